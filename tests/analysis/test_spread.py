"""Between-machine spread on recorded H200 rows: one machine gives no spread; a second GPU whose
time-sliced cells ran longer shows as a spread of the loss, each machine analysed on its own."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sharebench.analysis.spread import (
    document_run,
    folder_spread,
    frame_runs,
    machine_spread,
    spread_table,
    state_differences,
)
from sharebench.analysis.timeslice_split import append_runs
from sharebench.results import load_results
from support.timeslice import gpu_folder

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "tests" / "data" / "results" / "h200" / "cuda"


def test_one_machine_has_no_spread_and_a_second_machine_shows_one():
    df = load_results(H200)
    df = df[df["particles"] == 5_000_000]
    one = machine_spread(df)
    ts = one[one["mode"] == "timeslice:2"].iloc[0]
    assert ts["machines"] == 1 and np.isnan(ts["spread_pts"]) and ts["within_ci_pts"] > 0
    other = df.copy()
    other["device_uuid"] = "GPU-other"
    slow = other["mode"] == "timeslice:2"
    for col in ("track_start", "track_end"):  # the second machine's time-sliced cells take 10% longer
        base = other.loc[slow].groupby("cell_id")["track_start"].transform("min")
        other.loc[slow, col] = base + (other.loc[slow, col] - base) * 1.1
    other.loc[slow, "track_s"] *= 1.1
    two = machine_spread(pd.concat([df, other], ignore_index=True))
    ts2 = two[two["mode"] == "timeslice:2"].iloc[0]
    assert ts2["machines"] == 2 and ts2["uuids"].count("GPU-") == 2
    assert ts2["spread_pts"] > 5  # a 10% longer span: about 13.6 points more loss
    assert ts2["loss_min_pct"] == ts["loss_pct"]
    mps = two[two["mode"] == "mps:2"].iloc[0]
    assert mps["spread_pts"] < 0.5  # untouched: the same loss on both


def test_the_split_of_each_machine_attributes_the_spread_to_its_cause(tmp_path):
    """Two GPUs with the same slice and switch whose workload refills differ (0.5 and 0.3 ms per switch-in):
    the spread shows each machine's parts beside its loss and is attributed to the refill."""
    a, b = tmp_path / "a", tmp_path / "b"
    append_runs(a, gpu_folder(a, refills=(0.45, 0.5, 0.55), uuid="GPU-a", loss_refill=0.5))
    append_runs(b, gpu_folder(b, refills=(0.25, 0.3, 0.35), uuid="GPU-b", loss_refill=0.3))
    t = folder_spread([a, b]).set_index("mode")
    ts = t.loc["timeslice:2"]
    assert ts["machines"] == 2 and ts["spread_pts"] > 10 and ts["attributed"] == "refill"
    low, high = ts["per_machine"].split("; ")
    assert low.startswith("GPU-b: loss ") and "slice 2.000 ms, switch 0.200 ms" in low and "refill 0.30" in low
    assert high.startswith("GPU-a: loss ") and "in-slice rate 0.7" in high and "refill 0.50" in high
    without = machine_spread(load_results(a))  # no runs given: the loss alone, nothing attributed
    assert without.loc[0, "per_machine"].startswith("GPU-a: loss ") and "slice" not in without.loc[0, "per_machine"]
    assert without.loc[0, "attributed"] == ""


# --- issue 45: the within-run figure per single run; every run wherever it lies; disjoint is a spread ---------


def two_runs_of_one_machine(tmp_path):
    """One machine measured twice (two folders, as warm and fresh runs are): the second run's time-sliced
    cells 3% longer."""
    df = load_results(H200)
    df = df[(df["particles"] == 5_000_000) & (df["mode"].isin(["exclusive", "timeslice:2"]))]
    slower = df.copy()
    ts = slower["mode"] == "timeslice:2"
    base = slower.loc[ts].groupby("cell_id")["track_start"].transform("min")
    slower.loc[ts, "track_end"] = base + (slower.loc[ts, "track_end"] - base) * 1.03
    return df.assign(source="run-a"), slower.assign(source="run-b")


