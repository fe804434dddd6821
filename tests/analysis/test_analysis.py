"""The study's tables against hand-computed values from the crafted results CSV of
``support.crafted`` (its docstring lays the sweep out row by row)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import stats

from sharebench import analysis
from sharebench.analysis.tables import TABLE_COLUMNS
from sharebench.report import write_tables
from sharebench.results import ResultsWriter, load_results
from support.crafted import crafted_rows


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    d = tmp_path_factory.mktemp("crafted")
    ResultsWriter(d).append(crafted_rows())
    return analysis.build_tables(load_results(d))


def one(t, **where):
    for k, v in where.items():
        t = t[t[k] == v]
    assert len(t) == 1, f"expected one row for {where}, got {len(t)}"
    return t.iloc[0]


T975_2 = 4.302652729749462  # Student t, 97.5% quantile, 2 degrees of freedom (3 repeats)


def test_timeslice_table(tables):
    r = one(tables.timeslice, mode="timeslice:2")
    # T_1 = mean(10, 11, 12) = 11; warm-up 50 s left out; a time's CI is on the log scale:
    # 11 · exp(±t(2)·sd/(√3·11)) with sd = 1
    h1 = T975_2 / (np.sqrt(3) * 11)
    assert_allclose([r.T1_s, r.T1_ci_low, r.T1_ci_high], [11, 11 * np.exp(-h1), 11 * np.exp(h1)])
    assert_allclose(r.NT1_s, 22)
    # T_N = mean(21, 24, 23) = 68/3 (the 50%-overlap cell is excluded); sd = sqrt(7/3)
    half = T975_2 * np.sqrt(7 / 3) / np.sqrt(3) / (68 / 3)
    assert_allclose(
        [r.TN_s, r.TN_ci_low, r.TN_ci_high], [68 / 3, 68 / 3 * np.exp(-half), 68 / 3 * np.exp(half)], rtol=1e-12
    )
    # loss = (68/3 - 22) / 22 = 3.0303%; CI of the ratio: delta method on its log, Welch df (3.69 here)
    ra, rb = (7 / 3) / (3 * (68 / 3) ** 2), 1 / (3 * 11**2)
    df = (ra + rb) ** 2 / (ra**2 / 2 + rb**2 / 2)
    h = stats.t.ppf(0.975, df) * np.sqrt(ra + rb)
    ratio = (68 / 3) / 22
    assert_allclose(
        [r.loss_pct, r.loss_ci_low, r.loss_ci_high],
        [100 / 33, 100 * (ratio * np.exp(-h) - 1), 100 * (ratio * np.exp(h) - 1)],
        rtol=1e-12,
    )
    assert_allclose([r.loss_ci_low, r.loss_ci_high], [-14.594, 24.292], atol=1e-3)
    # CV of T_1: sd(10,11,12) = 1, mean 11 -> 9.0909%; of T_N: sd(21,24,23) = sqrt(7/3), mean 68/3
    assert_allclose([r.cv_T1_pct, r.cv_TN_pct], [100 / 11, 100 * np.sqrt(7 / 3) / (68 / 3)])
    # fairness per cell: 21/20.4, 24/23, 23/22 -> median 24/23... sorted: 1.0294, 1.0435, 1.0455
    assert_allclose(r.fairness, 24 / 23)
    assert r.repeats == 3 and r.t1_repeats == 3
    shown = analysis.display_table("timeslice", tables.timeslice).iloc[0]
    assert (shown["loss %"], shown["loss 95% CI"], shown["≠ 0?"]) == ("3.03", "[-14.59, 24.29]", "no")


def test_mps_table_leaves_out_the_failed_cell(tables):
    r = one(tables.mps, mode="mps:2")
    # only r2 (span 30) and r3 (span 32): mean 31; loss (31 - 22)/22 = 40.9090...%
    assert_allclose([r.TN_s, r.loss_pct], [31, 900 / 22])
    # two repeats: no interval (it could not have 95% coverage) and so no "≠ 0?" claim
    assert np.isnan(r.loss_ci_low) and np.isnan(r.loss_ci_high)
    assert r.repeats == 2
    shown = analysis.display_table("mps", tables.mps).iloc[0]
    assert (shown["loss 95% CI"], shown["≠ 0?"]) == ("", "")


def test_mig_table(tables):
    r = one(tables.mig, mode="mig:3g")
    # T_mig = mean of the per-cell mean track_s (12.1, 12.4, 12.3) = 36.8/3; T_full = mean(5.0, 5.2, 5.4) = 5.2
    assert_allclose([r.full_s, r.mig_s], [5.2, 36.8 / 3])
    # MIG loss = (36.8/3 - 5.2) / 5.2 = 135.897...%
    assert_allclose(r.loss_pct, 100 * (36.8 / 3 - 5.2) / 5.2)
    assert r.mig_profile == "3g.71gb" and r.instances == 2
    assert analysis.display_table("mig", tables.mig).iloc[0]["loss %"] == "135.90"


@pytest.mark.parametrize(
    "mode, full, slice_, ideal, measured",
    [
        # CPU: 2 cores -> 1 core each: ideal = 11 * 2/1 = 22; measured mean(21, 23, 24) = 68/3
        ("partition:2", 2, 1, 22.0, 68 / 3),
        # GPU: 132 SMs -> 60 SMs: ideal = 5.2 * 132/60 = 11.44; measured mean(12.1, 12.4, 12.3)
        ("mig:3g", 132, 60, 5.2 * 132 / 60, 36.8 / 3),
    ],
)
def test_partition_scaling(tables, mode, full, slice_, ideal, measured):
    r = one(tables.partition, mode=mode)
    assert_allclose([r.full_units, r.slice_units, r.ideal_s, r.slice_s], [full, slice_, ideal, measured])
    assert_allclose(r.excess_pct, 100 * (measured - ideal) / ideal)
    assert_allclose(r.efficiency_pct, 100 * ideal / measured)


def test_throughput_and_gain(tables):
    t = tables.throughput
    ex = one(t, mode="exclusive", particles=1000)
    ts = one(t, mode="timeslice:2", particles=1000)
    # exclusive: 1000*10 / mean(10, 11, 12); timeslice:2: 2*1000*10 / mean(21, 24, 23)
    assert_allclose([ex.throughput_pt_per_s, ts.throughput_pt_per_s], [10000 / 11, 20000 / (68 / 3)])
    # gain = (20000/(68/3)) / (10000/11) = 2·T_1 / T_N = 66/68 = 1 / (1 + loss)
    assert_allclose([ex.gain, ts.gain], [1.0, 66 / 68])
    h = T975_2 * np.sqrt(7 / 9) / (68 / 3)  # the span's interval on the log scale, swapped for a rate
    t_lo, t_hi = 68 / 3 * np.exp(-h), 68 / 3 * np.exp(h)
    assert_allclose([ts.throughput_ci_low, ts.throughput_ci_high], [20000 / t_hi, 20000 / t_lo])
    loss = one(tables.timeslice, mode="timeslice:2")
    assert_allclose(
        [ts.gain_ci_low, ts.gain_ci_high], [100 / (100 + loss.loss_ci_high), 100 / (100 + loss.loss_ci_low)]
    )


@pytest.mark.parametrize(
    "mode, text, excluded, kind, detail",
    [
        ("timeslice:2", "overlap 50.00% < 95%", True, "overlap", "50.00% < 95%"),
        ("mps:2", "failed: replica 1: boom", True, "failed", "replica 1: boom"),
        ("mps:2", "only 2 measured repeat(s)", False, "repeats", "only 2 measured repeat(s) (< 3)"),
        ("mig:3g", "replicas on different devices: GPU-a, GPU-b", True, "devices", "GPU-a, GPU-b"),
    ],
)
def test_flags(tables, mode, text, excluded, kind, detail):
    f = tables.flags
    hit = f[(f["mode"] == mode) & f["flag"].str.contains(text, regex=False)]
    assert len(hit) == 1, f["flag"].tolist()
    assert bool(hit.iloc[0]["excluded"]) is excluded
    assert (hit.iloc[0]["kind"], hit.iloc[0]["detail"]) == (kind, detail)


def test_every_flag_has_a_known_kind(tables):
    assert set(tables.flags["kind"]) <= set(analysis.FLAG_KINDS)
    assert {"overlap", "failed", "repeats", "devices"} <= set(tables.flags["kind"])
    with pytest.raises(ValueError, match="flag kind 'odd'"):
        analysis.Flag("cell", "exclusive", 1000, "c", "odd: x", False, kind="odd", detail="x")


def test_a_failure_naming_several_replicas_is_one_flag(tmp_path):
    """An error text holding '; ' (one clause per failed replica) stays one flag of kind failed."""
    rows = crafted_rows()
    for r in rows:
        if r["cell_error"]:
            r["cell_error"] = "replica 0: boom; replica 1: boom"
    ResultsWriter(tmp_path).append(rows)
    f = analysis.build_tables(load_results(tmp_path)).flags
    failed = f[f["kind"] == "failed"]
    assert failed["detail"].tolist() == ["replica 0: boom; replica 1: boom"]
    assert f["flag"].str.contains("boom").sum() == 1


def test_tables_always_hold_their_columns(tmp_path):
    """Every table is present with its documented columns, even with no rows; a table without them
    cannot be built."""
    empty = analysis.build_tables(load_results(_one_exclusive_folder(tmp_path)))
    for name, t in empty.to_dict().items():
        assert set(TABLE_COLUMNS[name]) <= set(t.columns), name
    assert empty.mig.empty and empty.timeslice.empty and len(empty.cells) == 1
    assert tuple(empty.to_dict()) == analysis.TABLES
    with pytest.raises(ValueError, match="table mps lacks its column"):
        dataclasses.replace(empty, mps=empty.mps.drop(columns=["loss_pct"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        empty.mps = empty.timeslice  # type: ignore[misc]


def _one_exclusive_folder(tmp_path):
    rows = [r for r in crafted_rows() if r["mode"] == "exclusive"][:1]
    ResultsWriter(tmp_path).append(rows)
    return tmp_path


def test_overlap_of_concurrent_but_unequal_windows(tables):
    """An unfair pair that started together overlaps 100% of the shorter window."""
    c = tables.cells
    r = one(c, cell_id="timeslice:2_p1000_r1")
    # windows [100, 121] and [100.1, 120.5]: (120.5 - 100.1) / 20.4 = 100%
    assert_allclose([r.overlap_pct, r.span_s], [100.0, 21.0])
    bad = one(c, cell_id="timeslice:2_p1000_r4")
    # windows [400, 420] and [410, 430]: (420 - 410) / 20 = 50%
    assert_allclose(bad.overlap_pct, 50.0)


def test_no_baseline_is_flagged_not_invented(tmp_path):
    rows = [r for r in crafted_rows() if not (r["mode"] == "exclusive" and r["device_class"] == "cpu")]
    ResultsWriter(tmp_path).append(rows)
    t = analysis.build_tables(load_results(tmp_path))
    r = one(t.timeslice, mode="timeslice:2")
    assert np.isnan(r.loss_pct) and np.isnan(r.T1_s)
    assert t.flags["flag"].str.contains("no exclusive baseline").any()


def test_write_tables(tables, tmp_path):
    d = write_tables(tables, tmp_path)
    md = (d / "timeslice.md").read_text()
    assert "| 1,000 | timeslice:2 | 2 | 11.000 | [8.776, 13.787] | 22.000 | 22.667 |" in md
    back = __import__("pandas").read_csv(d / "mig.csv")
    assert_allclose(back["loss_pct"], [100 * (36.8 / 3 - 5.2) / 5.2])


def test_summary_table(tables):
    s = analysis.summary_table(tables)
    # two kinds of work in the crafted sweep (CPU opencl, GPU cuda): a 'work' column says which
    assert list(s.columns) == [
        "work",
        "particles",
        "timeslice:2",
        "mps:2",
        "mig:3g",
        "mig:3g vs ideal",
        "partition:2 vs ideal",
    ]
    cpu = s[s["particles"] == "1,000"].iloc[0]
    # mps:2 has two repeats: no interval
    assert (cpu["timeslice:2"], cpu["mps:2"]) == ("3.03 [-14.59, 24.29]", "40.91")
    # partition: (68/3 - 22)/22 = 3.03% over the ideal; no MIG on the CPU
    assert cpu["partition:2 vs ideal"].startswith("3.03 ") and cpu["mig:3g"] == ""
    gpu = s[s["particles"] == "2,000"].iloc[0]
    # MIG: (36.8/3 - 5.2)/5.2 = 135.90%; vs ideal (36.8/3 - 11.44)/11.44 = 7.23%
    assert gpu["mig:3g"].startswith("135.90 [") and gpu["mig:3g vs ideal"].startswith("7.23 [")
