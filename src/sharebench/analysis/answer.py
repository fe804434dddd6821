"""The Answer: one verdict row per measured mode, and the mode to choose per workload pattern.

Everything here is derived from the study's tables (``sharebench.analysis.tables``) by the rules
below, which the README states in words (docs/readme/sweep.md, "How the Answer is derived"):

* **Work**: each mode is judged at the largest particle count it was measured at (the work closest
  to production); the row names it.
* **throughput gain**: the ``throughput`` table's gain against exclusive, with its 95% interval.
* **worst-job slowdown**: the slowest replica's tracking time against T_1 (one replica alone), the
  mean over the cell's repeats, with the ratio's 95% interval: how much longer the unluckiest job
  of the mode waits than it would alone. Exclusive is 1 by definition; MIG and partition: T_slice / T_1.
* **isolation**: fixed by the mode's kind: none (time-slicing), MPS limits (MPS), hardware (MIG:
  memory, faults, per-instance telemetry), core sets (partition on the CPU).
* **trust**: ``ok`` or the reasons not to: fewer than :data:`MIN_CI_REPEATS` repeats (no interval),
  a CV above :data:`CV_WARN_PCT`, a disturbed cell (a ``disturbed`` flag), excluded cells.
* **batch throughput**: the mode whose gain interval lies wholly above 1 with the highest gain; when
  none does, exclusive (sharing raises no throughput), naming the modes that cost nothing within noise.
* **interactive / latency-sensitive**: among the sharing modes that are fair (fairness ≤
  :data:`FAIRNESS_WARN`) the one with the smallest worst-job slowdown per replica
  (slowdown / N, 1 = a fair share at no cost); an unfair mode is named with its fairness (its jobs
  queue behind each other). None fair: exclusive.
* a choice whose mode is not trusted as measured says so ("caution: …") with the reasons;
* **isolation required**: the measured MIG mode with the highest gain; on the CPU the partition mode;
  otherwise MIG as predicted (``predict_cell``) or, where the device has no MIG, none.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sharebench.analysis.format import fmt_interval, fmt_times
from sharebench.analysis.prediction import predict_cell
from sharebench.analysis.statistics import MIN_CI_REPEATS, ratio_ci
from sharebench.analysis.tables import CV_WARN_PCT, FAIRNESS_WARN, WORK_KEYS, Tables
from sharebench.modes import mode_sort_key

ISOLATION = {
    "exclusive": "whole device (one job)",
    "timeslice": "none: memory, faults and telemetry shared",
    "mps": "MPS limits (thread % and memory limits); a fault stops every client",
    "mig": "hardware: memory, faults, per-instance telemetry",
    "partition": "core sets (cpusets); memory shared",
    "mig-emulated": "none beyond MPS: an emulation of MIG (its SM shares and memory limits; L2, memory bandwidth "
    "and faults shared)",
}
ANSWER_COLUMNS = [
    *WORK_KEYS,
    "mode",
    "kind",
    "replicas",
    "repeats",
    "gain",
    "gain_ci_low",
    "gain_ci_high",
    "slowdown",
    "slowdown_ci_low",
    "slowdown_ci_high",
    "fairness",
    "isolation",
    "trust",
]
CHOICE_COLUMNS = ["pattern", "mode", "reason"]
PATTERNS = ("batch throughput", "interactive / latency-sensitive", "isolation required")


def _good_cells(cells: pd.DataFrame, mode: str, work: dict) -> pd.DataFrame:
    c = cells[(cells["mode"] == mode) & ~cells["warmup"].astype(bool) & ~cells["excluded"].astype(bool)]
    for k, v in work.items():
        c = c[c[k] == v]
    return c


def _trust(mode: str, work: dict, repeats: int, flags: pd.DataFrame) -> str:
    reasons = []
    if repeats < MIN_CI_REPEATS:
        reasons.append(f"{repeats} repeat(s) < {MIN_CI_REPEATS}: no interval")
    f = flags[(flags["mode"].isin([mode, "exclusive"])) & (flags["particles"] == work["particles"])]
    disturbed = f[f["kind"] == "disturbed"]
    if len(disturbed):
        what = sorted(disturbed["detail"].astype(str))[0]
        reasons.append(f"{len(disturbed)} cell(s) of it or its baseline disturbed ({what})")
    if (f["kind"] == "spread").any():
        reasons.append(f"spread: CV > {CV_WARN_PCT:.0f}%")
    n_excl = int(f[(f["mode"] == mode) & f["excluded"].astype(bool)]["cell_id"].nunique())
    if n_excl:
        reasons.append(f"{n_excl} cell(s) excluded")
    return "ok" if not reasons else "; ".join(reasons)


def answer_rows(tables: Tables) -> pd.DataFrame:
    """One verdict row per measured mode (columns :data:`ANSWER_COLUMNS`), in mode order."""
    thr, cells = tables.throughput, tables.cells
    if thr.empty or cells.empty:
        return pd.DataFrame(columns=ANSWER_COLUMNS)
    rows = []
    for mode, g in thr.groupby("mode", sort=False):
        r = g.sort_values("particles").iloc[-1]
        work = {k: r[k] for k in WORK_KEYS}
        kind = str(mode).split(":")[0]
        mine, alone = _good_cells(cells, mode, work), _good_cells(cells, "exclusive", work)
        t1 = alone["mean_track_s"].to_numpy(float)
        if kind == "exclusive":
            slow = (1.0, math.nan, math.nan)
        elif kind in ("timeslice", "mps"):
            slow = ratio_ci(mine["max_track_s"].to_numpy(float), t1)
        else:
            slow = ratio_ci(mine["mean_track_s"].to_numpy(float), t1)
        rows.append(
            dict(
                **work,
                mode=mode,
                kind=kind,
                replicas=int(r["replicas"]),
                repeats=int(r["repeats"]),
                gain=r["gain"],
                gain_ci_low=r["gain_ci_low"],
                gain_ci_high=r["gain_ci_high"],
                slowdown=slow[0],
                slowdown_ci_low=slow[1],
                slowdown_ci_high=slow[2],
                fairness=r["fairness"],
                isolation=ISOLATION.get(kind, "?"),
                trust=_trust(mode, work, int(r["repeats"]), tables.flags),
            )
        )
    out = pd.DataFrame(rows, columns=ANSWER_COLUMNS)
    return out.iloc[sorted(range(len(out)), key=lambda i: mode_sort_key(out["mode"].iloc[i]))].reset_index(drop=True)


def _batch(rows: pd.DataFrame) -> dict[str, str]:
    sharing = rows[rows["kind"] != "exclusive"]
    better = sharing[sharing["gain_ci_low"] > 1].sort_values("gain", ascending=False)
    if len(better):
        b = better.iloc[0]
        return dict(
            mode=b["mode"],
            reason=f"throughput {fmt_times(b['gain'])} exclusive"
            f"{fmt_interval(b['gain_ci_low'], b['gain_ci_high'])}, the highest gain whose interval is above 1",
        )
    free = sharing[(sharing["gain_ci_low"] <= 1) & (sharing["gain_ci_high"] >= 1)]
    worse = sharing[sharing["gain_ci_high"] < 1]
    parts = ["no mode raises throughput beyond noise"]
    if len(free):
        parts.append(
            "same as exclusive within noise: "
            + ", ".join(f"{m} {fmt_times(g)}" for m, g in zip(free["mode"], free["gain"]))
        )
    if len(worse):
        w = worse.sort_values("gain").iloc[0]
        parts.append(f"worst: {w['mode']} {fmt_times(w['gain'])}{fmt_interval(w['gain_ci_low'], w['gain_ci_high'])}")
    return dict(mode="exclusive", reason="; ".join(parts))


def _interactive(rows: pd.DataFrame) -> dict[str, str]:
    sharing = rows[(rows["kind"] != "exclusive") & np.isfinite(rows["slowdown"].astype(float))]
    unfair = sharing[sharing["fairness"] > FAIRNESS_WARN]
    fair = sharing[~(sharing["fairness"] > FAIRNESS_WARN)]
    note = ""
    if len(unfair):
        u = unfair.sort_values("fairness", ascending=False).iloc[0]
        note = (
            f"; not {', '.join(dict.fromkeys(unfair['kind'] + ':*'))}: unfair (fairness up to "
            f"{u['fairness']:.2f} in {u['mode']}: its jobs queue behind each other, the last waits "
            f"{fmt_times(u['slowdown'])} its time alone)"
        )
    if fair.empty:
        return dict(mode="exclusive", reason="no sharing mode measured is fair" + note)
    per = fair["slowdown"].astype(float) / fair["replicas"].astype(float)
    b = fair.loc[per.idxmin()]
    return dict(
        mode=b["mode"],
        reason=f"fair (fairness {b['fairness']:.2f}); every job takes "
        f"{fmt_times(b['slowdown'])} its time alone{fmt_interval(b['slowdown_ci_low'], b['slowdown_ci_high'])} "
        f"with {b['replicas']} sharing" + note,
    )


def _isolation(rows: pd.DataFrame, gpu: str | None) -> dict[str, str]:
    for kind in ("mig", "partition"):
        m = rows[rows["kind"] == kind]
        if len(m):
            b = m.sort_values("gain", ascending=False).iloc[0]
            return dict(
                mode=b["mode"],
                reason=f"{ISOLATION[kind]}; measured: throughput {fmt_times(b['gain'])} exclusive"
                f"{fmt_interval(b['gain_ci_low'], b['gain_ci_high'])}, each job {fmt_times(b['slowdown'])} its time "
                "alone",
            )
    if gpu:
        try:
            p = predict_cell("mig:all-1g", gpu=gpu)
        except Exception:  # noqa: BLE001 - a GPU without MIG: say so below
            p = None
        if p and math.isfinite(float(p.get("predicted_pct", math.nan))):
            return dict(
                mode="mig:all-1g (predicted, not measured)",
                reason=f"{ISOLATION['mig']}; predicted for {gpu}: each job takes "
                f"{fmt_times(1 + float(p['predicted_pct']) / 100)} its time alone ({p.get('basis', '')})",
            )
    return dict(mode="none measured", reason="only MIG gives hardware isolation and none was measured here")


def choices(rows: pd.DataFrame, gpu: str | None = None) -> pd.DataFrame:
    """Per workload pattern (:data:`PATTERNS`) the mode to choose and the reason in numbers."""
    if rows.empty:
        return pd.DataFrame(columns=CHOICE_COLUMNS)
    rows = rows[rows["kind"] != "mig-emulated"]  # a measurement of MIG's compute share, not a mode to deploy
    made = [_batch(rows), _interactive(rows), _isolation(rows, gpu)]
    trust = dict(zip(rows["mode"], rows["trust"]))
    for c in made:  # a choice resting on numbers not to be trusted says so
        if trust.get(c["mode"], "ok") != "ok":
            c["reason"] += f"; caution, not trusted as measured: {trust[c['mode']]}"
    return pd.DataFrame([dict(pattern=p, **c) for p, c in zip(PATTERNS, made)], columns=CHOICE_COLUMNS)
