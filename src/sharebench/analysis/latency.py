"""Latency of bursts and requests per cell and pattern (``tables/latency.csv``), and users per GPU at a target.

Input: per-burst rows (:data:`BURST_COLUMNS`): the cell run (``cell_id``: one repeat of a mode), its
``mode`` and ``repeat``, the ``replica``, its ``role`` (``victim``: replica 0, the one measured;
``neighbour``: the others), its ``pattern`` label, and the burst's ``arrival``, ``start``, ``end``
(epoch s) and ``units``. A burst's latency is end - arrival (a request's includes its time queued).

One row of :func:`latency_table` per (mode, pattern, role, beside), where ``beside`` is the pattern of
the cell's replicas of the other role ("" alone); :data:`LATENCY_COLUMNS`:

* ``latency_pXX_s`` (50, 95, 99) with ``_lo_s``/``_hi_s``; ``slowdown_pXX`` with ``_lo``/``_hi``: the
  same percentile over the bursts of the same pattern alone (the ``exclusive`` cells' victim);
* ``busy_fraction``: the share of its window (first arrival to last end) a replica of the role had work
  in flight, mean over replicas and repeats; ``cell_busy_fraction``: the share of the cell's window in
  which any replica had (the union of every replica's bursts), mean over repeats: the busy fraction
  the pattern achieved on the device as the harness sees it (no device counter);
* ``throughput_units_per_s``: units over the window per replica, mean; ``throughput_cost`` with
  ``_lo``/``_hi``: 1 - that over the same pattern's alone, Student-t between repeats (the neighbour's cost
  of sharing, and the victim's).

Percentiles are numpy's (linear interpolation between order statistics). Intervals (95%), by
``ci_method``:

* ``hierarchical`` (default): the percentile of the pooled bursts; its interval a two-level percentile
  bootstrap (:func:`hierarchical_percentiles`, 2000 resamples, seeded): the repeats (cell runs) resampled
  with replacement, then the bursts within each repeat drawn; the slowdown's interval the ratio of the
  two sides' resamples. It carries the spread between runs (a baseline measured in a slow state in one
  repeat widens it) as well as within; with one repeat it is the ``bursts`` interval;
* ``bursts``: the percentile of the pooled bursts; its interval a percentile bootstrap
  (``scipy.stats.bootstrap``, 2000 resamples, seeded) that resamples bursts within each repeat (each
  cell run a sample of its own), and the slowdown's interval the same over both sides at once. Bursts of
  one run are not independent (a queue carries over from one request to the next), so this interval
  can be narrower than the spread between runs;
* ``repeats``: the mean over repeats of each repeat's percentile, with its Student-t interval on the
  log scale (``statistics.positive_mean_ci``: a latency is positive) and the slowdown's delta-method
  ratio interval (``statistics.ratio_ci``): honest about run-to-run spread, none below 3 repeats.

Fewer than :data:`MIN_CI_BURSTS` bursts on a side give no interval (NaN).

:func:`below_one_flags`: a ``below-one`` flag for each measured replica whose p95 slowdown interval lies
wholly below 1 (sharing faster than alone: the baseline, not the sharing, is off), naming the alone p95
of each repeat.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from sharebench.analysis.flags import Flag
from sharebench.analysis.kinds import baseline_mask
from sharebench.analysis.statistics import CONFIDENCE, positive_mean_ci, ratio_ci
from sharebench.errors import UserError
from sharebench.modes import is_baseline, mode_sort_key, parse_mode
from sharebench.parse import check_slo as check_slo  # kept there, light: the CLI checks --slo before this loads
from sharebench.patterns import DEFAULT_SLO  # kept there, light: the CLI shows it in its help

BURST_COLUMNS = ("cell_id", "mode", "replica", "role", "pattern", "repeat", "arrival", "start", "end", "units")
ROLES = ("victim", "neighbour")
PERCENTILES = (50, 95, 99)
CI_METHODS = ("hierarchical", "bursts", "repeats")
DEFAULT_CI_METHOD = "hierarchical"
RESAMPLE_BATCH = 250  # hierarchical resamples drawn at once (memory: batch x repeats x bursts per repeat)
MIN_CI_BURSTS = 20
N_RESAMPLES = 2000
KEY_COLUMNS = ["mode", "pattern", "role", "beside"]
LATENCY_COLUMNS = [
    *KEY_COLUMNS,
    "replicas",
    "repeats",
    "bursts",
    *[f"latency_p{p}{s}" for p in PERCENTILES for s in ("_s", "_lo_s", "_hi_s")],
    *[f"slowdown_p{p}{s}" for p in PERCENTILES for s in ("", "_lo", "_hi")],
    "busy_fraction",
    "cell_busy_fraction",
    "throughput_units_per_s",
    "throughput_cost",
    "throughput_cost_lo",
    "throughput_cost_hi",
    "ci_method",
]


def burst_frame(rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """The rows as a DataFrame with :data:`BURST_COLUMNS` and ``latency_s``, ``beside`` and ``replicas``."""
    df = rows.copy() if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    if df.empty and not len(df.columns):  # no rows at all
        df = pd.DataFrame(columns=list(BURST_COLUMNS))
    missing = [c for c in BURST_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"burst rows lack {', '.join(missing)}")
    df = df[df["end"].notna() & df["arrival"].notna()].copy()
    df["latency_s"] = df["end"].astype(float) - df["arrival"].astype(float)
    beside = {}
    for cell, g in df.groupby("cell_id", sort=False):
        for role in ROLES:
            other = sorted(set(g.loc[g["role"] != role, "pattern"]))
            beside[(cell, role)] = "+".join(other)
    df["beside"] = [beside[(c, r)] for c, r in zip(df["cell_id"], df["role"])]
    df["replicas"] = df.groupby("cell_id")["replica"].transform("nunique")
    return df


def samples(g: pd.DataFrame) -> list[np.ndarray]:
    """Latencies of a group, one array per cell run (repeat)."""
    return [np.asarray(s["latency_s"], float) for _, s in g.groupby("cell_id", sort=True)]


def pooled_percentiles(*runs: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.percentile(np.concatenate(runs, axis=axis), PERCENTILES, axis=axis)


def bootstrap_ci(
    runs: list[np.ndarray], seed: int, statistic: Any, n_resamples: int = N_RESAMPLES
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile-bootstrap 95% bounds of ``statistic(*runs)``, resampling within each run."""
    n = len(PERCENTILES)
    if sum(r.size for r in runs) < MIN_CI_BURSTS or any(r.size < 2 for r in runs):
        return np.full(n, math.nan), np.full(n, math.nan)
    res = stats.bootstrap(
        tuple(runs),
        statistic,
        vectorized=True,
        method="percentile",
        n_resamples=n_resamples,
        batch=100,
        confidence_level=CONFIDENCE,
        rng=np.random.default_rng(seed),
    )
    return np.asarray(res.confidence_interval.low, float), np.asarray(res.confidence_interval.high, float)


