"""The study's tables from a results CSV, with Student-t CIs and flags: one builder per table.

Definitions (times in seconds, means over the measured repeats):

* T_1: ``track_s`` of the one replica of an ``exclusive`` cell.
* T_N: span of a cell's N concurrent tracking windows, max(track_end) - min(track_start).
* overlap: the share of the shortest window during which all N replicas were tracking,
  (min(track_end) - max(track_start)) / min(track_end - track_start). Below 95% the
  replicas did not really run together: the cell is flagged and left out of the loss.
* time-slicing / MPS loss = (T_N - N*T_1) / (N*T_1).
* MIG loss = (T_mig - T_full) / T_full, T_mig the mean replica ``track_s`` of a MIG cell
  (each replica does the full cell's work on its own instance), T_full = T_1.
* partition scaling: T_slice (mean replica ``track_s``) against the ideal
  T_full x full units / slice units (SMs from sharebench.gpus on a GPU, cores on the CPU).
  ``mps:N@PCT`` cells are partitions too (an SM share; sharebench.analysis.partitions), and
  ``mig-emulated:LAYOUT`` has its own table, each profile against the full GPU and the ideal.
* aggregate throughput: total particle-turns of the cell / mean T_N, per physical device;
  sharing gain = throughput / exclusive throughput (= N·T_1 / T_N for time-slicing and MPS).
* fairness: slowest / fastest replica ``track_s`` in a cell (1.00 = fair).

Every mean comes with a 95% Student-t CI (``sharebench.analysis.statistics``) when there are
at least three samples, and a coefficient of variation. Warm-up rows and failed cells never enter a
statistic.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import pandas as pd

from sharebench.analysis.disturbance import disturbed_flags
from sharebench.analysis.flags import FLAG_COLUMNS, Flag, beyond_flags, flags_frame
from sharebench.analysis.kinds import baseline_mask, table_of
from sharebench.analysis.latency import DEFAULT_SLO, LATENCY_COLUMNS, below_one_flags, latency_table, sweep_slo
from sharebench.analysis.partitions import (
    EMULATED_COLUMNS,
    EMULATED_TABLE,
    emulated_table,
    is_sm_share,
    share_slice_sms,
)
from sharebench.analysis.statistics import MIN_CI_REPEATS, cv_pct, positive_mean_ci, ratio_ci, ratio_loss_ci
from sharebench.analysis.timeslice_split import SPLIT_COLUMNS, read_runs, split_table
from sharebench.gpus import models_with_profile
from sharebench.modes import is_baseline, mode_sort_key
from sharebench.patterns import saturated
from sharebench.results import SWEEP_JSON, load_results, read_sweeps, sweeps_warning
from sharebench.results.bursts import load_bursts

OVERLAP_MIN_PCT = 95.0
CV_WARN_PCT = 10.0
FAIRNESS_WARN = 1.25
MIN_REPEATS = MIN_CI_REPEATS

# what makes two cells "the same work": they may be compared with each other
WORK_KEYS = ["engine", "backend", "device_class", "lattice", "particles", "turns"]


# ------------------------------------------------------------------ per cell


def cell_checks(
    g: pd.DataFrame, n: int, overlap: float, phys: list[str], listed: set[str] | None = None
) -> list[tuple[str, str, str]]:
    """(kind, detail, sentence) of each flag of one cell; any of them excludes the cell. ``listed``: the
    sweeps the folder's sweep.json lists (None: no sweep.json, nothing to check against)."""
    sweep = str(g["sweep_id"].iloc[0])
    if listed is not None and sweep not in listed:
        return [("unlisted", sweep, f"unlisted: sweep {sweep!r} is not in sweep.json; not reported as measured")]
    if (g["status"] == "failed").any() or (g["cell_status"] == "failed").any():
        errs = [e for e in list(g["cell_error"]) + list(g["error"]) if isinstance(e, str) and e]
        err = errs[0] if errs else "a replica failed"
        return [("failed", err, "failed: " + err)]
    if len(g) != n:
        detail = f"{len(g)} of {n} replica rows"
        return [("incomplete", detail, f"incomplete: {detail}")]
    if n > 1 and np.isfinite(overlap) and overlap < OVERLAP_MIN_PCT:
        detail = f"{overlap:.2f}% < {OVERLAP_MIN_PCT:.0f}%"
        return [("overlap", detail, f"overlap {detail}: replicas did not track together; left out of the loss")]
    if len(phys) > 1:
        return [("devices", ", ".join(phys), "replicas on different devices: " + ", ".join(phys) + "; left out")]
    return []


