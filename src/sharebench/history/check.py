"""``history check``: has a cell's loss changed in the newest run?

For every cell (``records.CELL_KEYS``: node × work × mode × pattern) the newest run is set against its
*baseline*: up to ``baseline_runs`` runs before it, none older than the last accepted change of that
cell (``history accept``). A **change** is reported when both hold:

* it is **significant**: Welch's two-sample t-test (``scipy.stats.ttest_ind(equal_var=False)``,
  two-sided) of the newest run's per-repeat losses against the baseline runs' per-repeat losses
  (pooled) gives p < ``alpha`` (default 0.01); at least 2 repeats on each side, else no verdict;
* it is **large**: the difference of the mean losses exceeds ``threshold`` percentage points
  (default 2) in magnitude.

The test sees the spread between repeats, not a shift shared by a whole run; the threshold is what
keeps such run-to-run shifts (another GPU of the same model, a busier host) from alarming. With
per-repeat noise alone the false-alarm rate per cell is at most ``alpha`` and, with the threshold,
far lower: :func:`false_alarm_rate` measures it (stated in the README, tested in tests/history).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from sharebench.errors import UserError
from sharebench.history.records import CELL_KEYS, parse_losses
from sharebench.parse import DEFAULT_ALPHA, DEFAULT_BASELINE_RUNS, DEFAULT_THRESHOLD_PTS

MIN_REPEATS = 2


@dataclass(frozen=True)
class CheckOptions:
    threshold_pts: float = DEFAULT_THRESHOLD_PTS
    alpha: float = DEFAULT_ALPHA
    baseline_runs: int = DEFAULT_BASELINE_RUNS

    def validated(self) -> CheckOptions:
        if not (math.isfinite(self.threshold_pts) and self.threshold_pts > 0):
            raise UserError(f"bad --threshold {self.threshold_pts:g}; allowed: percentage points > 0, e.g. 2")
        if not (0 < self.alpha < 1):
            raise UserError(f"bad --alpha {self.alpha:g}; allowed: a probability in (0, 1), e.g. 0.01")
        if self.baseline_runs < 1:
            raise UserError(f"bad --baseline {self.baseline_runs}; allowed: a whole number of runs >= 1")
        return self


@dataclass(frozen=True)
class Verdict:
    """One cell's newest run against its baseline. ``status``: changed, same, no baseline, too few repeats."""

    cell: dict[str, Any]  # the CELL_KEYS values
    run_id: str
    time_utc: str
    baseline_run_ids: tuple[str, ...]
    new_loss_pct: float
    base_loss_pct: float
    delta_pts: float
    p_value: float
    status: str

    @property
    def changed(self) -> bool:
        return self.status == "changed"

    def line(self) -> str:
        """The one-line summary ``history check`` prints for a change."""
        c = self.cell
        where = f"node {c['node']} {c['mode']} {c['pattern']} {int(c['particles']):,} particles x {c['turns']} turns"
        return (
            f"{where} ({c['engine']}/{c['backend']}): loss {self.base_loss_pct:.2f}% -> {self.new_loss_pct:.2f}% "
            f"({self.delta_pts:+.2f} pts, Welch p = {self.p_value:.2g}; run {self.run_id} at {self.time_utc} against "
            f"{len(self.baseline_run_ids)} baseline run(s))"
        )


def compare_repeats(new: np.ndarray, base: np.ndarray, opts: CheckOptions) -> tuple[str, float, float]:
    """(status, difference of the means in points, Welch p) of new per-repeat losses against the baseline's."""
    if len(base) == 0:
        return "no baseline", math.nan, math.nan
    if len(new) < MIN_REPEATS or len(base) < MIN_REPEATS:
        return "too few repeats", float(np.mean(new) - np.mean(base)) if len(new) else math.nan, math.nan
    delta = float(np.mean(new) - np.mean(base))
    p = float(stats.ttest_ind(new, base, equal_var=False).pvalue)
    if not math.isfinite(p):  # no spread on either side: equal means are the same, others differ
        p = 1.0 if delta == 0 else 0.0
    return ("changed" if p < opts.alpha and abs(delta) > opts.threshold_pts else "same"), delta, p


def _accepted_since(accepts: list[dict[str, Any]], cell: dict[str, Any]) -> str:
    """The time of the last accepted change that covers this cell ("" when none)."""
    last = ""
    for a in accepts:
        if all(str(cell[k]) == str(v) for k, v in (a.get("cell") or {}).items() if k in cell):
            last = max(last, str(a.get("from_time_utc", "")))
    return last


def check_history(runs: pd.DataFrame, accepts: list[dict[str, Any]], opts: CheckOptions) -> list[Verdict]:
    """One verdict per cell: its newest run against the baseline (see the module's docstring)."""
    opts = opts.validated()
    out = []
    for key, g in runs.groupby(CELL_KEYS, sort=True, dropna=False):
        cell = dict(zip(CELL_KEYS, key))
        g = g.sort_values(["time_utc", "run_id"], kind="stable")
        newest = g.iloc[-1]
        since = _accepted_since(accepts, cell)
        before = g.iloc[:-1]
        before = before[before["time_utc"] >= since] if since else before
        if since and newest["time_utc"] < since:
            before = before.iloc[0:0]
        base = before.tail(opts.baseline_runs)
        new_l = parse_losses(newest["repeat_losses_pct"])
        base_l = np.concatenate([parse_losses(x) for x in base["repeat_losses_pct"]] or [np.array([])])
        status, delta, p = compare_repeats(new_l, base_l, opts)
        out.append(
            Verdict(
                cell=cell,
                run_id=str(newest["run_id"]),
                time_utc=str(newest["time_utc"]),
                baseline_run_ids=tuple(str(x) for x in base["run_id"]),
                new_loss_pct=float(np.mean(new_l)) if len(new_l) else float(newest["loss_pct"]),
                base_loss_pct=float(np.mean(base_l)) if len(base_l) else math.nan,
                delta_pts=delta,
                p_value=p,
                status=status,
            )
        )
    return out


def false_alarm_rate(
    seeds: int,
    opts: CheckOptions,
    *,
    repeats: int = 3,
    sigma_pts: float = 1.0,
    run_sigma_pts: float = 0.0,
    step_pts: float = 0.0,
    loss_pct: float = 35.0,
    seed: int = 0,
) -> float:
    """The share of ``seeds`` simulated series in which the check reports a change of one cell.

    Each series: ``opts.baseline_runs`` baseline runs and one new run of ``repeats`` repeats each;
    a repeat's loss = ``loss_pct`` + a run offset N(0, ``run_sigma_pts``) + noise N(0, ``sigma_pts``),
    plus ``step_pts`` in the new run (0: noise alone, the false-alarm rate; else the detection rate).
    Runs the same test as :func:`check_history` (:func:`compare_repeats`)."""
    opts = opts.validated()
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(seeds):
        offsets = (
            rng.normal(0.0, run_sigma_pts, opts.baseline_runs + 1)
            if run_sigma_pts > 0
            else np.zeros(opts.baseline_runs + 1)
        )
        runs = loss_pct + offsets[:, None] + rng.normal(0.0, sigma_pts, (opts.baseline_runs + 1, repeats))
        runs[-1] += step_pts
        status, _, _ = compare_repeats(runs[-1], runs[:-1].ravel(), opts)
        hits += status == "changed"
    return hits / seeds
