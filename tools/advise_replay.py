"""Benchmark: ``sharebench advise --check`` on a synthetic month of 100 GPUs (not a timed test).

    python -m tools.advise_replay [--days 30] [--results DIR ...] [--keep DIR]

Builds the usage of :func:`sharebench.advise.synthetic.month100` (100 GPUs at once: churned inference
services and notebooks, a few training jobs; 1-minute steps), writes it as the usage CSV (not timed),
then times the whole command as a site runs it: reading the CSV, the advice (every option of every class
packed by presence and replayed) and the check (fit on the first half, replay on the second), with the
committed H200 results (default: results/h200).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from sharebench.advise.synthetic import month100, synthetic_usage
from sharebench.cli import main as sharebench


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--results", nargs="+", default=["results/h200"])
    ap.add_argument("--keep", help="write the usage CSV and the advice here instead of a temporary folder")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(args.keep or tmp)
        where.mkdir(parents=True, exist_ok=True)
        usage = where / "usage.csv"
        t0 = time.perf_counter()
        df = synthetic_usage(month100(), args.days, seed=100)
        df.to_csv(usage, index=False)
        t1 = time.perf_counter()
        print(f"usage: {len(df):,} rows, {df['pod'].nunique()} pods ({t1 - t0:.1f} s to generate, not timed)")
        command = ["advise", "--usage", str(usage), "--results", *args.results, "--out", str(where / "advice")]
        rc = sharebench([*command, "--check", "--force"])
        t2 = time.perf_counter()
    print(f"sharebench {' '.join(command)} --check: rc {rc}, {t2 - t1:.1f} s on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
