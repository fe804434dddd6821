"""The report's workloads section: which sharing mode suits which workload, and the comparison table
behind it (``sharebench.analysis.workloads``); writes ``tables/workloads.csv``."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from sharebench.analysis import Tables, fmt_ci, fmt_num, fmt_particles, fmt_pct
from sharebench.analysis.workloads import exec_timings, workload_answers, workload_table
from sharebench.parse import number_or_nan
from sharebench.report.render import Section, Table, Text
from sharebench.results import load_results

WORKLOADS_CSV = "workloads.csv"
TIMING_NOTE = (
    "*timing*: **kernel** = the tracker's own synchronised window; **protocol** = the window the "
    "program reported through the replica protocol; **process** = the whole program, started at the "
    "barrier instant (set-up included: its loss is diluted by the set-up time)."
)


def _x(v: object) -> str:
    f = number_or_nan(v)
    return "—" if not math.isfinite(f) else f"{f:.2f}×"


def workloads_display(table: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "workload": r["workload"],
                "timing": r["timing"],
                "work": fmt_particles(r["particles"]),
                "mode": r["mode"],
                "loss %": fmt_pct(r["loss_pct"], "—"),
                "95% CI": fmt_ci(r["loss_ci_low"], r["loss_ci_high"], fmt_pct) or "—",
                "loss compares": r["loss_metric"] or "—",
                "worst job": _x(r["worst_slowdown"]),
                "throughput gain": _x(r["gain"]),
                "gain 95% CI": fmt_ci(r["gain_ci_low"], r["gain_ci_high"], fmt_num) or "—",
                "trust": r.get("trust", "") or "—",
                "repeats": r["repeats"],
            }
            for r in table.to_dict("records")
        ]
    )


def answers_display(answers: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "workload": r["workload"],
                "timing": r["timing"],
                "work": fmt_particles(r["particles"]),
                "suits": r["best_mode"],
                "why": r["why"],
            }
            for r in answers.to_dict("records")
        ]
    )


def workloads_section(results_dir: Path, tables: Tables) -> Section:
    """Per workload: the mode that suits it, then loss, worst-job slowdown and throughput gain per mode."""
    section = Section("Workloads: which mode suits which workload")
    table = workload_table(tables, exec_timings(load_results(results_dir)))
    if table.empty:
        section.blocks.append(Text("No measured cells to compare workloads with."))
        return section
    (results_dir / "tables").mkdir(parents=True, exist_ok=True)
    table.to_csv(results_dir / "tables" / WORKLOADS_CSV, index=False)
    answers = workload_answers(table)
    section.blocks += [
        Text(
            "*worst job* = the slowest replica's time over the same work's exclusive time (what the last job "
            "waits); *throughput gain* = work done per second by all replicas over exclusive use; *suits* follows "
            "the Answer's rules: a gain counts when its interval lies above 1 and it is at least 2%, and a mode "
            "flagged in *trust* is named with its reasons. " + TIMING_NOTE
        )
    ]
    if not answers.empty:
        section.blocks.append(Table(answers_display(answers)))
    section.blocks.append(Table(workloads_display(table)))
    return section
