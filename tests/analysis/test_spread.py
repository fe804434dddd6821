"""Between-machine spread on recorded H200 rows: one machine gives no spread; a second GPU whose
time-sliced cells ran longer shows as a spread of the loss, each machine analysed on its own."""

from pathlib import Path

import numpy as np
import pandas as pd

from sharebench.analysis.spread import folder_spread, machine_spread
from sharebench.analysis.timeslice_split import append_runs
from sharebench.results import load_results
from support.timeslice import gpu_folder

H200 = Path(__file__).resolve().parents[2] / "tests" / "data" / "results" / "h200" / "cuda"


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
