"""Time to an answer (issue 35): the table of a campaign folder of ``benchmarks/plans/time-to-answer.toml``.

    python -m tools.time_to_answer FOLDER        # the campaign's --out (its last step runs this)

FOLDER holds ``walls.csv`` (``sharebench campaign`` writes a row per step: ``step,start,end,status``, Unix
seconds from process start to exit, report included), a ``dry_<step>.txt`` per step run with ``predict_s``
(what ``--dry-run`` printed for the step's command before it ran) and a folder per sweep step. The folders of
2026-12-04 were written the same way by the shell scripts the plan replaced. Prints, as Markdown:
- per sweep step (a row of ``walls.csv`` with a folder or a prediction, in its order, then any of rn-users,
  adaptive, fixed with a folder): its wall time, the dry-run's ``predicted``/``cost`` line, and for a step
  whose cells were measured the share of the wall inside measured windows (each cell's first tracking
  start to its last tracking end, summed; issue 43 asks 85% of the nine-mode ResNet-18 step, the patterns
  plan's ``rn-users``), its median ``warm_cells`` and its priming (from its ``notes.txt``: the warm replicas'
  set-up before the first cell, and the fork server's import of PyTorch when its programs were forks);
- adaptive (``--budget``, ``--precision``) against fixed repeats, for each pair of steps ``<x>adaptive`` and
  ``<x>fixed`` (``adaptive`` and ``fixed``, ``rn-adaptive`` and ``rn-fixed``): per cell (mode x size) the
  measured repeats and the 95% half-width of its loss (T_N against N x T_1, points; an exclusive cell: of
  its mean time, % of it), one look at the repeats it has; and each step's node-minutes (wall / 60, one node).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import pandas as pd

from sharebench.analysis import cell_summary
from sharebench.analysis.sequential import should_continue
from sharebench.errors import UserError
from sharebench.results import load_results

STEPS = ("rn-users", "adaptive", "fixed")


def walls(folder: Path) -> dict[str, tuple[float, int]]:
    """Each step's last wall time (s) and exit status from ``walls.csv``."""
    path = folder / "walls.csv"
    if not path.exists():
        return {}
    df = pd.read_csv(path)
    return {str(r.step): (float(r.end) - float(r.start), int(r.status)) for r in df.itertuples()}


def dry_line(folder: Path, step: str) -> str:
    """The dry run's estimate of the step's command (its ``predicted:`` or ``cost:`` line), or '-'."""
    path = folder / f"dry_{step}.txt"
    if not path.exists():
        return "-"
    lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines()]
    hit = [ln for ln in lines if ln.startswith(("predicted:", "cost:", "budget:"))]
    return " ".join(" ".join(hit).split())[:120] or "-"


def dry_seconds(folder: Path, step: str) -> float:
    """The seconds the dry run predicted for the step's command (its ``predicted: N s`` line), or NaN."""
    path = folder / f"dry_{step}.txt"
    found = (
        re.search(r"^predicted: (\d+(?:\.\d+)?) s", path.read_text(errors="replace"), re.M) if path.exists() else None
    )
    return float(found[1]) if found else math.nan


def windows(df: pd.DataFrame) -> tuple[float, float]:
    """Seconds inside measured windows (per cell: first tracking start to last tracking end) and the
    median warm_cells of the replicas (NaN when unknown)."""
    ok = df[(df["status"] == "ok") & df["track_start"].notna() & df["track_end"].notna()]
    spans = ok.groupby("cell_id").agg(start=("track_start", "min"), end=("track_end", "max"))
    warm = pd.to_numeric(ok.get("warm_cells"), errors="coerce") if "warm_cells" in ok else pd.Series(dtype=float)
    return float((spans["end"] - spans["start"]).sum()), float(warm.median()) if len(warm.dropna()) else math.nan


PRIMED = re.compile(r"warm replicas: (\d+) of (\d+) set up at once in ([\d.]+) s")
FORKED = re.compile(r"fork server: PyTorch imported once in ([\d.]+) s")


def priming(folder: Path) -> str:
    """The step's priming from its notes: replicas set up and seconds, and the fork server's import."""
    notes = (folder / "notes.txt").read_text(errors="replace") if (folder / "notes.txt").exists() else ""
    primed, forked = PRIMED.search(notes), FORKED.search(notes)
    out = f"{primed[1]} of {primed[2]} in {primed[3]} s" if primed else "-"
    return out + (f" (fork server: PyTorch {forked[1]} s)" if forked else "")


