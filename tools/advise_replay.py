"""Benchmark: ``sharebench advise`` on a 30-day, 100-GPU, 1-minute usage trace (not a timed test).

    python -m tools.advise_replay [--days 30] [--out DIR]

Builds the synthetic trace (sharebench.advise.synthetic: 30 batch, 50 interactive, 20 serve pods),
writes it as the usage CSV, and times reading it and the whole advice (every option of every class
packed and replayed) with the given results folder (default: results/h200/cuda).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from sharebench.advise import advise, class_patterns, read_costs, read_usage_csv
from sharebench.advise.synthetic import synthetic_trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--results", default="results/h200/cuda")
    args = ap.parse_args()
    steps = args.days * 24 * 60
    classes = {"train": ("batch", 30), "notebooks": ("interactive", 50), "inference": ("serve", 20)}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "usage.csv"
        synthetic_trace(classes, steps, seed=1).to_csv(path, index=False)
        t0 = time.perf_counter()
        usage = read_usage_csv(path)
        t1 = time.perf_counter()
        result = advise(usage, read_costs([args.results], None), class_patterns(usage, {}), 2.0)
        t2 = time.perf_counter()
    replays = sum(len(o) for o in result.outcomes.values())
    print(
        f"trace: {usage.busy.shape[0]} pods x {usage.steps} steps ({usage.busy.size:,} pod-steps), cores {os.cpu_count()}"
    )
    print(f"read CSV: {t1 - t0:.1f} s; advise ({replays} class-option replays): {t2 - t1:.1f} s")
    if result.recommended:
        print(f"recommended: {result.recommended.gpus} GPUs of {result.today_total}")


if __name__ == "__main__":
    main()
