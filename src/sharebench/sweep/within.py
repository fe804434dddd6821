"""A cell measured within the sweep's time limit (issue 35) and, under a pattern, watched until it is decided
(issue 42): the instant its schedule's cells must end by (``Schedule.ends_at``), whatever set it
(``--budget``, ``--stop-after``), and the cell's own sample rule.

An unpatterned cell's run timeout is cut to the time left plus :data:`STOP_GRACE_S`
(:func:`cut_run_timeout`). A patterned cell is watched while it runs (``sweep.watch.CellWatch``, against
the folder's alone baseline of its pattern and size, :func:`sharebench.sweep.watch.sweep_alone`): it stops
once every user's p95 is decided (the alone cell: once its p95 is precise), or at its cap; its rows carry
the verdict (``sweep.watch.VERDICT_COLUMNS``). One started in time but running past the instant is
stopped there by :class:`StopAt`: the cell's stop file (``sharing.executor.STOP``, which every replica
watches) is written at that instant; the replicas end their burst and keep the bursts measured so far,
and :func:`mark_stopped` says so in the rows (``cell_error``, status kept ok). The keep-awake control of
an alone cell (``sweep.plan.is_awake``) runs beside a keep-awake process (``workloads.awake.KeepAwake``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sharebench.analysis.samples import Samples, cell_users
from sharebench.analysis.tail import alone_bounds
from sharebench.files import write_atomic
from sharebench.patterns import parse_pattern
from sharebench.results import CELLS_DIR
from sharebench.sharing.executor import STOP
from sharebench.sweep.bound import RunBound
from sharebench.sweep.cell import CellResult, Kept, measure_cell
from sharebench.sweep.plan import Cell, SweepPlan, is_awake
from sharebench.sweep.schedule import Measured
from sharebench.sweep.watch import CellWatch, sweep_alone
from sharebench.workloads.awake import KeepAwake

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
    (plus a grace), a patterned cell watched until decided (its rows carry the verdict) and stopped at the
    limit with its bursts kept and marked. Its result, and what its schedule learns (a cell stopped at the
    limit, or failed, did not run whole)."""
    t0 = time.monotonic()
    job = plan.replica_job(cell.particles)
    timeout_s = within.bound.timeout_s(cell.particles)
    watch = cell_watch(plan, cell, out) if job.patterned else None
    if not job.patterned:
        timeout_s = cut_run_timeout(timeout_s, within.ends_at)
    else:
        timeout_s += patterned_s(plan, plan.samples(cell))
    stop_file = out / CELLS_DIR / cell.folder / STOP
    awake = KeepAwake(plan.device.spec, out / CELLS_DIR / cell.folder) if is_awake(cell) else None
    with StopAt(stop_file, within.ends_at if job.patterned else None) as stop, awake or contextlib.nullcontext():
        result = measure_cell(
            plan,
            cell,
            out,
            sweep_id=within.sweep_id,
            kept=within.kept,
            run_timeout_s=timeout_s,
            on_progress=within.on_progress,
            watch=watch if awake is None or not awake.error else None,
        )
    if stop.fired.is_set():
        note = mark_stopped(result.rows, result.bursts, plan.samples(cell).cap)
        if note is not None:
            result.notes.append(note)
    if watch is not None and result.ok:  # a failed cell carries its error, no verdict
        keep_verdict(result, watch, stop.fired.is_set())
    if awake is not None:
        awake_note(result, awake)
    whole = result.ok and not stop.fired.is_set()
    return result, Measured(cell, result.rows, time.monotonic() - t0, whole)


def cell_watch(plan: SweepPlan, cell: Cell, out: Path) -> CellWatch:
    """The watcher of a patterned cell: its sample rule, its users, the sweep's rule and (a sharing cell)
    the folder's alone baseline of its pattern and size."""
    samples = plan.samples(cell)
    workload = plan.config.workload
    users = cell_users(workload, plan.plans[cell.mode.label].n)
    alone = None
    if not samples.alone:
        baseline = sweep_alone(out, plan.workload, workload.pattern, cell.particles)
        alone = alone_bounds(baseline, plan.rule) if baseline.size else None
    return CellWatch(samples, users, plan.rule, alone)


def patterned_s(plan: SweepPlan, samples: Samples) -> float:
    """The seconds a patterned cell may take beyond its bursts' work: its window, or its cap's think times
    (what a run timeout of the exclusive run's multiple does not see), twice."""
    pattern = parse_pattern(plan.config.workload.pattern)
    if samples.window_s is not None:
        return 2 * samples.window_s
    return 2 * samples.victim_count(True) * float(pattern.think_s or 0.0)


def keep_verdict(result: CellResult, watch: CellWatch, deadline: bool) -> None:
    """The watched cell's verdict columns on each of its rows (over every burst it kept), and a note."""
    columns = watch.columns(result.bursts, deadline=deadline)
    for row in result.rows:
        row.update(columns)
    if result.rows and columns.get("below_one"):
        result.notes.append(
            f"{result.rows[0]['cell_id']}: below 1: a user's p95 faster shared than alone beyond doubt: the "
            "baseline, not the sharing, is off"
        )


def awake_note(result: CellResult, awake: KeepAwake) -> None:
    """The keep-awake control's line in the notes; a control that could not keep the device awake fails its
    cell (its rows would otherwise read as a plain alone cell)."""
    cell = result.rows[0]["cell_id"] if result.rows else "?"
    if awake.error:
        why = f"keep-awake control: the keep-awake process did not run ({awake.error})"
        for r in result.rows:
            r["cell_status"] = "failed"
            r["cell_error"] = "; ".join(x for x in (str(r.get("cell_error") or ""), why) if x)
        result.notes.append(f"{cell}: {why}")
    else:
        result.notes.append(f"{cell}: the alone cell beside a keep-awake process ({awake.line or 'no account'})")
