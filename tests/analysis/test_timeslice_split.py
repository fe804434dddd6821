"""The split of a time-slicing loss into switch idle and refill, on synthetic switch-out records whose
causes are known, checked against a simulated time-sliced pair of the same workload."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharebench.analysis.timeslice_split import (
    SwitchOut,
    loss_at,
    predicted_loss_pct,
    split,
    summarize,
)
from sharebench.telemetry.timeslice_probe import BesideRun, ProbeTrace


def beside_probe(work_ms: float, slice_ms: float, switch_ms: float, refill_ms: float) -> tuple[float, SwitchOut]:
    """A workload that needs ``work_ms`` of progress, beside a probe with the same slices: every slice of
    the workload makes progress only after ``refill_ms``. Its time beside the probe and the probe's record."""
    n = math.ceil(work_ms / (slice_ms - refill_ms) - 1e-9)
    gap = slice_ms + 2 * switch_ms  # the probe sees the workload's slice and the switches around it
    window = n * (gap + slice_ms)  # workload slice, switches, probe slice
    return window / 1e3, SwitchOut(window, (gap,) * n)


def pair_loss_pct(work_ms: float, slice_ms: float, switch_ms: float, refill_ms: float, n: int = 2) -> float:
    """The measured loss of N such replicas time-sliced: T_N against N x T_1 (the tables' definition)."""
    slices = math.ceil(work_ms / (slice_ms - refill_ms) - 1e-9)
    t_n = n * slices * (slice_ms + switch_ms)
    return 100.0 * (t_n - n * work_ms) / (n * work_ms)


def test_all_loss_is_switch_idle() -> None:
    beside, rec = beside_probe(1000.0, 2.0, 0.2, 0.0)
    s = split(1.0, beside, rec, switch_ms=0.2, measured_loss_pct=pair_loss_pct(1000.0, 2.0, 0.2, 0.0))
    assert s.in_slice_rate == pytest.approx(1.0) and s.refill_ms == pytest.approx(0.0, abs=1e-9)
    assert s.switch_idle_pct == pytest.approx(100 * 0.2 / 2.2)
    assert s.gpu_share == pytest.approx(2.0 / 4.4)
    assert s.predicted_loss_pct == pytest.approx(10.0) and s.measured_loss_pct == pytest.approx(10.0)
    assert s.error_pts == pytest.approx(0.0, abs=1e-9)


def test_a_known_refill_cost_is_fitted_and_scales_as_one_over_slice() -> None:
    beside, rec = beside_probe(1050.0, 2.0, 0.2, 0.5)
    s = split(1.05, beside, rec, switch_ms=0.2, measured_loss_pct=pair_loss_pct(1050.0, 2.0, 0.2, 0.5))
    assert s.in_slice_rate == pytest.approx(0.75) and s.refill_ms == pytest.approx(0.5)
    assert s.predicted_loss_pct == pytest.approx(100 * 0.7 / 1.5) == pytest.approx(s.measured_loss_pct)
    rows = {r["slice_ms"]: r for r in loss_at(s, (1.0, 4.0, 8.0))}
    assert {r["label"] for r in rows.values()} == {"predicted"}
    assert rows[4.0]["predicted_loss_pct"] == pytest.approx(100 * 0.7 / 3.5)
    assert rows[4.0]["predicted_loss_pct"] == pytest.approx(pair_loss_pct(1050.0, 4.0, 0.2, 0.5), rel=1e-3)
    assert rows[8.0]["refill_pct"] == pytest.approx(100 * 0.5 / 8.2)
    assert rows[1.0]["predicted_loss_pct"] > rows[4.0]["predicted_loss_pct"] > rows[8.0]["predicted_loss_pct"]


@settings(max_examples=60, deadline=None)
@given(
    slice_ms=st.floats(0.5, 20.0),
    switch_ms=st.floats(0.0, 1.0),
    refill_frac=st.floats(0.0, 0.8),
    slices=st.integers(50, 3000),
)
def test_the_split_predicts_any_simulated_pair(
    slice_ms: float, switch_ms: float, refill_frac: float, slices: int
) -> None:
    refill = refill_frac * slice_ms
    work = slices * (slice_ms - refill)
    beside, rec = beside_probe(work, slice_ms, switch_ms, refill)
    s = split(
        work / 1e3, beside, rec, switch_ms=switch_ms, measured_loss_pct=pair_loss_pct(work, slice_ms, switch_ms, refill)
    )
    assert s.refill_ms == pytest.approx(refill, abs=1e-6)
    assert s.predicted_loss_pct == pytest.approx(s.measured_loss_pct, abs=1e-6)
    assert s.switch_idle_pct + s.refill_pct == pytest.approx(
        100 * (switch_ms + refill) / (slice_ms + switch_ms), abs=1e-6
    )
    assert 0 <= s.gpu_share <= 0.5 + 1e-9


def test_few_slices_fall_back_to_the_probe_slice() -> None:
    s = split(0.004, 0.01, SwitchOut(10.0, (4.4, 4.4)), switch_ms=0.2, probe_slice_ms=2.1)
    assert s.slice_ms == 2.1 and s.switch_ins == 2


def test_refill_filling_the_slice_is_infinite_loss() -> None:
    assert predicted_loss_pct(2.0, 0.2, 2.0) == math.inf
    assert math.isnan(predicted_loss_pct(0.0, 0.2, 0.0))


def test_switch_out_record_from_a_run_beside_the_probe() -> None:
    ms = 1_000_000
    gaps = ((1 * ms, 3 * ms), (5 * ms, 7 * ms), (9 * ms, 11 * ms))
    t = ProbeTrace(0, 1, 0, 20 * ms, gaps, n_gaps=3, offset_ns=-1000 * ms)
    rec = SwitchOut.of(BesideRun({"track_start": 1.002, "track_end": 1.010, "track_s": 0.008}, t))
    assert rec.window_ms == pytest.approx(8.0)
    assert rec.gaps_ms == pytest.approx((1.0, 2.0, 1.0))  # the first and last are clipped to the window


def test_summary_over_repeats_has_intervals() -> None:
    splits = []
    for refill in (0.4, 0.5, 0.6):
        beside, rec = beside_probe(900.0, 2.0, 0.2, refill)
        splits.append(split(0.9, beside, rec, switch_ms=0.2))
    out = summarize(splits, measured=(46.0, 45.0, 47.0))
    assert out["repeats"] == 3 and out["refill_ms"] == pytest.approx(0.5, abs=0.01)
    assert out["refill_ms_ci_low"] < 0.5 < out["refill_ms_ci_high"]
    assert out["error_pts"] == pytest.approx(out["predicted_loss_pct"] - 46.0)
