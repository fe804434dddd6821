"""A cell measured within the sweep's time limit (issue 35): the instant its schedule's cells must end by
(``Schedule.ends_at``), whatever set it (``--budget``, ``--stop-after``).

An unpatterned cell's run timeout is cut to the time left plus :data:`STOP_GRACE_S`
(:func:`cut_run_timeout`). A patterned cell started in time but running past the instant is stopped there by
:class:`StopAt`: the cell's stop file (``sharing.executor.STOP``, which the neighbours and the victim watch)
is written at that instant; the victim ends its burst and keeps the bursts measured so far, and
:func:`mark_stopped` says so in the rows (``cell_error``, status kept ok).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sharebench.files import write_atomic
from sharebench.results import CELLS_DIR
from sharebench.sharing.executor import STOP
from sharebench.sweep.bound import RunBound
from sharebench.sweep.cell import CellResult, Kept, measure_cell
from sharebench.sweep.plan import Cell, SweepPlan
from sharebench.sweep.schedule import Measured
from sharebench.workloads.job import victim_bursts

STOP_GRACE_S = 5.0  # an unpatterned cell may track this long past the deadline before it is stopped


def cut_run_timeout(given: float, ends_at: float | None, now: float | None = None) -> float:
    """An unpatterned cell's run timeout: ``given``, at most the time left before ``ends_at`` plus
    :data:`STOP_GRACE_S` (and at least 1 s); ``given`` with no limit."""
    if ends_at is None:
        return given
    left = ends_at - (time.monotonic() if now is None else now)
    return max(1.0, min(given, left + STOP_GRACE_S))


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


@dataclass(frozen=True)
class Within:
    """What a sweep's cells run within: its id, kept replicas, run timeouts and the instant its cells end by."""

    sweep_id: str
    kept: Kept
    bound: RunBound
    ends_at: float | None = None
    on_progress: Callable[[int], None] | None = None  # a patterned cell's victim's bursts done


def measure_within(plan: SweepPlan, cell: Cell, out: Path, within: Within) -> tuple[CellResult, Measured]:
    """One cell of the sweep within its time limit: an unpatterned cell's run timeout cut to the time left
    (plus a grace), a patterned cell stopped at the limit with its bursts kept and marked. Its result, and
    what its schedule learns (a cell stopped at the limit, or failed, did not run whole)."""
    t0 = time.monotonic()
    job = plan.replica_job(cell.particles)
    timeout_s = within.bound.timeout_s(cell.particles)
    if not job.patterned:
        timeout_s = cut_run_timeout(timeout_s, within.ends_at)
    stop_file = out / CELLS_DIR / cell.folder / STOP
    with StopAt(stop_file, within.ends_at if job.patterned else None) as stop:
        result = measure_cell(
            plan,
            cell,
            out,
            sweep_id=within.sweep_id,
            kept=within.kept,
            run_timeout_s=timeout_s,
            on_progress=within.on_progress,
        )
    if stop.fired.is_set():
        asked = victim_bursts(plan.config.workload, plan.plans[cell.mode.label].n)
        note = mark_stopped(result.rows, result.bursts, asked)
        if note is not None:
            result.notes.append(note)
    whole = result.ok and not stop.fired.is_set()
    return result, Measured(cell, result.rows, time.monotonic() - t0, whole)