def span_overlap(g: pd.DataFrame, n: int) -> tuple[float, float]:
    """T_N (the span of the tracking windows) and the overlap % of one cell of n replicas."""
    track = g["track_s"].astype(float)
    starts, ends = g["track_start"].astype(float), g["track_end"].astype(float)
    if n == 1:
        return (float(track.iloc[0]) if len(track) else math.nan), 100.0
    if bool(starts.notna().all() and ends.notna().all()) and len(g):
        shortest = float((ends - starts).min())
        overlap = (100.0 * max(0.0, float(ends.min() - starts.max())) / shortest) if shortest > 0 else math.nan
        return float(ends.max() - starts.min()), overlap
    return (float(track.max()) if len(track) else math.nan), math.nan


def one_cell(
    sweep_id: object, cell_id: object, g: pd.DataFrame, listed: set[str] | None = None
) -> tuple[dict, list[Flag]]:
    """One cell's row of the cells table and its flags."""
    first = g.iloc[0]
    n = int(first["replicas"]) if pd.notna(first["replicas"]) else len(g)
    track = g["track_s"].astype(float)
    span, overlap = span_overlap(g, n)
    phys_ids = g["parent_uuid"].where(g["parent_uuid"].astype(str) != "", g["device_uuid"])
    phys = sorted({str(p) for p in phys_ids if isinstance(p, str) and p})
    checks = cell_checks(g, n, overlap, phys, listed)
    fair = float(track.max() / track.min()) if n > 1 and len(track) and track.min() > 0 else math.nan
    work = float((g["particles"].astype(float) * g["turns"].astype(float)).sum())
    row = {k: first[k] for k in WORK_KEYS}
    row.update(
        sweep_id=sweep_id,
        cell_id=cell_id,
        mode=first["mode"],
        mode_kind=first["mode_kind"] or str(first["mode"]).split(":")[0],
        replicas=n,
        repeat=first["repeat"],
        warmup=bool(first["warmup"]),
        mig_profile=first["mig_profile"],
        sms=g["sms"].astype(float).median(),
        cores=g["cores"].astype(float).median(),
        span_s=span,
        mean_track_s=float(track.mean()) if len(track) else math.nan,
        min_track_s=float(track.min()) if len(track) else math.nan,
        max_track_s=float(track.max()) if len(track) else math.nan,
        overlap_pct=overlap,
        fairness=fair,
        work_particle_turns=work,
        throughput_pt_per_s=work / span if span and np.isfinite(span) and span > 0 else math.nan,
        devices=", ".join(phys),
        excluded=bool(checks),
        flags="; ".join(text for _, _, text in checks),
    )
    flags = [
        Flag(
            scope="cell",
            mode=row["mode"],
            particles=row["particles"],
            cell_id=str(cell_id),
            flag=text,
            excluded=bool(checks),
            kind=kind,
            detail=detail,
        )
        for kind, detail, text in checks
    ]
    return row, flags


