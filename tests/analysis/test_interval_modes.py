"""timeslice:N/INTERVAL modes are their own rows through the tables, the plots and the report:
the interval is part of the mode label, each interval gets its own loss against the same T_1."""

from __future__ import annotations

import pytest
from numpy.testing import assert_allclose

from sharebench import analysis
from sharebench.report import build_report
from sharebench.results import ResultsWriter, load_results
from support.crafted import GPU, cell

# exclusive T_1 = median(5.0, 5.2, 5.4) = 5.2 -> N T_1 = 10.4
# timeslice:2/short spans 11.0, 11.2, 11.4 -> T_N 11.2, loss (11.2 - 10.4)/10.4 = 7.692%
# timeslice:2/long  spans 10.6, 10.8, 11.0 -> T_N 10.8, loss 3.846%
SPANS = {"timeslice:2/short": (11.0, 11.2, 11.4), "timeslice:2/long": (10.6, 10.8, 11.0)}


def rows():
    out = []
    dev = dict(sms=132, device_uuid="GPU-a", parent_uuid="GPU-a")
    for r, t in zip((1, 2, 3), (5.0, 5.2, 5.4)):
        out += cell(GPU, "exclusive", r, [(100 * r, 100 * r + t)], **dev)
    for k, (mode, spans) in enumerate(SPANS.items()):
        for r, span in zip((1, 2, 3), spans):
            t0 = 1000 * (k + 1) + 100 * r
            out += cell(GPU, mode, r, [(t0, t0 + span), (t0, t0 + span - 0.1)], **dev)
    return out


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("intervals")
    ResultsWriter(d).append(rows())
    return d


def test_each_interval_its_own_loss(folder):
    t = analysis.build_tables(load_results(folder)).timeslice
    assert list(t["mode"]) == ["timeslice:2/short", "timeslice:2/long"]  # the interval order, not the alphabet
    short, long_ = t.iloc[0], t.iloc[1]
    assert_allclose([short.T1_s, short.TN_s, short.loss_pct], [5.2, 11.2, 100 * 0.8 / 10.4], rtol=1e-9)
    assert_allclose([long_.T1_s, long_.TN_s, long_.loss_pct], [5.2, 10.8, 100 * 0.4 / 10.4], rtol=1e-9)


def test_report_names_the_intervals(folder):
    paths = build_report(folder)
    md = paths["markdown"].read_text()
    assert md.index("timeslice:2/short") < md.index("timeslice:2/long")
    assert "7.69" in md and "3.85" in md
    assert any((folder / "plots").glob("*.png"))
