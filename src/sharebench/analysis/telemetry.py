"""Telemetry per cell: summaries over the tracking window, energy per work, throughput, cost.

* energy per million particle-turns (J/Mpt) = cell energy / (Σ particles × turns / 1e6).
  The energy is taken over the cell's tracking window (first track_start to last
  track_end) from the raw samples when they are found (NVML energy counter
  interpolated at the window edges, else power integrated over it); otherwise the
  whole sampled window (which also holds the replicas' set-up) and the table says so.
* throughput per GPU (particle-turns/s per physical device) and sharing gain come
  from the analysis' ``throughput`` table.
* cost per 10⁹ particle-turns = price per GPU-hour / 3600 / throughput × 10⁹, when a
  price is given: the sweep config key ``price_per_gpu_hour`` (in provenance.json) or
  the environment variable ``SHAREBENCH_PRICE_PER_GPU_HOUR`` (the config wins). On a
  CPU run the price is per device-hour of the CPU.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sharebench.errors import UserError
from sharebench.parse import number_or_nan
from sharebench.results import CELLS_DIR, DCGM_CSV, load_results, read_provenance
from sharebench.results.archive import scratch_root

PRICE_ENV = "SHAREBENCH_PRICE_PER_GPU_HOUR"
COST_UNIT_PT = 1e9  # cost is quoted per 10^9 particle-turns


def find_raw(results_dir: Path, raw: Any, cell_id: str | None = None) -> Path | None:
    """The raw samples CSV of a cell: the recorded path, or the same name under the results folder, or in
    its packed scratch (``cells.tar.xz`` of a committed campaign, sharebench.results.archive)."""
    if not isinstance(raw, str) or not raw:
        return None
    found = find_raw_under(results_dir, raw, cell_id)
    if found is None and not (results_dir / CELLS_DIR).is_dir():
        unpacked = scratch_root(results_dir)
        if unpacked is not None:
            return find_raw_under(unpacked, raw, cell_id)
    return found


def find_raw_under(results_dir: Path, raw: str, cell_id: str | None) -> Path | None:
    p = Path(raw)
    # as recorded, then its trailing parts under this folder (a results folder moved or copied)
    for cand in [p] + [
        results_dir.joinpath(*p.parts[-k:]) for k in range(len(p.parts), 0, -1) if not Path(*p.parts[-k:]).is_absolute()
    ]:
        if cand.is_file():
            return cand
    hits = sorted(results_dir.rglob(p.name))
    if cell_id:
        named = [h for h in hits if cell_id in str(h.relative_to(results_dir))]
        if named:
            return named[0]
    return hits[0] if len(hits) == 1 else None


def window_energy_j(samples: pd.DataFrame, t0: float, t1: float) -> tuple[float, str]:
    """Energy (J) over [t0, t1] from raw samples: the NVML counter interpolated at the edges,
    else the integral of linearly interpolated power. NaN if the samples do not cover it."""
    if samples is None or samples.empty or not (t1 > t0):
        return math.nan, ""
    t = samples["t_epoch_s"].astype(float).to_numpy()
    if t.size < 2 or t[0] > t0 + 1e-3 or t[-1] < t1 - 1e-3:
        return math.nan, ""
    if "energy_mj" in samples and samples["energy_mj"].notna().sum() >= 2:
        ok = samples["energy_mj"].notna().to_numpy()
        e = np.interp([t0, t1], t[ok], samples["energy_mj"].astype(float).to_numpy()[ok])
        return float(e[1] - e[0]) / 1000.0, "nvml_counter"
    if "power_w" in samples and samples["power_w"].notna().sum() >= 2:
        ok = samples["power_w"].notna().to_numpy()
        tt, pp = t[ok], samples["power_w"].astype(float).to_numpy()[ok]
        inner = (tt > t0) & (tt < t1)
        grid = np.concatenate([[t0], tt[inner], [t1]])
        pw = np.interp(grid, tt, pp)
        return float(np.sum((grid[1:] - grid[:-1]) * (pw[1:] + pw[:-1]) / 2.0)), "power_integral"
    return math.nan, ""


# raw sample columns averaged over the tracking window (``win_<name>``); GPM columns also per MIG
# instance (``mig<G>_<name>``, averaged over the instances)
WINDOW_COLUMNS = (
    "gpu_util_pct",
    "mem_util_pct",
    "sm_clock_mhz",
    "power_w",
    "sm_active_pct",
    "sm_occupancy_pct",
    "fp64_active_pct",
    "dram_bw_util_pct",
    "cpu_busy_cores",
    "proc_busy_cores",
)


def window_means(samples: pd.DataFrame, t0: float, t1: float) -> dict[str, float]:
    """Means of the raw samples taken inside [t0, t1] (the tracking window): ``win_<column>``.
    A sample's value covers the interval that ends at it, so samples in (t0, t1] are used."""
    if samples is None or samples.empty or "t_epoch_s" not in samples:
        return {}
    t = samples["t_epoch_s"].astype(float)
    inside = samples[(t > t0) & (t <= t1)]
    out: dict[str, float] = {}
    for col in WINDOW_COLUMNS:
        cols = [c for c in inside.columns if c == col or re.fullmatch(rf"migx?\d+_{col}", c)]
        vals = (
            pd.concat([pd.to_numeric(inside[c], errors="coerce") for c in cols]) if cols else pd.Series([], dtype=float)
        )
        vals = vals[np.isfinite(vals)]
        if len(vals):
            out[f"win_{col}"] = float(vals.mean())
    return out