def summarise_cells(df: pd.DataFrame, listed: set[str] | None = None) -> tuple[pd.DataFrame, list[Flag]]:
    """The cells table (one row per cell, measured repeats and warm-ups both) and the flags of the
    measured (non-warm-up) cells, in table order. A failed cell that a later sweep measured again is
    flagged ``rerun``: the folder's final state has it measured (``listed``: see :func:`cell_checks`)."""
    rows: list[dict] = []
    flags: list[list[Flag]] = []
    if df.empty:
        return pd.DataFrame(columns=CELL_COLUMNS), []
    for (sweep_id, cell_id), g in df.groupby(["sweep_id", "cell_id"], sort=False, dropna=False):
        row, more = one_cell(sweep_id, cell_id, g, listed)
        rows.append(row)
        flags.append([] if row["warmup"] else more)
    rerun_flags(rows, flags)
    return pd.DataFrame(rows, columns=CELL_COLUMNS), [f for more in flags for f in more]


def rerun_flags(rows: list[dict], flags: list[list[Flag]]) -> None:
    """Turn the ``failed`` flag of each cell measured ok by a later sweep (the same cell of the same
    work) into ``rerun``, in place: still left out, no longer a failure of the folder."""

    def same(row: dict) -> tuple:
        return (row["cell_id"], *[str(row[k]) for k in WORK_KEYS])

    good_at = {same(row): i for i, row in enumerate(rows) if not row["excluded"]}
    for i, row in enumerate(rows):
        key = same(row)
        if not str(row["flags"]).startswith("failed: ") or good_at.get(key, -1) < i:
            continue
        error = str(row["flags"])[len("failed: ") :]
        row["flags"] = f"rerun: failed ({error}); measured again by sweep {rows[good_at[key]]['sweep_id']}"
        flags[i] = [dataclasses.replace(f, kind="rerun", flag=row["flags"]) for f in flags[i]]