def latency_stats(
    runs: list[np.ndarray], alone: list[np.ndarray], method: str, seed: int, n_resamples: int = N_RESAMPLES
) -> dict[str, float]:
    """The latency and slowdown columns of one group against its alone runs."""
    out: dict[str, float] = {}
    if method == "repeats":
        mine = np.array([np.percentile(r, PERCENTILES) for r in runs if r.size])
        base = np.array([np.percentile(r, PERCENTILES) for r in alone if r.size]).reshape(-1, len(PERCENTILES))
        for k, p in enumerate(PERCENTILES):
            latency = positive_mean_ci(mine[:, k])
            out[f"latency_p{p}_s"], out[f"latency_p{p}_lo_s"], out[f"latency_p{p}_hi_s"] = latency
            s = ratio_ci(mine[:, k], base[:, k]) if base.size else (math.nan,) * 3
            out[f"slowdown_p{p}"], out[f"slowdown_p{p}_lo"], out[f"slowdown_p{p}_hi"] = s
        return out
    if method == "hierarchical":
        return hierarchical_stats(runs, alone, seed, n_resamples)
    point = pooled_percentiles(*runs)
    lo, hi = bootstrap_ci(runs, seed, pooled_percentiles, n_resamples)
    base_point = pooled_percentiles(*alone) if alone else np.full(len(PERCENTILES), math.nan)
    k_runs = len(runs)

    def ratio(*both: np.ndarray, axis: int = -1) -> np.ndarray:
        return pooled_percentiles(*both[:k_runs], axis=axis) / pooled_percentiles(*both[k_runs:], axis=axis)

    slo_lo, slo_hi = (
        bootstrap_ci([*runs, *alone], seed + 1, ratio, n_resamples) if alone else (lo * math.nan, hi * math.nan)
    )
    if alone and sum(a.size for a in alone) < MIN_CI_BURSTS:
        slo_lo, slo_hi = slo_lo * math.nan, slo_hi * math.nan
    for k, p in enumerate(PERCENTILES):
        out[f"latency_p{p}_s"], out[f"latency_p{p}_lo_s"], out[f"latency_p{p}_hi_s"] = point[k], lo[k], hi[k]
        slowdown = point[k] / base_point[k] if base_point[k] > 0 else math.nan
        out[f"slowdown_p{p}"], out[f"slowdown_p{p}_lo"], out[f"slowdown_p{p}_hi"] = slowdown, slo_lo[k], slo_hi[k]
    return {k: float(v) for k, v in out.items()}


