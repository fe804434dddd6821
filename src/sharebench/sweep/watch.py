"""A patterned cell watched while it runs (issue 42): the sweep's early stop, and the verdict its rows carry.

The executor (``sharebench.sharing.executor.LiveCell``) reads the users' live records at each poll and
calls the cell's :class:`CellWatch` with every replica's bursts so far; a reason it returns stops the cell
(the stop file every replica watches). The rule is ``sharebench.analysis.tail``'s, and the numbers are
the cell's sample rule (``sharebench.analysis.samples``):

* a sharing cell: at each new look (its users' fewest samples reaching n₀ · 2^j), ``tail.decide`` over
  every user (the replicas of the victim's pattern) against the sweep's alone baseline
  (``tail.alone_bounds`` of :func:`sweep_alone`); ``within`` or ``above`` stops it, once its floor of
  seconds has passed (a service: 5 s); ``undecided`` goes on to the next look;
* the alone cell: at each of its looks, its own p95 interval; ``hi / lo <= ALONE_PRECISION`` stops it;
* either stops at its cap (a count; a duration window ends by itself, the victim done).

No baseline measured yet (a sharing cell before any alone cell of its size, or one that failed): the cell
runs to its cap and is decided afterwards. After the cell, :meth:`CellWatch.columns` gives the verdict
columns its rows carry (``results.schema``: ``verdict`` ... ``below_one``, ``reason``, ``stopped_by``),
computed over every burst the cell kept (the final look).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sharebench.analysis.latency import DECISION_COLUMNS
from sharebench.analysis.samples import ALONE_PRECISION, Samples
from sharebench.analysis.tail import Bounds, Decision, TailRule, alone_bounds, decide, look_of
from sharebench.modes import is_baseline
from sharebench.results import RESULTS_CSV, load_results
from sharebench.results.bursts import BURSTS_CSV, load_bursts
from sharebench.workloads.bursts import Burst

VERDICT_COLUMNS = (*DECISION_COLUMNS, "stopped_by")
# why a watched cell ended (the rows' stopped_by): its verdict decided, the alone p95 precise, its cap or
# window reached (the victim done), or the sweep's deadline (sweep.within)
STOPPED_BY = ("decided", "precise", "cap", "deadline")


@dataclass
class CellWatch:
    """One patterned cell's watcher (``CellRun.watch``): its sample rule, its users (replica indices), the
    rule and the sweep's alone baseline of its pattern and size (None: none measured; the alone cell
    itself needs none). ``decision`` is the last look's (a sharing cell), ``precision`` the alone cell's
    bounds at its last look, ``stopped`` the reason it gave."""

    samples: Samples
    users: tuple[int, ...]
    rule: TailRule
    alone: Bounds | None = None
    decision: Decision | None = None
    precision: Bounds | None = None
    stopped: str = ""
    stopped_by: str = ""
    looked: int = -1
    ready: str = field(default="", repr=False)  # decided at a look before the floor of seconds: the reason

    def __call__(self, bursts: Mapping[int, Sequence[Burst]], elapsed_s: float) -> str | None:
        """Every replica's bursts so far and the seconds since the cell's start: why to stop it now, or None."""
        if not self.samples.watched or self.stopped:
            return None
        fewest = min(len(bursts.get(u, ())) for u in self.users)
        look = look_of(fewest, self.samples.first_look)
        if look is not None and look > self.looked:
            self.looked = look
            self.ready = self.judge({u: latencies(bursts.get(u, ())) for u in self.users})
        if self.ready and elapsed_s >= self.samples.min_s:
            return self.stop(self.ready, "precise" if self.samples.alone else "decided")
        if self.samples.window_s is None and fewest >= self.samples.cap:
            return self.stop(f"at its cap of {self.samples.cap} samples per user", "cap")
        return None

    def judge(self, users: Mapping[int, np.ndarray]) -> str:
        """This look's reason to stop ('' none): the alone cell's precision, or a sharing cell's verdict."""
        if self.samples.alone:
            b = alone_bounds(users[self.users[0]], self.rule)
            self.precision = b
            ratio = b.hi / b.lo if b.bounded and b.lo > 0 else math.inf
            return (
                f"alone p{self.rule.percentile} precise: hi/lo {ratio:.3f} <= {ALONE_PRECISION:g}"
                if (ratio <= ALONE_PRECISION)
                else ""
            )
        if self.alone is None or not self.alone.bounded:
            return ""
        self.decision = decide({str(u): v for u, v in users.items()}, self.alone, self.rule)
        d = self.decision
        return f"decided {d.verdict} at look {d.look}: {d.reason}" if d.verdict != "undecided" else ""

    def stop(self, why: str, by: str) -> str:
        self.stopped, self.stopped_by = why, by
        return why

    def columns(self, bursts: Iterable[Mapping[str, Any]], deadline: bool = False) -> dict[str, Any]:
        """The verdict columns of the cell's rows from the bursts it kept (``bursts.csv`` rows of this cell):
        a sharing cell's decision over every user (the final look), the alone cell's own p95 and interval.
        ``deadline``: the sweep's deadline stopped it."""
        users = {u: np.asarray([], float) for u in self.users}
        for b in bursts:
            r = int(b["replica"])
            if r in users:
                users[r] = np.append(users[r], float(b["end"]) - float(b["arrival"]))
        by = "deadline" if deadline else (self.stopped_by or ("cap" if self.samples.watched else ""))
        if self.samples.alone:
            return clean(self.alone_columns(users[self.users[0]], by))
        alone = self.alone or Bounds(math.nan, math.nan, math.nan, 0)
        d = decide({str(u): v for u, v in users.items()}, alone, self.rule)
        return clean(
            {
                "verdict": d.verdict,
                "users": d.users,
                "samples": d.samples,
                "worst_replica": d.worst,
                "worst_p95_slowdown": d.worst_slowdown,
                "worst_p95_slowdown_lo": d.worst_lo,
                "worst_p95_slowdown_hi": d.worst_hi,
                "pooled_p95_slowdown": d.pooled_slowdown,
                "pooled_p95_slowdown_lo": d.pooled_lo,
                "pooled_p95_slowdown_hi": d.pooled_hi,
                "alone_p95_s": alone.point,
                "alone_p95_lo_s": alone.lo,
                "alone_p95_hi_s": alone.hi,
                "below_one": d.below_one,
                "reason": d.reason if self.alone is not None else "no alone cell of this pattern and size measured yet",
                "stopped_by": by,
            }
        )

    def alone_columns(self, latency: np.ndarray, by: str) -> dict[str, Any]:
        """The alone cell's: its p95 and interval, and whether it reached its precision."""
        b = alone_bounds(latency, self.rule)
        ratio = b.hi / b.lo if b.bounded and b.lo > 0 else math.nan
        met = math.isfinite(ratio) and ratio <= ALONE_PRECISION
        why = (
            f"hi/lo {ratio:.3f} {'<=' if met else '>'} {ALONE_PRECISION:g}"
            if math.isfinite(ratio)
            else (f"{b.n} samples: no interval yet ({self.rule.alone_first_look()} needed)")
        )
        return {
            "users": 1,
            "samples": b.n,
            "alone_p95_s": b.point,
            "alone_p95_lo_s": b.lo,
            "alone_p95_hi_s": b.hi,
            "below_one": False,
            "reason": f"alone p{self.rule.percentile} interval {why}",
            "stopped_by": by,
        }