def cell_summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (measured repeats and warm-ups both), with span, overlap, fairness, flags."""
    return summarise_cells(df)[0]


CELL_COLUMNS = [
    "sweep_id",
    "cell_id",
    "mode",
    "mode_kind",
    "replicas",
    "repeat",
    "warmup",
    *WORK_KEYS,
    "mig_profile",
    "sms",
    "cores",
    "span_s",
    "mean_track_s",
    "min_track_s",
    "max_track_s",
    "overlap_pct",
    "fairness",
    "work_particle_turns",
    "throughput_pt_per_s",
    "devices",
    "excluded",
    "flags",
]


# ------------------------------------------------------------------ tables


SHARED_COLUMNS = [
    *WORK_KEYS,
    "mode",
    "N",
    "T1_s",
    "T1_ci_low",
    "T1_ci_high",
    "NT1_s",
    "TN_s",
    "TN_ci_low",
    "TN_ci_high",
    "loss_pct",
    "loss_ci_low",
    "loss_ci_high",
    "cv_T1_pct",
    "cv_TN_pct",
    "fairness",
    "fairness_max",
    "overlap_min_pct",
    "repeats",
    "t1_repeats",
]
MIG_COLUMNS = [
    *WORK_KEYS,
    "mode",
    "layout",
    "mig_profile",
    "instances",
    "full_s",
    "full_ci_low",
    "full_ci_high",
    "mig_s",
    "mig_ci_low",
    "mig_ci_high",
    "loss_pct",
    "loss_ci_low",
    "loss_ci_high",
    "cv_mig_pct",
    "fairness",
    "repeats",
]
PARTITION_COLUMNS = [
    *WORK_KEYS,
    "mode",
    "unit",
    "full_units",
    "slice_units",
    "full_s",
    "ideal_s",
    "slice_s",
    "slice_ci_low",
    "slice_ci_high",
    "excess_pct",
    "excess_ci_low",
    "excess_ci_high",
    "efficiency_pct",
    "repeats",
]
THROUGHPUT_COLUMNS = [
    *WORK_KEYS,
    "mode",
    "replicas",
    "repeats",
    "throughput_pt_per_s",
    "throughput_ci_low",
    "throughput_ci_high",
    "gain",
    "gain_ci_low",
    "gain_ci_high",
    "fairness",
]


@dataclass
class WorkGroup:
    """The measured cells of one mode for one kind of work, and the exclusive baseline of that work."""

    work: dict  # the WORK_KEYS values
    mode: str
    kind: str
    replicas: int
    cells: pd.DataFrame
    t1: np.ndarray  # T_1 samples of the same work (empty: no baseline)

    @property
    def repeats(self) -> int:
        return len(self.cells)

    def flag(self, kind: str, detail: str, text: str) -> Flag:
        return Flag(
            scope="group",
            mode=self.mode,
            particles=self.work["particles"],
            cell_id="",
            flag=text,
            excluded=False,
            kind=kind,
            detail=detail,
        )

    def fairness(self) -> float:
        return float(np.nanmedian(self.cells["fairness"])) if self.replicas > 1 else math.nan


def work_groups(good: pd.DataFrame) -> list[WorkGroup]:
    """The good measured cells grouped by work and mode, in table order (mode, then work)."""
    t1_by_key: dict[tuple, np.ndarray] = {}
    for key, g in good[baseline_mask(good["mode_kind"])].groupby(WORK_KEYS, sort=True, dropna=False):
        t1_by_key[key if isinstance(key, tuple) else (key,)] = g["mean_track_s"].to_numpy(float)
    groups = list(good.groupby(WORK_KEYS + ["mode"], sort=False, dropna=False))
    groups.sort(key=lambda kg: (mode_sort_key(kg[0][-1]), kg[0][:-1]))
    return [
        WorkGroup(
            work=dict(zip(WORK_KEYS, key[:-1])),
            mode=key[-1],
            kind=g["mode_kind"].iloc[0],
            replicas=int(g["replicas"].iloc[0]),
            cells=g,
            t1=t1_by_key.get(tuple(key[:-1]), np.array([])),
        )
        for key, g in groups
    ]


def coverage_flags(group: WorkGroup) -> list[Flag]:
    """Too few repeats for a trustworthy CI; no exclusive baseline to compute a loss against."""
    flags = []
    if group.repeats < MIN_REPEATS:
        few = f"only {group.repeats} measured repeat(s) (< {MIN_REPEATS})"
        flags.append(group.flag("repeats", few, f"{few}: no 95% interval, no ≠ 0 claim"))
    if not is_baseline(group.kind) and group.t1.size == 0:
        none = "no exclusive baseline for this work"
        flags.append(group.flag("baseline", none, f"{none}: loss not computed"))
    return flags


def spread_flags(group: WorkGroup, cvs: dict[str, float]) -> list[Flag]:
    details = [
        f"CV of {name} {cv:.2f}% > {CV_WARN_PCT:.0f}%"
        for name, cv in cvs.items()
        if np.isfinite(cv) and cv > CV_WARN_PCT
    ]
    return [group.flag("spread", d, f"{d}: spread is large, trust the mean less") for d in details]


def fairness_flags(group: WorkGroup) -> list[Flag]:
    fairness = group.cells["fairness"]
    if fairness.notna().any() and float(np.nanmax(fairness)) > FAIRNESS_WARN:
        detail = f"slowest replica took {float(np.nanmax(fairness)):.2f}x the fastest's time"
        return [group.flag("fairness", detail, f"unfair: {detail}")]
    return []


def throughput_row(group: WorkGroup) -> dict:
    """Aggregate throughput per physical device and the gain over exclusive use (every mode).

    Throughput = the cell's particle-turns / mean span, so that gain = N·T_1 / T_N for time-slicing and
    MPS: the gain and the loss tell one story. Intervals: that of the mean span, and of the ratio."""
    work = group.work
    w = float(np.nanmedian(group.cells["work_particle_turns"])) if len(group.cells) else math.nan
    w1 = float(work["particles"] * work["turns"])
    span = group.cells["span_s"].to_numpy(float)
    s_mean, s_lo, s_hi = positive_mean_ci(span)
    thr = (w / s_mean, w / s_hi, w / s_lo) if s_mean > 0 else (math.nan,) * 3
    gain = ratio_ci(group.t1, span, factor=w1 / w) if group.t1.size and w > 0 else (math.nan,) * 3
    return dict(
        **work,
        mode=group.mode,
        replicas=group.replicas,
        repeats=group.repeats,
        throughput_pt_per_s=thr[0],
        throughput_ci_low=thr[1],
        throughput_ci_high=thr[2],
        gain=gain[0],
        gain_ci_low=gain[1],
        gain_ci_high=gain[2],
        fairness=group.fairness(),
    )


def shared_row(group: WorkGroup, good: pd.DataFrame) -> tuple[dict, list[Flag]]:
    """Time-slicing or MPS: T_N against N·T_1, and the flags of its spread and fairness."""
    g, n, t1 = group.cells, group.replicas, group.t1
    t1_med, t1_lo, t1_hi = positive_mean_ci(t1)
    tn = g["span_s"].to_numpy(float)
    tn_med, tn_lo, tn_hi = positive_mean_ci(tn)
    loss, lo, hi = ratio_loss_ci(tn, t1, factor=n)
    cv_tn, cv_t1 = cv_pct(tn), cv_pct(t1)
    row = dict(
        **group.work,
        mode=group.mode,
        N=n,
        T1_s=t1_med,
        T1_ci_low=t1_lo,
        T1_ci_high=t1_hi,
        NT1_s=n * t1_med,
        TN_s=tn_med,
        TN_ci_low=tn_lo,
        TN_ci_high=tn_hi,
        loss_pct=loss,
        loss_ci_low=lo,
        loss_ci_high=hi,
        cv_T1_pct=cv_t1,
        cv_TN_pct=cv_tn,
        fairness=group.fairness(),
        fairness_max=float(np.nanmax(g["fairness"])) if n > 1 and g["fairness"].notna().any() else math.nan,
        overlap_min_pct=float(np.nanmin(g["overlap_pct"])) if g["overlap_pct"].notna().any() else math.nan,
        repeats=group.repeats,
        t1_repeats=int(t1.size),
    )
    return row, spread_flags(group, {"T_N": cv_tn, "T_1": cv_t1}) + fairness_flags(group)


def mig_row(group: WorkGroup, good: pd.DataFrame) -> tuple[dict, list[Flag]]:
    """MIG: one replica per instance against the full GPU, and the flag of its spread."""
    g, t1 = group.cells, group.t1
    t1_med, t1_lo, t1_hi = positive_mean_ci(t1)
    tm = g["mean_track_s"].to_numpy(float)
    tm_med, tm_lo, tm_hi = positive_mean_ci(tm)
    loss, lo, hi = ratio_loss_ci(tm, t1)
    profile = ", ".join(sorted({str(p) for p in g["mig_profile"] if isinstance(p, str) and p})) or "?"
    row = dict(
        **group.work,
        mode=group.mode,
        layout=group.mode.partition(":")[2],
        mig_profile=profile,
        instances=group.replicas,
        full_s=t1_med,
        full_ci_low=t1_lo,
        full_ci_high=t1_hi,
        mig_s=tm_med,
        mig_ci_low=tm_lo,
        mig_ci_high=tm_hi,
        loss_pct=loss,
        loss_ci_low=lo,
        loss_ci_high=hi,
        cv_mig_pct=cv_pct(tm),
        fairness=group.fairness(),
        repeats=group.repeats,
    )
    return row, spread_flags(group, {"T_mig": cv_pct(tm)})


def full_sms_from_profile(mig_profiles: pd.Series) -> float:
    """The SMs of the full GPU, from a MIG profile name that tells them (``1g.18gb``: an H200's 132)."""
    for p in mig_profiles:
        models = models_with_profile(p)
        if models and len({m.sms for m in models}) == 1:
            return float(models[0].sms)
    return math.nan


def partition_row(group: WorkGroup, good: pd.DataFrame) -> tuple[dict, list[Flag]]:
    """A slice (MIG instance, core set) against the ideal T_full × full units / slice units."""
    work, g, t1 = group.work, group.cells, group.t1
    slice_s = g["mean_track_s"].to_numpy(float)
    s_med, s_lo, s_hi = positive_mean_ci(slice_s)
    gpu = work["device_class"] == "gpu"
    unit, col = ("SMs", "sms") if gpu else ("cores", "cores")
    ex = good[baseline_mask(good["mode_kind"])]
    for k, v in work.items():
        ex = ex[ex[k] == v]
    full_units = float(ex[col].median()) if len(ex) and ex[col].notna().any() else math.nan
    if gpu and not np.isfinite(full_units) and len(g):
        full_units = full_sms_from_profile(g["mig_profile"])
    slice_units = float(g[col].median()) if g[col].notna().any() else math.nan
    if is_sm_share(group.mode):  # mps:N@PCT: the SMs the thread share gives (sharebench.analysis.partitions)
        slice_units = share_slice_sms(group.mode, full_units)
    t1_med = float(np.mean(t1)) if t1.size else math.nan
    ideal = t1_med * full_units / slice_units if slice_units and np.isfinite(slice_units) else math.nan
    flags = []
    if not np.isfinite(ideal) and t1.size:
        unknown = f"{unit} of the full device or the slice unknown"
        flags.append(group.flag("scaling", unknown, f"{unknown}: no ideal scaling"))
    if np.isfinite(ideal):
        exc, lo, hi = ratio_loss_ci(slice_s, t1, factor=full_units / slice_units)
    else:
        exc = lo = hi = math.nan
    row = dict(
        **work,
        mode=group.mode,
        unit=unit,
        full_units=full_units,
        slice_units=slice_units,
        full_s=t1_med,
        ideal_s=ideal,
        slice_s=s_med,
        slice_ci_low=s_lo,
        slice_ci_high=s_hi,
        excess_pct=exc,
        excess_ci_low=lo,
        excess_ci_high=hi,
        efficiency_pct=100 * ideal / s_med if np.isfinite(ideal) and s_med > 0 else math.nan,
        repeats=group.repeats,
    )
    return row, flags


@dataclass(frozen=True, eq=False)
class Tables:
    """The study's tables of one results frame: each always present, with its documented columns
    (possibly no rows). Built by :func:`build_tables` / :func:`analyse`; read by attribute."""

    cells: pd.DataFrame  # CELL_COLUMNS: one row per cell, warm-ups included
    timeslice: pd.DataFrame  # SHARED_COLUMNS
    mps: pd.DataFrame  # SHARED_COLUMNS
    mig: pd.DataFrame  # MIG_COLUMNS
    partition: pd.DataFrame  # PARTITION_COLUMNS
    mig_emulated: pd.DataFrame  # EMULATED_COLUMNS (sharebench.analysis.partitions)
    throughput: pd.DataFrame  # THROUGHPUT_COLUMNS
    flags: pd.DataFrame  # FLAG_COLUMNS (sharebench.analysis.flags)
    # LATENCY_COLUMNS (sharebench.analysis.latency): per mode, pattern, role and beside, from the folder's
    # bursts.csv (measured, good cells only), the victim rows of sharing modes with their cell's verdict
    # (every user of the pattern counted); no rows when no pattern was measured
    latency: pd.DataFrame
    # SPLIT_COLUMNS (sharebench.analysis.timeslice_split): each time-slicing loss split into switch idle and
    # refill, from the folder's runs beside the time-slice probe; no rows when there are none
    timeslice_split: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SPLIT_COLUMNS))

    def __post_init__(self) -> None:
        for name, columns in TABLE_COLUMNS.items():
            t = getattr(self, name)
            if not isinstance(t, pd.DataFrame):
                raise TypeError(f"table {name} is a {type(t).__name__}, not a DataFrame")
            missing = [c for c in columns if c not in t.columns]
            if missing:
                raise ValueError(f"table {name} lacks its column(s) {', '.join(missing)}")

    @classmethod
    def empty(cls) -> Tables:
        """Every table with its columns and no rows."""
        return cls(**{name: pd.DataFrame(columns=columns) for name, columns in TABLE_COLUMNS.items()})

    def to_dict(self) -> dict[str, pd.DataFrame]:
        """Name -> table, in :data:`TABLES` order (the names of the files tables/<name>.csv)."""
        return {name: getattr(self, name) for name in TABLES}