def cell_telemetry(results_dir: Path | str) -> pd.DataFrame:
    """One row per cell: mode, work, tracking window and its ``tel_*`` summary, plus
    ``track_energy_j`` (energy over the tracking window, see :func:`window_energy_j`)."""
    results_dir = Path(results_dir)
    df = load_results(results_dir)
    tel_cols = [c for c in df.columns if c.startswith("tel_")]
    rows = []
    for (sweep_id, cell_id), g in df.groupby(["sweep_id", "cell_id"], sort=False, dropna=False):
        first = g.iloc[0]
        ok = not ((g["status"] == "failed").any() or (g["cell_status"] == "failed").any())
        starts, ends = g["track_start"].astype(float), g["track_end"].astype(float)
        t0, t1 = float(starts.min()), float(ends.max())
        row = {
            "sweep_id": sweep_id,
            "cell_id": cell_id,
            "mode": first["mode"],
            "mode_kind": first["mode_kind"],
            "device_class": first["device_class"],
            "particles": number_or_nan(first["particles"]),
            "turns": number_or_nan(first["turns"]),
            "replicas": len(g),
            "warmup": bool(first["warmup"]),
            "ok": ok,
            "cores": number_or_nan(g["cores"].astype(float).median()),
            "sms": number_or_nan(g["sms"].astype(float).median()),
            "work_particle_turns": float((g["particles"].astype(float) * g["turns"].astype(float)).sum()),
            "track_window_s": t1 - t0 if math.isfinite(t0) and math.isfinite(t1) else math.nan,
        }
        for c in tel_cols:
            row[c] = first[c]
        energy, src = math.nan, ""
        raw = find_raw(results_dir, first.get("tel_raw_file"), str(cell_id))
        if raw is not None and math.isfinite(row["track_window_s"]):
            try:
                samples = pd.read_csv(raw)
                energy, src = window_energy_j(samples, t0, t1)
                row.update(window_means(samples, t0, t1))
            except (OSError, ValueError, KeyError, pd.errors.EmptyDataError):
                energy, src = math.nan, ""
        if not math.isfinite(energy) and math.isfinite(number_or_nan(row.get("tel_energy_j"))):
            energy, src = number_or_nan(row["tel_energy_j"]), "sampled window (includes set-up)"
        row["track_energy_j"], row["track_energy_source"] = energy, src
        rows.append(row)
    out = pd.DataFrame(rows)
    dcgm_path = results_dir / DCGM_CSV  # sharebench.telemetry.prometheus.attach_to_results
    if not out.empty and dcgm_path.exists():
        dcgm = pd.read_csv(dcgm_path).drop_duplicates("cell_id", keep="last")
        out = out.merge(dcgm, on="cell_id", how="left")
        if "dcgm_energy_j" in out:
            use = ~np.isfinite(out["track_energy_j"].astype(float)) & np.isfinite(out["dcgm_energy_j"].astype(float))
            out.loc[use, "track_energy_j"] = out.loc[use, "dcgm_energy_j"]
            out.loc[use, "track_energy_source"] = "dcgm (Prometheus)"
    if not out.empty:
        out["energy_j_per_mpt"] = out["track_energy_j"] / (out["work_particle_turns"] / 1e6)
    return out