def clean(columns: dict[str, Any]) -> dict[str, Any]:
    """Plain Python values for the results row: numpy's as Python's, a number that is not finite as NaN
    (an empty field: not measured), a bool as a bool."""
    out: dict[str, Any] = {}
    for k, v in columns.items():
        if isinstance(v, (bool, np.bool_)):
            out[k] = bool(v)
        elif isinstance(v, (int, np.integer)):
            out[k] = int(v)
        elif isinstance(v, (float, np.floating)):
            out[k] = float(v) if math.isfinite(v) else math.nan
        else:
            out[k] = v
    return out


def latencies(bursts: Sequence[Burst]) -> np.ndarray:
    return np.fromiter((b.end - b.arrival for b in bursts), float, len(bursts))


def sweep_alone(out: Path, engine: str, pattern: str, particles: int) -> np.ndarray:
    """The latencies of the alone baseline a folder holds for ``pattern`` at ``particles`` (its workload
    ``engine``): the victim's bursts of its measured (not warm-up), ok cells of the baseline mode, every
    sweep of the folder (a resumed sweep reuses them). Empty when there are none."""
    empty = np.asarray([], float)
    if not (Path(out) / RESULTS_CSV).exists() or not (Path(out) / BURSTS_CSV).exists():
        return empty
    rows = load_results(out)
    keep = (
        rows["mode"].map(is_baseline).astype(bool)
        & (rows["engine"].astype(str) == engine)
        & (pd.to_numeric(rows["particles"], errors="coerce") == particles)
        & (rows["cell_status"] == "ok")
        & ~rows["warmup"].astype(bool)
    )
    cells = set(rows.loc[keep, "cell_id"].astype(str))
    if not cells:
        return empty
    bursts = load_bursts(out)
    mine = bursts[
        bursts["cell_id"].astype(str).isin(cells)
        & (bursts["pattern"].astype(str) == pattern)
        & (pd.to_numeric(bursts["replica"], errors="coerce") == 0)
        & ~bursts["warmup"].astype(bool)
    ]
    return np.asarray(mine["end"].astype(float) - mine["arrival"].astype(float), float)
