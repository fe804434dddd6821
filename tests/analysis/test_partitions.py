"""SM-share partitions and emulated MIG on rows recorded on the H200 (results/h200/partitions,
issue 15): an ``mps:1@PCT`` cell is a partition near 100% efficiency, not a time-sharing loss."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharebench.analysis import Tables, build_tables
from sharebench.analysis.partitions import seven_g_deficit, share_slice_sms
from sharebench.results import load_results

RECORDED = Path(__file__).resolve().parents[2] / "tests" / "data" / "results" / "h200" / "partitions"


@pytest.fixture(scope="module")
def rows():
    return load_results(RECORDED)


@pytest.fixture(scope="module")
def tables(rows):
    return build_tables(rows)


def one(t, **where):
    for k, v in where.items():
        t = t[t[k] == v]
    assert len(t) == 1, (where, t)
    return t.iloc[0]


@pytest.mark.parametrize("mode, sms", [("mps:1@50", 66), ("mps:1@25", 32), ("mps:1@12", 14)])
def test_a_thread_share_is_a_partition_near_ideal(tables, mode, sms):
    assert mode not in set(tables.mps["mode"])  # never a loss against N x T_1
    for particles in (5_000_000, 10_000_000):
        r = one(tables.partition, mode=mode, particles=particles)
        assert (r["unit"], r["full_units"], r["slice_units"]) == ("SMs", 132, sms)
        assert r["ideal_s"] == pytest.approx(r["full_s"] * 132 / sms)
        assert 98 < r["efficiency_pct"] < 102, r


def test_rows_recorded_with_the_full_gpus_sms_still_get_the_shares_sms(rows):
    """Before issue 15 an mps:N@PCT replica recorded the whole GPU's SMs (132): the analysis takes the
    share's SMs from the percentage, so such a cell is not filed as a 99.5% loss or a 100% slice."""
    old = rows.copy()
    old.loc[old["mode"].str.startswith("mps:"), "sms"] = 132
    r = one(build_tables(old).partition, mode="mps:1@50", particles=5_000_000)
    assert r["slice_units"] == 66 and 98 < r["efficiency_pct"] < 102


def test_emulated_mig_in_the_studys_form(tables):
    t = tables.mig_emulated
    assert set(t["mig_profile"]) == {"1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"}
    assert t["emulation"].str.contains("emulated").all()
    seven = one(t, mode="mig-emulated:7g.141gb", particles=10_000_000)
    assert abs(seven["vs_full_pct"]) < 1 and seven["sms"] == 132
    assert (seven["mig_7g_sms"], seven["mig_7g_loss_pred_pct"]) == (132, 0)
    small = one(t, mode="mig-emulated:1g.18gb", particles=5_000_000)
    assert small["sms"] == 16 and small["vs_full_pct"] > 600  # 132/16 = 8.25x the full GPU's time
    assert 98 < small["efficiency_pct"] < 102
    mixed = t[t["mode"] == "mig-emulated:4g.71gb+3g.71gb"]
    assert set(mixed["mig_profile"]) == {"4g.71gb", "3g.71gb"} and (mixed["instances"] == 1).all()
    assert one(t, mode="mig-emulated:7x1g.18gb", particles=5_000_000)["instances"] == 7


def test_seven_g_deficit_and_share_sms():
    assert seven_g_deficit(108) == (98, pytest.approx(100 * (108 / 98 - 1)))  # A100: 10.20%
    assert seven_g_deficit(132) == (132, 0)
    assert share_slice_sms("mps:2@50", 132) == 66 and share_slice_sms("mps:1@5", 132) == 8


def test_partition_scaling_plot_from_recorded_rows(tables, tmp_path):
    """The study-form plot: one point per slice at its SM share and efficiency, the ideal line at 100%."""
    import xml.etree.ElementTree as ET

    import matplotlib

    from sharebench.report.plots import plot_partitions

    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text as text, to read the legend back
        paths = plot_partitions(tables, tmp_path)
    assert sorted(p.name for p in paths) == ["partition_scaling.png", "partition_scaling.svg"]
    svg = ET.parse(tmp_path / "partition_scaling.svg").getroot()
    text = " ".join(t.strip() for t in svg.itertext() if t.strip())
    for label in (
        "emulated profile alone, 5 M",
        "emulated full layout (concurrent), 10 M",
        "MPS thread share (mps:1@PCT), 5 M",
        "ideal (time scales with 1 / SMs)",
    ):
        assert label in text
    # nothing to draw without partitions: no figure
    assert plot_partitions(Tables.empty(), tmp_path / "none") == []
