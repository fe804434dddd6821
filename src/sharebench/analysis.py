"""Statistics over a results CSV: the study's tables, with bootstrap CIs and flags.

Definitions (times in seconds, medians over the measured repeats):

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
* aggregate throughput: total particle-turns of the cell / T_N, per physical device;
  sharing gain = throughput / exclusive throughput.
* fairness: slowest / fastest replica ``track_s`` in a cell (1.00 = fair).

Every median comes with a 95% bootstrap CI (scipy.stats.bootstrap, percentile
method, fixed seed) when there are at least two samples, and a coefficient of
variation. Warm-up rows and failed cells never enter a statistic.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

OVERLAP_MIN_PCT = 95.0
CV_WARN_PCT = 10.0
FAIRNESS_WARN = 1.25
MIN_REPEATS = 3
N_RESAMPLES = 4999
SEED = 12345

# what makes two cells "the same work": they may be compared with each other
WORK_KEYS = ["engine", "backend", "device_class", "lattice", "particles", "turns"]

TABLE_TITLES = {
    "timeslice": "Time-slicing: N replicas on one device at once",
    "mps": "MPS: N replicas as clients of one MPS server",
    "mig": "MIG: one replica per MIG instance against the full GPU",
    "partition": "Partition scaling against the ideal",
    "throughput": "Aggregate throughput per physical device and sharing gain",
    "flags": "Flags",
}


# ------------------------------------------------------------------ statistics


def _clean(x) -> np.ndarray:
    a = np.asarray(list(x), dtype=float)
    return a[np.isfinite(a)]


def median_ci(samples, scale: float = 1.0) -> tuple[float, float, float]:
    """Median and 95% bootstrap CI of the median (NaN CI with fewer than 2 samples)."""
    x = _clean(samples)
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    med = float(np.median(x)) * scale
    if x.size < 2:
        return (med, math.nan, math.nan)
    if np.all(x == x[0]):
        return (med, med, med)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((x,), np.median, confidence_level=0.95, n_resamples=N_RESAMPLES,
                              method="percentile", random_state=np.random.default_rng(SEED))
    return (med, float(res.confidence_interval.low) * scale, float(res.confidence_interval.high) * scale)


def ratio_loss_ci(num, den, factor: float = 1.0) -> tuple[float, float, float]:
    """Loss % = (median(num) - factor*median(den)) / (factor*median(den)) x 100 and its CI.

    Two independent samples, resampled separately (unpaired bootstrap).
    """
    a, b = _clean(num), _clean(den)
    if a.size == 0 or b.size == 0:
        return (math.nan, math.nan, math.nan)

    def stat(x, y, axis=-1):
        ref = factor * np.median(y, axis=axis)
        return (np.median(x, axis=axis) - ref) / ref * 100.0

    point = float(stat(a, b))
    if a.size < 2 or b.size < 2:
        return (point, math.nan, math.nan)
    if np.all(a == a[0]) and np.all(b == b[0]):
        return (point, point, point)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((a, b), stat, paired=False, vectorized=True, confidence_level=0.95,
                              n_resamples=N_RESAMPLES, method="percentile",
                              random_state=np.random.default_rng(SEED))
    return (point, float(res.confidence_interval.low), float(res.confidence_interval.high))


def cv_pct(samples) -> float:
    """Coefficient of variation in % (sample standard deviation / mean); NaN below 2 samples."""
    x = _clean(samples)
    if x.size < 2 or np.mean(x) == 0:
        return math.nan
    return float(np.std(x, ddof=1) / np.mean(x) * 100.0)


# ------------------------------------------------------------------ per cell


def cell_summary(df: pd.DataFrame) -> pd.DataFrame:
    """One row per cell (measured repeats and warm-ups both), with span, overlap, fairness, flags."""
    rows = []
    if df.empty:
        return pd.DataFrame(columns=_CELL_COLUMNS)
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
            flags.append(f"overlap {overlap:.2f}% < {OVERLAP_MIN_PCT:.0f}%: replicas did not track together; "
                         "left out of the loss")
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
            sweep_id=sweep_id, cell_id=cell_id, mode=first["mode"], mode_kind=first["mode_kind"] or
            str(first["mode"]).split(":")[0], replicas=n, repeat=first["repeat"], warmup=bool(first["warmup"]),
            mig_profile=first["mig_profile"], sms=g["sms"].astype(float).median(),
            cores=g["cores"].astype(float).median(),
            span_s=span, mean_track_s=float(track.mean()) if len(track) else math.nan,
            min_track_s=float(track.min()) if len(track) else math.nan,
            max_track_s=float(track.max()) if len(track) else math.nan,
            overlap_pct=overlap, fairness=fair, work_particle_turns=work,
            throughput_pt_per_s=work / span if span and np.isfinite(span) and span > 0 else math.nan,
            devices=", ".join(phys), excluded=excluded, flags="; ".join(flags),
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=_CELL_COLUMNS)


_CELL_COLUMNS = [
    "sweep_id", "cell_id", "mode", "mode_kind", "replicas", "repeat", "warmup", *WORK_KEYS, "mig_profile",
    "sms", "cores", "span_s", "mean_track_s", "min_track_s", "max_track_s", "overlap_pct", "fairness",
    "work_particle_turns", "throughput_pt_per_s", "devices", "excluded", "flags",
]


# ------------------------------------------------------------------ tables


def _mode_sort_key(mode: str) -> tuple:
    kind, _, arg = str(mode).partition(":")
    order = {"exclusive": 0, "timeslice": 1, "mps": 2, "mig": 3, "partition": 4}.get(kind, 9)
    num = arg.split("@")[0]
    return (order, int(num) if num.isdigit() else 0, arg)


def _key_dict(key) -> dict:
    return dict(zip(WORK_KEYS, key if isinstance(key, tuple) else (key,)))


def build_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """All tables from a loaded results frame (sharebench.results.load_results)."""
    cells = cell_summary(df)
    measured = cells[~cells["warmup"].astype(bool)] if len(cells) else cells
    good = measured[~measured["excluded"].astype(bool)] if len(measured) else measured
    flags: list[dict] = []
    for _, c in measured.iterrows():
        if c["flags"]:
            for f in str(c["flags"]).split("; "):
                flags.append(dict(scope="cell", mode=c["mode"], particles=c["particles"], cell_id=c["cell_id"],
                                  flag=f, excluded=bool(c["excluded"])))

    t1_by_key: dict[tuple, np.ndarray] = {}
    for key, g in good[good["mode_kind"] == "exclusive"].groupby(WORK_KEYS, sort=True, dropna=False):
        t1_by_key[key if isinstance(key, tuple) else (key,)] = g["mean_track_s"].to_numpy(float)

    shared: dict[str, list[dict]] = {"timeslice": [], "mps": []}
    mig_rows, part_rows, thr_rows = [], [], []
    groups = list(good.groupby(WORK_KEYS + ["mode"], sort=False, dropna=False))
    groups.sort(key=lambda kg: (_mode_sort_key(kg[0][-1]), kg[0][:-1]))
    for key, g in groups:
        work_key, mode = tuple(key[:-1]), key[-1]
        kind = g["mode_kind"].iloc[0]
        n = int(g["replicas"].iloc[0])
        kd = _key_dict(work_key)
        t1 = t1_by_key.get(work_key, np.array([]))
        nrep = len(g)
        if nrep < MIN_REPEATS:
            flags.append(dict(scope="group", mode=mode, particles=kd["particles"], cell_id="",
                              flag=f"only {nrep} measured repeat(s) (< {MIN_REPEATS}): CI is wide or missing",
                              excluded=False))
        if kind != "exclusive" and t1.size == 0:
            flags.append(dict(scope="group", mode=mode, particles=kd["particles"], cell_id="",
                              flag="no exclusive baseline for this work: loss not computed", excluded=False))
        t1_med, t1_lo, t1_hi = median_ci(t1)
        ex_thr = (kd["particles"] * kd["turns"]) / t1 if t1.size else np.array([])

        # aggregate throughput, for every mode
        thr = g["throughput_pt_per_s"].to_numpy(float)
        thr_med, thr_lo, thr_hi = median_ci(thr)
        gain, gain_lo, gain_hi = ratio_loss_ci(thr, ex_thr) if ex_thr.size else (math.nan,) * 3
        thr_rows.append(dict(**kd, mode=mode, replicas=n, repeats=nrep, throughput_pt_per_s=thr_med,
                             throughput_ci_low=thr_lo, throughput_ci_high=thr_hi,
                             gain=1 + gain / 100, gain_ci_low=1 + gain_lo / 100, gain_ci_high=1 + gain_hi / 100,
                             fairness=float(np.nanmedian(g["fairness"])) if n > 1 else math.nan))

        if kind in ("timeslice", "mps"):
            tn = g["span_s"].to_numpy(float)
            tn_med, tn_lo, tn_hi = median_ci(tn)
            loss, lo, hi = ratio_loss_ci(tn, t1, factor=n)
            cv_tn, cv_t1 = cv_pct(tn), cv_pct(t1)
            shared[kind].append(dict(
                **kd, mode=mode, N=n, T1_s=t1_med, T1_ci_low=t1_lo, T1_ci_high=t1_hi,
                NT1_s=n * t1_med, TN_s=tn_med, TN_ci_low=tn_lo, TN_ci_high=tn_hi,
                loss_pct=loss, loss_ci_low=lo, loss_ci_high=hi, cv_T1_pct=cv_t1, cv_TN_pct=cv_tn,
                fairness=float(np.nanmedian(g["fairness"])) if n > 1 else math.nan,
                fairness_max=float(np.nanmax(g["fairness"])) if n > 1 and g["fairness"].notna().any()
                else math.nan,
                overlap_min_pct=float(np.nanmin(g["overlap_pct"])) if g["overlap_pct"].notna().any() else math.nan,
                repeats=nrep, t1_repeats=int(t1.size)))
            _spread_flags(flags, mode, kd, {"T_N": cv_tn, "T_1": cv_t1})
            _fair_flag(flags, mode, kd, g)
        elif kind == "mig":
            tm = g["mean_track_s"].to_numpy(float)
            tm_med, tm_lo, tm_hi = median_ci(tm)
            loss, lo, hi = ratio_loss_ci(tm, t1)
            profile = ", ".join(sorted({str(p) for p in g["mig_profile"] if isinstance(p, str) and p})) or "?"
            mig_rows.append(dict(**kd, mode=mode, layout=mode.partition(":")[2], mig_profile=profile,
                                 instances=n, full_s=t1_med, full_ci_low=t1_lo, full_ci_high=t1_hi,
                                 mig_s=tm_med, mig_ci_low=tm_lo, mig_ci_high=tm_hi, loss_pct=loss,
                                 loss_ci_low=lo, loss_ci_high=hi, cv_mig_pct=cv_pct(tm),
                                 fairness=float(np.nanmedian(g["fairness"])) if n > 1 else math.nan,
                                 repeats=nrep))
            _spread_flags(flags, mode, kd, {"T_mig": cv_pct(tm)})
        if kind in ("mig", "partition"):
            part_rows.append(_partition_row(kd, mode, n, g, good, work_key, t1, flags))

    tables = {
        "cells": cells,
        "timeslice": pd.DataFrame(shared["timeslice"], columns=_SHARED_COLUMNS),
        "mps": pd.DataFrame(shared["mps"], columns=_SHARED_COLUMNS),
        "mig": pd.DataFrame(mig_rows, columns=_MIG_COLUMNS),
        "partition": pd.DataFrame(part_rows, columns=_PART_COLUMNS),
        "throughput": pd.DataFrame(thr_rows, columns=_THR_COLUMNS),
        "flags": pd.DataFrame(flags, columns=["scope", "mode", "particles", "cell_id", "flag", "excluded"]),
    }
    return tables


_SHARED_COLUMNS = [*WORK_KEYS, "mode", "N", "T1_s", "T1_ci_low", "T1_ci_high", "NT1_s", "TN_s", "TN_ci_low",
                   "TN_ci_high", "loss_pct", "loss_ci_low", "loss_ci_high", "cv_T1_pct", "cv_TN_pct", "fairness",
                   "fairness_max", "overlap_min_pct", "repeats", "t1_repeats"]
_MIG_COLUMNS = [*WORK_KEYS, "mode", "layout", "mig_profile", "instances", "full_s", "full_ci_low", "full_ci_high",
                "mig_s", "mig_ci_low", "mig_ci_high", "loss_pct", "loss_ci_low", "loss_ci_high", "cv_mig_pct",
                "fairness", "repeats"]
_PART_COLUMNS = [*WORK_KEYS, "mode", "unit", "full_units", "slice_units", "full_s", "ideal_s", "slice_s",
                 "slice_ci_low", "slice_ci_high", "excess_pct", "excess_ci_low", "excess_ci_high",
                 "efficiency_pct", "repeats"]
_THR_COLUMNS = [*WORK_KEYS, "mode", "replicas", "repeats", "throughput_pt_per_s", "throughput_ci_low",
                "throughput_ci_high", "gain", "gain_ci_low", "gain_ci_high", "fairness"]


def _spread_flags(flags: list, mode: str, kd: dict, cvs: dict[str, float]) -> None:
    for name, cv in cvs.items():
        if np.isfinite(cv) and cv > CV_WARN_PCT:
            flags.append(dict(scope="group", mode=mode, particles=kd["particles"], cell_id="",
                              flag=f"CV of {name} {cv:.2f}% > {CV_WARN_PCT:.0f}%: spread is large, trust the "
                              "median less", excluded=False))


def _fair_flag(flags: list, mode: str, kd: dict, g: pd.DataFrame) -> None:
    if g["fairness"].notna().any():
        worst = float(np.nanmax(g["fairness"]))
        if worst > FAIRNESS_WARN:
            flags.append(dict(scope="group", mode=mode, particles=kd["particles"], cell_id="",
                              flag=f"unfair: slowest replica took {worst:.2f}x the fastest's time",
                              excluded=False))


def _partition_row(kd, mode, n, g, good, work_key, t1, flags) -> dict:
    slice_s = g["mean_track_s"].to_numpy(float)
    s_med, s_lo, s_hi = median_ci(slice_s)
    gpu = kd["device_class"] == "gpu"
    unit = "SMs" if gpu else "cores"
    col = "sms" if gpu else "cores"
    ex = good[(good["mode_kind"] == "exclusive")]
    for k, v in kd.items():
        ex = ex[ex[k] == v]
    full_units = float(ex[col].median()) if len(ex) and ex[col].notna().any() else math.nan
    if gpu and not np.isfinite(full_units) and len(g):
        full_units = _full_sms_from_profile(g)
    slice_units = float(g[col].median()) if g[col].notna().any() else math.nan
    t1_med = float(np.median(t1)) if t1.size else math.nan
    ideal = t1_med * full_units / slice_units if slice_units and np.isfinite(slice_units) else math.nan
    if not np.isfinite(ideal) and t1.size:
        flags.append(dict(scope="group", mode=mode, particles=kd["particles"], cell_id="",
                          flag=f"{unit} of the full device or the slice unknown: no ideal scaling", excluded=False))
    if np.isfinite(ideal):
        exc, lo, hi = ratio_loss_ci(slice_s, t1, factor=full_units / slice_units)
    else:
        exc = lo = hi = math.nan
    return dict(**kd, mode=mode, unit=unit, full_units=full_units, slice_units=slice_units, full_s=t1_med,
                ideal_s=ideal, slice_s=s_med, slice_ci_low=s_lo, slice_ci_high=s_hi, excess_pct=exc,
                excess_ci_low=lo, excess_ci_high=hi,
                efficiency_pct=100 * ideal / s_med if np.isfinite(ideal) and s_med > 0 else math.nan,
                repeats=len(g))


def _full_sms_from_profile(g: pd.DataFrame) -> float:
    from sharebench.gpus import GPU_MODELS
    for p in g["mig_profile"]:
        # an unambiguous profile name tells the model (e.g. 1g.18gb only exists on the H200)
        models = [m for m in GPU_MODELS.values() if any(pr.name == p for pr in m.profiles)]
        if models and len({m.sms for m in models}) == 1:
            return float(models[0].sms)
    return math.nan


def analyse(results_dir: Path | str) -> dict[str, pd.DataFrame]:
    from sharebench.results import load_results
    return build_tables(load_results(results_dir))


# ------------------------------------------------------------------ formatting


def _pct(v) -> str:
    return "" if v is None or not np.isfinite(v) else f"{v:.2f}"


def _sec(v) -> str:
    if v is None or not np.isfinite(v):
        return ""
    return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"


def _ci(lo, hi, f) -> str:
    return "" if not (np.isfinite(lo) and np.isfinite(hi)) else f"[{f(lo)}, {f(hi)}]"


def _num(v) -> str:
    if v is None or not np.isfinite(v):
        return ""
    return f"{v:.3g}" if abs(v) >= 1e5 or abs(v) < 1e-2 else f"{v:,.2f}"


def _significant(lo, hi) -> str:
    """'yes' when the 95% CI excludes 0 (the loss is real at that level), 'no' when it holds 0, '' without a CI."""
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return ""
    return "yes" if lo > 0 or hi < 0 else "no"


def _int(v) -> str:
    return "" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f"{int(v):,}"


def display_table(name: str, t: pd.DataFrame) -> pd.DataFrame:
    """The table as the study prints it: text cells, two-decimal percentages, CIs in brackets.

    When the table mixes work of different kinds (engine, backend, device class, lattice, turns),
    a first column says which each row is.
    """
    out = _display_rows(name, t)
    if name != "flags" and not out.empty and all(k in t.columns for k in WORK_KEYS):
        kinds = t.apply(lambda r: f"{r.engine} on {r.backend} ({r.device_class}), {r.lattice}, {_int(r.turns)} turns",
                        axis=1)
        if kinds.nunique() > 1:
            out.insert(0, "work", kinds.to_numpy())
    return out


def _display_rows(name: str, t: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, r in t.iterrows():
        if name in ("timeslice", "mps"):
            rows.append({"particles": _int(r.particles), "mode": r["mode"], "N": _int(r.N), "T_1 [s]": _sec(r.T1_s),
                         "T_1 95% CI": _ci(r.T1_ci_low, r.T1_ci_high, _sec), "N·T_1 [s]": _sec(r.NT1_s),
                         "T_N [s]": _sec(r.TN_s), "T_N 95% CI": _ci(r.TN_ci_low, r.TN_ci_high, _sec),
                         "loss %": _pct(r.loss_pct), "loss 95% CI": _ci(r.loss_ci_low, r.loss_ci_high, _pct),
                         "≠ 0?": _significant(r.loss_ci_low, r.loss_ci_high),
                         "CV T_N %": _pct(r.cv_TN_pct), "CV T_1 %": _pct(r.cv_T1_pct), "fairness": _num(r.fairness),
                         "repeats": _int(r.repeats)})
        elif name == "mig":
            rows.append({"particles": _int(r.particles), "full GPU [s]": _sec(r.full_s),
                         "full 95% CI": _ci(r.full_ci_low, r.full_ci_high, _sec),
                         "MIG layout": f"{r.layout} ({r.mig_profile} x{_int(r.instances)})",
                         "T_mig [s]": _sec(r.mig_s), "T_mig 95% CI": _ci(r.mig_ci_low, r.mig_ci_high, _sec),
                         "loss %": _pct(r.loss_pct), "loss 95% CI": _ci(r.loss_ci_low, r.loss_ci_high, _pct),
                         "≠ 0?": _significant(r.loss_ci_low, r.loss_ci_high),
                         "CV T_mig %": _pct(r.cv_mig_pct), "repeats": _int(r.repeats)})
        elif name == "partition":
            rows.append({"particles": _int(r.particles), "mode": r["mode"],
                         f"slice / full": f"{_int(r.slice_units)} / {_int(r.full_units)} {r.unit}",
                         "T_full [s]": _sec(r.full_s), "ideal [s]": _sec(r.ideal_s), "T_slice [s]": _sec(r.slice_s),
                         "T_slice 95% CI": _ci(r.slice_ci_low, r.slice_ci_high, _sec),
                         "vs ideal %": _pct(r.excess_pct), "95% CI": _ci(r.excess_ci_low, r.excess_ci_high, _pct),
                         "efficiency %": _pct(r.efficiency_pct), "repeats": _int(r.repeats)})
        elif name == "throughput":
            rows.append({"particles": _int(r.particles), "mode": r["mode"],
                         "throughput [particle-turns/s]": _num(r.throughput_pt_per_s),
                         "95% CI": _ci(r.throughput_ci_low, r.throughput_ci_high, _num),
                         "gain vs exclusive": _num(r.gain), "gain 95% CI": _ci(r.gain_ci_low, r.gain_ci_high, _num),
                         "fairness": _num(r.fairness), "repeats": _int(r.repeats)})
        elif name == "flags":
            rows.append({"mode": r["mode"], "particles": _int(r.particles), "cell": r.cell_id, "flag": r.flag,
                         "excluded": "yes" if r.excluded else "no"})
    return pd.DataFrame(rows)


def summary_table(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One line per particle count, one column per mode: loss % with its 95% CI (partition modes: % over the
    ideal), the study's "loss % per N" at a glance."""
    cells: dict[tuple, dict[str, str]] = {}
    modes: list[str] = []
    sources = [("timeslice", "loss_pct", "loss_ci_low", "loss_ci_high", ""),
               ("mps", "loss_pct", "loss_ci_low", "loss_ci_high", ""),
               ("mig", "loss_pct", "loss_ci_low", "loss_ci_high", ""),
               ("partition", "excess_pct", "excess_ci_low", "excess_ci_high", " vs ideal")]
    for name, col, lo, hi, suffix in sources:
        t = tables.get(name)
        if t is None or t.empty:
            continue
        for _, r in t.iterrows():
            if name == "partition" and str(r["mode"]).startswith("mig:"):
                label = f"{r['mode']} vs ideal"
            else:
                label = f"{r['mode']}{suffix}"
            if label not in modes:
                modes.append(label)
            key = (r.engine, r.backend, r.device_class, r.lattice, r.turns, r.particles)
            ci = _ci(r[lo], r[hi], _pct)
            cells.setdefault(key, {})[label] = (_pct(r[col]) + (f" {ci}" if ci else "")) or "-"
    modes.sort(key=lambda m: _mode_sort_key(m.split(" ")[0]))
    rows = []
    kinds = {k[:5] for k in cells}
    for key in sorted(cells, key=lambda k: (str(k[:5]), k[5])):
        row = {"particles": _int(key[5])}
        if len(kinds) > 1:
            row = {"work": f"{key[0]} on {key[1]} ({key[2]}), {key[3]}, {_int(key[4])} turns", **row}
        row.update({m: cells[key].get(m, "") for m in modes})
        rows.append(row)
    return pd.DataFrame(rows)


def to_markdown(df: pd.DataFrame) -> str:
    if df.empty:
        return "_none_"
    cols = list(df.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        out.append("| " + " | ".join(str(r[c]).replace("|", "\\|") for c in cols) + " |")
    return "\n".join(out)


def write_tables(tables: dict[str, pd.DataFrame], results_dir: Path | str) -> Path:
    """tables/<name>.csv (numbers) and tables/<name>.md (as printed)."""
    d = Path(results_dir) / "tables"
    d.mkdir(parents=True, exist_ok=True)
    for name, t in tables.items():
        t.to_csv(d / f"{name}.csv", index=False)
        if name in TABLE_TITLES:
            (d / f"{name}.md").write_text(f"## {TABLE_TITLES[name]}\n\n{to_markdown(display_table(name, t))}\n")
    return d