TABLE_COLUMNS: dict[str, list[str]] = {
    "cells": CELL_COLUMNS,
    "timeslice": SHARED_COLUMNS,
    "mps": SHARED_COLUMNS,
    "mig": MIG_COLUMNS,
    "partition": PARTITION_COLUMNS,
    "mig_emulated": EMULATED_COLUMNS,
    "throughput": THROUGHPUT_COLUMNS,
    "flags": FLAG_COLUMNS,
    "latency": LATENCY_COLUMNS,
    "timeslice_split": SPLIT_COLUMNS,
}
TABLES = tuple(f.name for f in fields(Tables))

RowBuilder = Callable[[WorkGroup, pd.DataFrame], tuple[dict, list[Flag]]]
# each loss table built one row per mode and work, keyed by table name (KindSpec.table, Mode.table): a
# group of cells goes to its mode's table (tests/vocabulary/test_kinds.py checks every kind has one)
LOSS_ROWS: dict[str, RowBuilder] = {
    "timeslice": shared_row,
    "mps": shared_row,
    "mig": mig_row,
    "partition": partition_row,
}
# the tables a table's rows also go to: a MIG instance is a slice of the GPU, also against the ideal
ALSO_IN: dict[str, tuple[str, ...]] = {"mig": ("partition",)}
# the loss tables built whole from the rows rather than per group (sharebench.analysis.partitions)
WHOLE_TABLES = (EMULATED_TABLE,)


