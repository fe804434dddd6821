"""The between-machine spread of a loss beside its within-run interval.

Rows from any number of results folders are split by the GPU each replica ran on (``device_uuid``,
which every row records); each machine's rows are analysed on their own (``build_tables``), and for
every (work, mode) of time-slicing and MPS the loss on each machine is set beside the others:

* ``machines``: how many GPUs measured it; ``loss_pct``: the mean of their losses;
* ``within_ci_pts``: the widest half-width of a machine's own 95% interval (NaN below 3 repeats);
* ``spread_pts``: max − min of the machines' losses (NaN with one machine: no spread measured).

Rows without a GPU UUID are left out (they cannot be placed on a machine).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sharebench.analysis.tables import WORK_KEYS, build_tables

SPREAD_COLUMNS = [
    *WORK_KEYS,
    "mode",
    "machines",
    "loss_pct",
    "loss_min_pct",
    "loss_max_pct",
    "within_ci_pts",
    "spread_pts",
    "uuids",
]


def machine_losses(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (machine, work, mode): that machine's loss and its interval."""
    uuid = df["device_uuid"].astype("string").fillna("").str.strip()
    out = []
    for machine in sorted(u for u in uuid.unique() if u):
        tables = build_tables(df[uuid == machine])
        for t in (tables.timeslice, tables.mps):
            if t.empty:
                continue
            t = t[[*WORK_KEYS, "mode", "loss_pct", "loss_ci_low", "loss_ci_high"]].copy()
            t["uuid"] = machine
            out.append(t)
    cols = [*WORK_KEYS, "mode", "loss_pct", "loss_ci_low", "loss_ci_high", "uuid"]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)


def machine_spread(df: pd.DataFrame) -> pd.DataFrame:
    """Per (work, mode): machines, mean loss, within-run half-width, between-machine spread."""
    per = machine_losses(df)
    per = per[np.isfinite(per["loss_pct"].astype(float))]
    rows = []
    for key, g in per.groupby([*WORK_KEYS, "mode"], sort=True, dropna=False):
        loss = g["loss_pct"].astype(float)
        half = ((g["loss_ci_high"].astype(float) - g["loss_ci_low"].astype(float)) / 2).max()
        rows.append(
            dict(
                zip([*WORK_KEYS, "mode"], key),
                machines=g["uuid"].nunique(),
                loss_pct=loss.mean(),
                loss_min_pct=loss.min(),
                loss_max_pct=loss.max(),
                within_ci_pts=half,
                spread_pts=loss.max() - loss.min() if g["uuid"].nunique() > 1 else float("nan"),
                uuids=" ".join(sorted(g["uuid"].unique())),
            )
        )
    return pd.DataFrame(rows, columns=SPREAD_COLUMNS)
