"""SM-share partitions: ``mps:N@PCT`` cells and emulated MIG layouts, against ideal SM scaling.

* An MPS client limited by ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` runs on a share of the SMs, as a
  MIG compute slice does (without MIG's own memory, L2 and fault isolation). So ``mps:N@PCT`` cells
  are partitions: each replica's time against the ideal T_full x full SMs / slice SMs, the slice's
  SMs from the percentage (:func:`sharebench.gpus.share_sms`: floored to whole TPCs), never a
  time-sharing loss against N x T_1.
* ``mig-emulated:LAYOUT`` runs one MPS client per instance of a MIG layout, each with its profile's
  SMs and memory. :func:`emulated_table` gives it in the study's form: each profile against the full
  GPU and against the ideal, and beside it the loss real MIG is predicted to add from the 7g
  profile's SM deficit (A100: 98 of 108 SMs, 10.20%; H100/H200: 132 of 132, 0%). Every row says
  ``emulated``: MPS cannot show what MIG's memory and L2 split would cost.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sharebench.analysis.kinds import baseline_mask, table_mask
from sharebench.analysis.statistics import positive_mean_ci, ratio_loss_ci
from sharebench.gpus import GPU_MODELS, models_with_profile, share_sms
from sharebench.modes import KINDS

EMULATED_TABLE = "mig_emulated"  # the table of MPS-emulated MIG layouts (KindSpec.table)

EMULATED_COLUMNS = [
    "engine",
    "backend",
    "device_class",
    "lattice",
    "particles",
    "turns",
    "mode",
    "emulation",
    "mig_profile",
    "instances",
    "sms",
    "full_sms",
    "full_s",
    "ideal_s",
    "emulated_s",
    "emulated_ci_low",
    "emulated_ci_high",
    "vs_full_pct",
    "excess_pct",
    "excess_ci_low",
    "excess_ci_high",
    "efficiency_pct",
    "mig_7g_sms",
    "mig_7g_loss_pred_pct",
    "repeats",
]


def is_sm_share(mode: str) -> bool:
    """``mps:N@PCT``: an MPS thread limit, i.e. an SM partition (:attr:`Mode.sm_share`)."""
    kind, _, arg = str(mode).partition(":")
    spec = KINDS.get(kind)
    return spec is not None and spec.takes_thread_pct and "@" in arg


def thread_pct(mode: str) -> int:
    return int(str(mode).rpartition("@")[2])


def share_slice_sms(mode: str, full_sms: float) -> float:
    """The SMs one client of ``mps:N@PCT`` runs on, from the full GPU's SMs (NaN if unknown)."""
    if not np.isfinite(full_sms) or full_sms <= 0:
        return math.nan
    return float(share_sms(int(full_sms), thread_pct(mode)))


def seven_g_deficit(full_sms: float) -> tuple[float, float]:
    """(SMs of the 7g profile, the loss real MIG adds to an SM-bound run from them) for GPUs of
    ``full_sms`` SMs; NaN where the models of that size disagree or none is known."""
    sevens = {p.sms for m in GPU_MODELS.values() if m.sms == full_sms for p in m.profiles if p.slices == 7}
    if len(sevens) != 1:
        return math.nan, math.nan
    s7 = float(sevens.pop())
    return s7, 100.0 * (full_sms / s7 - 1)


def full_sms_of(exclusive: pd.DataFrame, profiles: pd.Series) -> float:
    """The full GPU's SMs: the exclusive cells' ``sms``, else the one model a profile name belongs to."""
    if len(exclusive) and exclusive["sms"].notna().any():
        return float(exclusive["sms"].median())
    for p in profiles:
        models = models_with_profile(str(p))
        if models and len({m.sms for m in models}) == 1:
            return float(models[0].sms)
    return math.nan


def emulated_table(rows: pd.DataFrame, good: pd.DataFrame, work_keys: list[str]) -> pd.DataFrame:
    """One row per emulated layout and profile: the profile's replicas (mean ``track_s`` per cell,
    mean over the cells) against the full GPU (T_full) and the ideal T_full x full SMs / profile SMs.

    ``rows``: the replica rows of the results; ``good``: the cell summary's good measured cells.
    """
    out: list[dict] = []
    em = good[table_mask(good["mode_kind"], EMULATED_TABLE)]
    if em.empty:
        return pd.DataFrame(out, columns=EMULATED_COLUMNS)
    keys = set(zip(em["sweep_id"], em["cell_id"]))
    reps = rows[[k in keys for k in zip(rows["sweep_id"], rows["cell_id"])]]
    ex = good[baseline_mask(good["mode_kind"])]
    for key, g in reps.groupby([*work_keys, "mode", "mig_profile"], sort=True, dropna=False):
        work = dict(zip(work_keys, key[:-2]))
        mode, profile = key[-2], key[-1]
        base = ex
        for k, v in work.items():
            base = base[base[k] == v]
        t1 = base["mean_track_s"].to_numpy(float)
        per_cell = g.groupby("cell_id")["track_s"].mean().to_numpy(float)
        full = full_sms_of(base, g["mig_profile"])
        sms = float(g["sms"].astype(float).median())
        t1_med = float(np.mean(t1)) if t1.size else math.nan
        e_med, e_lo, e_hi = positive_mean_ci(per_cell)
        ideal = t1_med * full / sms if np.isfinite(full) and sms > 0 else math.nan
        if np.isfinite(ideal):
            exc, lo, hi = ratio_loss_ci(per_cell, t1, factor=full / sms)
        else:
            exc = lo = hi = math.nan
        vs_full = ratio_loss_ci(per_cell, t1)[0] if t1.size else math.nan
        s7, loss7 = seven_g_deficit(full)
        out.append(
            dict(
                **work,
                mode=mode,
                emulation="emulated with MPS (no MIG memory/L2 isolation)",
                mig_profile=profile,
                instances=int(g.groupby("cell_id").size().median()),
                sms=sms,
                full_sms=full,
                full_s=t1_med,
                ideal_s=ideal,
                emulated_s=e_med,
                emulated_ci_low=e_lo,
                emulated_ci_high=e_hi,
                vs_full_pct=vs_full,
                excess_pct=exc,
                excess_ci_low=lo,
                excess_ci_high=hi,
                efficiency_pct=100 * ideal / e_med if np.isfinite(ideal) and e_med > 0 else math.nan,
                mig_7g_sms=s7,
                mig_7g_loss_pred_pct=loss7,
                repeats=int(per_cell.size),
            )
        )
    return pd.DataFrame(out, columns=EMULATED_COLUMNS)
