"""Running a sweep: cell after cell, each cell's rows appended to ``results.csv`` as it ends.

The runner keeps the results folder (:func:`open_folder`: one sweep at a time, a resumed folder's identity
checked, a torn last row set aside), records the sweep and its provenance (while the warm replicas set up),
then asks its schedule (``sweep.schedule``) for cell after cell (:func:`run_cells`), measures each within
the schedule's time limit (``sweep.within``) and hands the schedule what it measured. It knows nothing of
how the cells are chosen (``sweep.compose`` picks the schedule: a fixed plan, a budget's adaptive repeats,
a capacity search, a deadline). Ctrl-C stops the running cell; what is on disk stays, and ``--resume``
continues the folder later. One cell's measurement is ``sweep.cell.measure_cell``: the same code the KFP
components run.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tqdm import tqdm

from sharebench.devices.host import load_average
from sharebench.errors import UserError
from sharebench.processes import deferred
from sharebench.results import PROVENANCE_JSON, RESULTS_CSV, ResultsWriter, append_notes, append_sweep, write_provenance
from sharebench.results.bursts import append_bursts
from sharebench.results.guard import check_new_folder, check_out_path, claim_folder, set_aside_torn_tail
from sharebench.sharing import FreshLauncher, ReplicaPool, WarmLauncher
from sharebench.sweep.bound import Prediction, run_bound
from sharebench.sweep.cell import CellResult, Kept, measure_cell
from sharebench.sweep.plan import Cell, SweepConfig, SweepPlan, plan_mode
from sharebench.sweep.probe import split_cells, sweep_probe
from sharebench.sweep.resume import check_same_work, identity
from sharebench.sweep.schedule import Schedule, Stop
from sharebench.sweep.within import Within, measure_within
from sharebench.telemetry import collect_provenance

WARM_DIR = "warm"  # the warm replicas' set-up files and their MPS daemon's logs


def new_sweep_id() -> str:
    """A sweep's id: its UTC start time."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


@dataclass
class Folder:
    """A results folder held by one sweep: its id, the writer of its rows, and the notes its opening made
    (a torn last row set aside)."""

    out: Path
    sweep_id: str = field(default_factory=new_sweep_id)
    notes: list[str] = field(default_factory=list)
    writer: ResultsWriter = field(init=False)

    def __post_init__(self) -> None:
        self.writer = ResultsWriter(self.out)

    def keep(self, result: CellResult) -> None:
        """A cell's rows and bursts, written (flushed) to the folder together: a signal waits until both are
        (rows without their bursts would be a cell measured with nothing in it, never measured again)."""
        with deferred(signal.SIGINT), deferred(signal.SIGTERM), deferred(signal.SIGHUP):
            self.writer.append(result.rows)
            append_bursts(self.out, result.bursts)

    def measure(self, plan: SweepPlan, cell: Cell) -> CellResult:
        """One cell measured outside the sweep's schedule (fresh replicas, no time limit), not yet kept."""
        return measure_cell(plan, cell, self.out, sweep_id=self.sweep_id)


def check_fresh(config: SweepConfig, out: Path) -> None:
    """A folder that holds results is continued only with ``--resume``."""
    if (out / RESULTS_CSV).exists() and not config.resume:
        raise UserError(f"{out} already holds {RESULTS_CSV}; use --resume to continue it, or another --out")


@contextmanager
def open_folder(out: Path, plan: SweepPlan, resumed: Callable[[], SweepConfig]) -> Iterator[Folder]:
    """``out`` held for this sweep (``results.guard`` says what it keeps safe): a new folder must be empty; a
    resumed one must hold the same work (``resumed()``: the config its identity is checked against), its
    torn last row set aside."""
    check_out_path(out)
    with claim_folder(out):
        torn = None
        if plan.config.resume:
            shared = identity(resumed(), plan.turns, plan.workload)
            check_same_work(out, shared, plan.workload, device_model=plan.device.name or plan.device.kind)
            torn = set_aside_torn_tail(out)
        else:
            check_new_folder(out)
        yield Folder(out, notes=[torn] if torn else [])