def price_per_hour(results_dir: Path) -> tuple[float | None, str]:
    """(price per GPU-hour, where it came from): sweep config key, else the environment."""
    try:
        prov = read_provenance(results_dir) or {}
    except UserError:
        prov = {}
    cfg = prov.get("config") or {}
    v = cfg.get("price_per_gpu_hour") if isinstance(cfg, dict) else None
    if v is not None and math.isfinite(number_or_nan(v)) and number_or_nan(v) > 0:
        return number_or_nan(v), "sweep config price_per_gpu_hour"
    env = os.environ.get(PRICE_ENV)
    if env:
        if not (math.isfinite(number_or_nan(env)) and number_or_nan(env) > 0):
            raise UserError(f"{PRICE_ENV}={env!r} is not a price; allowed: a positive number (per GPU-hour)")
        return number_or_nan(env), f"environment {PRICE_ENV}"
    return None, ""


def energy_table(cells: pd.DataFrame, throughput: pd.DataFrame | None, price: float | None = None) -> pd.DataFrame:
    """Per mode × particle count: telemetry medians over measured cells, J/Mpt, throughput, gain, cost."""
    cols = [
        "mode",
        "device_class",
        "particles",
        "cells",
        "tel_source",
        "gpu_util_pct",
        "sm_clock_mhz",
        "sm_active_pct",
        "dram_bw_util_pct",
        "power_w",
        "mem_used_bytes_max",
        "cpu_busy_cores",
        "proc_busy_cores",
        "dcgm_sm_active_pct",
        "dcgm_fp64_active_pct",
        "track_energy_j",
        "energy_j_per_mpt",
        "energy_source",
        "throughput_pt_per_s",
        "gain",
        "cost_per_1e9_pt",
    ]
    if cells is None or cells.empty:
        return pd.DataFrame(columns=cols)
    good = cells[(~cells["warmup"].astype(bool)) & cells["ok"].astype(bool)]
    rows = []
    for (mode, dc, particles), g in good.groupby(["mode", "device_class", "particles"], sort=False, dropna=False):

        def med(c: str, g: pd.DataFrame = g) -> float:
            """Median over the cells; the tracking-window value (win_*) where the raw samples had it."""
            stem = c[4:-5] if c.startswith("tel_") and c.endswith("_mean") else None
            if stem and f"win_{stem}" in g:
                win = pd.to_numeric(g[f"win_{stem}"], errors="coerce")
                if win.notna().any():
                    return float(win.median())
            return float(pd.to_numeric(g[c], errors="coerce").median()) if c in g else math.nan

        src = sorted({str(s) for s in g.get("tel_source", []) if isinstance(s, str) and s})
        esrc = sorted({str(s) for s in g["track_energy_source"] if isinstance(s, str) and s})
        thr = gain = math.nan
        if throughput is not None and len(throughput):
            t = throughput[(throughput["mode"] == mode) & (throughput["particles"].astype(float) == float(particles))]
            if "device_class" in t:
                t = t[t["device_class"] == dc]
            if len(t):
                thr, gain = number_or_nan(t["throughput_pt_per_s"].iloc[0]), number_or_nan(t["gain"].iloc[0])
        cost = (price / 3600.0 / thr * COST_UNIT_PT) if price and math.isfinite(thr) and thr > 0 else math.nan
        rows.append(
            {
                "mode": mode,
                "device_class": dc,
                "particles": particles,
                "cells": len(g),
                "tel_source": ", ".join(src) or "none",
                "gpu_util_pct": med("tel_gpu_util_pct_mean"),
                "sm_clock_mhz": med("tel_sm_clock_mhz_mean"),
                "sm_active_pct": med("tel_sm_active_pct_mean"),
                "dram_bw_util_pct": med("tel_dram_bw_util_pct_mean"),
                "power_w": med("tel_power_w_mean"),
                "mem_used_bytes_max": med("tel_mem_used_bytes_max"),
                "cpu_busy_cores": med("tel_cpu_busy_cores_mean"),
                "proc_busy_cores": med("tel_proc_busy_cores_mean"),
                "dcgm_sm_active_pct": 100 * med("dcgm_sm_active_mean"),
                "dcgm_fp64_active_pct": 100 * med("dcgm_fp64_active_mean"),
                "track_energy_j": med("track_energy_j"),
                "energy_j_per_mpt": med("energy_j_per_mpt"),
                "energy_source": ", ".join(esrc),
                "throughput_pt_per_s": thr,
                "gain": gain,
                "cost_per_1e9_pt": cost,
            }
        )
    return pd.DataFrame(rows, columns=cols)
