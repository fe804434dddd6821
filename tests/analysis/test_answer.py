"""The Answer on the committed H200 folder: what the README's prose says, derived by the rules."""

from __future__ import annotations

import math

import pytest

from sharebench import analysis
from sharebench.analysis.answer import answer_rows, choices
from support.paths import ROOT

H200 = ROOT / "docs" / "results" / "h200" / "cuda"


@pytest.fixture(scope="module")
def answer():
    tables = analysis.analyse(H200)
    rows = answer_rows(tables).set_index("mode")
    return rows, choices(rows.reset_index(), "H200").set_index("pattern")


def test_verdicts_per_mode(answer):
    rows, _ = answer
    assert list(rows.index) == ["exclusive", "timeslice:2", "timeslice:4", "timeslice:8", "mps:2", "mps:4", "mps:8"]
    # time-slicing: T_N about 35% longer than N·T_1, so about a quarter less throughput, fair
    for n in (2, 4, 8):
        r = rows.loc[f"timeslice:{n}"]
        assert 0.70 < r.gain < 0.78 and r.gain_ci_high < 1 and r.fairness < 1.05
        assert r.slowdown == pytest.approx(n * 1.355, rel=0.02)
    # MPS: no throughput cost, but the clients run one after another: the last waits N times as long
    for n in (2, 4, 8):
        r = rows.loc[f"mps:{n}"]
        assert abs(r.gain - 1) < 0.005 and r.fairness == pytest.approx(n, rel=0.01)
        assert r.slowdown == pytest.approx(n, rel=0.01)
    assert rows.loc["exclusive"].slowdown == 1 and math.isnan(rows.loc["exclusive"].slowdown_ci_low)
    assert set(rows["trust"]) == {"ok"}


def test_choices_per_pattern(answer):
    _, picks = answer
    assert picks.loc["batch throughput", "mode"] == "exclusive"
    assert "same as exclusive within noise: mps:2" in picks.loc["batch throughput", "reason"]
    assert picks.loc["interactive / latency-sensitive", "mode"] == "timeslice:2"
    assert "not mps:*: unfair" in picks.loc["interactive / latency-sensitive", "reason"]
    assert picks.loc["isolation required", "mode"] == "mig:all-1g (predicted, not measured)"


def test_too_few_repeats_are_not_trusted(tmp_path):
    from sharebench.results import ResultsWriter, load_results
    from support.crafted import crafted_rows

    ResultsWriter(tmp_path).append(crafted_rows())
    rows = answer_rows(analysis.build_tables(load_results(tmp_path))).set_index("mode")
    # mps:2 kept 2 good repeats (one failed): no interval, and the Answer says so
    assert rows.loc["mps:2"].trust.startswith("2 repeat(s) < 3: no interval")
    assert math.isnan(rows.loc["mps:2"].gain_ci_low)


def test_a_disturbed_baseline_is_a_flag_of_kind_disturbed_and_the_answer_names_what(tmp_path):
    """The flag keeps the whole reason; its detail and the Answer leave out the busiest processes."""
    from sharebench.results import ResultsWriter, load_results
    from support.crafted import crafted_rows

    busy = "stress (pid 7) 1.90; yes (pid 8) 0.40"
    rows = crafted_rows()
    for r in rows:
        if r["mode"] == "exclusive" and r["particles"] == 1000:
            r["tel_busy_processes"] = busy
            r["tel_disturbed"] = f"other processes used 2.30 cores (> 0.5), busiest: {busy}; CPU steal 6.0% (> 5%)"
    ResultsWriter(tmp_path).append(rows)
    tables = analysis.build_tables(load_results(tmp_path))
    disturbed = tables.flags[tables.flags["kind"] == "disturbed"]
    assert len(disturbed) > 0 and (disturbed["mode"] == "exclusive").all()
    assert disturbed["flag"].str.contains(busy, regex=False).all()
    assert set(disturbed["detail"]) == {"other processes used 2.30 cores (> 0.5); CPU steal 6.0% (> 5%)"}
    trust = answer_rows(tables).set_index("mode").loc["timeslice:2", "trust"]
    assert (
        f"{len(disturbed)} cell(s) of it or its baseline disturbed "
        "(other processes used 2.30 cores (> 0.5); CPU steal 6.0% (> 5%))" in trust
    )
    assert "pid" not in trust