def precision(df: pd.DataFrame) -> pd.DataFrame:
    """Per cell (mode, size): measured repeats and the 95% half-width of its loss (shared cells, points)
    or of its mean time (exclusive, % of it), one look at the repeats it has."""
    cells = cell_summary(df)
    cells = cells[~cells["warmup"].astype(bool) & ~cells["excluded"].astype(bool)]
    rows = []
    for (mode, size), g in cells.groupby(["mode", "particles"], sort=False):
        n = len(g)
        base = cells[(cells["replicas"] == 1) & (cells["particles"] == size)]["mean_track_s"].astype(float).tolist()
        replicas = int(g["replicas"].iloc[0])
        if replicas == 1 or not base:
            d = should_continue(g["mean_track_s"].astype(float).tolist(), relative=True, min_repeats=n, max_repeats=n)
        else:
            d = should_continue(
                g["span_s"].astype(float).tolist(), baseline=base, factor=replicas, min_repeats=n, max_repeats=n
            )
        rows.append(
            {
                "mode": mode,
                "size": size,
                "repeats": n,
                "estimate": d.interval.estimate,
                "half_width": d.interval.half_width,
            }
        )
    return pd.DataFrame(rows)


def step_table(folder: Path) -> list[str]:
    out = [
        "| step | wall s | node-min | status | in measured windows | median warm_cells | priming | dry run predicted "
        "| dry run |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    w = walls(folder)
    for step in dict.fromkeys([*w, *STEPS]):
        if not (folder / step).exists() and not (folder / f"dry_{step}.txt").exists():
            continue  # a tool's step (no folder, no prediction), or a step not run
        wall, status = w.get(step, (math.nan, -1))
        share, warm = "-", "-"
        if (folder / step / "results.csv").exists():
            measured, median_warm = windows(load_results(folder / step))
            share = f"{measured:.0f} s = {100 * measured / wall:.1f}%" if wall > 0 else f"{measured:.0f} s"
            warm = "-" if math.isnan(median_warm) else f"{median_warm:g}"
        guess = dry_seconds(folder, step)
        said = "-" if math.isnan(guess) else f"{guess:.0f} s ({100 * (guess - wall) / wall:+.0f}% of the wall)"
        out.append(
            f"| {step} | {wall:.0f} | {wall / 60:.2f} | {status} | {share} | {warm} | {priming(folder / step)} | "
            f"{said} | {dry_line(folder, step)} |"
        )
    return out


def pairs(folder: Path) -> list[tuple[str, str]]:
    """The (adaptive, fixed) step pairs with results: ``<x>adaptive`` beside ``<x>fixed``, by name."""
    found = sorted(p.parent.name for p in folder.glob("*/results.csv"))
    fixed = {a: a.removesuffix("adaptive") + "fixed" for a in found if a.endswith("adaptive")}
    return [(a, f) for a, f in fixed.items() if f in found]


def comparison(folder: Path) -> list[str]:
    """One table per (adaptive, fixed) pair, each under its names when there is more than one pair."""
    found = pairs(folder)
    if not found:
        return ["(adaptive against fixed: both folders are needed)"]
    out: list[str] = []
    for adaptive, fixed in found:
        out += [f"### {adaptive} against {fixed}", ""] if len(found) > 1 else []
        out += [*pair_table(folder, adaptive, fixed), ""]
    return out[:-1]


def pair_table(folder: Path, adaptive: str, fixed: str) -> list[str]:
    a, f = precision(load_results(folder / adaptive)), precision(load_results(folder / fixed))
    m = a.merge(f, on=["mode", "size"], how="outer", suffixes=("_adaptive", "_fixed"))
    out = ["| mode | size | repeats adaptive | ± adaptive | repeats fixed | ± fixed |", "|---|---|---|---|---|---|"]
    for r in m.itertuples():
        out.append(
            f"| {r.mode} | {r.size:g} | {r.repeats_adaptive:g} | {r.half_width_adaptive:.2f} | "
            f"{r.repeats_fixed:g} | {r.half_width_fixed:.2f} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.time_to_answer", description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="the campaign folder (sharebench campaign --out)")
    args = ap.parse_args(argv)
    folder = Path(args.folder)
    try:
        if not folder.is_dir():
            raise UserError(f"no folder {str(folder)!r}: give the campaign's folder (its --out)")
        lines = [
            "## Steps",
            "",
            *step_table(folder),
            "",
            "## Adaptive against fixed repeats (95% half-widths)",
            "",
            *comparison(folder),
        ]
    except UserError as exc:
        print(f"time_to_answer: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