def loss_frames(tables: Tables) -> list[pd.DataFrame]:
    """The loss tables whose figure is ``loss_pct`` (against N·T_1 or the full GPU), in :data:`LOSS_ROWS`
    order; the partition table's figure is an excess over an ideal."""
    return [t for t in (getattr(tables, name) for name in LOSS_ROWS) if "loss_pct" in t.columns]


def loss_tables(group: WorkGroup) -> tuple[str, ...]:
    """The loss tables a group's row goes to: its mode's table (:attr:`Mode.table`) and those it is
    also in (:data:`ALSO_IN`); none for the baseline, a whole table or a kind with no table here."""
    table = table_of(group.mode)
    if table not in LOSS_ROWS:
        return ()
    return (table, *ALSO_IN.get(table, ()))


def kind_flags(groups: list[WorkGroup]) -> list[Flag]:
    """A flag for each mode with no loss table here (a kind this sharebench does not know, or one whose
    table has no builder): its cells are in the cells and throughput tables only, never silently gone."""
    out = []
    for group in groups:
        table = table_of(group.mode)
        if table == "" or table in LOSS_ROWS or table in WHOLE_TABLES:
            continue
        why = f"kind {group.kind!r} unknown to this sharebench" if table is None else f"no loss table {table!r}"
        detail = f"{group.mode}: {why}"
        out.append(group.flag("kind", detail, f"{detail}; in the cells and throughput tables only, no loss"))
    return out


