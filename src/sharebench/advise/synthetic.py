"""Synthetic usage shaped like published production traces (tests, benchmark, documentation): seeded.

No third-party trace is read or shipped: the shapes are the ones cluster studies report for GPU pods
(most pods mostly idle, heavy-tailed bursts, churn, a diurnal load), set by :class:`ClassSpec`:

* ``pods_at_once`` GPUs today, each hosting one pod at a time; with ``lifetime_h`` (lognormal median and
  sigma, hours) a GPU's pods follow one another (churn: a new pod as the last one ends), else one pod
  stays the whole window;
* busy while present, by the class's usage (``sharebench.advise.usage``'s vocabulary): ``saturating``
  keeps its GPU busy in every step (Beta ``busy_beta``); ``bursty`` and ``steady`` are idle in
  ``idle_share`` of their steps and busy (Beta ``busy_beta``) in bursts whose length
  in steps is Pareto with shape ``burst_alpha`` (at least 1 step: a heavy tail), starting more often
  near 14:00 UTC by ``diurnal`` (0: flat, 1: none at 02:00);
* memory ``memory_gb`` held while present.

Presets: :func:`pool16` (4 batch GPUs at 97 % and 12 notebook GPUs busy in 5 % of minutes),
:func:`churn48` (4 GPUs hosting a new 97 %-busy pod every 2 hours for a day: 48 pods, never more than 4
at once), :func:`inference_like` (about 140 pods, mean busy about 7 %, about two thirds of samples idle,
the shape a public inference-cluster trace reports) and :func:`month100` (100 GPUs for 30 days, the
``advise --check`` benchmark).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from sharebench.advise.usage import BURSTY, SATURATING, STEADY
from sharebench.patterns import parse_pattern

START = 1_800_000_000.0  # 2027-01-15T08:00:00Z
MAX_BURST_STEPS = 240
MEMORY_GB = {SATURATING: 40.0, BURSTY: 8.0, STEADY: 6.0}  # by usage class


@dataclass(frozen=True)
class ClassSpec:
    usage: str  # a usage class: saturating | bursty | steady (sharebench.advise.usage.USAGE_RULES)
    pods_at_once: int
    lifetime_h: tuple[float, float] | None = None  # lognormal (median hours, sigma); None: the whole window
    idle_share: float = 0.0  # bursty/steady: share of present steps without work
    burst_alpha: float = 1.5  # Pareto shape of burst lengths in steps (>= 1 step)
    busy_beta: tuple[float, float] = (2.0, 3.0)  # busy within a burst (saturating: every step)
    diurnal: float = 0.0
    memory_gb: float | None = None  # default by usage class (MEMORY_GB)
    phase: bool = True  # churn: the window opens part-way through a pod's life (False: as a pod starts)


def lifetimes(spec: ClassSpec, steps: int, step_s: float, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(first, last) steps of the pods of one GPU, back to back over the window (a random phase)."""
    if spec.lifetime_h is None:
        return [(0, steps)]
    median, sigma = spec.lifetime_h
    out, t = [], 0
    first = True
    while t < steps:
        life = max(1, int(round(median * 3600 / step_s * math.exp(sigma * rng.standard_normal()))))
        if first and spec.phase:  # the pod running when the window opens is part-way through its life
            life = max(1, int(round(life * rng.uniform(0.05, 1.0))))
            first = False
        out.append((t, min(steps, t + life)))
        t += life
    return out


def burst_busy(spec: ClassSpec, start_step: int, n: int, step_s: float, rng: np.random.Generator) -> np.ndarray:
    """Busy per step of one pod present for ``n`` steps from ``start_step``: every step saturating, else bursts."""
    if spec.usage == SATURATING:
        return rng.beta(*spec.busy_beta, n)
    lengths = np.minimum(np.ceil((1 - rng.random(n)) ** (-1 / spec.burst_alpha)), MAX_BURST_STEPS).astype(int)
    mean_len = float(lengths.mean()) if n else 1.0
    hours = ((START + (start_step + np.arange(n)) * step_s) / 3600) % 24
    shape = 1 + spec.diurnal * np.sin(2 * np.pi * (hours - 8) / 24)
    p = -math.log(max(spec.idle_share, 1e-6)) / mean_len * shape / max(float(shape.mean()), 1e-9)
    on = np.zeros(n + MAX_BURST_STEPS, bool)
    for i in np.flatnonzero(rng.random(n) < p):
        on[i : i + lengths[i]] = True
    return np.where(on[:n], rng.beta(*spec.busy_beta, n), 0.0)


@dataclass(frozen=True)
class TraceOrigin:
    """Where a synthetic trace sits: its first step's time (epoch seconds) and the GPU model its rows name
    (None: no ``gpu_model`` column)."""

    start: float = START
    gpu_model: str | None = "NVIDIA H200"


