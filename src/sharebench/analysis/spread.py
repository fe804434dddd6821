"""The between-machine spread of a loss beside its within-run interval.

Rows from any number of results folders are split by the GPU each replica ran on (``device_uuid``,
which every row records); each machine's rows are analysed on their own (``build_tables``), and for
every (work, mode) of time-slicing and MPS the loss on each machine is set beside the others:

* ``machines``: how many GPUs measured it; ``loss_pct``: the mean of their losses;
* ``within_ci_pts``: the widest half-width of a machine's own 95% interval (NaN below 3 repeats);
* ``spread_pts``: max − min of the machines' losses (NaN with one machine: no spread measured).

Where the folders hold runs beside the time-slice probe (``timeslice_split.json``, :func:`folder_spread`
reads them), each machine's time-slicing loss comes with its split (``analysis.timeslice_split``): its
slice, switch, in-slice rate and refill (:data:`PART_COLUMNS`, NaN where not measured), and the spread row
names the part whose difference between the extreme machines moves the predicted loss most
(``attributed``: ``scheduler`` for the slice length, ``switch`` for the switch cost, ``refill`` for the
workload's refill; each part put in turn from the lowest-loss machine into the highest one's split).

Rows without a GPU UUID are left out (they cannot be placed on a machine).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sharebench.analysis.tables import WORK_KEYS, build_tables
from sharebench.analysis.timeslice_split import predicted_loss_pct, read_runs
from sharebench.devices.nvml import normalise_uuid
from sharebench.results import load_results

PART_COLUMNS = ["slice_ms", "switch_ms", "in_slice_rate", "refill_ms", "predicted_loss_pct"]
PARTS = {"scheduler": "slice_ms", "switch": "switch_ms", "refill": "refill_ms"}

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
    "per_machine",
    "attributed",
]


def with_parts(t: pd.DataFrame, split: pd.DataFrame) -> pd.DataFrame:
    """A machine's loss rows with the split's parts of the same work and mode (NaN where none)."""
    keys = [*WORK_KEYS, "mode"]
    if split.empty:
        return t.assign(**dict.fromkeys(PART_COLUMNS, math.nan))
    parts = split[[*keys, *PART_COLUMNS]].drop_duplicates(keys).astype({"particles": "int64", "turns": "int64"})
    return t.astype({"particles": "int64", "turns": "int64"}).merge(parts, on=keys, how="left")


def machine_losses(df: pd.DataFrame, runs: Sequence[dict[str, Any]] = ()) -> pd.DataFrame:
    """One row per (machine, work, mode): that machine's loss and its interval, and for time-slicing the
    parts of its split where ``runs`` (the folders' runs beside the probe) hold that machine's."""
    uuid = df["device_uuid"].astype("string").fillna("").str.strip()
    out = []
    for machine in sorted(u for u in uuid.unique() if u):
        mine = [r for r in runs if normalise_uuid(r.get("uuid")) == normalise_uuid(machine)]
        tables = build_tables(df[uuid == machine], split_runs=mine)
        for t in (tables.timeslice, tables.mps):
            if t.empty:
                continue
            t = with_parts(
                t[[*WORK_KEYS, "mode", "loss_pct", "loss_ci_low", "loss_ci_high"]].copy(), tables.timeslice_split
            )
            t["uuid"] = machine
            out.append(t)
    cols = [*WORK_KEYS, "mode", "loss_pct", "loss_ci_low", "loss_ci_high", *PART_COLUMNS, "uuid"]
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


def attribute(low: pd.Series, high: pd.Series) -> str:
    """Which part of the split explains most of the difference between the machines with the lowest and the
    highest loss: each part in turn taken from ``low`` into ``high``'s split, the one that moves the predicted
    loss most (:data:`PARTS`); '' where either machine has no split."""
    base = {v: float(high[v]) for v in PARTS.values()}
    if not all(math.isfinite(float(x[v])) for x in (low, high) for v in PARTS.values()):
        return ""
    now = predicted_loss_pct(base["slice_ms"], base["switch_ms"], base["refill_ms"])
    moved = {}
    for name, col in PARTS.items():
        b = {**base, col: float(low[col])}
        moved[name] = abs(now - predicted_loss_pct(b["slice_ms"], b["switch_ms"], b["refill_ms"]))
    return max(moved, key=lambda k: moved[k])


def machine_text(r: Any) -> str:
    """One machine's loss and split parts, for the ``per_machine`` column."""
    text = f"{r['uuid']}: loss {float(r['loss_pct']):.2f}%"
    if math.isfinite(float(r["slice_ms"])):
        text += (
            f", slice {float(r['slice_ms']):.3f} ms, switch {float(r['switch_ms']):.3f} ms, in-slice rate "
            f"{float(r['in_slice_rate']):.3f}, refill {float(r['refill_ms']):.3f} ms"
        )
    return text


def machine_spread(df: pd.DataFrame, runs: Sequence[dict[str, Any]] = ()) -> pd.DataFrame:
    """Per (work, mode): machines, mean loss, within-run half-width, between-machine spread, and with
    ``runs`` each machine's split parts and the part the spread is attributed to."""
    per = machine_losses(df, runs)
    per = per[np.isfinite(per["loss_pct"].astype(float))]
    rows = []
    for key, g in per.groupby([*WORK_KEYS, "mode"], sort=True, dropna=False):
        loss = g["loss_pct"].astype(float)
        half = ((g["loss_ci_high"].astype(float) - g["loss_ci_low"].astype(float)) / 2).max()
        many = g["uuid"].nunique() > 1
        rows.append(
            dict(
                zip([*WORK_KEYS, "mode"], key),
                machines=g["uuid"].nunique(),
                loss_pct=loss.mean(),
                loss_min_pct=loss.min(),
                loss_max_pct=loss.max(),
                within_ci_pts=half,
                spread_pts=loss.max() - loss.min() if many else float("nan"),
                uuids=" ".join(sorted(g["uuid"].unique())),
                per_machine="; ".join(machine_text(r) for _, r in g.sort_values("loss_pct").iterrows()),
                attributed=attribute(g.loc[loss.idxmin()], g.loc[loss.idxmax()]) if many else "",
            )
        )
    return pd.DataFrame(rows, columns=SPREAD_COLUMNS)


def folder_spread(folders: Sequence[Path | str]) -> pd.DataFrame:
    """:func:`machine_spread` of results folders, with the runs beside the probe they hold."""
    df = pd.concat([load_results(f) for f in folders], ignore_index=True)
    runs = [r for f in folders for r in read_runs(Path(f) if Path(f).is_dir() else Path(f).parent)]
    return machine_spread(df, runs)
