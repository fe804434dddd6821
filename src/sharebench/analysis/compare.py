"""Differences between results folders, per cell, in pyperf's ``compare_to`` style.

For every (work, mode) that folder A and folder B both measured, the cell time is compared: T_1 for
exclusive, T_N (the span) for time-slicing and MPS, the mean replica time for MIG and partition.

* **change** = mean(B) / mean(A) − 1 in %, with the 95% interval of the ratio (delta method on the log,
  Welch degrees of freedom; ``sharebench.analysis.statistics.ratio_ci``); none below 3 repeats;
* **verdict**: *same within noise* when the interval holds 0, *faster* / *slower* (B against A) when it
  lies wholly below / above 0, *no interval* with fewer than 3 repeats on either side;
* each folder's own loss (time-slicing, MPS, MIG) with its within-run interval, and the
  **between-run spread** of the loss, B − A in percentage points, beside them: two runs of the same
  cell that differ by more than their intervals allow show it here;
* **losses**: whether the two losses' intervals overlap (``statistics.agreement``); disjoint intervals are a
  spread between the runs, never agreement, and ``machines`` says whether the runs were on one GPU or two
  (the cells' device UUIDs): the same cell on two machines with disjoint intervals is a between-machine
  spread.

``ignore`` drops work keys from the match (``backend``: CUDA against OpenCL on the same GPU).

Two calibrated runs (the CPU default, ``--budget``) pick their own particle counts, so their cells
rarely hold the same work. :func:`differing_settings` names the work keys whose values differ, and
``compare_tables(..., per_unit=True)`` matches on everything but the particle count and the turns and
compares time per particle-turn (a cell's time / (particles x turns)): the change then holds what the
size itself changes (launch and set-up amortised differently, caches), which the output says.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from sharebench.analysis.kinds import shared_mask
from sharebench.analysis.statistics import agreement, ratio_ci
from sharebench.analysis.tables import WORK_KEYS, Tables, loss_frames
from sharebench.errors import UserError
from sharebench.modes import mode_sort_key
from sharebench.parse import COMPARE_IGNORABLE

IGNORABLE = COMPARE_IGNORABLE  # sharebench.parse: `compare --ignore` is checked before this module loads
UNIT_KEYS = ("particles", "turns")  # the work of a replica: compared per particle-turn when they differ
PER_UNIT_NOTE = (
    "time per particle-turn: a cell's time / (particles x turns); the change also holds what the size itself "
    "changes (set-up and launch amortised differently, caches)"
)
COMPARE_COLUMNS = [
    "particles",
    "turns",
    "mode",
    "repeats_a",
    "repeats_b",
    "time_a_s",
    "time_b_s",
    "change_pct",
    "change_ci_low",
    "change_ci_high",
    "verdict",
    "loss_a_pct",
    "loss_a_ci",
    "loss_b_pct",
    "loss_b_ci",
    "loss_spread_pts",
    "losses",
    "machines",
    "particles_b",
    "turns_b",
    "per",
]


def _times(cells: pd.DataFrame) -> pd.DataFrame:
    good = cells[~cells["warmup"].astype(bool) & ~cells["excluded"].astype(bool)].copy()
    good["time_s"] = np.where(shared_mask(good["mode_kind"].astype(str)), good["span_s"], good["mean_track_s"])
    return good


def _losses(tables: Tables, keys: list[str]) -> dict[tuple, tuple[float, float, float]]:
    """Each (work, mode)'s loss and interval; a key that more than one size shares (per unit) has none."""
    out: dict[tuple, tuple[float, float, float]] = {}
    seen: set[tuple] = set()
    for t in loss_frames(tables):
        for _, r in t.iterrows():
            key = tuple(r[k] for k in keys) + (r["mode"],)
            out[key] = (math.nan,) * 3 if key in seen else (r["loss_pct"], r["loss_ci_low"], r["loss_ci_high"])
            seen.add(key)
    return out


def differing_settings(a: Tables, b: Tables, ignore: tuple[str, ...] = ()) -> list[str]:
    """The work keys whose values differ between A's and B's measured cells, each as
    ``"particles: 1,700 in A, 1,900 in B"``."""
    ta, tb = _times(a.cells), _times(b.cells)
    out = []
    for k in (k for k in WORK_KEYS if k not in ignore):
        va, vb = set(ta[k].dropna()), set(tb[k].dropna())
        if va != vb:
            out.append(f"{k}: {_values(va)} in A, {_values(vb)} in B")
    return out


def _values(values: set) -> str:
    if not values:
        return "none"
    if all(isinstance(v, (int, float, np.number)) for v in values):
        return "/".join(f"{float(v):,.0f}" for v in sorted(values))
    return "/".join(sorted(map(str, values)))


def verdict(lo: float, hi: float) -> str:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "no interval (< 3 repeats)"
    if lo <= 0 <= hi:
        return "same within noise"
    return "faster" if hi < 0 else "slower"


def _ci(lo: float, hi: float) -> str:
    return f"[{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) and math.isfinite(hi) else ""


