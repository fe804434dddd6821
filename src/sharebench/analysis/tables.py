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

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from sharebench.analysis.disturbance import disturbed_flags
from sharebench.analysis.partitions import emulated_table, is_sm_share, share_slice_sms
from sharebench.analysis.statistics import MIN_CI_REPEATS, cv_pct, mean_ci, ratio_ci, ratio_loss_ci
from sharebench.gpus import models_with_profile
from sharebench.modes import mode_sort_key
from sharebench.results import load_results

OVERLAP_MIN_PCT = 95.0
CV_WARN_PCT = 10.0
FAIRNESS_WARN = 1.25
MIN_REPEATS = MIN_CI_REPEATS

# what makes two cells "the same work": they may be compared with each other
WORK_KEYS = ["engine", "backend", "device_class", "lattice", "particles", "turns"]
TABLES = ("cells", "timeslice", "mps", "mig", "partition", "mig_emulated", "throughput", "flags")


# ------------------------------------------------------------------ per cell


def cell_summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (measured repeats and warm-ups both), with span, overlap, fairness, flags."""
    rows = []
    if df.empty:
        return pd.DataFrame(columns=CELL_COLUMNS)
    for (sweep_id, cell_id), g in df.groupby(["sweep_id", "cell_id"], sort=False, dropna=False):
        first = g.iloc[0]
        n = int(first["replicas"]) if pd.notna(first["replicas"]) else len(g)
        flags: list[str] = []
        excluded = False
        failed = (g["status"] == "failed").any() or (g["cell_status"] == "failed").any()
        if failed:
            errs = [e for e in list(g["cell_error"]) + list(g["error"]) if isinstance(e, str) and e]
            flags.append("failed: " + (errs[0] if errs else "a replica failed"))
            excluded = True
        elif len(g) != n:
            flags.append(f"incomplete: {len(g)} of {n} replica rows")
            excluded = True
        track = g["track_s"].astype(float)
        starts, ends = g["track_start"].astype(float), g["track_end"].astype(float)
        windows_known = bool(starts.notna().all() and ends.notna().all())
        if n == 1:
            span = float(track.iloc[0]) if len(track) else math.nan
            overlap = 100.0
        elif windows_known and len(g):
            span = float(ends.max() - starts.min())
            durations = ends - starts
            shortest = float(durations.min())
            overlap = (100.0 * max(0.0, float(ends.min() - starts.max())) / shortest) if shortest > 0 else math.nan
        else:
            span = float(track.max()) if len(track) else math.nan
            overlap = math.nan
        if not excluded and n > 1 and np.isfinite(overlap) and overlap < OVERLAP_MIN_PCT:
            flags.append(
                f"overlap {overlap:.2f}% < {OVERLAP_MIN_PCT:.0f}%: replicas did not track together; "
                "left out of the loss"
            )
            excluded = True
        phys = g["parent_uuid"].where(g["parent_uuid"].astype(str) != "", g["device_uuid"])
        phys = sorted({str(p) for p in phys if isinstance(p, str) and p})
        if not excluded and len(phys) > 1:
            flags.append("replicas on different devices: " + ", ".join(phys) + "; left out")
            excluded = True
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
            excluded=excluded,
            flags="; ".join(flags),
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=CELL_COLUMNS)


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
FLAG_COLUMNS = ["scope", "mode", "particles", "cell_id", "flag", "excluded"]


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

    def flag(self, text: str) -> dict:
        return dict(
            scope="group", mode=self.mode, particles=self.work["particles"], cell_id="", flag=text, excluded=False
        )

    def fairness(self) -> float:
        return float(np.nanmedian(self.cells["fairness"])) if self.replicas > 1 else math.nan


def work_groups(good: pd.DataFrame) -> list[WorkGroup]:
    """The good measured cells grouped by work and mode, in table order (mode, then work)."""
    t1_by_key: dict[tuple, np.ndarray] = {}
    for key, g in good[good["mode_kind"] == "exclusive"].groupby(WORK_KEYS, sort=True, dropna=False):
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


def cell_flags(measured: pd.DataFrame) -> list[dict]:
    """One flag row per flag of a measured cell (failed, incomplete, low overlap, split devices)."""
    flags = []
    for _, c in measured.iterrows():
        if c["flags"]:
            for f in str(c["flags"]).split("; "):
                flags.append(
                    dict(
                        scope="cell",
                        mode=c["mode"],
                        particles=c["particles"],
                        cell_id=c["cell_id"],
                        flag=f,
                        excluded=bool(c["excluded"]),
                    )
                )
    return flags


def coverage_flags(group: WorkGroup) -> list[dict]:
    """Too few repeats for a trustworthy CI; no exclusive baseline to compute a loss against."""
    flags = []
    if group.repeats < MIN_REPEATS:
        flags.append(
            group.flag(f"only {group.repeats} measured repeat(s) (< {MIN_REPEATS}): no 95% interval, no ≠ 0 claim")
        )
    if group.kind != "exclusive" and group.t1.size == 0:
        flags.append(group.flag("no exclusive baseline for this work: loss not computed"))
    return flags


def spread_flags(group: WorkGroup, cvs: dict[str, float]) -> list[dict]:
    return [
        group.flag(f"CV of {name} {cv:.2f}% > {CV_WARN_PCT:.0f}%: spread is large, trust the mean less")
        for name, cv in cvs.items()
        if np.isfinite(cv) and cv > CV_WARN_PCT
    ]


def fairness_flags(group: WorkGroup) -> list[dict]:
    fairness = group.cells["fairness"]
    if fairness.notna().any() and float(np.nanmax(fairness)) > FAIRNESS_WARN:
        return [group.flag(f"unfair: slowest replica took {float(np.nanmax(fairness)):.2f}x the fastest's time")]
    return []


def throughput_row(group: WorkGroup) -> dict:
    """Aggregate throughput per physical device and the gain over exclusive use (every mode).

    Throughput = the cell's particle-turns / mean span, so that gain = N·T_1 / T_N for time-slicing and
    MPS: the gain and the loss tell one story. Intervals: that of the mean span, and of the ratio."""
    work = group.work
    w = float(np.nanmedian(group.cells["work_particle_turns"])) if len(group.cells) else math.nan
    w1 = float(work["particles"] * work["turns"])
    span = group.cells["span_s"].to_numpy(float)
    s_mean, s_lo, s_hi = mean_ci(span)
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


def shared_row(group: WorkGroup) -> tuple[dict, list[dict]]:
    """Time-slicing or MPS: T_N against N·T_1, and the flags of its spread and fairness."""
    g, n, t1 = group.cells, group.replicas, group.t1
    t1_med, t1_lo, t1_hi = mean_ci(t1)
    tn = g["span_s"].to_numpy(float)
    tn_med, tn_lo, tn_hi = mean_ci(tn)
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


def mig_row(group: WorkGroup) -> tuple[dict, list[dict]]:
    """MIG: one replica per instance against the full GPU, and the flag of its spread."""
    g, t1 = group.cells, group.t1
    t1_med, t1_lo, t1_hi = mean_ci(t1)
    tm = g["mean_track_s"].to_numpy(float)
    tm_med, tm_lo, tm_hi = mean_ci(tm)
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


def partition_row(group: WorkGroup, good: pd.DataFrame) -> tuple[dict, list[dict]]:
    """A slice (MIG instance, core set) against the ideal T_full × full units / slice units."""
    work, g, t1 = group.work, group.cells, group.t1
    slice_s = g["mean_track_s"].to_numpy(float)
    s_med, s_lo, s_hi = mean_ci(slice_s)
    gpu = work["device_class"] == "gpu"
    unit, col = ("SMs", "sms") if gpu else ("cores", "cores")
    ex = good[(good["mode_kind"] == "exclusive")]
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
        flags.append(group.flag(f"{unit} of the full device or the slice unknown: no ideal scaling"))
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


def build_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """All tables (:data:`TABLES`) from a loaded results frame (``sharebench.results.load_results``)."""
    cells = cell_summary(df)
    measured = cells[~cells["warmup"].astype(bool)] if len(cells) else cells
    good = measured[~measured["excluded"].astype(bool)] if len(measured) else measured
    flags = cell_flags(measured) + disturbed_flags(df, measured)
    rows: dict[str, list[dict]] = {"timeslice": [], "mps": [], "mig": [], "partition": [], "throughput": []}
    for group in work_groups(good):
        flags += coverage_flags(group)
        rows["throughput"].append(throughput_row(group))
        more: list[dict] = []
        if group.kind in ("timeslice", "mps") and not is_sm_share(group.mode):
            row, more = shared_row(group)
            rows[group.kind].append(row)
        elif group.kind == "mig":
            row, more = mig_row(group)
            rows["mig"].append(row)
        flags += more
        if group.kind in ("mig", "partition") or is_sm_share(group.mode):
            row, more = partition_row(group, good)
            rows["partition"].append(row)
            flags += more
    return {
        "cells": cells,
        "timeslice": pd.DataFrame(rows["timeslice"], columns=SHARED_COLUMNS),
        "mps": pd.DataFrame(rows["mps"], columns=SHARED_COLUMNS),
        "mig": pd.DataFrame(rows["mig"], columns=MIG_COLUMNS),
        "partition": pd.DataFrame(rows["partition"], columns=PARTITION_COLUMNS),
        "mig_emulated": emulated_table(df, good, WORK_KEYS),
        "throughput": pd.DataFrame(rows["throughput"], columns=THROUGHPUT_COLUMNS),
        "flags": pd.DataFrame(flags, columns=FLAG_COLUMNS),
    }


def analyse(results_dir: Path | str) -> dict[str, pd.DataFrame]:
    """The tables of a results folder (or results.csv)."""
    return build_tables(load_results(results_dir))