def _record_sweep(out: Path, sweep_id: str, plan: SweepPlan, extra: Mapping[str, Any] | None = None) -> None:
    """The sweep's entry in sweep.json; ``started_unix`` is the sweep's start (``tools/cell_overhead.py``);
    ``extra``: more keys (a serve:load=F's capacity alone, ``sweep.load``)."""
    config = plan.config
    append_sweep(
        out,
        {
            "sweep_id": sweep_id,
            "config": config.to_dict(),
            "device": plan.device.to_dict(),
            "modes": [m.label for m in plan.modes],
            "particles": plan.particles,
            "turns": plan.turns,
            "identity": identity(config, plan.turns, plan.workload),
            "started_unix": time.time(),
            **(extra or {}),
        },
    )


def _record_provenance(out: Path, sweep_id: str, plan: SweepPlan, probe: dict[str, Any] | None = None) -> list[str]:
    """The sweep's provenance (a resumed folder keeps its first provenance.json; later sessions add their
    own beside it), with its time-slice probe (``sweep.probe``). Notes what could not be recorded."""
    config = plan.config
    name = PROVENANCE_JSON if not (out / PROVENANCE_JSON).exists() else f"provenance-{sweep_id}.json"
    try:
        prov = collect_provenance(
            plan.device,
            command=config.command if config.command is not None else sys.argv,
            config=config.to_dict(),
            timeslice_probe=probe,
        )
    except Exception as exc:  # noqa: BLE001 - provenance never costs the measurement
        return [f"provenance: collect failed ({type(exc).__name__}: {exc})"]
    write_provenance(out, prov, name=name)
    return []


class Provenance(threading.Thread):
    """The sweep's provenance, collected in a thread while the warm replicas set up in the sweep's own
    (they must start there: their parent-death signal fires when the thread that started them ends)."""

    def __init__(self, out: Path, sweep_id: str, plan: SweepPlan, probe: dict[str, Any] | None) -> None:
        super().__init__(name="sharebench-provenance", daemon=True)
        self.out, self.sweep_id, self.plan, self.probe = out, sweep_id, plan, probe
        self.notes: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.notes = _record_provenance(self.out, self.sweep_id, self.plan, self.probe)
        except BaseException as exc:  # noqa: BLE001 - handed to the sweep's thread by result()
            self.error = exc

    def result(self) -> list[str]:
        self.join()
        if self.error is not None:
            raise self.error
        return self.notes


def _prime(kept: Kept, plan: SweepPlan, cells: list[Cell]) -> list[str]:
    """Every warm replica the cells need, set up at once before the first cell."""
    if not cells:
        return []
    modes = list(dict.fromkeys(c.mode.label for c in cells))
    job = plan.replica_job(cells[0].particles)
    return kept.launcher.prime([plan.plans[m] for m in modes], job, plan.config.ready_timeout_s)


def _weight(plan: SweepPlan, cell: Cell) -> float:
    """A cell's work as the progress bar counts it: its victim's expected bursts under a pattern (the bar
    moves per burst, :class:`CellProgress`), else millions of particle-turns (it moves per cell)."""
    if plan.config.workload.patterned:
        return plan.samples(cell).expected
    return plan.replicas(cell.mode) * cell.particles * plan.turns / 1e6


class CellProgress:
    """The bar's position within a patterned cell: the bursts its victim has done, on top of the cells before."""

    def __init__(self, bar: tqdm, weight: float) -> None:
        self.bar, self.base, self.weight = bar, bar.n, weight

    def __call__(self, done: int) -> None:
        self.bar.n = self.base + min(done, self.weight)
        self.bar.refresh()

    def finish(self) -> None:
        self.bar.n = self.base
        self.bar.update(self.weight)


def _progress(cells: list[Cell], plan: SweepPlan) -> tqdm | None:
    if not plan.config.progress:
        return None
    return tqdm(
        total=sum(_weight(plan, c) for c in cells),
        unit="bursts" if plan.config.workload.patterned else "M particle-turns",
        unit_scale=False,
        dynamic_ncols=True,
        file=sys.stderr,
        bar_format="{l_bar}{bar}| {n:.3g}/{total:.3g} {unit} [{elapsed}<{remaining}{postfix}]",
    )


def say_stopped(notes: list[str], out: Path, stop: Stop, left: int, ran: int) -> None:
    """A sweep that stopped with cells left (``--stop-after``, or the budget spent): a note and a line on stderr."""
    if stop.detail is not None:
        notes.append(stop.detail)
    msg = f"{stop.why}: {left} of {ran + left} cell(s) not run; continue with --resume --out {out}"
    notes.append(msg)
    # through tqdm: the progress bar's line is cleared first and redrawn after, never glued to this one
    tqdm.write(f"sharebench: {msg}", file=sys.stderr)


