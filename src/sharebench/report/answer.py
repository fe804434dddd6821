"""The report's ``## Answer``: the verdict per mode, the choice per workload pattern, the decision plot.

The numbers come from ``sharebench.analysis.answer`` (rules stated there and in the README); this
module only lays them out: blocks for report.md/report.html, ``tables/answer.csv`` (and
``tables/choices.csv``), ``plots/decision.png`` (throughput gain against worst-job slowdown, one point
per mode, 95% intervals as bars) and the lines the end screen of ``sharebench run`` prints.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd

from sharebench.analysis import Tables, fmt_interval, fmt_times
from sharebench.analysis.answer import answer_rows, choices
from sharebench.analysis.prediction import gpu_of
from sharebench.report.plots import save_figure
from sharebench.report.render import Bullets, Heading, Image, Text

matplotlib.use("Agg")
import matplotlib.pyplot as plt

DECISION_PLOT = "decision"
ANSWER_HELP = (
    "Derived from the tables below by the rules in the README (*How the Answer is derived*): "
    "throughput against exclusive (1.00× = no gain), the worst job's time against running alone, "
    "95% Student-t intervals (none below 3 repeats)."
)


class Answer:
    """The Answer of one results folder."""

    def __init__(self, results_dir: Path | str, tables: Tables, machine: str = ""):
        self.path = Path(results_dir)
        self.rows = answer_rows(tables)
        self.choices = choices(self.rows, gpu_of(self.path, tables))
        self.machine = machine

    def lines(self) -> list[str]:
        """The verdict per mode, then the choice per pattern (Markdown)."""
        return [verdict_line(r) for _, r in self.rows.iterrows()] + [
            f"*{c['pattern']}*: **{c['mode']}**: {c['reason']}" for _, c in self.choices.iterrows()
        ]

    def flags(self) -> int:
        return int((self.rows["trust"] != "ok").sum()) if len(self.rows) else 0

    def write(self) -> list[Path]:
        """tables/answer.csv, tables/choices.csv and plots/decision.png/svg."""
        tables = self.path / "tables"
        tables.mkdir(parents=True, exist_ok=True)
        self.rows.to_csv(tables / "answer.csv", index=False)
        self.choices.to_csv(tables / "choices.csv", index=False)
        return plot_decision(self.rows, self.path / "plots", self.machine) if len(self.rows) else []

    def blocks(self, plots: list[Path]) -> list:
        if self.rows.empty:
            return [Heading("Answer"), Text("No mode was measured: no answer (see Flags and Cells).")]
        out: list[Any] = [
            Heading("Answer"),
            Text(ANSWER_HELP),
            Bullets([verdict_line(r) for _, r in self.rows.iterrows()]),
            Text("**Per workload pattern, the mode to choose on this device:**"),
            Bullets([f"*{c['pattern']}*: **{c['mode']}**: {c['reason']}" for _, c in self.choices.iterrows()]),
        ]
        return out + [Image(p) for p in plots if p.suffix == ".png"]


def verdict_line(r: Any) -> str:
    """One line of the Answer for a mode (Markdown): gain, worst job, isolation, trust."""
    work = f"{int(r['particles']):,} particles"
    if r["kind"] == "exclusive":
        head = f"**{r['mode']}** ({work}): the baseline, throughput 1.00×"
    else:
        head = (
            f"**{r['mode']}** ({work}): throughput {fmt_times(r['gain'])} exclusive"
            f"{fmt_interval(r['gain_ci_low'], r['gain_ci_high'])}; worst job {fmt_times(r['slowdown'])} its time "
            f"alone{fmt_interval(r['slowdown_ci_low'], r['slowdown_ci_high'])}"
        )
    fair = f"; fairness {r['fairness']:.2f}" if math.isfinite(float(r["fairness"])) else ""
    return f"{head}{fair}; isolation: {r['isolation']}; trust: {r['trust']}"


def _err(lo: Any, hi: Any, mid: Any) -> np.ndarray:
    lo, hi, mid = (np.asarray(v, float) for v in (lo, hi, mid))
    lo, hi = np.where(np.isfinite(lo), lo, mid), np.where(np.isfinite(hi), hi, mid)
    return np.vstack([np.clip(mid - lo, 0, None), np.clip(hi - mid, 0, None)])


def plot_decision(rows: pd.DataFrame, out_dir: Path, machine: str = "") -> list[Path]:
    """Throughput gain (y) against worst-job slowdown per replica (x), one point per mode, intervals as bars."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, (_, r) in enumerate(rows.iterrows()):
        n = float(r["replicas"]) or 1.0
        x, y = float(r["slowdown"]) / n, float(r["gain"])
        if not (math.isfinite(x) and math.isfinite(y)):
            continue
        ax.errorbar(
            [x],
            [y],
            xerr=_err([r["slowdown_ci_low"] / n], [r["slowdown_ci_high"] / n], [x]),
            yerr=_err([r["gain_ci_low"]], [r["gain_ci_high"]], [y]),
            marker="o",
            capsize=3,
            color=f"C{k % 10}",
            label=str(r["mode"]),
            linestyle="none",
        )
    ax.axhline(1.0, color="0.6", lw=0.8, ls=":")
    ax.axvline(1.0, color="0.6", lw=0.8, ls=":")
    ax.set_xlabel("worst job's time / (N × its time alone)   (1 = a fair share at no cost)")
    ax.set_ylabel("throughput / exclusive throughput")
    ax.set_title("Decision: gain against the worst job's slowdown (95% intervals)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if machine:
        fig.text(0.01, -0.03, machine, fontsize=7, color="0.4")
    return save_figure(fig, out_dir, DECISION_PLOT)


EXIT_OK, EXIT_FAILED = 0, 1


def end_screen(results_dir: Path | str) -> tuple[str, int]:
    """What ``sharebench run`` prints at the end, and its exit status.

    The text: the Answer lines (from tables/answer.csv and tables/choices.csv, as the report wrote them),
    the count of failed cells and of flags. The status: 0 when every measured cell is ok, 1 when any
    cell failed or nothing was measured (2 stays for user errors, raised before anything runs)."""
    d = Path(results_dir) / "tables"
    cells = _read(d / "cells.csv")
    measured = cells[~cells["warmup"].astype(bool)] if len(cells) else cells
    failed = int(measured["flags"].fillna("").astype(str).str.startswith("failed").sum()) if len(measured) else 0
    good = int((~measured["excluded"].astype(bool)).sum()) if len(measured) else 0
    rows, picks, flags = _read(d / "answer.csv"), _read(d / "choices.csv"), _read(d / "flags.csv")
    lines = ["Answer:"]
    lines += [f"  {verdict_line(r).replace('**', '')}" for _, r in rows.iterrows()]
    lines += [f"  {c['pattern']}: {c['mode']}: {c['reason']}" for _, c in picks.iterrows()]
    if rows.empty:
        lines.append("  none: no cell was measured")
    untrusted = int((rows["trust"] != "ok").sum()) if len(rows) else 0
    lines.append(
        f"cells: {good} measured, {failed} failed; flags: {len(flags)} (see the report), "
        f"{untrusted} mode(s) not to be trusted as measured"
    )
    return "\n".join(lines), EXIT_OK if failed == 0 and good > 0 else EXIT_FAILED


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()