def hierarchical_percentiles(runs: list[np.ndarray], rng: np.random.Generator, n_resamples: int) -> np.ndarray:
    """:data:`PERCENTILES` of ``n_resamples`` two-level resamples of ``runs`` (one array per repeat), shape
    (n_resamples, len(PERCENTILES)): each resample draws as many repeats as there are, with replacement,
    and from each drawn repeat as many bursts as it has, with replacement; the percentiles of the pooled
    draw, numpy's linear interpolation (vectorised: repeats padded with +inf, sorted, indexed by rank)."""
    sizes = np.array([r.size for r in runs])
    k, width = len(runs), int(sizes.max())
    padded = np.full((k, width), np.inf)
    for i, r in enumerate(runs):
        padded[i, : r.size] = r
    q = np.asarray(PERCENTILES, float) / 100
    out = []
    for start in range(0, n_resamples, RESAMPLE_BATCH):
        b = min(RESAMPLE_BATCH, n_resamples - start)
        pick = rng.integers(0, k, (b, k))  # the repeats drawn
        n = sizes[pick]  # (b, k): bursts of each drawn repeat
        idx = (rng.random((b, k, width)) * n[..., None]).astype(int)  # bursts drawn within it
        vals = np.where(np.arange(width) < n[..., None], padded[pick[..., None], idx], np.inf).reshape(b, -1)
        vals.sort(axis=1)
        total = n.sum(axis=1)[:, None]
        pos = q[None, :] * (total - 1)
        low = np.floor(pos).astype(int)
        high = np.minimum(low + 1, total - 1)
        a, c = np.take_along_axis(vals, low, 1), np.take_along_axis(vals, high, 1)
        out.append(a + (pos - low) * (c - a))
    return np.concatenate(out)


def hierarchical_stats(
    runs: list[np.ndarray], alone: list[np.ndarray], seed: int, n_resamples: int
) -> dict[str, float]:
    """The latency and slowdown columns with ``hierarchical`` intervals (repeats, then bursts resampled)."""
    runs, alone = [r for r in runs if r.size], [a for a in alone if a.size]
    n = len(PERCENTILES)
    nan = np.full(n, math.nan)
    point = pooled_percentiles(*runs) if runs else nan
    base = pooled_percentiles(*alone) if alone else nan

    def enough(side: list[np.ndarray]) -> bool:
        return bool(side) and sum(r.size for r in side) >= MIN_CI_BURSTS and all(r.size >= 2 for r in side)

    mine = hierarchical_percentiles(runs, np.random.default_rng(seed), n_resamples) if enough(runs) else None
    ref = hierarchical_percentiles(alone, np.random.default_rng(seed + 1), n_resamples) if enough(alone) else None
    tail = [(1 - CONFIDENCE) / 2 * 100, (1 + CONFIDENCE) / 2 * 100]
    lo, hi = np.percentile(mine, tail, axis=0) if mine is not None else (nan, nan)
    s_lo, s_hi = np.percentile(mine / ref, tail, axis=0) if mine is not None and ref is not None else (nan, nan)
    out: dict[str, float] = {}
    for k, p in enumerate(PERCENTILES):
        out[f"latency_p{p}_s"], out[f"latency_p{p}_lo_s"], out[f"latency_p{p}_hi_s"] = point[k], lo[k], hi[k]
        slowdown = point[k] / base[k] if base[k] > 0 else math.nan
        out[f"slowdown_p{p}"], out[f"slowdown_p{p}_lo"], out[f"slowdown_p{p}_hi"] = slowdown, s_lo[k], s_hi[k]
    return {k: float(v) for k, v in out.items()}


