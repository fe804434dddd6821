"""The split of a time-slicing loss into switch idle and refill, on synthetic switch-out records whose
causes are known, checked against a simulated time-sliced pair of the same workload."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharebench.analysis import analyse
from sharebench.analysis.answer import answer_rows
from sharebench.analysis.timeslice_split import (
    SPLIT_COLUMNS,
    ProbePair,
    SwitchOut,
    append_runs,
    helpful_interval,
    identify,
    implied_refill_ms,
    loss_at,
    loss_from_rate,
    model_row,
    neighbour_terms,
    predicted_loss_pct,
    read_runs,
    resplit,
    split,
    summarize,
    switch_idle_pct,
)
from sharebench.report.answer import verdict_line
from sharebench.telemetry.timeslice_probe import BesideRun, ProbeTrace
from support.timeslice import beside_probe, gpu_folder, pair_loss_pct


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


# --- in a results folder: the split table, the interval that would help, the Answer's mention -------------


def test_the_split_table_of_a_folder_sets_each_part_beside_the_measured_loss(tmp_path) -> None:
    assert read_runs(tmp_path) == []
    runs = gpu_folder(tmp_path)
    failed = dict(runs[0], status="failed", reason="the probe process failed", track_s=99.0)
    other = dict(runs[0], particles=999)  # a size without a measured loss: no row
    append_runs(tmp_path, runs[:2])
    append_runs(tmp_path, [runs[2], failed, other])
    assert len(read_runs(tmp_path)) == 5
    t = analyse(tmp_path).timeslice_split
    assert list(t.columns) == SPLIT_COLUMNS and len(t) == 1
    r = t.iloc[0]
    assert (r["mode"], r["uuid"], r["repeats"], r["particles"]) == ("timeslice:2", "GPU-a", 3, 2000)
    assert r["loss_pct"] == pytest.approx(pair_loss_pct(1050.0, 2.0, 0.2, 0.5), abs=0.5)
    assert r["refill_ms_ci_low"] < 0.5 < r["refill_ms_ci_high"] and r["refill_ms"] == pytest.approx(0.5, abs=0.01)
    assert r["in_slice_rate"] == pytest.approx(0.75, abs=0.01) and r["switch_ms"] == pytest.approx(0.2)
    assert r["switch_idle_pct"] == pytest.approx(100 * 0.2 / 2.2)
    assert abs(r["error_pts"]) < 1.0 and r["predicted_ci_low"] < r["predicted_loss_pct"] < r["predicted_ci_high"]


def test_without_runs_beside_the_probe_the_split_table_is_empty(tmp_path) -> None:
    gpu_folder(tmp_path)
    t = analyse(tmp_path)
    assert len(t.timeslice) == 1 and t.timeslice_split.empty


def test_the_interval_that_would_help_halves_the_predicted_loss() -> None:
    refill = dict(slice_ms=2.0, switch_ms=0.2, refill_ms=0.5)  # 46.7% now; 4 ms: 0.7 / 3.5 = 20%
    h = helpful_interval(refill)
    assert h is not None and h["slice_ms"] == 4.0 and h["label"] == "predicted"
    assert h["predicted_loss_pct"] == pytest.approx(20.0) and h["now_pct"] == pytest.approx(70 / 1.5)
    switch_only = dict(slice_ms=2.0, switch_ms=0.2, refill_ms=0.0)  # 10% now; 4 ms: 5%
    assert helpful_interval(switch_only)["slice_ms"] == 4.0
    assert helpful_interval(dict(slice_ms=16.0, switch_ms=0.2, refill_ms=0.0)) is None  # 1.25%: nothing to gain
    assert helpful_interval(dict(slice_ms=2.0, switch_ms=0.2, refill_ms=0.5), lengths_ms=(1.0, 2.5)) is None


def test_the_answer_names_the_interval_that_would_help_as_predicted(tmp_path) -> None:
    append_runs(tmp_path, gpu_folder(tmp_path))
    rows = answer_rows(analyse(tmp_path)).set_index("mode")
    assert rows.loc["exclusive", "interval"] == ""
    text = rows.loc["timeslice:2", "interval"]
    assert text.startswith("a 4 ms time slice would cut its loss to 2") and "(predicted, not measured;" in text
    assert f"; {text}; isolation:" in verdict_line(rows.reset_index().iloc[1])


# --- issue 34: beside a heavy neighbour, the evicted term and what stays unexplained ------------------------


def splits_beside(work_ms: float, slice_ms: float, switch_ms: float, refills: tuple[float, ...]) -> list:
    """Splits of runs beside one neighbour whose switch is ``switch_ms``, one per refill (repeats)."""
    out = []
    for refill in refills:
        beside, rec = beside_probe(work_ms, slice_ms, switch_ms, refill)
        out.append(split(work_ms / 1e3, beside, rec, switch_ms=switch_ms))
    return out


def test_loss_from_rate_is_the_refill_form_and_implied_refill_inverts_it() -> None:
    for slice_ms, switch, refill in ((2.1, 0.15, 0.36), (4.0, 0.2, 0.0), (1.0, 0.05, 0.5)):
        rate = 1 - refill / slice_ms
        pred = predicted_loss_pct(slice_ms, switch, refill)
        assert loss_from_rate(rate, switch_idle_pct(slice_ms, switch)) == pytest.approx(pred, abs=1e-9)
        assert implied_refill_ms(pred, slice_ms, switch) == pytest.approx(refill, abs=1e-9)
    assert loss_from_rate(0.0, 5.0) == math.inf


def test_a_heavy_neighbour_recovers_the_evicted_term_and_predicts_the_pair() -> None:
    work, slice_ms, sw_l, sw_h, refill, evict = 1200.0, 2.1, 0.15, 0.16, 0.36, 0.06
    light = splits_beside(work, slice_ms, sw_l, (refill - 0.01, refill, refill + 0.01))
    heavy = splits_beside(work, slice_ms, sw_h, tuple(r + evict for r in (refill - 0.01, refill, refill + 0.01)))
    loss = pair_loss_pct(work, slice_ms, sw_h, refill + evict)
    t = neighbour_terms(heavy, light, (loss, loss - 0.3, loss + 0.3))
    assert t["evict_ms"] == pytest.approx(evict, abs=2e-3)  # one partial slice in ~700
    assert t["refill_light_ms"] == pytest.approx(refill, abs=2e-3)
    assert t["in_slice_rate_light"] == pytest.approx(1 - refill / slice_ms, abs=1e-3)
    predicted = float(np.mean([s.predicted_loss_pct for s in heavy]))
    assert predicted == pytest.approx(loss, abs=0.05)
    assert abs(t["unexplained_pts"]) < 0.05 and t["unexplained_ci_low"] < 0 < t["unexplained_ci_high"]
    assert loss - t["predicted_light_pct"] > 2.0  # the light probe alone misses by the evicted term
    assert t["predicted_light_pct"] == pytest.approx(pair_loss_pct(work, slice_ms, sw_l, refill), abs=0.05)
    assert abs(t["missing_ms"]) < 0.005


def test_a_planted_missing_term_is_stated_with_an_interval_that_excludes_zero() -> None:
    work, slice_ms, sw, refill, missing = 1200.0, 2.1, 0.15, 0.36, 0.06
    refills = (refill - 0.005, refill, refill + 0.005)
    light = splits_beside(work, slice_ms, sw, refills)
    heavy = splits_beside(work, slice_ms, sw, refills)  # the neighbour evicts nothing more
    loss = pair_loss_pct(work, slice_ms, sw, refill + missing)
    t = neighbour_terms(heavy, light, (loss, loss - 0.3, loss + 0.3))
    assert t["evict_ms"] == pytest.approx(0.0, abs=1e-9)
    assert t["missing_ms"] == pytest.approx(missing, abs=0.005)
    assert t["unexplained_pts"] > 2 and t["unexplained_ci_low"] > 0


def test_the_split_table_sets_the_heavy_prediction_beside_the_light_one(tmp_path) -> None:
    runs = gpu_folder(tmp_path, refills=(0.35, 0.4, 0.45), loss_refill=0.5)
    heavy = [
        dict(r, neighbour="heavy:128", **beside_fields(1050.0, 2.0, 0.2, refill))
        for r, refill in zip(runs, (0.45, 0.5, 0.55))
    ]
    append_runs(tmp_path, runs + heavy)
    t = analyse(tmp_path).timeslice_split
    assert list(t.columns) == SPLIT_COLUMNS and len(t) == 1
    r = t.iloc[0]
    assert r["neighbour"] == "heavy:128" and r["repeats"] == 3
    assert r["evict_ms"] == pytest.approx(0.1, abs=3e-3) and r["refill_light_ms"] == pytest.approx(0.4, abs=3e-3)
    assert abs(r["error_pts"]) < 1.0 and r["loss_pct"] - r["predicted_light_pct"] > 3.0
    assert r["unexplained_ci_low"] < r["unexplained_pts"] < r["unexplained_ci_high"]


def test_light_only_folders_keep_one_light_row_without_an_evicted_term(tmp_path) -> None:
    append_runs(tmp_path, gpu_folder(tmp_path))
    r = analyse(tmp_path).timeslice_split.iloc[0]
    assert r["neighbour"] == "light" and math.isnan(r["evict_ms"])
    assert r["predicted_light_pct"] == pytest.approx(r["predicted_loss_pct"])
    assert r["unexplained_pts"] == pytest.approx(r["loss_pct"] - r["predicted_loss_pct"])


def beside_fields(work_ms: float, slice_ms: float, switch_ms: float, refill_ms: float) -> dict:
    beside, rec = beside_probe(work_ms, slice_ms, switch_ms, refill_ms)
    return dict(track_s=beside, window_ms=rec.window_ms, gaps_ms=list(rec.gaps_ms), probe_switch_ms=switch_ms)


# --- issue 45: the model as it is; what the data cannot identify; the probe's spread carried ------------------


@settings(max_examples=60, deadline=None)
@given(
    slice_ms=st.floats(1.0, 10.0),
    switch_ms=st.floats(0.05, 0.4),
    other_ms=st.floats(0.05, 0.4),
    refill_frac=st.floats(0.0, 0.5),
)
def test_a_split_recomputed_at_another_switch_is_the_split_measured_with_it(slice_ms, switch_ms, other_ms, refill_frac):
    beside, rec = beside_probe(500.0, slice_ms, switch_ms, refill_frac * slice_ms)
    moved = resplit(split(0.5, beside, rec, switch_ms=switch_ms), other_ms)
    direct = split(0.5, beside, rec, switch_ms=other_ms)
    for f in ("slice_ms", "gpu_share", "in_slice_rate", "refill_ms", "predicted_loss_pct", "switch_idle_pct"):
        assert getattr(moved, f) == pytest.approx(getattr(direct, f), rel=1e-9, abs=1e-12), f


def test_a_switch_reused_in_every_repeat_has_only_the_probes_interval() -> None:
    splits = splits_beside(1200.0, 2.1, 0.15, (0.35, 0.36, 0.37))
    alone = summarize(splits)
    assert math.isnan(alone["switch_ms_ci_low"])  # one probe median copied three times: not an interval
    probe = summarize(splits, switch=(0.149, 0.152))
    assert (probe["switch_ms_ci_low"], probe["switch_ms_ci_high"]) == (0.149, 0.152)
    # the probe's spread is carried into everything that depends on the switch, the prediction first
    assert probe["predicted_loss_pct_ci_low"] < alone["predicted_loss_pct_ci_low"]
    assert probe["predicted_loss_pct_ci_high"] > alone["predicted_loss_pct_ci_high"]
    assert probe["predicted_loss_pct"] == alone["predicted_loss_pct"]


def test_the_probe_pair_alone_is_the_independent_part() -> None:
    summary = {
        "n": 900,
        "p5": 0.150,
        "p25": 0.1505,
        "p50": 0.151,
        "p75": 0.1515,
        "p95": 0.152,
        "min": 0.149,
        "max": 0.16,
    }
    slices = {"n": 900, "p5": 2.08, "p25": 2.085, "p50": 2.09, "p75": 2.095, "p95": 2.1, "min": 2.0, "max": 2.2}
    pair = ProbePair.of({"slice_ms": slices, "switch_ms": summary})
    est, lo, hi = pair.independent()
    assert est == pytest.approx(100 * 0.151 / 2.09)
    assert lo == pytest.approx(100 * 0.1505 / 2.095) and hi == pytest.approx(100 * 0.1515 / 2.085)
    assert math.isnan(ProbePair.medians(2.09, 0.151).independent()[1])  # medians only: no interval


def test_terms_below_zero_are_not_identified_and_never_a_negative_time() -> None:
    row = dict(
        in_slice_rate=1.011,
        refill_ms=-0.022,
        refill_ms_ci_low=-0.032,
        refill_ms_ci_high=-0.012,
        refill_pct=-0.97,
        evict_ms=-0.092,
        evict_ms_ci_low=-0.104,
        evict_ms_ci_high=-0.079,
        refill_light_ms=0.069,
        implied_refill_ms=0.02,
        missing_ms=0.04,
    )
    out = identify(row)
    assert all(
        math.isnan(out[k]) for k in ("refill_ms", "refill_ms_ci_low", "refill_pct", "evict_ms", "evict_ms_ci_high")
    )
    assert out["not_identified"].startswith("refill (in-slice rate above 1") and "evict (" in out["not_identified"]
    assert out["refill_light_ms"] == 0.069 and out["implied_refill_ms"] == 0.02
    kept = identify(dict(in_slice_rate=0.9, refill_ms=0.01, refill_ms_ci_low=-0.005, refill_ms_ci_high=0.025))
    assert kept["refill_ms_ci_low"] == 0.0 and kept["refill_ms"] == 0.01 and kept["not_identified"] == ""


def test_a_heavy_row_states_its_independent_part_beside_the_transfer() -> None:
    light = splits_beside(1200.0, 2.1, 0.15, (0.35, 0.36, 0.37))
    heavy = splits_beside(1200.0, 2.1, 0.24, (0.34, 0.35, 0.36))  # a refill below the light one: evict < 0
    pair = ProbePair((2.04, 2.03, 2.05), (0.24, 0.238, 0.242))
    light_pair = ProbePair((2.09, 2.08, 2.1), (0.15, 0.149, 0.151))
    row = model_row(heavy, light, (40.0, 39.0, 41.0), "heavy:128", (pair, light_pair))
    assert set(SPLIT_COLUMNS) - {
        "engine",
        "backend",
        "device_class",
        "lattice",
        "particles",
        "turns",
        "mode",
        "uuid",
        "device_name",
    } <= set(row)
    assert row["independent_pct"] == pytest.approx(100 * 0.24 / 2.04)
    assert row["independent_light_pct"] == pytest.approx(100 * 0.15 / 2.09)
    assert row["independent_ci_low"] < row["independent_pct"] < row["independent_ci_high"]
    assert math.isnan(row["evict_ms"]) and "evict (" in row["not_identified"]
    assert (row["switch_ms_ci_low"], row["switch_ms_ci_high"]) == (0.238, 0.242)
