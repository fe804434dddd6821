"""Each measured cell of a results folder decided by interval against advise's target, as a cost or a reason.

The rule is ``sharebench.analysis.tail`` (every user counted: the worst user's p95 slowdown and its
distribution-free interval, against the same pattern alone); advise applies it to the folder's bursts
(``bursts.csv``, warm-ups and excluded cells left out as the report does) at its own target, or reads the
verdict columns a report wrote into ``tables/latency.csv`` where the bursts are gone. What a cell gives
advise (:func:`cell_cost`):

* ``within`` or ``above``: the worst user's slowdown, with its interval;
* ``undecided``: its upper bound only (the slowdown is taken at the bound), or nothing where it has none;
* below 1 (a user faster shared than alone, beyond doubt: the baseline, not the sharing, is off):
  nothing, with that reason.

A cell with no decision at all (neither bursts nor verdict columns) gives nothing, with the reason.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from sharebench.analysis.latency import burst_frame
from sharebench.analysis.tables import measured_bursts, summarise_cells
from sharebench.analysis.tail import Bounds, Decision, TailRule, decisions, verdict_of
from sharebench.patterns import DEFAULT_SLO
from sharebench.results.bursts import BURSTS_CSV, load_bursts
from sharebench.results.table import RESULTS_CSV, load_results

Key = tuple[str, str, str]  # (mode, pattern label, beside) as tables/latency.csv keys a victim row
VERDICT_COLUMNS = ("worst_p95_slowdown", "worst_p95_slowdown_lo", "worst_p95_slowdown_hi")


@dataclass(frozen=True)
class CellCost:
    """What one cell gives advise: ``slowdown`` (NaN: nothing) and its interval, how it is used, and why."""

    slowdown: float
    lo: float
    hi: float
    used: str  # "measured", "upper bound" or "" (left out)
    why: str

    @property
    def usable(self) -> bool:
        return math.isfinite(self.slowdown)


def cell_cost(d: Decision) -> CellCost:
    """A decided cell as a cost (:mod:`this module's rules <sharebench.advise.decided>`)."""
    if d.below_one:
        return CellCost(
            math.nan,
            d.worst_lo,
            d.worst_hi,
            "",
            f"below 1 (a user faster shared than alone, upper bound {d.fastest_hi:.2f}x): the baseline, "
            "not the sharing, is off; not a cost",
        )
    if d.verdict in ("within", "above"):
        hi = d.worst_hi if math.isfinite(d.worst_hi) else math.inf
        return CellCost(d.worst_slowdown, d.worst_lo, hi, "measured", f"{d.verdict}: {d.reason}")
    if math.isfinite(d.worst_hi):
        return CellCost(
            d.worst_hi, d.worst_lo, d.worst_hi, "upper bound", f"undecided, its upper bound used: {d.reason}"
        )
    return CellCost(math.nan, d.worst_lo, d.worst_hi, "", f"undecided with no upper bound: {d.reason}")


def stamp(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def folder_decisions(folder: Path, rule: TailRule) -> dict[Key, Decision]:
    """Every sharing cell of the folder's bursts decided by ``rule`` ({} without bursts); the bounds are
    computed once per folder and state of its files (a target only changes the verdicts)."""
    if not (folder / BURSTS_CSV).exists():
        return {}
    key = (str(folder.resolve()), stamp(folder / BURSTS_CSV), stamp(folder / RESULTS_CSV), rule.q, rule.confidence)
    found = bounded(key)
    return {k: redecide(d, rule) for k, d in found.items()}


def redecide(d: Decision, rule: TailRule) -> Decision:
    """A decision made again at ``rule``'s target (its bounds do not depend on the target)."""
    verdict, reason = verdict_of(rule, d.users, d.samples, d.look, d.alone, d.worst_hi, d.worst_lo)
    return replace(d, verdict=verdict, reason=reason)


@functools.lru_cache(maxsize=256)
def bounded(key: tuple[str, tuple[int, int], tuple[int, int], float, float]) -> dict[Key, Decision]:
    folder, rule = Path(key[0]), TailRule(DEFAULT_SLO, key[3], key[4])
    bursts = load_bursts(folder)
    if bursts.empty:
        return {}
    if (folder / RESULTS_CSV).exists():
        cells, _ = summarise_cells(load_results(folder))
        measured = cells[~cells["warmup"].astype(bool)] if len(cells) else cells
        good = measured[~measured["excluded"].astype(bool)] if len(measured) else measured
        rows = measured_bursts(bursts, good)
    else:
        rows = bursts[~bursts["warmup"].astype(bool)]
    if rows.empty:
        return {}
    frame = burst_frame(rows)
    frame["mode"] = frame["mode"].astype("category")  # the rule maps each mode label once, not each burst
    return decisions(frame, rule)


def number(row: Mapping[str, Any], key: str) -> float:
    try:
        value = float(row.get(key, math.nan))
    except (TypeError, ValueError):
        return math.nan
    return value


def row_decision(row: Mapping[str, Any], rule: TailRule) -> Decision | None:
    """The decision of a ``tables/latency.csv`` victim row from its verdict columns (a report's, at its own
    target), decided again at ``rule``'s target by the same rule; None where the row has none."""
    if not all(c in row for c in VERDICT_COLUMNS) or not math.isfinite(number(row, VERDICT_COLUMNS[0])):
        return None
    worst, lo, hi = (number(row, c) for c in VERDICT_COLUMNS)
    users, samples = int(number(row, "users") or 0), int(number(row, "samples") or 0)
    alone = Bounds(number(row, "alone_p95_s"), number(row, "alone_p95_lo_s"), number(row, "alone_p95_hi_s"), samples)
    look = 0 if math.isfinite(lo) or math.isfinite(hi) else None
    verdict, reason = verdict_of(rule, users, samples, look, alone, hi, lo)
    return Decision(
        verdict, users, samples, str(row.get("worst_replica", "")), worst, lo, hi, *pooled(row), alone, look, {}, reason
    )


def pooled(row: Mapping[str, Any]) -> tuple[float, float, float]:
    return (
        number(row, "pooled_p95_slowdown"),
        number(row, "pooled_p95_slowdown_lo"),
        number(row, "pooled_p95_slowdown_hi"),
    )


def latency_decisions(table: pd.DataFrame, rule: TailRule) -> dict[Key, Decision]:
    """The decisions the verdict columns of a latency table hold, per victim row's key."""
    out: dict[Key, Decision] = {}
    if not set(VERDICT_COLUMNS) <= set(table.columns):
        return out
    for row in table[table["role"] == "victim"].to_dict("records"):
        d = row_decision(row, rule)
        if d is not None:
            beside = row.get("beside")
            out[(str(row["mode"]), str(row["pattern"]), beside if isinstance(beside, str) else "")] = d
    return out
