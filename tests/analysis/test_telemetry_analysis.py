"""Energy per work, throughput and cost from a crafted sweep with raw telemetry files.

2,000 particles × 10 turns = 0.02 M particle-turns per replica, an NVIDIA H200:
  exclusive r1  track [10, 15]; raw samples 8..16 s, energy counter rising 200 J/s
                → 5 s × 200 W = 1000 J → 1000 / 0.02 = 50,000 J/Mpt
  exclusive r2  track [20, 25.2], no raw file, tel_energy_j = 1300 (sampled window)
                → 65,000 J/Mpt (marked: includes set-up)
  exclusive r3  track [30, 35.4], raw power only, 150 W flat → 5.4 × 150 = 810 J → 40,500 J/Mpt
                median over r1..r3 = 50,000 J/Mpt
  timeslice:2   track [100, 111] both; raw power 100 + 10·(t − 100) W
                → ∫₀¹¹ (100 + 10x) dx = 1705 J over 0.04 Mpt = 42,625 J/Mpt
  price 3.6 per GPU-hour → cost per 10⁹ pt = 3.6/3600/throughput × 10⁹; exclusive throughput
  median = 20,000/5.2 pt/s → 260.00
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from sharebench import analysis
from sharebench.analysis import telemetry as tel_analysis
from sharebench.errors import UserError
from sharebench.report.render import Image, markdown
from sharebench.report.sections import telemetry_section
from sharebench.results import ResultsWriter

BASE = dict(
    sweep_id="crafted",
    engine="simpletrack",
    lattice="generated",
    turns=10,
    particles=2000,
    host="h",
    status="ok",
    error="",
    cell_status="ok",
    cell_error="",
    device_class="gpu",
    backend="cuda",
    device_spec="cuda:0",
    device_name="NVIDIA H200",
    parent_uuid="GPU-1",
    device_uuid="GPU-1",
)


def _cell(mode, repeat, windows, **tel):
    return [
        dict(
            BASE,
            mode=mode,
            mode_kind=mode.split(":")[0],
            replicas=len(windows),
            replica=i,
            repeat=repeat,
            warmup=False,
            cell_id=f"{mode}_r{repeat}",
            track_start=s,
            track_end=e,
            track_s=e - s,
            tel_source="nvml",
            **tel,
        )
        for i, (s, e) in enumerate(windows)
    ]


def _raw(path, t, **cols):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"t_epoch_s": t, **cols}).to_csv(path, index=False)
    return path


@pytest.fixture()
def crafted(tmp_path):
    t = np.arange(8.0, 16.5, 0.5)
    _raw(tmp_path / "cells" / "exclusive_r1" / "telemetry.csv", t, energy_mj=200_000.0 * t, power_w=200.0 + 0 * t)
    t3 = np.arange(29.0, 36.0, 0.25)
    _raw(tmp_path / "cells" / "exclusive_r3" / "telemetry.csv", t3, power_w=150.0 + 0 * t3)
    t4 = np.arange(99.0, 112.0, 0.5)
    _raw(tmp_path / "cells" / "timeslice:2_r1" / "telemetry.csv", t4, power_w=100 + 10 * (t4 - 100))
    rows = _cell("exclusive", 1, [(10.0, 15.0)], tel_raw_file="telemetry.csv", tel_energy_j=1600.0)
    rows += _cell("exclusive", 2, [(20.0, 25.2)], tel_raw_file="", tel_energy_j=1300.0)
    rows += _cell("exclusive", 3, [(30.0, 35.4)], tel_raw_file="telemetry.csv", tel_energy_j=1050.0)
    rows += _cell("timeslice:2", 1, [(100.0, 111.0)] * 2, tel_raw_file="telemetry.csv", tel_energy_j=1900.0)
    ResultsWriter(tmp_path).append(rows)
    return tmp_path


def test_energy_over_the_tracking_window(crafted):
    cells = tel_analysis.cell_telemetry(crafted).set_index("cell_id")
    assert_allclose(cells.loc["exclusive_r1", "track_energy_j"], 1000.0, rtol=1e-9)
    assert cells.loc["exclusive_r1", "track_energy_source"] == "nvml_counter"
    assert_allclose(cells.loc["exclusive_r2", "track_energy_j"], 1300.0)
    assert cells.loc["exclusive_r2", "track_energy_source"] == "sampled window (includes set-up)"
    assert_allclose(cells.loc["exclusive_r3", "track_energy_j"], 810.0, rtol=1e-9)
    assert cells.loc["exclusive_r3", "track_energy_source"] == "power_integral"
    assert_allclose(cells.loc["timeslice:2_r1", "track_energy_j"], 1705.0, rtol=1e-9)
    assert_allclose(cells["energy_j_per_mpt"].to_numpy(float), [50_000, 65_000, 40_500, 42_625], rtol=1e-9)


def test_energy_table_and_cost(crafted, monkeypatch):
    monkeypatch.setenv(tel_analysis.PRICE_ENV, "3.6")
    tables = analysis.analyse(crafted)
    sec = telemetry_section(crafted, tables)
    md = markdown([sec], crafted)
    summary = pd.read_csv(crafted / "telemetry_summary.csv").set_index("mode")
    assert_allclose(summary.loc["exclusive", "energy_j_per_mpt"], 50_000.0, rtol=1e-9)
    assert_allclose(summary.loc["timeslice:2", "energy_j_per_mpt"], 42_625.0, rtol=1e-9)
    assert_allclose(summary.loc["exclusive", "throughput_pt_per_s"], 20_000 / 5.2, rtol=1e-9)
    assert_allclose(summary.loc["exclusive", "cost_per_1e9_pt"], 3.6 / 3600 / (20_000 / 5.2) * 1e9, rtol=1e-9)
    assert_allclose(summary.loc["timeslice:2", "gain"], (40_000 / 11) / (20_000 / 5.2), rtol=1e-9)
    assert "cost / 10⁹ pt" in md and "| 260 |" in md
    assert "environment SHAREBENCH_PRICE_PER_GPU_HOUR" in md
    assert [b.path.name for b in sec.blocks if isinstance(b, Image)] == ["energy_per_mpt.png"]


def test_no_price_no_cost_column(crafted, monkeypatch):
    monkeypatch.delenv(tel_analysis.PRICE_ENV, raising=False)
    md = markdown([telemetry_section(crafted, analysis.analyse(crafted))], crafted)
    assert "cost / 10⁹ pt" not in md
    assert "No price given" in md


def test_a_bad_price_is_a_user_error(crafted, monkeypatch):
    monkeypatch.setenv(tel_analysis.PRICE_ENV, "cheap")
    with pytest.raises(UserError, match=r"SHAREBENCH_PRICE_PER_GPU_HOUR='cheap' is not a price"):
        telemetry_section(crafted, analysis.analyse(crafted))


@pytest.mark.parametrize(
    "t0,t1,want,source",
    [
        (10.0, 12.0, 400.0, "nvml_counter"),  # inside the samples
        (7.0, 12.0, np.nan, ""),  # starts before the first sample: not covered
    ],
)
def test_window_energy_needs_covering_samples(t0, t1, want, source):
    t = np.arange(8.0, 16.5, 0.5)
    got, src = tel_analysis.window_energy_j(pd.DataFrame({"t_epoch_s": t, "energy_mj": 200_000.0 * t}), t0, t1)
    assert_allclose(got, want, rtol=1e-9)
    assert src == source


def test_window_means_use_only_samples_inside_the_tracking_window():
    """Samples at 0.5 s steps from 8 s; window (10, 12]: the samples at 10.5, 11, 11.5, 12."""
    t = np.arange(8.0, 14.0, 0.5)
    inside = (t > 10) & (t <= 12)
    samples = pd.DataFrame(
        {
            "t_epoch_s": t,
            "proc_busy_cores": np.where(inside, 1.0, 0.1),
            "mig1_sm_active_pct": np.where(inside, 90.0, 0.0),
            "mig2_sm_active_pct": np.where(inside, 50.0, 0.0),
            "power_w": np.where(inside, 300.0, 100.0),
        }
    )
    got = tel_analysis.window_means(samples, 10.0, 12.0)
    assert_allclose(
        [got["win_proc_busy_cores"], got["win_sm_active_pct"], got["win_power_w"]], [1.0, 70.0, 300.0], rtol=1e-12
    )
    assert "win_gpu_util_pct" not in got  # not sampled, not invented
