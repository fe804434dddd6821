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

**Sizes that differ.** A run sized by calibration (the CPU with no ``--particles``) may measure another
particle count than the runs before it, so its cell has no run of its own size to compare with. Its
newest run is then compared with the runs of the same node × engine × backend × lattice × mode ×
pattern at other sizes (:data:`SERIES_KEYS`) by the **rate per unit of work** instead: the device's
particle-turns per second per repeat (``history.rates``), the same Welch test, and a change when the
mean rates differ by more than ``threshold`` **percent** (:func:`compare_rates`). A rate per
particle-turn stays comparable across sizes where the time grows with the work (every size the CPU
calibration picks tracks for about 2 s); a GPU sweep fixes its sizes and is compared size by size.

**Trust.** A run whose cells were disturbed (the store's ``disturbed``) is no baseline for later runs;
a newest run the Answer does not trust (``trust``) is still judged, and its line says why not to
trust it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sharebench.history.rates import parse_numbers
from sharebench.history.records import CELL_KEYS
from sharebench.history_settings import CheckOptions

MIN_REPEATS = 2
SIZE_KEYS = ("particles", "turns")
SERIES_KEYS = [k for k in CELL_KEYS if k not in SIZE_KEYS]  # a cell at any size: compared by rate
LOSS_BASIS, RATE_BASIS = "loss", "rate"


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
    basis: str = LOSS_BASIS  # what was compared: the loss (same size) or the rate per unit of work
    base_sizes: tuple[int, ...] = ()  # with the rate: the particle counts of the baseline runs
    trust: str = ""  # the Answer's trust of the newest run ("ok", its reasons, or "" from an old store)
    new_rate: float = math.nan  # particle-turns/s (mean over repeats) of the newest run
    base_rate: float = math.nan  # and of the baseline runs (with the rate basis)

    @property
    def changed(self) -> bool:
        return self.status == "changed"

    def line(self) -> str:
        """The one-line summary ``history check`` prints for a change."""
        c = self.cell
        where = f"node {c['node']} {c['mode']} {c['pattern']} {int(c['particles']):,} particles x {c['turns']} turns"
        if self.basis == RATE_BASIS:
            sizes = ", ".join(f"{p:,}" for p in self.base_sizes)
            what = (
                f"rate {self.base_rate:,.4g} -> {self.new_rate:,.4g} particle-turns/s "
                f"({self.delta_pts:+.2f}%, Welch p = {self.p_value:.2g}; sizes differ: against {sizes} particles"
            )
        else:
            what = (
                f"loss {self.base_loss_pct:.2f}% -> {self.new_loss_pct:.2f}% "
                f"({self.delta_pts:+.2f} pts, Welch p = {self.p_value:.2g};"
            )
        caution = f"; newest run not trusted as measured: {self.trust}" if self.trust not in ("", "ok") else ""
        return (
            f"{where} ({c['engine']}/{c['backend']}): {what} run {self.run_id} at {self.time_utc} against "
            f"{len(self.baseline_run_ids)} baseline run(s)){caution}"
        )


def compare_repeats(new: np.ndarray, base: np.ndarray, opts: CheckOptions) -> tuple[str, float, float]:
    """(status, difference of the means in points, Welch p) of new per-repeat losses against the baseline's."""
    if len(base) == 0:
        return "no baseline", math.nan, math.nan
    if len(new) < MIN_REPEATS or len(base) < MIN_REPEATS:
        return "too few repeats", float(np.mean(new) - np.mean(base)) if len(new) else math.nan, math.nan
    delta = float(np.mean(new) - np.mean(base))
    from scipy import stats  # noqa: PLC0415 - only when a cell has repeats on both sides (history startup)

    p = float(stats.ttest_ind(new, base, equal_var=False).pvalue)
    if not math.isfinite(p):  # no spread on either side: equal means are the same, others differ
        p = 1.0 if delta == 0 else 0.0
    return ("changed" if p < opts.alpha and abs(delta) > opts.threshold_pts else "same"), delta, p


def compare_rates(new: np.ndarray, base: np.ndarray, opts: CheckOptions) -> tuple[str, float, float]:
    """(status, change of the mean rate in %, Welch p) of new per-repeat rates against the baseline's:
    the test of :func:`compare_repeats`, the threshold in percent of the baseline's rate."""
    if len(base) == 0 or not np.mean(base) > 0:
        return "no baseline", math.nan, math.nan
    scale = 100.0 / float(np.mean(base))  # rates as percent of the baseline's: the threshold applies as is
    status, delta, p = compare_repeats(np.asarray(new) * scale, np.asarray(base) * scale, opts)
    return status, delta, p


def _accepted_since(accepts: list[dict[str, Any]], cell: dict[str, Any]) -> str:
    """The time of the last accepted change that covers this cell ("" when none)."""
    last = ""
    for a in accepts:
        if all(str(cell[k]) == str(v) for k, v in (a.get("cell") or {}).items() if k in cell):
            last = max(last, str(a.get("from_time_utc", "")))
    return last


def baseline_runs(before: pd.DataFrame, newest: pd.Series, since: str, opts: CheckOptions) -> pd.DataFrame:
    """The rows of ``before`` (runs before ``newest``, oldest first) that form its baseline: none older than
    ``since`` (the last accept), none disturbed, those of the last ``opts.baseline_runs`` runs."""
    if since:
        before = before[before["time_utc"] >= since] if newest["time_utc"] >= since else before.iloc[0:0]
    if "disturbed" in before.columns:
        before = before[before["disturbed"].fillna("").astype(str) == ""]
    last = list(dict.fromkeys(before["run_id"]))[-opts.baseline_runs :]
    return before[before["run_id"].isin(last)]


def earlier(runs: pd.DataFrame, newest: pd.Series) -> pd.DataFrame:
    """The rows of runs before ``newest``'s (by time, then run id), oldest first."""
    t, rid = runs["time_utc"].astype(str), runs["run_id"].astype(str)
    mask = (t < str(newest["time_utc"])) | ((t == str(newest["time_utc"])) & (rid < str(newest["run_id"])))
    return runs[mask].sort_values(["time_utc", "run_id"], kind="stable")


def other_sizes(runs: pd.DataFrame, cell: dict[str, Any]) -> pd.DataFrame:
    """The rows of the cell's series (:data:`SERIES_KEYS`) at other sizes than the cell's."""
    mask = np.ones(len(runs), dtype=bool)
    for k in SERIES_KEYS:
        mask &= (runs[k].astype(str) == str(cell[k])).to_numpy()
    size = np.zeros(len(runs), dtype=bool)
    for k in SIZE_KEYS:
        size |= (runs[k].astype(str) != str(cell[k])).to_numpy()
    return runs[mask & size]


def judge(newest: pd.Series, same: pd.DataFrame, other: pd.DataFrame, opts: CheckOptions) -> dict[str, Any]:
    """The verdict's figures: by loss against ``same`` (runs of the newest's size), or when there are none
    by the rate per unit of work against ``other`` (runs of other sizes)."""
    new_l = parse_numbers(newest["repeat_losses_pct"])
    if len(same) or other.empty:
        base_l = np.concatenate([parse_numbers(x) for x in same["repeat_losses_pct"]] or [np.array([])])
        status, delta, p = compare_repeats(new_l, base_l, opts)
        return dict(
            base=same,
            base_loss_pct=float(np.mean(base_l)) if len(base_l) else math.nan,
            delta_pts=delta,
            p_value=p,
            status=status,
            basis=LOSS_BASIS,
        )
    new_r = parse_numbers(newest.get("repeat_rates_pt_per_s", ""))
    rates = other["repeat_rates_pt_per_s"] if "repeat_rates_pt_per_s" in other.columns else []
    base_r = np.concatenate([parse_numbers(x) for x in rates] or [np.array([])])
    status, delta, p = compare_rates(new_r, base_r, opts)
    return dict(
        base=other,
        base_loss_pct=math.nan,
        delta_pts=delta,
        p_value=p,
        status=status,
        basis=RATE_BASIS,
        base_sizes=tuple(sorted({int(x) for x in other["particles"]})),
        new_rate=float(np.mean(new_r)) if len(new_r) else math.nan,
        base_rate=float(np.mean(base_r)) if len(base_r) else math.nan,
    )


def check_history(runs: pd.DataFrame, accepts: list[dict[str, Any]], opts: CheckOptions) -> list[Verdict]:
    """One verdict per cell: its newest run against the baseline (see the module's docstring)."""
    opts = opts.validated()
    out = []
    for key, g in runs.groupby(CELL_KEYS, sort=True, dropna=False):
        cell = dict(zip(CELL_KEYS, key))
        g = g.sort_values(["time_utc", "run_id"], kind="stable")
        newest = g.iloc[-1]
        since = _accepted_since(accepts, cell)
        same = baseline_runs(g.iloc[:-1], newest, since, opts)
        other = baseline_runs(earlier(other_sizes(runs, cell), newest), newest, since, opts)
        v = judge(newest, same, other, opts)
        base = v.pop("base")
        new_l = parse_numbers(newest["repeat_losses_pct"])
        out.append(
            Verdict(
                cell=cell,
                run_id=str(newest["run_id"]),
                time_utc=str(newest["time_utc"]),
                baseline_run_ids=tuple(str(x) for x in base["run_id"]),
                new_loss_pct=float(np.mean(new_l)) if len(new_l) else float(newest["loss_pct"]),
                trust=str(newest.get("trust", "") or ""),
                **v,
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
