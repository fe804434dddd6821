"""The report's ``## Answer``: the verdict per mode, the choice per workload pattern, the decision plot.

The numbers come from ``sharebench.analysis.answer`` (rules stated there and in the README); this
module only lays them out: blocks for report.md/report.html, ``tables/answer.csv`` (and
``tables/choices.csv``, ``tables/trust.csv``), ``plots/decision.png`` (throughput gain against the wait of the last job, one
point per mode, 95% intervals as bars) and the lines the end screen of ``sharebench run`` prints.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd

from sharebench.analysis import Tables, fmt_interval, fmt_times
from sharebench.analysis.answer import CPU_NOTE, MIN_GAIN, NO_ANSWER, answer_rows, choices, evidence, trust_table
from sharebench.analysis.latency import sweep_slo
from sharebench.analysis.prediction import gpu_of
from sharebench.analysis.reproduce import DEFAULT_SUGGEST_S, reproduce_of, work_text
from sharebench.modes import is_baseline
from sharebench.report.plots import save_figure
from sharebench.report.render import Bullets, Heading, Image, Snippet, Text
from sharebench.results import RESULTS_CSV, load_results, read_sweeps
from sharebench.results.bursts import BURSTS_CSV, load_bursts
from sharebench.sweep.capacity import capacity_lines, write_capacity_table

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

DECISION_PLOT = "decision"
TRUST_CSV = "trust.csv"
ANSWER_HELP = (
    "Derived from the tables below by the rules of *How the Answer is derived* (docs/readme/sweep.md), each pattern "
    "from its own cells: throughput against exclusive (1.00× = no gain; a gain under "
    f"{MIN_GAIN:.0%} counts as none), the worst job's time against running alone, 95% Student-t intervals "
    "(times and ratios on the log scale; none below 3 repeats); interactive users and services per GPU at a p95 slowdown target, "
    "decided by interval with every user counted (within, above or undecided; distribution-free intervals)."
)


def choice_line(c: Any) -> str:
    return f"*{c['pattern']}*: **{c['mode']}**: {c['reason']}"


class Answer:
    """The Answer of one results folder."""

    def __init__(
        self, results_dir: Path | str, tables: Tables, machine: str = "", suggest_s: float = DEFAULT_SUGGEST_S
    ):
        self.path = Path(results_dir)
        self.rows = answer_rows(tables)
        sweeps = read_sweeps(self.path, torn_ok=True)
        rows = load_results(self.path) if (self.path / RESULTS_CSV).exists() else None
        bursts = load_bursts(self.path) if (self.path / BURSTS_CSV).exists() else None
        reproduce = reproduce_of(sweeps, rows, bursts, suggest_s)
        self.evidence = evidence(tables, sweep_slo(sweeps), gpu_of(self.path, tables), reproduce)
        self.choices = choices(self.rows, self.evidence)
        self.machine = machine

    def lines(self) -> list[str]:
        """The verdict per mode, then the choice per pattern (Markdown)."""
        return [verdict_line(r) for _, r in self.rows.iterrows()] + [choice_line(c) for _, c in self.choices.iterrows()]

    def flags(self) -> int:
        return int((self.rows["trust"] != "ok").sum()) if len(self.rows) else 0

    def write(self) -> list[Path]:
        """tables/answer.csv, tables/choices.csv, tables/trust.csv (every measured mode's trust: what the end
        screen counts), tables/capacity.csv (a capacity search's answers, ``sweep.capacity``) and
        plots/decision.png/svg."""
        tables = self.path / "tables"
        tables.mkdir(parents=True, exist_ok=True)
        write_capacity_table(self.path)
        self.rows.to_csv(tables / "answer.csv", index=False)
        self.choices.to_csv(tables / "choices.csv", index=False)
        trust_table(self.evidence).to_csv(tables / TRUST_CSV, index=False)
        return plot_decision(self.rows, self.path / "plots", self.machine) if len(self.rows) else []

    def blocks(self, plots: list[Path]) -> list:
        if self.rows.empty and self.evidence.latency.empty:
            return [Heading("Answer"), Text("No mode was measured: no answer (see Flags and Cells).")]
        out: list[Any] = [Heading("Answer")]
        if self.evidence.cpu:
            out.append(Text(f"**{CPU_NOTE[0].upper()}{CPU_NOTE[1:]}.**"))
        none = self.choices[self.choices["mode"] == NO_ANSWER]
        if len(none):
            out.append(Text(f"**No trustworthy answer.** {none.iloc[0]['reason']}."))
        out.append(Text(ANSWER_HELP))
        if len(self.rows):  # the documentation quotes these lines from here (render.Snippet)
            out.append(Snippet("answer-modes", [Bullets([verdict_line(r) for _, r in self.rows.iterrows()])]))
        rest = [choice_line(c) for _, c in self.choices.iterrows() if c["mode"] != NO_ANSWER]
        if rest and none.empty:
            head = "Per workload pattern, the mode to choose on this device"
            out += [Text(f"**{head}:**"), Snippet("answer-choices", [Bullets(rest)])]
        elif rest:  # no trustworthy answer: what was measured but not trusted, then what was not measured
            flagged = [
                choice_line(c)
                for _, c in self.choices.iterrows()
                if c["basis"] == "untrusted" and c["mode"] != NO_ANSWER
            ]
            missing = [choice_line(c) for _, c in self.choices.iterrows() if c["basis"] == "not measured"]
            for head, lines in (("Measured, not trusted", flagged), ("Not measured here", missing)):
                out += [Text(f"**{head}:**"), Bullets(lines)] if lines else []
        return out + capacity_blocks(self.path) + [Image(p) for p in plots if p.suffix == ".png"]


def verdict_line(r: Any) -> str:
    """One line of the Answer for a mode (Markdown): gain, worst job, isolation, trust."""
    work = work_text(r["engine"], r["particles"])
    if is_baseline(str(r["kind"])):
        head = f"**{r['mode']}** ({work}): the baseline, throughput 1.00×"
    else:
        head = (
            f"**{r['mode']}** ({work}): throughput {fmt_times(r['gain'])} exclusive"
            f"{fmt_interval(r['gain_ci_low'], r['gain_ci_high'])}; worst job {fmt_times(r['slowdown'])} its time "
            f"alone{fmt_interval(r['slowdown_ci_low'], r['slowdown_ci_high'])}"
        )
    fair = f"; fairness {r['fairness']:.2f}" if math.isfinite(float(r["fairness"])) else ""
    interval = r.get("interval")  # time-slicing: a longer slice, predicted (analysis.answer.interval_text)
    longer = f"; {interval}" if isinstance(interval, str) and interval else ""
    return f"{head}{fair}{longer}; isolation: {r['isolation']}; trust: {r['trust']}"


def _err(lo: Any, hi: Any, mid: Any) -> np.ndarray:
    lo, hi, mid = (np.asarray(v, float) for v in (lo, hi, mid))
    lo, hi = np.where(np.isfinite(lo), lo, mid), np.where(np.isfinite(hi), hi, mid)
    return np.vstack([np.clip(mid - lo, 0, None), np.clip(hi - mid, 0, None)])


def plot_decision(rows: pd.DataFrame, out_dir: Path, machine: str = "") -> list[Path]:
    """``plots/decision.png`` and ``.svg`` (:func:`decision_figure`)."""
    return save_figure(decision_figure(rows, machine), out_dir, DECISION_PLOT)


def decision_figure(rows: pd.DataFrame, machine: str = "") -> Figure:
    """Throughput gain (y) against the wait of the last job (x: the worst job's time over its time alone, log
    scale), one point per mode, 95% intervals as bars: MPS's N× wait shows where it is, not as a fair share."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for k, (_, r) in enumerate(rows.iterrows()):
        x, y = float(r["slowdown"]), float(r["gain"])
        if not (math.isfinite(x) and math.isfinite(y) and x > 0):
            continue
        color = f"C{k % 10}"
        ax.errorbar(
            [x],
            [y],
            xerr=_err([r["slowdown_ci_low"]], [r["slowdown_ci_high"]], [x]),
            yerr=_err([r["gain_ci_low"]], [r["gain_ci_high"]], [y]),
            marker="o",
            capsize=3,
            color=color,
            label=f"{r['mode']} ({int(r['replicas'])} job{'s' if int(r['replicas']) > 1 else ''})",
            linestyle="none",
        )
        ax.annotate(str(r["mode"]), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=color)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}×"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.axhline(1.0, color="0.6", lw=0.8, ls=":")
    ax.axhline(1.0 + MIN_GAIN, color="0.4", lw=0.8, ls="--", label=f"+{MIN_GAIN:.0%}: the least gain that counts")
    ax.axvline(1.0, color="0.6", lw=0.8, ls=":")
    ax.set_xlabel("wait of the last job: its time / its time alone   (log scale; 1× = as if alone)")
    ax.set_ylabel("throughput / exclusive throughput")
    ax.set_title("Decision: throughput gain against the last job's wait (95% intervals)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.grid(alpha=0.3, which="major")
    if machine:
        fig.text(0.01, -0.03, machine, fontsize=7, color="0.4")
    return fig


EXIT_OK, EXIT_FAILED = 0, 1


def end_screen(results_dir: Path | str) -> tuple[str, int]:
    """What ``sharebench run`` prints at the end, and its exit status.

    The text: the Answer lines (from tables/answer.csv and tables/choices.csv, as the report wrote them),
    first of all that there is no trustworthy answer when every sharing mode is flagged, a CPU sweep
    labelled a smoke test of the harness, the count of failed cells and of flags. The status: 0 when every
    measured cell is ok, 1 when any cell failed or nothing was measured (2 stays for user errors, raised
    before anything runs); flags never change it (``--strict`` is what stops a disturbed sweep)."""
    d = Path(results_dir) / "tables"
    cells = _read(d / "cells.csv")
    measured = cells[~cells["warmup"].astype(bool)] if len(cells) else cells
    failed = int(measured["flags"].fillna("").astype(str).str.startswith("failed").sum()) if len(measured) else 0
    good = int((~measured["excluded"].astype(bool)).sum()) if len(measured) else 0
    rows, picks, flags = _read(d / "answer.csv"), _read(d / "choices.csv"), _read(d / "flags.csv")
    none = picks[picks["mode"] == NO_ANSWER] if len(picks) else picks
    lines = ["Answer:"]
    lines += [f"  NO TRUSTWORTHY ANSWER: {r['reason']}" for _, r in none.iterrows()]
    lines += [f"  {verdict_line(r).replace('**', '')}" for _, r in rows.iterrows()]
    if len(cells) and "device_class" in cells.columns and set(cells["device_class"].astype(str)) == {"cpu"}:
        lines.append(f"  ({CPU_NOTE})")
    lines += [f"  {c['pattern']}: {c['mode']}: {c['reason']}" for _, c in picks.iterrows() if c["mode"] != NO_ANSWER]
    if rows.empty:
        lines.append("  none: no cell was measured" if picks.empty else "  no verdict per mode: no batch cell")
    lines += [f"  capacity: {line}" for line in capacity_lines(Path(results_dir))]
    untrusted = untrusted_count(d, rows)
    unanswered = sorted(set(none["pattern"].astype(str))) if len(none) else []
    lines.append(
        f"cells: {good} measured, {failed} failed; flags: {len(flags)} (see the report), "
        f"{untrusted} mode(s) not to be trusted as measured"
        + (f", no trustworthy answer for {', '.join(unanswered)}" if unanswered else "")
    )
    return "\n".join(lines), EXIT_OK if failed == 0 and good > 0 else EXIT_FAILED


def capacity_blocks(path: Path) -> list[Any]:
    """The Answer's capacity search lines (``sweep.capacity``: users, and requests/s of a service, per GPU
    at the target, with the N measured); none when the folder ran no search."""
    lines = capacity_lines(path)
    return [Text("**Capacity by search, per mode family:**"), Bullets(lines)] if lines else []


def untrusted_count(tables: Path, rows: pd.DataFrame) -> int:
    """The modes not to be trusted as measured: from tables/trust.csv (every measured mode, batch or
    patterned: the table the "no trustworthy answer" row reads), else the verdict rows (older folders)."""
    trust = _read(tables / TRUST_CSV)
    if len(trust):
        return int((trust["trust"].astype(str) != "ok").sum())
    return int((rows["trust"] != "ok").sum()) if len(rows) else 0


def _read(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()
