"""The Answer as the report and the end screen print it, and the figures whose axes it concerns: the
decision plot's last-job wait and the categorical size axis of a one-size sweep."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from sharebench import analysis
from sharebench.analysis import fmt_particles
from sharebench.analysis.answer import CPU_NOTE, answer_rows
from sharebench.report import build_report, end_screen
from sharebench.report.answer import decision_figure
from sharebench.report.plots import loss_figure, time_figure
from sharebench.results import ResultsWriter, load_results
from support.crafted import crafted_rows
from support.paths import ROOT

H200 = ROOT / "tests" / "data" / "results" / "h200" / "cuda"


def cpu_rows_without_failures() -> list[dict]:
    """The crafted sweep's CPU cells (one size, 1,000 particles) less the failed MPS cell."""
    return [r for r in crafted_rows() if r["device_class"] == "cpu" and r["cell_id"] != "mps:2_p1000_r1"]


def test_every_mode_flagged_gives_no_trustworthy_answer_and_the_exit_status_is_unchanged(tmp_path):
    rows = cpu_rows_without_failures()
    for r in rows:
        r["tel_disturbed"] = "other processes used 1.90 cores (> 0.5)"
    ResultsWriter(tmp_path).append(rows)
    md = build_report(tmp_path)["markdown"].read_text()
    answer = md.split("\n## ")[1]
    assert answer.startswith(f"Answer\n\n**{CPU_NOTE[0].upper()}{CPU_NOTE[1:]}.**\n\n**No trustworthy answer.** Every ")
    assert "*batch throughput*" not in answer and "**Not measured here:**" in answer
    text, status = end_screen(tmp_path)
    lines = text.splitlines()
    assert lines[1].startswith("  NO TRUSTWORTHY ANSWER: Every sharing mode measured is flagged (disturbed")
    assert f"  ({CPU_NOTE})" in lines
    assert not [line for line in lines if line.startswith("  batch throughput:")]
    # flags never change the exit status: no cell failed, so 0 (--strict is what stops a disturbed sweep)
    assert status == 0


def test_a_trusted_sweep_prints_its_choices_after_the_verdicts(tmp_path):
    ResultsWriter(tmp_path).append(cpu_rows_without_failures())
    build_report(tmp_path)
    lines = end_screen(tmp_path)[0].splitlines()
    assert lines[1].startswith("  exclusive (1,000 particles): the baseline")
    assert not [line for line in lines if "NO TRUSTWORTHY ANSWER" in line]
    batch = [line for line in lines if line.startswith("  batch throughput: ")]
    assert len(batch) == 1 and batch[0].startswith("  batch throughput: exclusive: no mode raises throughput by 2%")
    assert lines.index(f"  ({CPU_NOTE})") < lines.index(batch[0])
    assert [line for line in lines if line.startswith("  interactive: not measured: ")]


def test_the_decision_plot_shows_the_wait_of_the_last_job():
    """MPS on the H200: no throughput cost, the last of 8 clients waits 8x; the plot puts it at 8x, not at
    "a fair share at no cost" (slowdown / N = 1)."""
    rows = answer_rows(analysis.analyse(H200))
    fig = decision_figure(rows)
    ax = fig.axes[0]
    points = {}
    for container in ax.containers:  # one error-bar container per mode, labelled "<mode> (N jobs)"
        line = container.lines[0]
        points[container.get_label().split(" ")[0]] = (float(line.get_xdata()[0]), float(line.get_ydata()[0]))
    assert points["mps:8"][0] == pytest.approx(8.0, rel=0.01) and points["mps:8"][1] == pytest.approx(1.0, abs=0.01)
    assert points["timeslice:8"][0] == pytest.approx(10.9, rel=0.02)
    assert points["exclusive"] == (1.0, 1.0)
    assert ax.get_xscale() == "log"


def test_a_one_size_sweep_has_a_categorical_size_axis(tmp_path):
    ResultsWriter(tmp_path).append(cpu_rows_without_failures())
    one = analysis.build_tables(load_results(tmp_path))
    for fig in (loss_figure(one), time_figure(one)):
        ax = fig.axes[0]
        fig.canvas.draw()
        assert [t.get_text() for t in ax.get_xticklabels()] == ["1k"]
        assert ax.get_xlim() == (-0.5, 0.5) and ax.get_xscale() == "linear"
        xs = [float(x) for c in ax.containers for x in c.lines[0].get_xdata()]  # the error-bar series
        assert len(xs) >= 3 and all(abs(x) < 0.5 for x in xs)  # every series at the one category, side by side


def test_several_sizes_keep_a_numeric_size_axis(tmp_path):
    ResultsWriter(tmp_path).append(crafted_rows())  # 1,000 (CPU) and 2,000 (GPU) particles
    two = analysis.analyse(tmp_path)
    fig = loss_figure(two)
    ax = fig.axes[0]
    fig.canvas.draw()
    lo, hi = ax.get_xlim()
    assert lo > 500 and hi < 2500 and not math.isclose(lo, -0.5)
    ticks = [(t.get_position()[0], t.get_text()) for t in ax.get_xticklabels()]
    assert len(ticks) > 2 and all(text == fmt_particles(x) for x, text in ticks)  # 800, 1k, 1.2k: no offset


def test_the_last_line_agrees_with_a_pattern_that_has_no_trustworthy_answer(tmp_path):
    """A pattern sweep has no batch verdict rows: the count line names the pattern left without an answer,
    so that it does not read "0 mode(s) not to be trusted" under a NO TRUSTWORTHY ANSWER."""
    from sharebench.analysis.answer import CHOICE_COLUMNS, NO_ANSWER

    tables = tmp_path / "tables"
    tables.mkdir()
    reason = "the p95 slowdown intervals of interactive straddle the 2x target"
    pd.DataFrame([["interactive", NO_ANSWER, "latency", reason]], columns=CHOICE_COLUMNS).to_csv(
        tables / "choices.csv", index=False
    )
    text, status = end_screen(tmp_path)
    lines = text.splitlines()
    assert lines[1] == f"  NO TRUSTWORTHY ANSWER: {reason}"
    assert lines[-1].endswith("0 mode(s) not to be trusted as measured, no trustworthy answer for interactive")
    assert status == 1  # nothing measured
