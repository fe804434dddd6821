"""Latency of bursts and requests per cell and pattern (``tables/latency.csv``), every user's verdict against
the target, and users per GPU at that target (``tables/users_per_gpu.csv``).

Input: per-burst rows (:data:`BURST_COLUMNS`): the cell run (``cell_id``: one repeat of a mode), its
``mode`` and ``repeat``, the ``replica``, its ``role`` (``victim``: replica 0, the one that follows
``--pattern``; ``neighbour``: the others), its ``pattern`` label, and the burst's ``arrival``, ``start``,
``end`` (epoch s) and ``units``. A burst's latency is end - arrival (a request's includes its time queued).

One row of :func:`latency_table` per (mode, pattern, role, beside), where ``beside`` is the pattern of
the cell's replicas of the other role ("" alone); :data:`LATENCY_COLUMNS`:

* ``latency_pXX_s`` (50, 95, 99) with ``_lo_s``/``_hi_s``; ``slowdown_pXX`` with ``_lo``/``_hi``: the
  same percentile over the bursts of the same pattern alone (the ``exclusive`` cells' victim). These are
  the bursts of the row's role: a victim row is replica 0's;
* ``busy_fraction``: the share of its window (first arrival to last end) a replica of the role had work
  in flight, mean over replicas and repeats; ``cell_busy_fraction``: the share of the cell's window in
  which any replica had (the union of every replica's bursts), mean over repeats: the busy fraction
  the pattern achieved on the device as the harness sees it (no device counter);
* ``throughput_units_per_s``: units over the window per replica, mean; ``throughput_cost`` with
  ``_lo``/``_hi``: 1 - that over the same pattern's alone, Student-t between repeats (the neighbour's cost
  of sharing, and the victim's);
* the **verdict** (:data:`VERDICT_COLUMNS`, on the victim rows of sharing modes; empty elsewhere): the
  cell decided by :func:`sharebench.analysis.tail.decide` against ``slo``, **every user counted**: the
  users are all the replicas that follow the victim's pattern (a neighbour of another pattern is the
  aggressor and stays out), each pooled over the repeats; ``worst_p95_slowdown`` the worst user's p95
  slowdown with its interval, ``pooled_p95_slowdown`` the p95 over every user's bursts with its interval,
  ``verdict`` within / above / undecided, ``below_one`` a user faster shared than alone beyond doubt
  (the baseline, not the sharing, is off), ``reason`` why, in words; ``slo`` the target decided against.

Percentiles are numpy's (linear interpolation between order statistics). Intervals (95%), by
``ci_method``:

* ``order`` (default): distribution-free: the percentile's interval between two order statistics of the
  pooled bursts whose ranks the binomial gives (:func:`sharebench.analysis.tail.percentile_bounds`); the
  slowdown's ``[lo / alone_hi, hi / alone_lo]``, each side at 97.5% so that both hold together at 95%.
  It assumes what the verdict assumes: the bursts of a row are independent draws of one distribution
  (a closed-loop user's fresh think times come close; a queue that carries over from one request to the
  next makes it narrower than the truth near saturation; a slow state of one repeat is not modelled).
  It is valid for one run, needs no minimum number of repeats, and has no bound where too few bursts
  reach the percentile's rank (a p95's upper bound needs 72);
* ``hierarchical``: a two-level percentile bootstrap (:func:`hierarchical_percentiles`, 2000 resamples,
  seeded): the repeats (cell runs) resampled with replacement, then the bursts within each repeat drawn;
  the slowdown's interval the ratio of the two sides' resamples. It carries the spread between runs; with
  one repeat it gives no interval (a bootstrap over the bursts of one run is no interval of the run);
* ``bursts``: a percentile bootstrap (``scipy.stats.bootstrap``, 2000 resamples, seeded) that resamples
  bursts within each repeat, and the slowdown's interval the same over both sides at once;
* ``repeats``: the mean over repeats of each repeat's percentile, with its Student-t interval on the
  log scale (``statistics.positive_mean_ci``: a latency is positive) and the slowdown's delta-method
  ratio interval (``statistics.ratio_ci``): honest about run-to-run spread, none below 3 repeats.

The bootstrap methods give no interval below :data:`MIN_CI_BURSTS` bursts on a side.

:func:`below_one_flags`: a ``below-one`` flag for each cell in which a user's p95 slowdown interval lies
wholly below 1, naming the alone p95 of each repeat.

:func:`users_at_target`: per pattern and mode family, the users per GPU decided by the verdicts of the
cells of that pattern alone (:func:`bracket`): the largest N within with every smaller measured N within,
and the smallest N above: "N users" when they are one apart, else "between A and B", ">= N" (nothing
above measured), "< N" (above at N, nothing smaller measured), "no sharing" (2 users above), "undecided";
a cell flagged below 1 is left out, with the reason. Never a point estimate alone, never extrapolated.
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
from sharebench.analysis.tail import (
    VERDICTS,
    Bounds,
    Decision,
    TailRule,
    decisions,
    look_of,
    percentile_bounds,
    verdict_of,
)
from sharebench.errors import UserError
from sharebench.modes import is_baseline, mode_sort_key, parse_mode
from sharebench.parse import check_slo as check_slo  # kept there, light: the CLI checks --slo before this loads
from sharebench.patterns import DEFAULT_SLO  # kept there, light: the CLI shows it in its help

BURST_COLUMNS = ("cell_id", "mode", "replica", "role", "pattern", "repeat", "arrival", "start", "end", "units")
ROLES = ("victim", "neighbour")
PERCENTILES = (50, 95, 99)
CI_METHODS = ("order", "hierarchical", "bursts", "repeats")
DEFAULT_CI_METHOD = "order"
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
# a cell's decision (sharebench.analysis.tail.Decision) on the victim rows of sharing modes: the columns every
# writer of a verdict uses (capacity.json's probes, the headline, a cell's watch)
DECISION_COLUMNS = (
    "verdict",
    "users",
    "samples",
    "worst_replica",
    "worst_p95_slowdown",
    "worst_p95_slowdown_lo",
    "worst_p95_slowdown_hi",
    "pooled_p95_slowdown",
    "pooled_p95_slowdown_lo",
    "pooled_p95_slowdown_hi",
    "alone_p95_s",
    "alone_p95_lo_s",
    "alone_p95_hi_s",
    "below_one",
    "reason",
)
VERDICT_COLUMNS = [*DECISION_COLUMNS, "slo"]  # then the target it was decided against
LATENCY_COLUMNS += VERDICT_COLUMNS


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
    if method == "order":
        return order_stats(runs, alone)
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


def order_stats(runs: list[np.ndarray], alone: list[np.ndarray], alpha: float = 1 - CONFIDENCE) -> dict[str, float]:
    """The latency and slowdown columns with ``order`` intervals: each percentile of the pooled bursts with its
    distribution-free ``1 - alpha`` interval (``tail.percentile_bounds``), the slowdown's ``[lo / alone_hi,
    hi / alone_lo]`` with each side at ``1 - alpha / 2`` (together at least ``1 - alpha``)."""
    mine = np.concatenate(runs) if runs else np.array([])
    base = np.concatenate(alone) if alone else np.array([])
    out: dict[str, float] = {}
    for p in PERCENTILES:
        q = p / 100
        own, half, ref = (percentile_bounds(x, q, a) for x, a in ((mine, alpha), (mine, alpha / 2), (base, alpha / 2)))
        out[f"latency_p{p}_s"], out[f"latency_p{p}_lo_s"], out[f"latency_p{p}_hi_s"] = own.point, own.lo, own.hi
        point = own.point / ref.point if ref.point > 0 else math.nan
        out[f"slowdown_p{p}"], out[f"slowdown_p{p}_lo"], out[f"slowdown_p{p}_hi"] = (
            point,
            half.lo / ref.hi,
            half.hi / ref.lo,
        )
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

    def enough(side: list[np.ndarray]) -> bool:  # one repeat: no interval of the run (issue 45)
        return len(side) >= 2 and sum(r.size for r in side) >= MIN_CI_BURSTS and all(r.size >= 2 for r in side)

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
    slo: float = DEFAULT_SLO,
) -> pd.DataFrame:
    """The ``latency.csv`` rows (:data:`LATENCY_COLUMNS`) of per-burst rows, sorted by mode, pattern, role;
    ``seed`` and ``n_resamples`` are the bootstrap's (methods ``hierarchical`` and ``bursts``); the victim rows
    of sharing modes carry their cell's verdict against ``slo`` (:data:`VERDICT_COLUMNS`)."""
    if method not in CI_METHODS:
        raise UserError(f"bad latency interval method {method!r}; allowed: {', '.join(CI_METHODS)}")
    target = check_slo(slo)
    df = burst_frame(rows)
    if df.empty:
        return pd.DataFrame(columns=LATENCY_COLUMNS)
    busy_of_cell = cell_busy(df)
    alone_all = df[baseline_mask(df["mode"]) & (df["role"] == "victim")]
    verdicts = decisions(df, TailRule(target))
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
        decision = verdicts.get((str(mode), str(pattern), str(beside))) if role == "victim" else None
        row.update(verdict_fields(decision, target) if decision is not None else {})
        out.append(row)
    table = pd.DataFrame(out, columns=LATENCY_COLUMNS)
    order = sorted(range(len(table)), key=lambda i: (mode_sort_key(table["mode"][i]), *table.loc[i, KEY_COLUMNS[1:]]))
    return table.iloc[order].reset_index(drop=True)


