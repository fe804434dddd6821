"""A budget that holds: when a sweep's cells must end, which cell may still start, and a patterned cell
stopped at that instant (issue 35).

:class:`Deadline` is the instant (``time.monotonic()``) by which the sweep's cells end: the budget's end
less the report's time (``--budget``), or ``--stop-after`` seconds after the first cell. Before each cell
:meth:`Deadline.refuses` compares the cell's predicted length with the time left: the median wall time of
this sweep's measured cells of the same mode and size, else the plan's estimate, else (nothing known) the
cell starts only while a quarter of the limit is left. A patterned cell started in time but running past
the deadline is stopped there by :class:`StopAt`: the cell's stop file (``sharing.executor.STOP``, which
the neighbours and the victim watch) is written at that instant; the victim ends its burst and keeps the
bursts measured so far, and :func:`mark_stopped` says so in the rows (``cell_error``, status kept ok).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharebench.files import write_atomic
from sharebench.sweep.plan import Cell

UNKNOWN_FRACTION = 0.25  # a cell with no prediction starts only while this fraction of the limit is left
STOP_GRACE_S = 5.0  # an unpatterned cell may track this long past the deadline before it is stopped


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

    def refuses(self, cell: Cell, now: float | None = None) -> str | None:
        """Why ``cell`` may not start now (None: it may)."""
        left = self.left_s(now)
        if left is None:
            return None
        if left <= 0:
            return f"not started: {cell.id}, no time left"
        predicted = self.predicted_s(cell)
        if predicted is None:
            if left < UNKNOWN_FRACTION * self.limit_s:
                return f"not started: {cell.id}, length unknown and {left:.0f} s left (< {UNKNOWN_FRACTION:.0%})"
            return None
        if predicted > left:
            return f"not started: {cell.id}, predicted {predicted:.0f} s, {left:.0f} s left"
        return None

    def run_timeout_s(self, given: float, now: float | None = None) -> float:
        """An unpatterned cell's run timeout: ``given``, at most the time left plus :data:`STOP_GRACE_S`."""
        left = self.left_s(now)
        return given if left is None else max(1.0, min(given, left + STOP_GRACE_S))


class StopAt:
    """Writes a patterned cell's stop file at ``at`` (``time.monotonic()``) unless cancelled first;
    ``fired`` says whether it did. A context manager: started on entry, cancelled on exit."""

    def __init__(self, stop_file: Path, at: float | None) -> None:
        self.stop_file, self.at = stop_file, at
        self.fired = threading.Event()
        self.timer: threading.Timer | None = None

    def fire(self) -> None:
        self.fired.set()
        try:
            write_atomic(self.stop_file, "stopped at the budget\n")
        except OSError:  # the cell's folder gone: the cell ended anyway
            pass

    def __enter__(self) -> StopAt:
        if self.at is not None:
            self.timer = threading.Timer(max(0.0, self.at - time.monotonic()), self.fire)
            self.timer.daemon = True
            self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.timer is not None:
            self.timer.cancel()


def mark_stopped(rows: list[dict[str, Any]], bursts: list[dict[str, Any]], asked: int | None) -> str | None:
    """A patterned cell stopped at the budget: each row's ``cell_error`` says after how many of the asked
    bursts (the rows stay ``ok``: every burst kept was measured in full); the note, or None when the victim
    had finished its bursts anyway."""
    done = sum(1 for b in bursts if b.get("role") == "victim")
    if asked is not None and done >= asked:
        return None
    why = f"stopped at the budget after {done} of {asked if asked is not None else '?'} bursts"
    for r in rows:
        r["cell_error"] = "; ".join(x for x in (str(r.get("cell_error") or ""), why) if x)
    return f"{rows[0]['cell_id'] if rows else '?'}: {why}"