def batch_cells(cells: pd.DataFrame, df: pd.DataFrame) -> pd.DataFrame:
    """The cells whose every replica ran a saturated pattern (batch, ``PatternSpec.saturated``; no label: the
    releases before patterns): the only ones the loss, partition and throughput tables compare; a cell
    under another pattern is measured by the latency table."""
    if cells.empty or "pattern" not in df.columns:
        return cells
    labels = df["pattern"].fillna("").astype(str)
    shaped = df[~labels.map({label: saturated(label) for label in labels.unique()}).astype(bool)]
    if shaped.empty:
        return cells
    drop = set(zip(shaped["sweep_id"].astype(str), shaped["cell_id"].astype(str)))
    keys = zip(cells["sweep_id"].astype(str), cells["cell_id"].astype(str))
    return cells[[k not in drop for k in keys]]


def measured_bursts(bursts: pd.DataFrame | None, good: pd.DataFrame) -> pd.DataFrame:
    """The burst rows of the good measured cells (warm-ups and excluded cells left out)."""
    if bursts is None or bursts.empty or good.empty:
        return pd.DataFrame()
    keep = set(zip(good["sweep_id"].astype(str), good["cell_id"].astype(str)))
    rows = bursts[~bursts["warmup"].astype(bool)]
    mask = [(str(s), str(c)) in keep for s, c in zip(rows["sweep_id"], rows["cell_id"])]
    rows = rows[mask].copy()
    if rows["sweep_id"].nunique() > 1:  # a cell id names one cell run within a sweep
        rows["cell_id"] = rows["sweep_id"].astype(str) + "/" + rows["cell_id"].astype(str)
    return rows


