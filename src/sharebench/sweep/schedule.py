"""What a sweep runs next: one protocol for every way of choosing cells (issue 41).

The runner (``sweep.runner``) asks a :class:`Schedule` for the next cell, measures it and hands the
schedule what it measured (:class:`Measured`), until the schedule has none left; it knows nothing of how
the cells are chosen. The ways of choosing, each a schedule in its own module:

* ``sweep.fixed.FixedSchedule``: the plan's cells in run order (those a resumed folder holds left out);
* ``sweep.adaptive.AdaptiveSchedule``: a budget plan's cells, then further repeats of the blocks not yet
  settled, what fits the time left;
* ``sweep.capacity.CapacitySchedule``: the alone cells, then each family's probes of users per GPU;
* ``sweep.deadline.DeadlineSchedule``: another schedule within a time limit (``--budget``,
  ``--stop-after``): a cell that no longer fits is refused, and the cells end by its instant.

A schedule whose cells can end early and whose next cell can be another (the capacity search) is also
:class:`Yielding`: a deadline asks it how short a cell can be and tells it which cell it refused, and goes
on with the next it gives.

Which schedule runs for which options is ``sweep.compose``'s one decision. A new way of choosing cells is
one new module that implements this protocol, and one line there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from sharebench.sweep.plan import Cell


@dataclass(frozen=True)
class Measured:
    """One cell as measured: its rows (results rows, one per replica), the seconds its measurement took,
    and whether it ran whole (ok, not stopped at a time limit: its time predicts the next of its kind)."""

    cell: Cell
    rows: Sequence[Mapping[str, Any]]
    wall_s: float = 0.0
    whole: bool = True


@dataclass(frozen=True)
class Stop:
    """Why a schedule ended with cells left: ``why`` heads the stop line (``budget 10m reached``);
    ``detail`` names the cell refused (a note of its own), when one was."""

    why: str
    detail: str | None = None


class Schedule(Protocol):
    """The cells of a sweep, chosen one at a time."""

    def next_cell(self) -> Cell | None:
        """The cell to measure now; None when the schedule is done (or stopped: :meth:`stopped` says why)."""
        ...

    def learn(self, measured: Measured) -> None:
        """Take in what the cell :meth:`next_cell` gave measured."""
        ...

    def ahead(self) -> list[Cell]:
        """The cells it would measure from now, in order, as it knows them now (the progress bar's total,
        the warm replicas set up before the first cell)."""
        ...

    def left(self) -> list[Cell]:
        """What is left to measure, counted in the stop line and continued by ``--resume``."""
        ...

    def stopped(self) -> Stop | None:
        """Why it ended with cells left (None: it finished, or has not ended)."""
        ...

    def ends_at(self) -> float | None:
        """The instant (``time.monotonic()``) by which its cells must end; None: no limit."""
        ...

    def describe(self) -> list[str]:
        """What it would run, as ``--dry-run`` prints it."""
        ...

    def report(self) -> list[str]:
        """The lines it adds to the sweep's notes at the end."""
        ...


@runtime_checkable
class Yielding(Protocol):
    """A schedule that a deadline (``sweep.deadline``) may refuse a cell of and still go on: it says how
    short a cell can be and still tell it something, and takes another course when one is refused."""

    def shortest_s(self, cell: Cell) -> float | None:
        """The fewest seconds ``cell`` can take and still be of use (None: not known; the deadline's own
        prediction then)."""
        ...

    def refused(self, cell: Cell, why: str) -> None:
        """The deadline refused ``cell`` (``why``: its note); :meth:`Schedule.next_cell` then gives another
        cell, or None."""
        ...
