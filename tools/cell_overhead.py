"""Per-cell overhead of a sweep, from its results folder: how much of the wall time the GPU tracked.

For each sweep (``sweep_id``: one call of ``sharebench run``, a --resume starts another), the cells in
the order they ran; a cell's span = max(track_end) - min(track_start), its overhead = the gap between
the previous cell's last tracking end and its first tracking start (set-up, upload, start lead, writing);
tracked % = spans / (spans + gaps) of the cells counted (the first cell of a sweep has no gap: left
out). Also the replicas' median ``setup_s`` and ``transfer_s``, and the whole sweep: from its start
(``started_unix`` in sweep.json: validation, provenance and the warm replicas' set-up included) to its
last tracking end, with the share of that the GPU tracked (``sweep_wall_s``, ``sweep_tracked_pct``).

    python3 -m tools.cell_overhead results/h200/cuda [--particles 1e7]

Issue 15's target: <= 1.5 s per cell, the GPU tracking >= 80% of a 10 M x 1-turn sweep's wall time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from sharebench.errors import UserError
from sharebench.results import load_results, read_sweeps


def overhead(df: pd.DataFrame, particles: int | None = None, starts: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per sweep: cells, wall, tracked share, overhead per cell. Each cell is charged the gap
    before it (the previous cell's last tracking end to its first tracking start); with ``particles``
    only the cells of that size count, each with its own gap, wall = their spans + their gaps."""
    ok = df[(df["status"] == "ok") & df["track_start"].notna() & df["track_end"].notna()]
    cells = (
        ok.groupby(["sweep_id", "cell_id"], sort=False)
        .agg(
            particles=("particles", "first"),
            start=("track_start", "min"),
            end=("track_end", "max"),
            setup_s=("setup_s", "median"),
            transfer_s=("transfer_s", "median"),
        )
        .reset_index()
    )
    rows = []
    for sweep_id, g in cells.groupby("sweep_id", sort=True):
        g = g.sort_values("start").reset_index(drop=True)
        whole = {}
        if starts and sweep_id in starts and particles is None:
            wall = float(g["end"].max()) - starts[sweep_id]
            whole = dict(sweep_wall_s=wall, sweep_tracked_pct=100 * float((g["end"] - g["start"]).sum()) / wall)
        g["gap_s"] = g["start"] - g["end"].shift(1)
        g["span_s"] = g["end"] - g["start"]
        g = g.iloc[1:] if particles is None else g[(g["particles"] == particles) & g["gap_s"].notna()]
        if g.empty:
            continue
        wall = float(g["span_s"].sum() + g["gap_s"].sum())
        rows.append(
            dict(
                sweep_id=sweep_id,
                particles=",".join(f"{p:g}" for p in sorted(g["particles"].unique())),
                cells=len(g),
                wall_s=wall,
                tracked_s=float(g["span_s"].sum()),
                tracked_pct=100 * float(g["span_s"].sum()) / wall if wall > 0 else float("nan"),
                overhead_per_cell_s=float(g["gap_s"].mean()),
                overhead_median_s=float(g["gap_s"].median()),
                setup_s_median=float(g["setup_s"].median()),
                transfer_s_median=float(g["transfer_s"].median()),
                **whole,
            )
        )
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a results folder (or its results.csv)")
    ap.add_argument("--particles", type=float, default=None, help="only the cells of this particle count")
    args = ap.parse_args(argv)
    try:
        df = load_results(args.results)
    except UserError as exc:
        print(f"cell_overhead: {exc}", file=sys.stderr)
        return 2
    particles = int(args.particles) if args.particles is not None else None
    folder = Path(args.results)
    folder = folder.parent if folder.name.endswith(".csv") else folder
    starts = {str(s["sweep_id"]): float(s["started_unix"]) for s in read_sweeps(folder) if s.get("started_unix")}
    table = overhead(df, particles, starts)
    if table.empty:
        print(
            f"cell_overhead: no cells{f' of {particles:,} particles' if particles else ''} after a first one in "
            f"{args.results}",
            file=sys.stderr,
        )
        return 2
    print(table.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
