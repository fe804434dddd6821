"""Synthetic usage traces (the tests, the benchmark and the README's worked example): seeded, described.

Per pod and step (busy = share of a whole GPU's time):

* ``batch``: busy 0.9-1.0 in every step (a training job keeping its GPU full);
* ``interactive``: idle, except in bursts that start in a step with probability ``burst_prob`` and last
  1-3 steps, busy 0.2-0.6 within them (a notebook user);
* ``serve``: busy 0.05-0.25 in every step (a request stream far below the GPU's capacity).

Memory: batch 40 GB, interactive 8 GB, serve 6 GB (flat). Each pod runs on a GPU of its own today.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MEMORY_GB = {"batch": 40.0, "interactive": 8.0, "serve": 6.0}


def busy_series(kind: str, steps: int, rng: np.random.Generator, burst_prob: float = 0.08) -> np.ndarray:
    if kind == "batch":
        return rng.uniform(0.9, 1.0, steps)
    if kind == "serve":
        return rng.uniform(0.05, 0.25, steps)
    starts = rng.random(steps) < burst_prob
    lengths = rng.integers(1, 4, steps)
    on = np.zeros(steps, bool)
    for i in np.flatnonzero(starts):
        on[i : i + lengths[i]] = True
    return np.where(on, rng.uniform(0.2, 0.6, steps), 0.0)


def synthetic_trace(
    classes: dict[str, tuple[str, int]],
    steps: int,
    *,
    start: float = 1_800_000_000.0,
    step_s: float = 60.0,
    seed: int = 0,
) -> pd.DataFrame:
    """``classes``: name -> (pattern kind, pods). Rows of the usage CSV (time,gpu,pod,class,busy,memory_bytes)."""
    rng = np.random.default_rng(seed)
    times = start + step_s * np.arange(steps)
    frames, gpu = [], 0
    for name, (kind, pods) in classes.items():
        for p in range(pods):
            busy = np.round(busy_series(kind, steps, rng), 4)
            frames.append(
                pd.DataFrame(
                    {
                        "time": times,
                        "gpu": f"gpu-{gpu:03d}",
                        "pod": f"{name}-{p}",
                        "class": name,
                        "busy": busy,
                        "memory_bytes": np.where(busy > 0, MEMORY_GB[kind] * 1e9, 0.0),
                    }
                )
            )
            gpu += 1
    return pd.concat(frames, ignore_index=True)