def busy_union_s(intervals: Sequence[tuple[float, float]]) -> float:
    """Seconds covered by the union of ``(start, end)`` intervals."""
    total, cur_s, cur_e = 0.0, -math.inf, -math.inf
    for s, e in sorted(intervals):
        if s > cur_e:
            total += max(0.0, cur_e - cur_s) if cur_e > -math.inf else 0.0
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (cur_e - cur_s if cur_e > -math.inf else 0.0)


def replica_runs(g: pd.DataFrame) -> pd.DataFrame:
    """One row per (cell run, replica): its window, busy fraction and throughput (units/s)."""
    rows = []
    for (cell, replica), s in g.groupby(["cell_id", "replica"], sort=True):
        window = float(s["end"].max() - s["arrival"].min())
        busy = float((s["end"] - s["start"]).sum())
        rows.append(
            dict(
                cell_id=cell,
                replica=replica,
                busy_fraction=busy / window if window > 0 else math.nan,
                throughput=float(s["units"].sum()) / window if window > 0 else math.nan,
            )
        )
    return pd.DataFrame(rows)


def cell_busy(df: pd.DataFrame) -> dict[Any, float]:
    """The union busy fraction of each cell run, over every replica of it."""
    out = {}
    for cell, s in df.groupby("cell_id", sort=False):
        window = float(s["end"].max() - s["arrival"].min())
        union = busy_union_s(list(zip(s["start"].astype(float), s["end"].astype(float))))
        out[cell] = union / window if window > 0 else math.nan
    return out


def per_run_throughput(g: pd.DataFrame) -> np.ndarray:
    """Mean per-replica throughput of each cell run of a group."""
    runs = replica_runs(g)
    return runs.groupby("cell_id")["throughput"].mean().to_numpy(float) if len(runs) else np.array([])


