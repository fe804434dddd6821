"""Between-machine spread on recorded H200 rows: one machine gives no spread; a second GPU whose
time-sliced cells ran longer shows as a spread of the loss, each machine analysed on its own."""

from pathlib import Path

import numpy as np
import pandas as pd

from sharebench.analysis.spread import machine_spread
from sharebench.results import load_results

H200 = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200" / "cuda"


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
