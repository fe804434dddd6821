"""A budget that holds: when a sweep's cells must end, and which cell may still start (issue 35).

:class:`Deadline` is the instant (``time.monotonic()``) by which the sweep's cells end: the budget's end
less the report's time (``--budget``), or ``--stop-after`` seconds after the first cell. Before each cell
:meth:`Deadline.refuses` compares the cell's predicted length with the time left: the median wall time of
this sweep's measured cells of the same mode and size, else the plan's estimate, else (nothing known) the
cell starts only while a quarter of the limit is left.

:class:`DeadlineSchedule` is another schedule (``sweep.schedule``) within a deadline: it passes on the
cells of the one it wraps while they fit and stops at the first that does not. A ``Yielding`` schedule
(the capacity search) is asked instead how short its cell can be, told which cell was refused, and asked
for another: the deadline stops only when none fits, so the time left is used. The runner ends a cell
running past the instant (``sweep.within``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sharebench.sweep.plan import Cell
from sharebench.sweep.schedule import Measured, Schedule, Stop, Yielding

UNKNOWN_FRACTION = 0.25  # a cell with no prediction starts only while this fraction of the limit is left


@dataclass
class Deadline:
    """When the sweep's cells end (``ends_at``, ``time.monotonic()``; None: no limit), the limit it comes
    from (seconds) and this sweep's measured cell wall times per (mode, particles)."""

    ends_at: float | None
    limit_s: float = 0.0
    estimate: Callable[[Cell], float | None] = field(default=lambda _c: None)
    walls: dict[tuple[str, int], list[float]] = field(default_factory=dict)

    def left_s(self, now: float | None = None) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        if self.ends_at is None:
            return None
        return self.ends_at - (time.monotonic() if now is None else now)

    def predicted_s(self, cell: Cell) -> float | None:
        """The cell's predicted wall time: this sweep's median of the same (mode, size), else the plan's."""
        seen = self.walls.get((cell.mode.label, cell.particles))
        return statistics.median(seen) if seen else self.estimate(cell)

    def learn(self, cell: Cell, wall_s: float) -> None:
        self.walls.setdefault((cell.mode.label, cell.particles), []).append(wall_s)

    def refuses(self, cell: Cell, now: float | None = None, shortest_s: float | None = None) -> str | None:
        """Why ``cell`` may not start now (None: it may); ``shortest_s``: the fewest seconds it can take and
        be of use (a capacity probe's fewest samples), what is compared with the time left when given."""
        left = self.left_s(now)
        if left is None:
            return None
        if left <= 0:
            return f"not started: {cell.id}, no time left"
        predicted = shortest_s if shortest_s is not None else self.predicted_s(cell)
        if predicted is None:
            if left < UNKNOWN_FRACTION * self.limit_s:
                return f"not started: {cell.id}, length unknown and {left:.0f} s left (< {UNKNOWN_FRACTION:.0%})"
            return None
        if predicted > left:
            said = "its fewest samples take" if shortest_s is not None else "predicted"
            return f"not started: {cell.id}, {said} {predicted:.0f} s, {left:.0f} s left"
        return None


@dataclass
class DeadlineSchedule:
    """``inner``'s cells while each fits before the deadline (:class:`Deadline`); the first that does not
    stops it (``why``: the stop line's head, ``budget 10m reached`` or ``stopped after S s (--stop-after)``).
    ``from_first``: the deadline is ``deadline.limit_s`` seconds after the first cell is asked for
    (``--stop-after``), not ``deadline.ends_at``."""

    inner: Schedule
    deadline: Deadline
    why: str
    clock: Callable[[], float] = time.monotonic
    from_first: bool = False
    refused: str | None = None
    skipped: list[str] = field(default_factory=list)  # the cells a Yielding schedule was refused

    def next_cell(self) -> Cell | None:
        if self.refused is not None:
            return None
        last = None
        while (cell := self.inner.next_cell()) is not None:
            if self.from_first:  # --stop-after counts from the first cell
                self.deadline.ends_at, self.from_first = self.clock() + self.deadline.limit_s, False
            # a Yielding schedule goes on with another cell; the same cell again: it has no other course
            flexible = self.inner if isinstance(self.inner, Yielding) and cell != last else None
            why = self.deadline.refuses(cell, self.clock(), flexible.shortest_s(cell) if flexible else None)
            if why is None:
                return cell
            if flexible is None:
                self.refused = why
                return None
            self.skipped.append(why)
            flexible.refused(cell, why)
            last = cell
        return None

    def learn(self, measured: Measured) -> None:
        if measured.whole:
            self.deadline.learn(measured.cell, measured.wall_s)
        self.inner.learn(measured)

    def ahead(self) -> list[Cell]:
        return self.inner.ahead()

    def left(self) -> list[Cell]:
        return self.inner.left()

    def stopped(self) -> Stop | None:
        if self.refused is not None:
            return Stop(self.why, self.refused)
        if self.skipped and self.inner.left():
            return Stop(self.why, "; ".join(self.skipped))
        return self.inner.stopped()

    def ends_at(self) -> float | None:
        return self.deadline.ends_at

    def describe(self) -> list[str]:
        return self.inner.describe()

    def report(self) -> list[str]:
        return self.inner.report()