@dataclass
class Sweep:
    """What the runner runs: the plan at its sizes, the schedule of its cells, the notes so far (notes.txt),
    more keys of its entry in sweep.json, and what predicts the exclusive run before one is measured (the
    run timeouts, ``sweep.bound``)."""

    plan: SweepPlan
    schedule: Schedule
    notes: list[str] = field(default_factory=list)
    record: Mapping[str, Any] = field(default_factory=dict)
    predicted: Prediction | None = None


def run_cells(folder: Folder, sweep: Sweep, on_cell: Callable[[list[dict[str, Any]]], None] | None = None) -> Path:
    """Measure the cells the sweep's schedule gives, one after the other, into ``folder``; then (the schedule
    done) the runs of one replica beside the time-slice probe, and the notes. ``on_cell``: called with each
    cell's rows once they are on disk."""
    out, sweep_id, plan, notes, schedule = folder.out, folder.sweep_id, sweep.plan, sweep.notes, sweep.schedule
    cells = schedule.ahead()
    _record_sweep(out, sweep_id, plan, sweep.record)
    probe, probe_notes = sweep_probe(plan)  # the GPU's time slices, before any replica is on it (sweep.probe)
    notes += probe_notes
    bar = _progress(cells, plan)
    bound = run_bound(plan, out, notes, sweep.predicted)
    # warm replicas and the sampler: kept from cell to cell (sharebench.sharing.pool); --fresh-replicas
    # starts new ones for every cell
    fresh = plan.config.fresh_replicas
    kept = Kept(launcher=FreshLauncher() if fresh else WarmLauncher(ReplicaPool(out / WARM_DIR)))
    provenance = Provenance(out, sweep_id, plan, probe)
    provenance.start()
    try:
        notes += _prime(kept, plan, cells)  # while the provenance is collected
        notes += provenance.result()
        plan, ran = _measure_cells(folder, sweep, Within(sweep_id, kept, bound), bar, on_cell)
        stop = schedule.stopped()
        if stop is not None:
            say_stopped(notes, out, stop, len(schedule.left()), ran)
        else:  # the last step: one replica beside one probe per size (sweep.probe), the GPU to themselves
            kept.close()
            notes += split_cells(plan, out, sweep_id, probe)
    finally:
        kept.close()
        if bar is not None:
            bar.close()
        notes += schedule.report()
        load = load_average()
        if load:  # how busy the machine was: other jobs distort shared-mode timings
            notes.append("load average at the end: " + " / ".join(f"{v:.2f}" for v in load) + " (1, 5, 15 min)")
        append_notes(out, sweep_id, notes)
    return out


def _measure_cells(
    folder: Folder,
    sweep: Sweep,
    within: Within,
    bar: tqdm | None,
    on_cell: Callable[[list[dict[str, Any]]], None] | None,
) -> tuple[SweepPlan, int]:
    """The loop: the schedule's next cell measured within its time limit, kept, learnt from, until it has
    none; the plan with every mode it ran, and how many cells ran."""
    plan, schedule, notes, ran = sweep.plan, sweep.schedule, sweep.notes, 0
    while (cell := schedule.next_cell()) is not None:
        plan = plan_mode(plan, cell.mode)  # a mode the schedule chose on the way (a search's next N), planned
        if bar is not None:
            waiting = within.bound.waiting(cell.particles, brief=True)
            bar.set_postfix_str(" ".join(filter(None, (cell.id, waiting))), refresh=True)
        moving = CellProgress(bar, _weight(plan, cell)) if bar is not None else None
        limits = replace(within, ends_at=schedule.ends_at(), on_progress=moving)
        result, measured = measure_within(plan, cell, folder.out, limits)
        within.bound.learn(result.rows)
        launcher = within.kept.launcher
        if isinstance(launcher, WarmLauncher):  # idle replicas found stopped and replaced (sharing.pool)
            notes += launcher.pool.replaced
            launcher.pool.replaced.clear()
        notes += result.notes
        folder.keep(result)
        if on_cell is not None:
            on_cell(result.rows)
        ran += 1
        schedule.learn(measured)
        if bar is not None and moving is not None:
            moving.finish()
            bar.total = max(bar.total, bar.n + sum(_weight(plan, c) for c in schedule.ahead()))
    return plan, ran
