"""A sweep within a node-time budget (sharebench.sweep.budget) and what runs after each cell
(sharebench.sweep.adaptive): durations, the plan, recorded rates, the next cells and the report."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharebench.analysis.sequential import look_confidence, loss_interval, mean_interval
from sharebench.errors import UserError
from sharebench.modes import parse_modes
from sharebench.sweep import SweepConfig, validate
from sharebench.sweep.adaptive import budget_report, next_cells
from sharebench.sweep.budget import (
    DEFAULT_OVERHEADS,
    BudgetOptions,
    BudgetPlan,
    Calibration,
    Overheads,
    budget_options,
    calibrate_particles,
    measured_overheads,
    parse_duration,
    plan_budget,
    plan_recorded,
    plan_within,
    recorded_calibration,
    recorded_results,
)
from sharebench.workloads import Workload
from support.crafted import CPU, cell
from support.lattices import tiny_lattice

RESULTS = Path(__file__).resolve().parents[2] / "tests" / "data" / "results"
# T_1 = particles / 1,000 s: 1,000 particles x 10 turns at 10,000 particle-turns/s
CAL = Calibration(turns=10, elements=1, rates={1000: 10_000.0}, source="test rates")
OVERHEADS = Overheads(per_cell_s=0.5, start_s=2.0, end_s=3.0, source="test")
MODES = parse_modes("exclusive,timeslice:2,timeslice:4,mps:2,mps:4")


@pytest.mark.parametrize(
    "text, seconds",
    [("90s", 90), ("10m", 600), ("1h30m", 5400), ("1h30m15s", 5415), ("1.5h", 5400), (" 2M ", 120), ("45m30s", 2730)],
)
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["90", "", "abc", "10ms", "-5s", "5 minutes", "1d"])
def test_a_bad_duration_names_the_value(text):
    with pytest.raises(UserError) as err:
        parse_duration(text)
    assert (
        str(err.value)
        == f"bad --budget {text!r}; allowed: a duration such as 90s, 10m, 1h30m (h, m, s; at most 30 days)"
    )


@pytest.mark.parametrize("text", ["0s", "0m0s", "31000h"])
def test_a_duration_out_of_range(text):
    with pytest.raises(UserError, match=re.escape(f"bad --budget {text!r}; allowed: a duration such as 90s")):
        parse_duration(text)


def test_options_checked_in_one_line():
    assert budget_options("90s", "0.5", "6") == BudgetOptions(90.0, 0.5, 6)
    assert budget_options(None).budget_s is None
    for bad in ("0", "-1", "nan", "x"):
        with pytest.raises(UserError) as err:
            budget_options("90s", bad)
        assert str(err.value) == f"bad --precision {bad!r}; allowed: points of loss > 0, such as 1 or 0.5"
    with pytest.raises(UserError) as err:
        budget_options("90s", 1, 2)
    assert str(err.value) == "bad --max-repeats 2; allowed: a whole number 3..1000"
    assert budget_options("1m", target_slowdown=2.5).slowdown_thresholds == (2.5,)


def study_plan(budget: float, **kw) -> BudgetPlan:
    return plan_within(budget, CAL, OVERHEADS, MODES, [1000, 2000, 4000], 3, 3, **kw)


def test_headline_modes_and_the_largest_size_first():
    # a round of every mode at 2,000: 13 x T_1 2 s + 5 gaps = 28.5 s, x 4 (3 repeats + 1 warm-up) = 114 s;
    # at 4,000: 218 s, too much; 215 s leaves 96 s after 114 s: exclusive + timeslice:2 (52 s) and
    # mps:2 (34 s) fit at 4,000, timeslice:4 (66 s) no longer; at 1,000 exclusive + timeslice:2 (16 s) not
    plan = study_plan(215)
    assert [(b.mode.label, b.particles) for b in plan.blocks] == [
        ("exclusive", 2000),
        ("timeslice:2", 2000),
        ("mps:2", 2000),
        ("timeslice:4", 2000),
        ("mps:4", 2000),
        ("exclusive", 4000),
        ("timeslice:2", 4000),
        ("mps:2", 4000),
    ]
    assert plan.left_out[:3] == ("timeslice:4 at 4,000", "mps:4 at 4,000", "exclusive at 1,000")
    assert plan.predicted_s == pytest.approx(2 + 114 + 86 + 3)
    assert plan.predicted_s <= plan.budget_s
    cells = plan.cells()
    assert len(cells) == 8 * 4
    assert [c.id for c in cells[:8]] == [
        "exclusive_p2000_r0",
        "timeslice:2_p2000_r0",
        "timeslice:4_p2000_r0",
        "mps:2_p2000_r0",
        "mps:4_p2000_r0",
        "exclusive_p4000_r0",
        "timeslice:2_p4000_r0",
        "mps:2_p4000_r0",
    ]
    assert all(c.warmup for c in cells[:8]) and not any(c.warmup for c in cells[8:])
    text = plan.describe()
    assert text.startswith("budget:    3m35s (215 s); test rates\n")
    assert "predicted: 205 s of 215 s (calibration 0.0 s, set-up 2.0 s, cells 200.0 s, report 3 s)" in text
    assert "left out:  timeslice:4 at 4,000, mps:4 at 4,000, exclusive at 1,000" in text


def test_a_budget_too_small_for_one_cell_of_each_mode_says_what_fits():
    # one cell each at 1,000: 13 x 1 s + 5 x 0.5 s = 15.5 s, + 5 s of set-up and report
    with pytest.raises(UserError) as err:
        study_plan(12)
    assert str(err.value) == (
        "--budget 12s is too small for one cell of each mode at 1,000 particles: about 20 s (exclusive 1.5 s, "
        "timeslice:2 2.5 s, mps:2 2.5 s, timeslice:4 4.5 s, mps:4 4.5 s; 5 s of calibration, set-up and report); "
        "it fits exclusive, timeslice:2, mps:2; allowed: --budget 21s or more, or fewer --modes"
    )


def test_a_tight_budget_drops_the_warm_ups_then_repeats():
    assert (study_plan(5 + 15.5 * 3).repeats, study_plan(5 + 15.5 * 3).warmup_repeats) == (3, 0)
    plan = study_plan(5 + 15.5 * 2)
    assert (plan.repeats, plan.warmup_repeats, plan.particles) == (2, 0, (1000, 2000, 4000))
    assert {b.particles for b in plan.blocks} == {1000}


def test_no_sizes_given_picks_the_largest_that_fits():
    modes = parse_modes("exclusive,timeslice:2,timeslice:4,partition:2")
    plan = plan_within(90, CAL, DEFAULT_OVERHEADS["cpu"], modes, None, 3, 10)
    (size,) = plan.particles
    assert plan.predicted_s <= 90
    # the room left for adaptive repeats is a quarter of what set-up and report leave; one step more
    # (two significant digits) would not fit the other three quarters
    o = DEFAULT_OVERHEADS["cpu"]
    room = 0.75 * (90 - o.start_s - o.end_s)
    step = 10 ** (int(math.log10(size)) - 1)
    bigger = plan_within(1e9, CAL, DEFAULT_OVERHEADS["cpu"], modes, [size + step], 3, 3)
    assert bigger.cells_s > room >= plan.cells_s


@settings(max_examples=60, deadline=None)
@given(st.floats(10, 5000), st.floats(100, 1e6), st.integers(0, 2), st.integers(3, 12))
def test_a_plan_never_predicts_more_than_its_budget(budget, rate, warmups, max_repeats):
    cal = Calibration(10, 1, {1000: rate}, "hypothesis")
    try:
        plan = plan_within(budget, cal, OVERHEADS, MODES, [1000, 5000, 20000], 3, max_repeats, warmup_repeats=warmups)
    except UserError as exc:
        assert str(exc).startswith("--budget ")
        return
    assert plan.predicted_s <= budget + 1e-9
    assert len(plan.cells()) == len(plan.blocks) * (plan.repeats + plan.warmup_repeats)
    assert {m.label for m in MODES} <= {b.mode.label for b in plan.blocks}  # one cell of each mode at least


def test_recorded_rates_of_the_h200_plan_a_gpu_campaign():
    cal, overheads = recorded_calibration("H200", RESULTS, turns=1)
    assert cal.source.startswith("planned from recorded rates of H200 (")
    assert set(cal.rates) >= {5_000_000, 10_000_000, 15_000_000}
    assert all(1.2e11 < r < 1.4e11 for r in cal.rates.values())  # element-passes/s of the exclusive cells
    assert cal.factors["mps:2"] == pytest.approx(1.0, abs=0.01)  # MPS: the two run one after the other
    assert 1.25 < cal.factors["timeslice:2"] < 1.4
    assert cal.exclusive_s(10_000_000) == pytest.approx(1.43, abs=0.02)  # the recorded 10 M x 1 turn T_1
    modes = parse_modes("exclusive,timeslice:2,timeslice:4,timeslice:8,mps:2,mps:4,mps:8")
    plan = plan_within(600, cal, overheads, modes, [5_000_000, 10_000_000, 15_000_000], 3, 10)
    assert plan.describe().startswith("budget:    10m (600 s); planned from recorded rates of H200 (")
    assert plan.predicted_s <= 600
    assert [b.mode.label for b in plan.blocks[:3]] == ["exclusive", "timeslice:2", "mps:2"]
    assert plan.blocks[0].particles == 15_000_000


def test_no_recorded_rates_of_a_model_is_one_line():
    with pytest.raises(UserError) as err:
        recorded_results(RESULTS, "A100-40GB")
    assert str(err.value) == (
        f"no recorded simpletrack results on the cuda backend of GPU model 'A100-40GB' under {RESULTS}; "
        "record a sweep on one first"
    )


def test_the_default_overheads_are_the_recorded_ones():
    cpu = measured_overheads([RESULTS / "cpu-default"])
    assert cpu.per_cell_s == pytest.approx(DEFAULT_OVERHEADS["cpu"].per_cell_s, abs=0.01)
    assert cpu.start_s == pytest.approx(DEFAULT_OVERHEADS["cpu"].start_s, abs=0.05)
    gpu = measured_overheads([f for f, _ in recorded_results(RESULTS, "H200")])
    assert gpu.per_cell_s == pytest.approx(DEFAULT_OVERHEADS["gpu"].per_cell_s, abs=0.01)
    assert gpu.start_s == pytest.approx(DEFAULT_OVERHEADS["gpu"].start_s, abs=0.05)


def test_calibration_runs_one_exclusive_run_per_size(tmp_path):
    plan = validate(
        SweepConfig(workload=Workload(device="cpu", lattice=str(tiny_lattice(tmp_path / "fodo.json"))), turns=20)
    )
    cal = calibrate_particles(plan.run_config, [500, 1000])
    assert set(cal.rates) == {500, 1000} and all(r > 0 for r in cal.rates.values())
    assert cal.turns == 20 and cal.elements > 1 and cal.spent_s > 0
    assert cal.source.startswith("calibrated on this machine (one exclusive run per size: 500 particles ")
    assert cal.exclusive_s(1000) == pytest.approx(1000 * 20 * cal.elements / cal.rates[1000])


# ------------------------------------------------------------------ after each cell

HEADLINE = parse_modes("exclusive,timeslice:2,mps:2")


def headline_plan(budget: float = 1000.0, max_repeats: int = 6) -> BudgetPlan:
    return plan_within(budget, CAL, OVERHEADS, HEADLINE, [1000], 3, max_repeats, warmup_repeats=0)


def measured(spans: dict[str, list[float]], start: float = 0.0) -> list[dict]:
    """Rows of cells whose replicas track side by side for the given spans, one cell after the other
    (0.5 s apart), repeat by repeat in run order."""
    rows: list[dict] = []
    t = start
    for r in range(max(len(v) for v in spans.values())):
        for mode, values in spans.items():
            if r < len(values):
                n = 1 if mode == "exclusive" else 2
                rows += cell(CPU, mode, r + 1, [(t, t + values[r])] * n, cores=2)
                t += values[r] + 0.5
    return rows


def ids(cells) -> list[str]:
    return [c.id for c in cells]


def test_the_planned_cells_first_then_repeats_while_unsettled():
    plan = headline_plan()
    opts = BudgetOptions(None, precision=1.0, max_repeats=6)
    assert ids(next_cells(plan, [], opts)) == ids(plan.cells())
    rows = measured({"exclusive": [1.0, 1.0]})
    assert ids(next_cells(plan, rows, opts))[0] == "timeslice:2_p1000_r1"
    # timeslice:2 is settled (±0.06 points, clear of -1.96); mps:2 scatters by 5 points: it goes on, and
    # exclusive with it
    rows = measured({"exclusive": [1.0, 1.0005, 0.9995], "timeslice:2": [2.2, 2.2, 2.2002], "mps:2": [2.0, 2.1, 1.95]})
    assert ids(next_cells(plan, rows, opts)) == ["exclusive_p1000_r4", "mps:2_p1000_r4"]
    # a block that stopped stays stopped when its T_1 gets more repeats
    rows = measured(
        {
            "exclusive": [1.0, 1.0005, 0.9995, 1.2, 0.8],
            "timeslice:2": [2.2, 2.2, 2.2002],
            "mps:2": [2.0, 2.1, 1.95, 2.2, 1.9],
        }
    )
    assert ids(next_cells(plan, rows, opts)) == ["exclusive_p1000_r6", "mps:2_p1000_r6"]
    rows = measured(
        {
            "exclusive": [1.0, 1.0005, 0.9995, 1.2, 0.8, 1.0],
            "timeslice:2": [2.2, 2.2, 2.2002],
            "mps:2": [2.0, 2.1, 1.95, 2.2, 1.9, 2.0],
        }
    )
    assert next_cells(plan, rows, opts) == []  # max repeats


def test_the_budget_keeps_planned_cells_in_priority_order():
    plan = headline_plan()
    opts = BudgetOptions(100.0, precision=1.0, max_repeats=6)
    # 100 s - 3 s of report - 88 s spent leaves 9 s: block by block in priority order, exclusive's three
    # cells (1.5 s each), then one of timeslice:2 (2.5 s); a second (or one of mps:2) would not fit
    queue = next_cells(plan, [], opts, elapsed_s=88.0)
    assert ids(queue) == ["exclusive_p1000_r1", "timeslice:2_p1000_r1", "exclusive_p1000_r2", "exclusive_p1000_r3"]
    # measured spans replace the prediction: timeslice:2 took 6 s, so the rest of it costs 6.5 s a cell
    rows = measured({"exclusive": [1.0], "timeslice:2": [6.0], "mps:2": [2.0]})
    queue = next_cells(plan, rows, opts, elapsed_s=80.0)
    assert ids(queue) == ["exclusive_p1000_r2", "timeslice:2_p1000_r2", "exclusive_p1000_r3", "timeslice:2_p1000_r3"]
    assert next_cells(plan, rows, opts, elapsed_s=97.0) == []


def test_the_report_states_budget_plan_time_and_precision():
    plan = headline_plan(max_repeats=4)
    opts = BudgetOptions(60.0, precision=1.0, max_repeats=4)
    rows = measured(
        {"exclusive": [1.0, 1.0005, 0.9995, 1.0], "timeslice:2": [2.2, 2.2, 2.2002], "mps:2": [2.0, 2.1, 1.95, 2.0]}
    )
    lines = budget_report(plan, rows, opts, elapsed_s=45.0)
    assert lines[0] == "budget: 1m (60 s); used 45.0 s (75%) before the report"
    assert lines[1] == "plan: test rates; predicted 24 s for 9 planned cells (3 repeat(s) + 0 warm-up of 3 block(s))"
    assert lines[2] == (
        "ran: 11 cells; repeats while wider than ±1 or straddling -1.96, 3 to 4; intervals at 97.5% per look, 95% as "
        "stated"
    )
    t1 = mean_interval([1.0, 1.0005, 0.9995, 1.0], look_confidence(3, 4))
    assert lines[3] == (
        f"  exclusive at 1,000: 4 repeat(s), mean track time {t1.estimate:.4g} s [{t1.low:.4g}, {t1.high:.4g}] "
        f"(±{100 * t1.half_width / t1.estimate:.3g}%); stopped: max repeats 4 reached"
    )
    # timeslice:2 after its 3 repeats, against T_1 of repeats 1..3
    ts = loss_interval([2.2, 2.2, 2.2002], [1.0, 1.0005, 0.9995], 2, look_confidence(3, 4))
    assert lines[4] == (
        f"  timeslice:2 at 1,000: 3 repeat(s), loss 10 [{ts.low:.3g}, {ts.high:.3g}] points (±{ts.half_width:.3g}); "
        f"stopped: settled: ±{ts.half_width:.3g} within ±1, clear of -1.96078"
    )
    mps = loss_interval([2.0, 2.1, 1.95, 2.0], [1.0, 1.0005, 0.9995, 1.0], 2, look_confidence(3, 4))
    assert lines[5] == (
        f"  mps:2 at 1,000: 4 repeat(s), loss {mps.estimate:.3g} [{mps.low:.3g}, {mps.high:.3g}] points "
        f"(±{mps.half_width:.3g}); stopped: max repeats 4 reached (interval ±{mps.half_width:.3g} wider than ±1; "
        f"interval [{mps.low:.3g}, {mps.high:.3g}] straddles -1.96078)"
    )
    assert len(lines) == 6


def test_the_report_says_which_cells_the_budget_cut():
    plan = headline_plan()
    opts = BudgetOptions(30.0, precision=1.0, max_repeats=6)
    rows = measured({"exclusive": [1.0, 1.0, 1.0], "timeslice:2": [2.2, 2.4, 2.0], "mps:2": [2.0]})
    lines = budget_report(plan, rows, opts, elapsed_s=29.0)
    assert lines[-1] == "planned cells not run (budget): 2: mps:2_p1000_r2, mps:2_p1000_r3"
    assert "stopped: budget (would go on: " in lines[4]
    assert np.isfinite(plan.predicted_s)


def test_a_sweep_on_this_machine_is_planned_from_a_real_calibration(tmp_path):
    lattice = str(tiny_lattice(tmp_path / "fodo.json"))
    sweep = validate(SweepConfig(workload=Workload(device="cpu", lattice=lattice), turns=20))  # the CPU default
    plan = plan_budget(sweep, budget_options("90s"))
    assert list(plan.calibration.rates) == [1000]  # one probe run; the size is chosen to fit
    assert [m.label for m in plan.modes] == [m.label for m in sweep.modes]
    assert {b.replicas for b in plan.blocks if b.mode.label == "timeslice:4"} == {4}
    assert plan.warmup_repeats == 1 and plan.predicted_s <= 90
    sized = validate(SweepConfig(workload=Workload(device="cpu", lattice=lattice), particles="500,1000", turns=20))
    plan = plan_budget(sized, budget_options("90s", max_repeats=3))
    assert set(plan.calibration.rates) == {500, 1000} and plan.particles == (500, 1000)


def test_a_gpu_campaign_planned_where_the_gpu_is_not():
    modes = parse_modes("exclusive,timeslice:2,mps:2,mig:1g")
    plan = plan_recorded(budget_options("10m"), "H200", RESULTS, modes, [10_000_000], turns=1)
    assert {b.mode.label: b.replicas for b in plan.blocks} == {
        "exclusive": 1,
        "timeslice:2": 2,
        "mps:2": 2,
        "mig:1g": 7,
    }
    assert plan.calibration.source.startswith("planned from recorded rates of H200")


def test_a_further_t1_repeat_goes_only_with_its_shared_repeat():
    plan = headline_plan()
    opts = BudgetOptions(100.0, precision=1.0, max_repeats=6)
    rows = measured({"exclusive": [1.0, 1.0005, 0.9995], "timeslice:2": [2.2, 2.2, 2.2002], "mps:2": [2.0, 2.1, 1.95]})
    assert ids(next_cells(plan, rows, opts, elapsed_s=80.0)) == ["exclusive_p1000_r4", "mps:2_p1000_r4"]
    # 100 - 3 - 95 = 2 s: exclusive's repeat (1.5 s) would fit, mps:2's (2.5 s) not: neither runs
    assert next_cells(plan, rows, opts, elapsed_s=95.0) == []


def test_a_patterned_budget_measures_the_alone_cell_once_and_first(tmp_path):
    """Issue 42: a patterned sweep within a budget measures its baseline once per size (its warm-up and the
    alone cell, ``sweep.plan.alone_cells``), first, as the fixed schedule does; the sharing modes repeat while
    unsettled, never the alone cell with them; the report says so."""
    lattice = tiny_lattice(tmp_path / "fodo.json")
    workload = Workload(device="cpu", lattice=str(lattice), pattern="interactive:burst=1,think=0.05")
    sweep = validate(
        SweepConfig(modes=("exclusive", "timeslice:2", "timeslice:4"), particles=(1000,), turns=1, workload=workload)
    )
    plan = plan_budget(sweep, budget_options("10m"))
    assert [c.id for c in plan.alone] == ["exclusive_p1000_r0", "exclusive_p1000_r1"]
    planned = ids(plan.cells())
    assert planned[:2] == ["exclusive_p1000_r0", "exclusive_p1000_r1"]
    assert [c for c in planned[2:] if c.startswith("exclusive")] == []  # never a repeat of the alone cell
    assert len(planned) == 2 + 2 * (plan.repeats + plan.warmup_repeats)
    baseline = plan.block("exclusive", 1000)
    assert baseline is not None and plan.once(baseline) and plan.rounds(baseline) == 2
    assert "x 2 = " in plan.describe() and "(the alone cell, once)" in plan.describe()
    opts = BudgetOptions(None, precision=1.0, max_repeats=6)
    # the alone cell and the planned sharing repeats measured, timeslice:4 scattering: only it goes on
    spans = {"timeslice:2": [2.2, 2.2, 2.2002], "timeslice:4": [4.0, 5.0, 3.5]}
    warmups = [
        cell(CPU, m, 0, [(0.0, 1.0)] * n, cores=2)
        for m, n in (("exclusive", 1), ("timeslice:2", 2), ("timeslice:4", 4))
    ]
    rows = [r for w in warmups for r in w] + cell(CPU, "exclusive", 1, [(1.0, 2.0)], cores=2) + measured(spans, 3.0)
    assert ids(next_cells(plan, rows, opts)) == ["timeslice:4_p1000_r4"]
    # in a queue the alone cell comes first, whatever its repeat number
    assert ids(next_cells(plan, [], opts))[:2] == ["exclusive_p1000_r0", "exclusive_p1000_r1"]
    report = budget_report(plan, rows, BudgetOptions(600.0, precision=1.0, max_repeats=6), elapsed_s=30.0)
    assert "  exclusive at 1,000: the alone cell, once (its p95 until precise)" in report
