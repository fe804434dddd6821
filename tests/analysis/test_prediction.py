"""Predicted loss from SM counts, the bound from telemetry, predicted vs measured on a crafted sweep.

The crafted sweep (real ResultsWriter → load_results → analysis.build_tables), an NVIDIA H200
(132 SMs; 1g.18gb = 16 SMs), 2,000 particles × 10 turns:
  exclusive     track_s 5.0, 5.2, 5.4                        → T_1 = 5.2, GPM SM active 92%
  timeslice:2   spans 11.0, 11.5, 12.0 (full overlap)        → loss = (11.5 − 10.4)/10.4 = 10.5769%
  mig:1g.18gb   7 replicas, mean track_s 44, 45, 46          → loss = (45 − 5.2)/5.2 = 765.3846%
  prediction    timeslice 0%; MIG SM-bound 132/16 − 1 = 725%  → excess 10.5769 pp, 40.3846 pp
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from numpy.testing import assert_allclose

from sharebench import analysis
from sharebench.analysis import prediction
from sharebench.analysis.tables import MIG_COLUMNS
from sharebench.analysis.telemetry import cell_telemetry
from sharebench.errors import UserError
from sharebench.report.render import Image, html_page, markdown
from sharebench.report.sections import prediction_section
from sharebench.results import ResultsWriter, write_provenance
from sharebench.telemetry import collect_provenance


@pytest.mark.parametrize(
    "mode,gpu,bound,pct,lost",
    [
        ("exclusive", None, "SM-bound", 0.0, 0.0),
        ("timeslice:4", "H200", "SM-bound", 0.0, 0.0),
        ("mps:2", "H200", "SM-bound", 0.0, 0.0),
        ("mps:2@25", "H200", "SM-bound", 100.0, 0.0),  # 2 × 25% of the SMs: span = T_1·4 = 2·(2·T_1)
        ("mps:4@25", "H200", "SM-bound", 0.0, 0.0),  # 4 × 25% = all SMs
        ("mig:7g", "A100-40GB", "SM-bound", 100 * (108 / 98 - 1), 100 * 10 / 108),  # 10.20%, 9.26%
        ("mig:7g", "NVIDIA A100-SXM4-40GB", "memory-bound", 0.0, 100 * 10 / 108),
        ("mig:7g", "NVIDIA H200", "SM-bound", 0.0, 0.0),
        ("mig:7g", "H100-80GB", "SM-bound", 0.0, 0.0),
        ("mig:1g", "H200", "SM-bound", 100 * (132 / 16 - 1), 100 * (132 - 7 * 16) / 132),
        ("mig:1g.10gb", "A100-40GB", "memory-bound", 100 * (40 / 10 - 1), 100 * (108 - 4 * 14) / 108),
        ("mig:3g", "A100-40GB", "SM-bound", 100 * (108 / 42 - 1), 100 * (108 - 84) / 108),
        ("partition:2", None, "core-bound", 0.0, 0.0),
    ],
)
def test_predict_cell(mode, gpu, bound, pct, lost):
    got = prediction.predict_cell(
        mode, gpu=gpu, bound=bound, device_class="cpu" if mode.startswith("partition") else "gpu"
    )
    assert_allclose(got["predicted_pct"], pct, rtol=1e-12, atol=1e-12)
    assert_allclose(got["compute_share_lost_pct"], lost, rtol=1e-12, atol=1e-12)
    assert got["basis"]


def test_the_study_numbers_to_two_decimals():
    a100 = prediction.predict_cell("mig:7g", gpu="A100-40GB")
    assert f"{a100['compute_share_lost_pct']:.2f}" == "9.26"
    assert f"{a100['predicted_pct']:.2f}" == "10.20"
    assert "108/98 − 1 = 10.20%" in a100["basis"]


def test_mig_prediction_needs_a_known_model():
    got = prediction.predict_cell("mig:7g", gpu="Tesla T4")
    assert math.isnan(got["predicted_pct"]) and "unknown" in got["basis"]
    with pytest.raises(UserError, match="MIG profile '2g.99gb' does not exist on H200"):
        prediction.predict_cell("mig:2g.99gb", gpu="H200")


@pytest.mark.parametrize(
    "tel,device_class,cores,bound",
    [
        ({"tel_sm_active_pct_mean": 92.0, "tel_dram_bw_util_pct_mean": 20.0}, "gpu", None, "SM-bound"),
        ({"tel_sm_active_pct_mean": 70.0, "tel_dram_bw_util_pct_mean": 75.0}, "gpu", None, "memory-bound"),
        ({"tel_sm_active_pct_mean": 30.0}, "gpu", None, "latency-bound"),
        ({"dcgm_sm_active_mean": 0.9, "dcgm_dram_active_mean": 0.1}, "gpu", None, "SM-bound"),
        ({"tel_gpu_util_pct_mean": 99.0, "tel_mem_util_pct_mean": 80.0}, "gpu", None, "memory-bound"),
        ({"tel_gpu_util_pct_mean": 99.0, "tel_mem_util_pct_mean": 10.0}, "gpu", None, "SM-bound"),
        ({"tel_note": "GPU telemetry not recorded: NVML unavailable"}, "gpu", None, "unknown"),
        ({"tel_cpu_busy_cores_mean": 1.95}, "cpu", 2, "core-bound"),
        ({"tel_cpu_busy_cores_mean": 0.5}, "cpu", 2, "unknown"),
        # the replicas' own use wins over a host busy with other work
        ({"tel_cpu_busy_cores_mean": 2.0, "tel_proc_busy_cores_mean": 0.9}, "cpu", 2, "unknown"),
    ],
)
def test_bound_from_telemetry(tel, device_class, cores, bound):
    got, evidence = prediction.classify_bound(tel, device_class, cores)
    assert got == bound, evidence
    assert evidence


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
    sms=132,
)


def _cell(mode, repeat, windows, **extra):
    rows = []
    for i, (s, e) in enumerate(windows):
        rows.append(
            dict(
                BASE,
                mode=mode,
                mode_kind=mode.split(":")[0],
                replicas=len(windows),
                replica=i,
                repeat=repeat,
                warmup=repeat == 0,
                cell_id=f"{mode}_r{repeat}",
                track_start=s,
                track_end=e,
                track_s=e - s,
                **extra,
            )
        )
    return rows


@pytest.fixture()
def crafted(tmp_path):
    rows = []
    for r, t in zip((1, 2, 3), (5.0, 5.2, 5.4)):
        rows += _cell(
            "exclusive",
            r,
            [(10.0 * r, 10.0 * r + t)],
            tel_sm_active_pct_mean=92.0,
            tel_dram_bw_util_pct_mean=21.0,
            tel_source="nvml",
        )
    for r, span in zip((1, 2, 3), (11.0, 11.5, 12.0)):
        rows += _cell("timeslice:2", r, [(100.0 * r, 100.0 * r + span)] * 2, tel_source="nvml")
    for r, t in zip((1, 2, 3), (44.0, 45.0, 46.0)):
        rows += _cell("mig:1g", r, [(1000.0 * r, 1000.0 * r + t)] * 7, mig_profile="1g.18gb", sms=16, tel_source="nvml")
    ResultsWriter(tmp_path).append(rows)
    return tmp_path


def test_predicted_vs_measured_on_a_crafted_sweep(crafted):
    tables = analysis.analyse(crafted)
    tel = cell_telemetry(crafted)
    bounds = prediction.bounds_from_telemetry(tel)
    assert bounds[("gpu", 2000.0)][0] == "SM-bound"
    df = prediction.predicted_vs_measured(tables, gpu=prediction.gpu_of(crafted, tables), bounds=bounds)
    got = df.set_index(["table", "mode"])
    ts = got.loc[("timeslice", "timeslice:2")]
    assert_allclose(ts["measured_pct"], 100 * (11.5 - 10.4) / 10.4, rtol=1e-9)
    assert ts["predicted_pct"] == 0.0
    assert_allclose(ts["excess_pct"], 100 * (11.5 - 10.4) / 10.4, rtol=1e-9)
    mig = got.loc[("mig", "mig:1g")]
    assert_allclose(mig["measured_pct"], 100 * (45 - 5.2) / 5.2, rtol=1e-9)
    assert_allclose(mig["predicted_pct"], 725.0, rtol=1e-12)
    assert_allclose(mig["excess_pct"], 100 * (45 - 5.2) / 5.2 - 725.0, rtol=1e-9)
    assert mig["bound"] == "SM-bound"
    # the partition table's MIG row: ideal = 5.2 × 132/16 = 42.9 s; measured 45 → excess 4.895%; predicted 0
    part = got.loc[("partition", "mig:1g")]
    assert_allclose(part["measured_pct"], 100 * (45 - 5.2 * 132 / 16) / (5.2 * 132 / 16), rtol=1e-9)
    assert part["predicted_pct"] == 0.0
    assert part["basis"] == "ideal = T_full × 132/16 SMs: 0% excess"


def test_report_section_has_the_table_and_the_plot(crafted):
    write_provenance(
        crafted, collect_provenance({"kind": "gpu", "backend": "cuda", "name": "NVIDIA H200"}, "sharebench run", {})
    )
    sec = prediction_section(crafted, analysis.analyse(crafted), "NVIDIA H200 (cuda)")
    md, page = markdown([sec], crafted), html_page("", [sec])
    images = [b.path for b in sec.blocks if isinstance(b, Image)]
    assert sec.title == "Predicted vs measured loss"
    assert [p.name for p in images] == ["prediction_vs_measured.png"]
    assert all(p.stat().st_size > 1000 for p in images)
    assert (crafted / "plots" / "prediction_vs_measured.svg").stat().st_size > 1000
    assert "| mig | mig:1g | 2k | T_mig vs T_full | 765.38 |" in md
    assert "| 725.00 | 40.38 | SM-bound |" in md
    assert "GPM: SM active 92.0%, DRAM bandwidth 21.0%" in md
    assert "<table" in page and "765.38" in page
    assert (crafted / "prediction.csv").exists()


def test_a_row_without_a_single_profile_gets_no_prediction_not_an_error():
    import pandas as pd

    mig = pd.DataFrame(
        [
            {
                "mode": "mig:mixed",
                "device_class": "gpu",
                "particles": 1000,
                "mig_profile": "1g.18gb, 3g.71gb",
                "loss_pct": 10.0,
                "loss_ci_low": 9.0,
                "loss_ci_high": 11.0,
            }
        ]
    )
    tables = dataclasses.replace(analysis.Tables.empty(), mig=mig.reindex(columns=MIG_COLUMNS))
    df = prediction.predicted_vs_measured(tables, gpu="H200")
    assert math.isnan(df.loc[0, "predicted_pct"]) and df.loc[0, "basis"].startswith("no prediction: ")
    assert math.isnan(df.loc[0, "excess_pct"])
