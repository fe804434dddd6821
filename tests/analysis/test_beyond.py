"""A throughput gain beyond what the replicas can give is flagged (issue 43): N replicas do at most N times one
replica's work in its time, and on the CPU no more than its cores allow. The default CPU sweep of a busy
machine printed timeslice:4 at 2.54x exclusive on 2 cores, its interval above the possible 2x: the exclusive
baseline had run slower than the work runs."""

from __future__ import annotations

import pandas as pd
import pytest

from sharebench.analysis import build_tables
from sharebench.analysis.answer import answer_rows
from sharebench.analysis.flags import gain_bound
from sharebench.results import load_results
from support.paths import ROOT

FOLDER = ROOT / "tests" / "data" / "results" / "cpu-default"


def slowed_baseline(factor: float) -> pd.DataFrame:
    """The default CPU sweep's rows with every exclusive run ``factor`` times slower (its windows stretched)."""
    df = load_results(FOLDER)
    alone = df["mode"] == "exclusive"
    df.loc[alone, "track_end"] = df.loc[alone, "track_start"] + factor * (
        df.loc[alone, "track_end"] - df.loc[alone, "track_start"]
    )
    df.loc[alone, "track_s"] = df.loc[alone, "track_s"] * factor
    return df


def test_the_bound_is_the_replicas_and_on_the_cpu_its_cores():
    assert gain_bound(4, "cpu", 2.0) == (2.0, "4 replicas on 2 cores")
    assert gain_bound(2, "cpu", 2.0) == (2.0, "2 replicas")
    assert gain_bound(8, "gpu", float("nan")) == (8.0, "8 replicas")


def test_a_measured_sweep_is_not_flagged():
    tables = build_tables(load_results(FOLDER))
    assert "beyond" not in set(tables.flags["kind"])


def test_a_gain_above_the_bound_is_flagged_and_not_trusted():
    tables = build_tables(slowed_baseline(3.0))  # each shared mode ~2.9x exclusive: beyond 2 cores (and 2 replicas)
    beyond = tables.flags[tables.flags["kind"] == "beyond"].set_index("mode")
    assert set(beyond.index) == {"timeslice:2", "timeslice:4", "partition:2"}
    assert beyond.loc["timeslice:4", "detail"].endswith("> 2x (4 replicas on 2 cores)")
    assert "not a gain" in beyond.loc["timeslice:4", "flag"]
    gain = tables.throughput.set_index("mode").loc["timeslice:4"]
    assert gain["gain_ci_low"] > 2 and gain["gain"] == pytest.approx(2.9, rel=0.1)
    rows = answer_rows(tables).set_index("mode")
    assert "beyond" in rows.loc["timeslice:4", "flag_kinds"] and rows.loc["timeslice:4", "trust"] != "ok"
    assert rows.loc["exclusive", "trust"] == "ok"