def verdict_fields(d: Decision, slo: float) -> dict[str, Any]:
    """A :class:`~sharebench.analysis.tail.Decision` as the :data:`VERDICT_COLUMNS` of a row."""
    return dict(
        verdict=d.verdict,
        users=d.users,
        samples=d.samples,
        worst_replica=d.worst,
        worst_p95_slowdown=d.worst_slowdown,
        worst_p95_slowdown_lo=d.worst_lo,
        worst_p95_slowdown_hi=d.worst_hi,
        pooled_p95_slowdown=d.pooled_slowdown,
        pooled_p95_slowdown_lo=d.pooled_lo,
        pooled_p95_slowdown_hi=d.pooled_hi,
        alone_p95_s=d.alone.point,
        alone_p95_lo_s=d.alone.lo,
        alone_p95_hi_s=d.alone.hi,
        below_one=d.below_one,
        reason=d.reason,
        slo=slo,
    )


def has_verdict(row: Mapping[str, Any]) -> bool:
    """Whether a latency row carries a cell's verdict (a victim row of a sharing mode, written by this version)."""
    return str(row.get("verdict", "")) in VERDICTS


def truthy(value: Any) -> bool:
    """A boolean cell of a table read back from CSV (True, "True", 1) as a bool; NaN and "" are False."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value) if value is not None and not (isinstance(value, float) and math.isnan(value)) else False


def below_one(row: Mapping[str, Any]) -> bool:
    """A sharing cell with a user faster shared than alone beyond doubt (the verdict's ``below_one``: a
    user's upper bound below 1); for a row of before the verdict columns, the
    measured replica's p95 slowdown interval wholly below 1."""
    if row.get("role") != "victim" or is_baseline(str(row.get("mode"))):
        return False
    if has_verdict(row):
        return truthy(row.get("below_one"))
    return float(row.get("slowdown_p95_hi", math.nan)) < 1


def alone_p95_text(bursts: pd.DataFrame, pattern: str) -> str:
    """The alone (baseline victim) p95 of each repeat of ``pattern``: ``32.0, 21.0, 24.1 ms``."""
    alone = bursts[baseline_mask(bursts["mode"]) & (bursts["role"] == "victim") & (bursts["pattern"] == pattern)]
    per = [float(np.percentile(r, 95)) * 1e3 for r in samples(alone) if r.size]
    return ", ".join(f"{v:.1f}" for v in per) + " ms" if per else "none"


def ratio_text(value: Any, lo: Any, hi: Any) -> str:
    """``1.57× [1.31, 1.89]``; ``1.57× [1.31, ?]`` where a bound does not exist (too few samples)."""
    v, a, b = (float(x) if x is not None and x == x else math.nan for x in (value, lo, hi))

    def one(x: float) -> str:
        return f"{x:.2f}" if math.isfinite(x) else "?"

    return f"{one(v)}× [{one(a)}, {one(b)}]"


def verdict_text(row: Mapping[str, Any]) -> str:
    """A row's verdict in words: ``within: worst user 1.57× [1.31, 1.89], all users 1.45× [1.30, 1.62] (2
    users)``."""
    worst = ratio_text(
        row.get("worst_p95_slowdown"), row.get("worst_p95_slowdown_lo"), row.get("worst_p95_slowdown_hi")
    )
    pooled = ratio_text(
        row.get("pooled_p95_slowdown"), row.get("pooled_p95_slowdown_lo"), row.get("pooled_p95_slowdown_hi")
    )
    n = row.get("users")
    users = f" ({int(float(n))} users)" if n is not None and n == n else ""
    return f"{row.get('verdict')}: worst user {worst}, all users {pooled}{users}"


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
        what = (
            f"a user's p95 slowdown below 1 ({verdict_text(r)})"
            if has_verdict(r)
            else f"p95 slowdown {ratio_text(r['slowdown_p95'], r['slowdown_p95_lo'], r['slowdown_p95_hi'])} below 1"
        )
        detail = (
            f"{r['mode']} {r['pattern']}{beside}: {what}; alone p95 per repeat {alone_p95_text(df, str(r['pattern']))}"
        )
        text = (
            f"{detail}: faster shared than alone, so the baseline alone was measured in a slower state (too few "
            "alone bursts, per-process kernel choice, host noise); no measurable slowdown, and never a figure (users "
            "per GPU, the Answer, the headline, advise's costs)"
        )
        work = (particles or {}).get(str(r["mode"]), math.nan)
        out.append(Flag("group", str(r["mode"]), work, "", text, False, "below-one", detail))
    return out


# ----------------------------------------------------------------- users per GPU at a target


@dataclass(frozen=True)
class Point:
    """One N measured of a mode family: its cell's verdict against the target and the worst user's and the
    pooled p95 slowdowns with their intervals; ``flag`` why the cell is left out ("" when it counts: a cell
    flagged below 1 is no figure), ``source`` where it comes from (a folder; "" within one)."""

    n: int
    mode: str
    verdict: str  # within, above, undecided
    worst: float = math.nan
    worst_lo: float = math.nan
    worst_hi: float = math.nan
    pooled: float = math.nan
    pooled_lo: float = math.nan
    pooled_hi: float = math.nan
    flag: str = ""
    source: str = ""
    reason: str = ""  # the verdict's, in words

    @property
    def mark(self) -> str:
        return {"within": "✓", "above": "✗"}.get(self.verdict, "?")

    @property
    def text(self) -> str:
        """``4 ✓ worst user 1.57× [1.31, 1.89]``."""
        return f"{self.n} {self.mark} worst user {ratio_text(self.worst, self.worst_lo, self.worst_hi)}"


@dataclass(frozen=True)
class Bracket:
    """Users per GPU as the measured N decide it (:func:`bracket`): the ``answer`` in words, ``lo`` the largest
    N within with every smaller counted N within, ``hi`` the smallest N above, and ``why`` the bracket is not
    one N wide: ``none`` (it is, or "no sharing"), ``unmeasured`` (the N between were not measured),
    ``undecided`` (an N in the way is undecided), ``maximum`` (nothing above was measured), ``flagged``
    (every cell measured is flagged)."""

    answer: str
    lo: int | None
    hi: int | None
    why: str
    reason: str


def counted_verdicts(points: Sequence[Point]) -> list[tuple[int, str]]:
    """(N, verdict) ascending over the points that count (not flagged); of several points of one N (folders of
    one machine) the decided verdict (an undecided one tells nothing against it), ``undecided`` when one is
    within and another above (:func:`disagree`)."""
    by_n: dict[int, set[str]] = {}
    for p in points:
        if not p.flag:
            by_n.setdefault(p.n, set()).add(p.verdict if p.verdict in VERDICTS else "undecided")
    out = []
    for n, verdicts in sorted(by_n.items()):
        decided = verdicts - {"undecided"}
        out.append((n, next(iter(decided)) if len(decided) == 1 else "undecided"))
    return out


def disagree(n: int, points: Sequence[Point]) -> bool:
    """Whether the counted points of ``n`` say both within and above."""
    return {"within", "above"} <= {p.verdict for p in points if p.n == n and not p.flag}


def bracket(points: Sequence[Point]) -> Bracket:
    """Users per GPU from the verdicts of the N measured: never a point estimate, never extrapolated; a
    flagged point is left out (as if not measured; :attr:`UsersAtTarget.flagged` names it)."""
    counted = counted_verdicts(points)
    if not counted:
        if points:
            return Bracket("undecided", None, None, "flagged", "every cell measured is flagged")
        return Bracket("not measured", None, None, "none", "no cell measured")
    lo = hi = None
    for n, verdict in counted:
        if verdict == "above":
            hi = n
            break
        if verdict == "within" and not any(v != "within" for m, v in counted if m < n):
            lo = n
    undecided = [n for n, v in counted if v == "undecided" and (hi is None or n < hi) and (lo is None or n > lo)]
    stuck = f"undecided at {', '.join(undecided_text(n, points) for n in undecided)}" if undecided else ""
    answer, why, reason = bracket_words(lo, hi, stuck, hi is not None and any(n < hi for n, _ in counted))
    return Bracket(answer, lo, hi, why, reason)


def undecided_text(n: int, points: Sequence[Point]) -> str:
    """An undecided N and why: ``4 (90 samples a user; 127 needed for 4 users)``; folders that disagree at it."""
    mine = [p for p in points if p.n == n and not p.flag]
    if disagree(n, points):
        return f"{n} (the measurements disagree: {', '.join(f'{p.verdict} in {p.source or p.mode}' for p in mine)})"
    why = "; ".join(dict.fromkeys(p.reason for p in mine if p.reason))
    return f"{n} ({why})" if why else str(n)


def bracket_words(lo: int | None, hi: int | None, stuck: str, below_hi: bool) -> tuple[str, str, str]:
    """The answer, why and reason of a bracket (``stuck``: the undecided N in the way, in words; ``below_hi``:
    some N below ``hi`` was measured)."""
    if lo is None and hi is None:
        return "undecided", "undecided", stuck or "no N decided"
    if lo is None:
        assert hi is not None
        if below_hi:
            return "undecided", "undecided", f"above at {hi}; {stuck or 'nothing smaller within'}"
        if hi <= 2:
            return "no sharing", "none", f"{hi} users already above the target"
        return f"< {hi}", "unmeasured", f"above at {hi}; nothing smaller measured"
    if hi is None:
        if stuck:
            return f">= {lo}", "undecided", f"within up to {lo}; {stuck}"
        return f">= {lo}", "maximum", f"within at every N measured up to {lo}; more users not measured"
    if hi == lo + 1:
        return f"{lo} users", "none", f"{lo} within and {hi} above, both measured"
    if stuck:
        return f"between {lo} and {hi}", "undecided", f"{lo} within, {hi} above; {stuck}"
    return f"between {lo} and {hi}", "unmeasured", f"{lo} within, {hi} above; the N between not measured"


@dataclass(frozen=True)
class UsersAtTarget:
    """Users of ``pattern`` per GPU under ``family`` at the target, decided by the verdicts of the measured N
    (:class:`Bracket`'s answer, lo, hi and why), with every :class:`Point` measured (flagged ones included)."""

    pattern: str
    family: str  # the mode without its count: timeslice, timeslice/long, mps, mps@25, mig, mig-emulated
    answer: str
    lo: int | None
    hi: int | None
    why: str
    points: tuple[Point, ...]
    reason: str

    @property
    def measured(self) -> tuple[int, ...]:
        """The N measured, ascending (flagged cells included)."""
        return tuple(sorted({p.n for p in self.points}))

    def at(self, n: int | None) -> Point | None:
        """The counted point of ``n`` (None: not measured, flagged, or ``n`` None)."""
        return next((p for p in self.points if p.n == n and not p.flag), None)

    @property
    def flagged(self) -> tuple[Point, ...]:
        return tuple(p for p in self.points if p.flag)


def mode_family(mode: str) -> str:
    """``timeslice:4/long`` -> ``timeslice/long``, ``mps:4@25`` -> ``mps@25``, ``mig-emulated:7x1g`` -> ``mig-emulated``."""
    m = parse_mode(mode)
    if m.interval:
        return f"{m.kind}/{m.interval}"
    if m.thread_pct is not None:
        return f"{m.kind}@{m.thread_pct}"
    return m.kind


def verdict_at(row: Mapping[str, Any], slo: float) -> tuple[str, str]:
    """A victim row's verdict against ``slo`` and why: the rule (``tail.verdict_of``) on the row's numbers, so
    that a table decided against one target answers for another; ``undecided`` for a row without a verdict."""
    if not has_verdict(row):
        return "undecided", "no verdict in this table"
    users, fewest = int(float(row["users"])), int(float(row["samples"]))
    rule = TailRule(slo)
    alone = Bounds(float(row["alone_p95_s"]), float(row["alone_p95_lo_s"]), float(row["alone_p95_hi_s"]), 0)
    if float(row.get("slo", math.nan)) == slo or not alone.bounded:  # decided against this target, or no baseline
        return str(row["verdict"]), str(row.get("reason", ""))
    look = look_of(fewest, rule.first_look(users)) if users else None
    hi, lo = float(row["worst_p95_slowdown_hi"]), float(row["worst_p95_slowdown_lo"])
    return verdict_of(rule, users, fewest, look, alone, hi, lo)


def point_of(row: Mapping[str, Any], slo: float) -> Point:
    """A victim row of a sharing mode as a :class:`Point` of its family against ``slo``."""

    def num(key: str) -> float:
        v = row.get(key, math.nan)
        return float(v) if v is not None and v == v and v != "" else math.nan

    flag = "below 1: a user faster shared than alone, so the baseline is off" if below_one(row) else ""
    if not has_verdict(row):
        flag = flag or "no verdict in this table (written before every user was counted): rebuild the report"
    verdict, reason = verdict_at(row, slo)
    return Point(
        int(float(row["users"] if has_verdict(row) else row["replicas"])),
        str(row["mode"]),
        verdict,
        worst=num("worst_p95_slowdown"),
        worst_lo=num("worst_p95_slowdown_lo"),
        worst_hi=num("worst_p95_slowdown_hi"),
        pooled=num("pooled_p95_slowdown"),
        pooled_lo=num("pooled_p95_slowdown_lo"),
        pooled_hi=num("pooled_p95_slowdown_hi"),
        flag=flag,
        reason=reason,
    )


def users_at_target(table: pd.DataFrame, slo: float = DEFAULT_SLO) -> list[UsersAtTarget]:
    """Per pattern and mode family, from the cells where every replica follows the pattern (victim rows,
    ``beside`` empty or the same pattern): the users per GPU the verdicts decide (:func:`bracket`). Never
    extrapolated: N is one of the measured replica counts."""
    target = check_slo(slo)
    if table is None or table.empty:
        return [UsersAtTarget("", "", "not measured", None, None, "none", (), "nothing measured: no latency rows")]
    homogeneous = table[
        (table["role"] == "victim")
        & ~baseline_mask(table["mode"])
        & ((table["beside"].fillna("") == "") | (table["beside"] == table["pattern"]))
    ]
    out = []
    for pattern in sorted(set(table.loc[table["role"] == "victim", "pattern"])):
        rows = homogeneous[homogeneous["pattern"] == pattern]
        if rows.empty:
            why = f"no sharing cell of {pattern} alone measured"
            out.append(UsersAtTarget(pattern, "", "not measured", None, None, "none", (), why))
            continue
        for family in sorted({mode_family(m) for m in rows["mode"]}, key=mode_sort_key):
            fam = rows[[mode_family(m) == family for m in rows["mode"]]].sort_values("replicas")
            points = tuple(point_of(r, target) for r in fam.to_dict("records"))
            b = bracket(points)
            out.append(UsersAtTarget(pattern, family, b.answer, b.lo, b.hi, b.why, points, b.reason))
    return out


USERS_CSV = "users_per_gpu.csv"
SIDE_COLUMNS = ["mode", *VERDICT_COLUMNS[4:10]]  # of the cell at lo (within) and at hi (above)
USERS_COLUMNS = [
    "pattern",
    "family",
    "slo",
    "answer",
    "lo",
    "hi",
    "why",
    *[f"lo_{c}" for c in SIDE_COLUMNS],
    *[f"hi_{c}" for c in SIDE_COLUMNS],
    "measured",
    "flagged",
    "reason",
]


def side_fields(prefix: str, p: Point | None) -> dict[str, Any]:
    values = (
        [p.mode, p.worst, p.worst_lo, p.worst_hi, p.pooled, p.pooled_lo, p.pooled_hi] if p else [""] + [math.nan] * 6
    )
    return {f"{prefix}_{c}": v for c, v in zip(SIDE_COLUMNS, values)}


def users_table(table: pd.DataFrame, slo: float = DEFAULT_SLO) -> pd.DataFrame:
    """:func:`users_at_target` as a table (:data:`USERS_COLUMNS`; ``lo``/``hi`` NaN where none; the cells at
    ``lo`` and ``hi`` with the worst user's and the pooled p95 slowdowns and intervals; ``measured``: every N
    with its verdict, ``2:within,4:undecided,8:above``; ``flagged``: the cells left out and why); no rows when
    no latency was measured."""
    if table is None or table.empty:
        return pd.DataFrame(columns=USERS_COLUMNS)
    rows = [
        dict(
            pattern=u.pattern,
            family=u.family,
            slo=check_slo(slo),
            answer=u.answer,
            lo=u.lo if u.lo is not None else math.nan,
            hi=u.hi if u.hi is not None else math.nan,
            why=u.why,
            **side_fields("lo", u.at(u.lo)),
            **side_fields("hi", u.at(u.hi)),
            measured=",".join(f"{p.n}:{p.verdict if not p.flag else 'flagged'}" for p in u.points),
            flagged="; ".join(f"{p.mode}: {p.flag}" for p in u.flagged),
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