def build_tables(
    df: pd.DataFrame,
    bursts: pd.DataFrame | None = None,
    listed: set[str] | None = None,
    *,
    split_runs: list[dict] | None = None,
    slo: float = DEFAULT_SLO,
) -> Tables:
    """All tables (:class:`Tables`) from a loaded results frame (``sharebench.results.load_results``) and,
    for the latency table, its burst rows (``sharebench.results.bursts.load_bursts``; None: no patterns) and
    the p95 slowdown target its verdicts are decided against; for the split table, the runs beside the
    time-slice probe (``timeslice_split.read_runs``; None: none)."""
    cells, flags = summarise_cells(df, listed)
    measured = cells[~cells["warmup"].astype(bool)] if len(cells) else cells
    good = measured[~measured["excluded"].astype(bool)] if len(measured) else measured
    flags += disturbed_flags(df, measured)
    rows: dict[str, list[dict]] = {name: [] for name in (*LOSS_ROWS, "throughput")}
    batch = batch_cells(good, df)
    for group in work_groups(batch):
        flags += coverage_flags(group)
        rows["throughput"].append(throughput_row(group))
        for table in loss_tables(group):
            row, more = LOSS_ROWS[table](group, batch)
            rows[table].append(row)
            flags += more
    unknown = kind_flags(work_groups(batch))
    unknown += beyond_flags(pd.DataFrame(rows["throughput"], columns=THROUGHPUT_COLUMNS), batch)
    shaped = measured_bursts(bursts, good)
    latency = latency_table(shaped, slo=slo)
    unknown += below_one_flags(latency, shaped, dict(zip(good["mode"], good["particles"])) if len(good) else {})
    loss = {name: pd.DataFrame(rows[name], columns=TABLE_COLUMNS[name]) for name in LOSS_ROWS}
    return Tables(
        cells=cells,
        **loss,
        mig_emulated=emulated_table(df, batch, WORK_KEYS),
        throughput=pd.DataFrame(rows["throughput"], columns=THROUGHPUT_COLUMNS),
        flags=flags_frame(flags + unknown),
        latency=latency,
        timeslice_split=split_table(split_runs or [], loss["timeslice"]),
    )


def analyse(results_dir: Path | str) -> Tables:
    """The tables of a results folder (or results.csv), the latency table from its bursts.csv (its verdicts
    against the target of the folder's last sweep), the split of the time-slicing losses from its
    timeslice_split.json."""
    path = Path(results_dir)
    folder = path if path.is_dir() else path.parent
    return build_tables(
        load_results(results_dir),
        load_bursts(results_dir),
        listed_sweeps(results_dir),
        split_runs=read_runs(folder),
        slo=sweep_slo(read_sweeps(folder, torn_ok=True)),
    )


def listed_sweeps(results_dir: Path | str) -> set[str] | None:
    """The sweeps a folder's sweep.json lists (its rows of others are flagged ``unlisted``); None without one,
    and None when it is torn (no row is flagged by a list that cannot be read: ``sweeps_warning`` says so)."""
    path = Path(results_dir)
    folder = path if path.is_dir() else path.parent
    if not (folder / SWEEP_JSON).is_file() or sweeps_warning(folder) is not None:
        return None
    return {str(s.get("sweep_id")) for s in read_sweeps(folder)}