def latency_table(
    rows: pd.DataFrame | Iterable[Mapping[str, Any]],
    *,
    method: str = DEFAULT_CI_METHOD,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> pd.DataFrame:
    """The ``latency.csv`` rows (:data:`LATENCY_COLUMNS`) of per-burst rows, sorted by mode, pattern, role;
    ``seed`` and ``n_resamples`` are the bootstrap's (methods ``hierarchical`` and ``bursts``)."""
    if method not in CI_METHODS:
        raise UserError(f"bad latency interval method {method!r}; allowed: {', '.join(CI_METHODS)}")
    df = burst_frame(rows)
    if df.empty:
        return pd.DataFrame(columns=LATENCY_COLUMNS)
    busy_of_cell = cell_busy(df)
    alone_all = df[baseline_mask(df["mode"]) & (df["role"] == "victim")]
    out = []
    for key, g in df.groupby(KEY_COLUMNS, sort=False):
        mode, pattern, role, beside = key
        alone = alone_all[alone_all["pattern"] == pattern]
        runs = replica_runs(g)
        mine_thr, alone_thr = per_run_throughput(g), per_run_throughput(alone)
        ratio, r_lo, r_hi = ratio_ci(mine_thr, alone_thr) if len(alone) else (math.nan,) * 3
        row: dict[str, Any] = dict(
            mode=mode,
            pattern=pattern,
            role=role,
            beside=beside,
            replicas=int(g["replicas"].max()),
            repeats=int(g["cell_id"].nunique()),
            bursts=len(g),
            busy_fraction=float(runs["busy_fraction"].mean()),
            cell_busy_fraction=float(np.nanmean([busy_of_cell[c] for c in g["cell_id"].unique()])),
            throughput_units_per_s=float(np.mean(mine_thr)),
            throughput_cost=1 - ratio,
            throughput_cost_lo=1 - r_hi,
            throughput_cost_hi=1 - r_lo,
            ci_method=method,
        )
        row.update(latency_stats(samples(g), samples(alone), method, seed, n_resamples))
        out.append(row)
    table = pd.DataFrame(out, columns=LATENCY_COLUMNS)
    order = sorted(range(len(table)), key=lambda i: (mode_sort_key(table["mode"][i]), *table.loc[i, KEY_COLUMNS[1:]]))
    return table.iloc[order].reset_index(drop=True)


def below_one(row: Mapping[str, Any]) -> bool:
    """A measured replica's p95 slowdown whose whole interval lies below 1 (the row of a sharing mode)."""
    hi = float(row.get("slowdown_p95_hi", math.nan))
    return row.get("role") == "victim" and not is_baseline(str(row.get("mode"))) and hi < 1


def alone_p95_text(bursts: pd.DataFrame, pattern: str) -> str:
    """The alone (baseline victim) p95 of each repeat of ``pattern``: ``32.0, 21.0, 24.1 ms``."""
    alone = bursts[baseline_mask(bursts["mode"]) & (bursts["role"] == "victim") & (bursts["pattern"] == pattern)]
    per = [float(np.percentile(r, 95)) * 1e3 for r in samples(alone) if r.size]
    return ", ".join(f"{v:.1f}" for v in per) + " ms" if per else "none"


def below_one_flags(
    table: pd.DataFrame, bursts: pd.DataFrame | Iterable[Mapping[str, Any]], particles: Mapping[str, Any] | None = None
) -> list[Flag]:
    """A ``below-one`` flag per :func:`below_one` row of the latency ``table``, built from ``bursts`` (its
    burst rows), naming the alone p95 of each repeat; ``particles``: mode -> the work of its cells."""
    rows = [r for r in table.to_dict("records") if below_one(r)] if len(table) else []
    if not rows:
        return []
    df = burst_frame(bursts)
    out = []
    for r in rows:
        other = r["beside"] if isinstance(r["beside"], str) and r["beside"] != r["pattern"] else ""
        beside = f" beside {other}" if other else ""
        detail = (
            f"{r['mode']} {r['pattern']}{beside}: p95 slowdown {r['slowdown_p95']:.2f}x "
            f"[{r['slowdown_p95_lo']:.2f}, {r['slowdown_p95_hi']:.2f}] below 1; alone p95 per repeat "
            f"{alone_p95_text(df, str(r['pattern']))}"
        )
        text = (
            f"{detail}: faster shared than alone, so the baseline alone was measured in a slower state (too few "
            "alone bursts, per-process kernel choice, host noise); read it as no measurable slowdown"
        )
        work = (particles or {}).get(str(r["mode"]), math.nan)
        out.append(Flag("group", str(r["mode"]), work, "", text, False, "below-one", detail))
    return out


# ----------------------------------------------------------------- users per GPU at a target


@dataclass(frozen=True)
class UsersAtTarget:
    """The largest measured number of users of ``pattern`` per GPU under ``family`` whose p95 slowdown
    stays within ``slo`` (None when even the smallest measured N fails, or nothing was measured)."""

    pattern: str
    family: str  # the mode without its count: timeslice, timeslice/long, mps, mps@25, mig, mig-emulated
    users: int | None
    slowdown_p95: float  # at ``users`` (or at the smallest N, when that fails); NaN when none
    measured: tuple[int, ...]  # the N values measured, ascending
    reason: str


def mode_family(mode: str) -> str:
    """``timeslice:4/long`` -> ``timeslice/long``, ``mps:4@25`` -> ``mps@25``, ``mig-emulated:7x1g`` -> ``mig-emulated``."""
    m = parse_mode(mode)
    if m.interval:
        return f"{m.kind}/{m.interval}"
    if m.thread_pct is not None:
        return f"{m.kind}@{m.thread_pct}"
    return m.kind


def users_at_target(table: pd.DataFrame, slo: float = DEFAULT_SLO) -> list[UsersAtTarget]:
    """Per pattern and mode family, from the cells where every replica follows the pattern (victim rows,
    ``beside`` empty or the same pattern): the largest N such that it and every smaller measured N keep
    the p95 slowdown within ``slo``. Never extrapolated: N is one of the measured replica counts."""
    target = check_slo(slo)
    if table is None or table.empty:
        return [UsersAtTarget("", "", None, math.nan, (), "nothing measured: no latency rows")]
    homogeneous = table[
        (table["role"] == "victim")
        & ~baseline_mask(table["mode"])
        & ((table["beside"].fillna("") == "") | (table["beside"] == table["pattern"]))
    ]
    out = []
    for pattern in sorted(set(table.loc[table["role"] == "victim", "pattern"])):
        rows = homogeneous[homogeneous["pattern"] == pattern]
        if rows.empty:
            out.append(UsersAtTarget(pattern, "", None, math.nan, (), f"no sharing cell of {pattern} alone measured"))
            continue
        families = sorted({mode_family(m) for m in rows["mode"]}, key=mode_sort_key)
        for family in families:
            fam = rows[[mode_family(m) == family for m in rows["mode"]]].sort_values("replicas")
            out.append(family_users(pattern, family, fam, target))
    return out


def family_users(pattern: str, family: str, rows: pd.DataFrame, target: float) -> UsersAtTarget:
    measured = tuple(int(n) for n in rows["replicas"])
    best: tuple[int, float] | None = None
    for mode, n, slow in zip(rows["mode"], rows["replicas"], rows["slowdown_p95"]):
        if not math.isfinite(slow):
            reason = f"{mode}: no p95 slowdown (no exclusive cell of {pattern} to compare with)"
            return UsersAtTarget(pattern, family, best[0] if best else None, math.nan, measured, reason)
        if slow > target:
            if best is None:
                reason = f"{mode} already exceeds the target: p95 slowdown {slow:.2f}x > {target:g}x"
                return UsersAtTarget(pattern, family, None, float(slow), measured, reason)
            reason = f"{best[0]} users within {target:g}x; {mode} exceeds it (p95 slowdown {slow:.2f}x)"
            return UsersAtTarget(pattern, family, best[0], best[1], measured, reason)
        best = (int(n), float(slow))
    assert best is not None
    reason = f"within {target:g}x at every measured N (up to {best[0]}); more users not measured"
    return UsersAtTarget(pattern, family, best[0], best[1], measured, reason)


USERS_CSV = "users_per_gpu.csv"
USERS_COLUMNS = ["pattern", "family", "slo", "users", "slowdown_p95", "measured", "reason"]


def users_table(table: pd.DataFrame, slo: float = DEFAULT_SLO) -> pd.DataFrame:
    """:func:`users_at_target` as a table (:data:`USERS_COLUMNS`; ``measured``: the N values, "1,2,4";
    ``users`` NaN where none is within the target); no rows when no latency was measured."""
    if table is None or table.empty:
        return pd.DataFrame(columns=USERS_COLUMNS)
    rows = [
        dict(
            pattern=u.pattern,
            family=u.family,
            slo=check_slo(slo),
            users=u.users if u.users is not None else math.nan,
            slowdown_p95=u.slowdown_p95,
            measured=",".join(str(n) for n in u.measured),
            reason=u.reason,
        )
        for u in users_at_target(table, slo)
    ]
    return pd.DataFrame(rows, columns=USERS_COLUMNS)


def sweep_slo(sweeps: Sequence[Mapping[str, Any]]) -> float:
    """The target the last sweep of a folder was run with (``sweep.json``'s config ``slo``), else the default."""
    for sweep in reversed(list(sweeps)):
        value = (sweep.get("config") or {}).get("slo")
        if value is not None:
            return check_slo(value)
    return DEFAULT_SLO