def test_the_within_run_figure_is_one_runs_never_two_runs_pooled(tmp_path):
    a, b = two_runs_of_one_machine(tmp_path)
    runs = frame_runs(pd.concat([a, b], ignore_index=True))
    ts = runs[runs["mode"] == "timeslice:2"]
    assert sorted(ts["run"]) == ["run-a", "run-b"] and set(ts["repeats"]) == {3}  # 3 + 3, not one run of 6
    row = spread_table(runs).set_index("mode").loc["timeslice:2"]
    halves = (ts["loss_ci_high"] - ts["loss_ci_low"]) / 2
    assert row["within_ci_pts"] == pytest.approx(halves.max())
    assert row["machines"] == 1 and row["runs"] == 2 and np.isnan(row["spread_pts"])
    assert row["loss_pct"] == pytest.approx(ts["loss_pct"].mean())
    assert "(2 runs: " in row["per_machine"]


def test_disjoint_intervals_on_two_machines_are_a_spread_never_agreement(tmp_path):
    a, b = two_runs_of_one_machine(tmp_path)
    b = b.assign(device_uuid="GPU-other")
    row = spread_table(frame_runs(pd.concat([a, b], ignore_index=True))).set_index("mode").loc["timeslice:2"]
    assert row["machines"] == 2 and row["intervals"] == "disjoint" and row["spread_pts"] > 2
    same = spread_table(frame_runs(pd.concat([a, a.assign(source="run-c", device_uuid="GPU-other")])))
    assert same.set_index("mode").loc["timeslice:2", "intervals"] == "overlap"


def test_a_probe_split_document_is_a_run_of_its_machine(tmp_path):
    """The committed split documents are runs of the spread: the work from the document or its command."""
    folder = ROOT / "tests" / "data" / "results" / "timeslice-split" / "GPU-9479f04d"  # a copy of 2026-12-04's
    run = document_run(folder / "st_5M_1turn.json")
    r = run.iloc[0]
    assert (r["engine"], r["lattice"], r["particles"], r["turns"], r["mode"]) == (
        "simpletrack",
        "lhc_simpletrack_7tev.json.gz",
        5_000_000,
        1,
        "timeslice:2",
    )
    assert r["uuid"].startswith("GPU-9479f04d") and r["repeats"] == 3
    assert r["loss_pct"] == pytest.approx(35.954, abs=1e-3) and r["loss_ci_low"] < r["loss_pct"] < r["loss_ci_high"]
    assert r["switch_ms"] == pytest.approx(0.151, abs=1e-3)  # the light probe's terms, which every document has
    doc = json.loads((folder / "st_5M_1turn.json").read_text())
    (tmp_path / "lone.json").write_text(json.dumps(doc))  # no command beside it, no work recorded: no run
    assert document_run(tmp_path / "lone.json").empty
    (tmp_path / "named.json").write_text(
        json.dumps(
            {
                **doc,
                "work": dict(
                    engine="simpletrack", backend="cuda", device_class="gpu", lattice="x", particles=5, turns=2
                ),
            }
        )
    )
    assert document_run(tmp_path / "named.json").iloc[0]["turns"] == 2


def test_the_facts_of_two_groups_of_machines_are_compared():
    facts = {
        "GPU-a": {"driver_version": {"580"}, "load_avg_1m": {0.5, 1.0}, "vbios": {"96.00.A5"}},
        "GPU-b": {"driver_version": {"580"}, "load_avg_1m": {0.7}},
        "GPU-c": {"driver_version": {"580"}, "load_avg_1m": {3.0}, "vbios": {"96.00.B1"}},
    }
    rows = {f: (lo, hi, v) for f, lo, hi, v in state_differences(facts, ["GPU-a", "GPU-b"], ["GPU-c"])}
    assert rows["driver_version"][2] == "same"
    assert rows["vbios"] == ("96.00.A5 (1 of 2 machines)", "96.00.B1 (1 of 1 machines)", "differs")
    assert rows["load_avg_1m"][0] == "0.5–1 (2 of 2 machines)" and rows["load_avg_1m"][2] == "differs"
    assert rows["power_limit_w"][2] == "not recorded"