def compare_tables(a: Tables, b: Tables, ignore: tuple[str, ...] = (), *, per_unit: bool = False) -> pd.DataFrame:
    """One row per (work, mode) measured in both (columns :data:`COMPARE_COLUMNS`); B against A.
    ``per_unit``: match on all but the particle count and turns, and compare time per particle-turn
    (``particles``/``turns``: A's, ``particles_b``/``turns_b``: B's)."""
    bad = [k for k in ignore if k not in IGNORABLE]
    if bad:
        raise UserError(f"bad --ignore {','.join(bad)!r}; allowed: {', '.join(IGNORABLE)}")
    keys = [k for k in WORK_KEYS if k not in ignore and not (per_unit and k in UNIT_KEYS)]
    ta, tb = _times(a.cells), _times(b.cells)
    if per_unit:
        for t in (ta, tb):
            t["time_s"] = t["time_s"] / (t["particles"].astype(float) * t["turns"].astype(float))
    la, lb = _losses(a, keys), _losses(b, keys)
    rows = []
    groups_b = dict(list(tb.groupby(keys + ["mode"], sort=False, dropna=False)))
    for key, ga in ta.groupby(keys + ["mode"], sort=False, dropna=False):
        gb = groups_b.get(key)
        if gb is None:
            continue
        xa, xb = ga["time_s"].to_numpy(float), gb["time_s"].to_numpy(float)
        r, lo, hi = ratio_ci(xb, xa)
        loss_a = la.get(key, (math.nan,) * 3)
        loss_b = lb.get(key, (math.nan,) * 3)
        both = agreement([loss_a[1:], loss_b[1:]]) if math.isfinite(loss_a[0]) and math.isfinite(loss_b[0]) else ""
        rows.append(
            dict(
                particles=_one(ga["particles"]),
                turns=_one(ga["turns"]),
                mode=key[-1],
                repeats_a=len(xa),
                repeats_b=len(xb),
                time_a_s=float(np.mean(xa)),
                time_b_s=float(np.mean(xb)),
                change_pct=(r - 1) * 100,
                change_ci_low=(lo - 1) * 100,
                change_ci_high=(hi - 1) * 100,
                verdict=verdict((lo - 1) * 100, (hi - 1) * 100),
                loss_a_pct=loss_a[0],
                loss_a_ci=_ci(*loss_a[1:]),
                loss_b_pct=loss_b[0],
                loss_b_ci=_ci(*loss_b[1:]),
                loss_spread_pts=loss_b[0] - loss_a[0],
                losses=both,
                machines=machines(ga, gb),
                particles_b=_one(gb["particles"]),
                turns_b=_one(gb["turns"]),
                per="particle-turn" if per_unit else "cell",
            )
        )
    out = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
    order = sorted(range(len(out)), key=lambda i: (mode_sort_key(out["mode"].iloc[i]), out["particles"].iloc[i]))
    return out.iloc[order].reset_index(drop=True)


def machines(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """``one machine`` when A's and B's cells ran on the same GPUs, ``two machines`` when on others, '' when
    a side's devices are not recorded."""
    da, db = ({d.strip() for v in g["devices"].dropna().astype(str) for d in v.split(",") if d.strip()} for g in (a, b))
    if not da or not db:
        return ""
    return "one machine" if da == db else "two machines"


LOSSES = {"overlap": "overlap", "disjoint": "disjoint: a spread, not agreement", "no interval": "no interval", "": ""}


def _one(values: pd.Series) -> float:
    """The one value of a group (NaN where the group holds several: sizes pooled per unit)."""
    u = values.dropna().unique()
    return float(u[0]) if len(u) == 1 else math.nan


def display_compare(t: pd.DataFrame, labels: tuple[str, str]) -> pd.DataFrame:
    """The comparison as printed: times, change with its interval, verdict, the losses and their spread."""
    a, b = labels

    def pct(v: float) -> str:
        return f"{v:+.2f}" if math.isfinite(v) else ""

    def size(v: float) -> str:
        return f"{int(v):,}" if math.isfinite(v) else "several"

    def seconds(v: float, per: str) -> str:
        return f"{v:.3f}" if per == "cell" else f"{v:.4g}"

    return pd.DataFrame(
        [
            {
                "particles": size(r.particles) if r.per == "cell" else f"{size(r.particles)} / {size(r.particles_b)}",
                "mode": r["mode"],
                f"{a} [s{'' if r.per == 'cell' else '/' + r.per}]": seconds(r.time_a_s, r.per),
                f"{b} [s{'' if r.per == 'cell' else '/' + r.per}]": seconds(r.time_b_s, r.per),
                "change %": pct(r.change_pct),
                "95% CI": _ci(r.change_ci_low, r.change_ci_high),
                "verdict": r.verdict,
                f"loss {a} %": " ".join(x for x in (pct(r.loss_a_pct), r.loss_a_ci) if x),
                f"loss {b} %": " ".join(x for x in (pct(r.loss_b_pct), r.loss_b_ci) if x),
                "loss spread [pts]": pct(r.loss_spread_pts),
                "loss intervals": LOSSES.get(str(r.losses), str(r.losses))
                + (f" ({r.machines})" if r.losses and r.machines else ""),
            }
            for _, r in t.iterrows()
        ]
    )