def synthetic_usage(
    spec: dict[str, ClassSpec], days: float, step_s: float = 60.0, seed: int = 0, *, origin: TraceOrigin = TraceOrigin()
) -> pd.DataFrame:
    """Rows of the usage CSV (time,gpu,pod,class,busy,memory_bytes[,gpu_model]) while each pod is present."""
    start = origin.start
    rng = np.random.default_rng(seed)
    steps = int(round(days * 86_400 / step_s))
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("time", "gpu", "pod", "class", "busy", "memory_bytes")}
    gpu = 0
    for name, s in spec.items():
        memory = (s.memory_gb if s.memory_gb is not None else MEMORY_GB[s.usage]) * 1e9
        count = 0
        for _ in range(s.pods_at_once):
            for a, b in lifetimes(s, steps, step_s, rng):
                n = b - a
                cols["time"].append(start + step_s * np.arange(a, b))
                cols["gpu"].append(np.full(n, f"gpu-{gpu:03d}", dtype=object))
                cols["pod"].append(np.full(n, f"{name}-{count}", dtype=object))
                cols["class"].append(np.full(n, name, dtype=object))
                cols["busy"].append(np.round(burst_busy(s, a, n, step_s, rng), 4))
                cols["memory_bytes"].append(np.full(n, memory))
                count += 1
            gpu += 1
    df = pd.DataFrame({k: np.concatenate(v) for k, v in cols.items()})
    if origin.gpu_model:
        df["gpu_model"] = origin.gpu_model
    return df


def pool16() -> dict[str, ClassSpec]:
    """4 batch GPUs at 97 % and 12 notebook GPUs busy in 5 % of minutes (one day, 1-minute steps)."""
    return {
        "train": ClassSpec(SATURATING, 4, busy_beta=(97.0, 3.0)),
        "notebooks": ClassSpec(BURSTY, 12, idle_share=0.95, burst_alpha=1.8, busy_beta=(2.0, 4.0), diurnal=0.5),
    }


def churn48() -> dict[str, ClassSpec]:
    """4 GPUs, each hosting a new 97 %-busy pod every 2 hours (48 pods a day, never more than 4 at once)."""
    return {"jobs": ClassSpec(SATURATING, 4, lifetime_h=(2.0, 0.0), busy_beta=(97.0, 3.0), phase=False)}


def inference_like() -> dict[str, ClassSpec]:
    """About 140 pods: mostly idle inference services, notebooks and a few training jobs (mean busy about
    7 %, about two thirds of the samples idle), with churn and a diurnal load."""
    return {
        "inference": ClassSpec(
            STEADY, 110, (48.0, 1.0), idle_share=0.5, burst_alpha=1.3, busy_beta=(1.2, 12.0), diurnal=0.6
        ),
        "notebooks": ClassSpec(
            BURSTY, 26, (8.0, 0.8), idle_share=0.85, burst_alpha=1.6, busy_beta=(2.0, 5.0), diurnal=0.8
        ),
        "train": ClassSpec(SATURATING, 4, (24.0, 0.5), busy_beta=(20.0, 2.0)),
    }


def month100() -> dict[str, ClassSpec]:
    """100 GPUs of the inference-like shape for the ``advise --check`` benchmark (30 days)."""
    return {
        "inference": ClassSpec(
            STEADY, 60, (96.0, 1.0), idle_share=0.62, burst_alpha=1.3, busy_beta=(1.2, 12.0), diurnal=0.6
        ),
        "notebooks": ClassSpec(
            BURSTY, 30, (24.0, 0.7), idle_share=0.85, burst_alpha=1.6, busy_beta=(2.0, 5.0), diurnal=0.8
        ),
        "train": ClassSpec(SATURATING, 10, (72.0, 0.5), busy_beta=(20.0, 2.0)),
    }


# ------------------------------------------------------------------ the earlier, simpler generator

LEGACY = {
    SATURATING: ClassSpec(SATURATING, 1, busy_beta=(19.0, 1.0)),
    BURSTY: ClassSpec(BURSTY, 1, idle_share=0.8, burst_alpha=2.0, busy_beta=(2.0, 3.0)),
    STEADY: ClassSpec(STEADY, 1, idle_share=0.1, burst_alpha=3.0, busy_beta=(4.0, 20.0)),
}


def synthetic_trace(
    classes: dict[str, tuple[str, int]],
    steps: int,
    *,
    start: float = START,
    step_s: float = 60.0,
    seed: int = 0,
) -> pd.DataFrame:
    """``classes``: name -> (pattern kind, pods), each pod on a GPU of its own for the whole window and no
    GPU model named: :func:`synthetic_usage` with the shapes of :data:`LEGACY`, by the usage class the
    kind's row names (``PatternSpec.usage``)."""
    usages = {name: parse_pattern(kind).spec.usage for name, (kind, _) in classes.items()}
    spec = {name: replace(LEGACY[usages[name]], pods_at_once=pods) for name, (_, pods) in classes.items()}
    return synthetic_usage(spec, steps * step_s / 86_400, step_s, seed, origin=TraceOrigin(start, None))
