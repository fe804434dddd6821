"""Running a sweep: cell after cell, each cell's rows appended to ``results.csv`` as it ends.

``run_sweep(config, out_dir)`` validates everything first (``sharebench.sweep.plan``), records the
sweep and its provenance (while the warm replicas set up), then measures the cells in run order. With
a budget (``budget=sharebench.sweep.budget.budget_options(...)``) the cells are the budget plan's
(``sweep.budget.plan_budget``), and after each cell ``sweep.adaptive`` says what runs next: further
repeats of the cells not yet settled, what fits the time left. Ctrl-C stops the running cell; what
is on disk stays, and ``--resume`` continues the folder later. ``measure_cell`` is the step the KFP
components run for one cell (or one pod's part of it): the same code as the local sweep.
"""

from __future__ import annotations

import math
import re
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tqdm import tqdm

from sharebench.devices.host import load_average
from sharebench.errors import UserError
from sharebench.modes import BASELINE, parse_mode
from sharebench.results import (
    CELLS_DIR,
    COLUMN_NAMES,
    EXTRA_PREFIX,
    PROVENANCE_JSON,
    RESULTS_CSV,
    ResultsWriter,
    append_notes,
    append_sweep,
    load_results,
    write_provenance,
)
from sharebench.results.bursts import append_bursts
from sharebench.results.guard import check_new_folder, check_out_path, claim_folder, set_aside_torn_tail
from sharebench.sharing import FreshLauncher, Launcher, ReplicaPool, WarmLauncher, cell_run, run_cell
from sharebench.sharing.executor import STOP
from sharebench.sharing.timeslice import gpu_timeslice
from sharebench.sweep.adaptive import Schedule
from sharebench.sweep.budget import (
    RECORDED_ROOT,
    REPORT_S,
    BudgetOptions,
    BudgetPlan,
    Calibration,
    fmt_duration,
    model_key,
    plan_budget,
    recorded_calibration,
)
from sharebench.sweep.calibrate import auto_sized, calibrate, folder_particles
from sharebench.sweep.capacity import CapacityOptions, CapacitySchedule
from sharebench.sweep.deadline import Deadline, StopAt, mark_stopped
from sharebench.sweep.load import resolve_sweep_load, resume_config
from sharebench.sweep.plan import Cell, SweepConfig, SweepPlan, mode_fits, plan_mode, validate
from sharebench.sweep.probe import split_cells, sweep_probe
from sharebench.sweep.resume import check_same_work, identity, work_key
from sharebench.telemetry import collect_provenance, make_sampler
from sharebench.telemetry.disturbance import Probe
from sharebench.workloads import role
from sharebench.workloads.job import victim_bursts

WARM_DIR = "warm"  # the warm replicas' set-up files and their MPS daemon's logs
# the default run timeout, when --run-timeout is not given (RunBound): every cell's wait ends
RUN_TIMEOUT_FLOOR_S = 60.0
RUN_TIMEOUT_FACTOR = 20.0
# before any exclusive run of the sweep is measured: the ceiling of a predicted run timeout, and the timeout
# itself when nothing predicts the exclusive run (no recorded results of the GPU model, no calibration)
FIRST_RUN_TIMEOUT_S = 3600.0
PREDICTED_SETUP_S = 120.0  # a replica's set-up (kernel build, upload) allowed beside a predicted track time
RECORDED_ENGINE = "simpletrack"  # the engine the recorded results (sweep.budget.recorded_results) measured


@dataclass
class CellResult:
    """What measuring one cell gave: its rows in the results schema (one per replica, failed ones
    included) and what the sweep should note (telemetry that did not start, ...)."""

    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    bursts: list[dict[str, Any]] = field(default_factory=list)  # bursts.csv rows (replica patterns only)

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(r.get("cell_status") == "ok" for r in self.rows)


@dataclass
class RunBound:
    """How long a cell may track (``CellRun.run_timeout_s``): ``--run-timeout`` when given, else
    max(60 s, 20 x the exclusive replica's track_s at the cell's size + its setup_s), the longest exclusive
    run of that size measured in the folder; a size not measured yet scales the nearest measured size's
    track time by the particle counts. Before any exclusive run is measured, the same from the
    ``predicted`` exclusive track time (the recorded results of the GPU model, or the sweep's calibration)
    and ``predicted_setup_s``, never above :data:`FIRST_RUN_TIMEOUT_S` (1 h); nothing predicted: 1 h.
    A replica that never ends (stopped with SIGSTOP while tracking, a hung program) fails its cell, not
    the whole sweep."""

    given: float | None = None
    exclusive: dict[int, tuple[float, float]] = field(default_factory=dict)  # particles -> (track_s, setup_s)
    predicted: Calibration | None = None  # the exclusive run's track time before one is measured
    predicted_setup_s: float = 0.0

    def learn(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Keep the exclusive runs' times among ``rows`` (results rows)."""
        for r in rows:
            if r.get("mode_kind") != BASELINE or r.get("status") != "ok":
                continue
            try:
                p, track, setup = int(r["particles"]), float(r["track_s"]), float(r.get("setup_s") or 0.0)
            except (KeyError, TypeError, ValueError):
                continue
            setup = setup if math.isfinite(setup) else 0.0
            if p > 0 and math.isfinite(track) and track >= 0:
                old = self.exclusive.get(p, (0.0, 0.0))
                self.exclusive[p] = (max(old[0], track), max(old[1], setup))

    def timeout_s(self, particles: int) -> float:
        if self.given is not None:
            return self.given
        if not self.exclusive:
            track = self.predicted_track_s(particles)
            if track is None:
                return FIRST_RUN_TIMEOUT_S
            bound = max(RUN_TIMEOUT_FLOOR_S, RUN_TIMEOUT_FACTOR * track + self.predicted_setup_s)
            return min(FIRST_RUN_TIMEOUT_S, bound)
        near = min(self.exclusive, key=lambda p: abs(math.log(p / max(particles, 1))))
        track, setup = self.exclusive[near]
        return max(RUN_TIMEOUT_FLOOR_S, RUN_TIMEOUT_FACTOR * track * max(particles, 1) / near + setup)

    def predicted_track_s(self, particles: int) -> float | None:
        """The predicted exclusive track time at ``particles`` (None: no prediction, or not a finite one)."""
        if self.predicted is None or not self.predicted.rates:
            return None
        track = self.predicted.exclusive_s(max(particles, 1))
        return track if math.isfinite(track) and track > 0 else None

    def waiting(self, particles: int, *, brief: bool = False) -> str:
        """What a cell waits for and its limit, while no exclusive run is measured ('' once one is, or
        with --run-timeout): stderr's answer to a bar at 0%; ``brief``: the progress bar's."""
        if self.given is not None or self.exclusive:
            return ""
        limit = self.timeout_s(particles)
        track = self.predicted_track_s(particles)
        if brief:
            why = "no prediction" if track is None else f"predicted {track:.3g} s"
            return f"first runs: timeout {limit:.0f} s ({why}; ceiling {FIRST_RUN_TIMEOUT_S:g} s)"
        if track is None:
            why = "nothing predicts it: no recorded results of this GPU model, no calibration"
        else:
            capped = " (capped)" if limit >= FIRST_RUN_TIMEOUT_S else ""
            why = f"{RUN_TIMEOUT_FACTOR:g} x the predicted {track:.3g} s{capped}"
        return (
            f"waiting for its replicas to track {particles:,} particles; run timeout {limit:.0f} s ({why}; "
            f"ceiling {FIRST_RUN_TIMEOUT_S:g} s until an exclusive run is measured)"
        )


def new_sweep_id() -> str:
    """A sweep's id: its UTC start time."""
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")


@dataclass
class Kept:
    """What a sweep keeps from one cell to the next: its replica launcher (warm replicas, or fresh ones
    with ``--fresh-replicas``) and its telemetry sampler (paused between cells, so no cell pays for
    starting one)."""

    launcher: Launcher = field(default_factory=FreshLauncher)
    sampler: Any = None

    def close(self) -> None:
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None
        self.launcher.close()


def _start_sampler(plan: SweepPlan, cdir: Path, notes: list[str], kept: Kept | None = None) -> Any:
    """The cell's telemetry sampler, started (or resumed, when the sweep keeps one); None (and a note)
    if it cannot start."""
    interval = plan.config.telemetry_interval_s
    if not interval:
        return None
    try:
        cdir.mkdir(parents=True, exist_ok=True)
        if kept is not None and kept.sampler is not None:
            return kept.sampler.resume(cdir / "telemetry.csv")
        sampler = make_sampler(plan.device, interval_s=interval, out_path=cdir / "telemetry.csv").start()
        if kept is not None:
            kept.sampler = sampler
        return sampler
    except Exception as exc:  # noqa: BLE001 - telemetry is optional: the measurement goes on without it
        notes.append(f"telemetry: sampler failed to start ({type(exc).__name__}: {exc})")
        return None


def _stop_sampler(sampler: Any, notes: list[str], kept: Kept | None = None) -> dict[str, Any]:
    if sampler is None:
        return {}
    try:
        summary = dict((sampler.pause() if kept is not None else sampler.stop()) or {})
    except Exception as exc:  # noqa: BLE001 - telemetry is optional
        notes.append(f"telemetry: sampler failed to stop ({type(exc).__name__}: {exc})")
        return {}
    return {k: v for k, v in summary.items() if k.startswith(EXTRA_PREFIX)}


def measure_cell(
    plan: SweepPlan,
    cell: Cell,
    out_dir: Path | str,
    *,
    sweep_id: str = "",
    kept: Kept | None = None,
    run_timeout_s: float | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> CellResult:
    """Run one cell (its replicas behind one start barrier, telemetry around them) under
    ``out_dir/cells/<cell>/``; returns its rows in the results schema. A failed replica never
    raises: its rows say so (``status``, ``cell_status``). With ``kept`` the replicas come from the
    sweep's launcher (warm ones kept from earlier cells, ``sharebench.sharing.launch``) and the sampler
    is the sweep's; without, fresh processes. ``run_timeout_s``: how long it may track (default: the
    config's ``run_timeout_s``, else :data:`FIRST_RUN_TIMEOUT_S`; a sweep passes its :class:`RunBound`'s);
    ``on_progress``: a patterned cell's victim's bursts done, while it runs (its progress bar)."""
    if run_timeout_s is None:
        run_timeout_s = RunBound(plan.config.run_timeout_s).timeout_s(cell.particles)
    cell_plan = plan.plans[cell.mode.label]
    cdir = Path(out_dir) / CELLS_DIR / cell.folder
    notes: list[str] = []
    sampler = _start_sampler(plan, cdir, notes, kept)
    summary: dict[str, Any] = {}
    probe = Probe(plan.device)  # what else kept the host/GPU busy (sharebench.telemetry.disturbance)
    try:
        with gpu_timeslice(plan.device, cell_plan.mode, allowed=plan.config.allow_gpu_settings, say=notes.append):
            job = plan.replica_job(cell.particles)
            if job.patterned:  # think times and arrivals: seeded per cell (and per replica, in the replica)
                job = replace(job, pattern_seed=zlib.crc32(cell.id.encode()))
            run = cell_run(
                cell.mode,
                job,
                cdir,
                plan=cell_plan,
                ready_timeout_s=plan.config.ready_timeout_s,
                run_timeout_s=run_timeout_s,
                on_progress=on_progress,
            )
            recs = run_cell(run, kept.launcher if kept is not None else None)
    finally:
        summary = {**_stop_sampler(sampler, notes, kept), **probe.stop()}
    lattice = Path(plan.config.workload.lattice).name if plan.config.workload.lattice else "generated"
    shared = identity(plan.config, plan.turns, plan.workload)
    rows = []
    for rec in recs:
        row = {k: v for k, v in rec.items() if k in COLUMN_NAMES}
        row.setdefault("engine", plan.workload)
        row.setdefault("exec_timing", plan.exec_timing)
        row.setdefault("particles", cell.particles)
        row.setdefault("turns", plan.turns)
        row.update(
            sweep_id=sweep_id,
            cell_id=cell.id,
            mode=cell_plan.mode.label,
            mode_kind=cell.mode.kind,
            replicas=cell_plan.n,
            repeat=cell.repeat,
            warmup=cell.warmup,
            device_class=plan.device.kind,
            backend=plan.device.backend,
            lattice=lattice,
            **summary,
        )
        row["work_key"] = work_key(shared, cell.id, plan.device.name or plan.device.kind)
        row["warm_cells"] = (rec.get("extra") or {}).get("warm_cells")  # 0: a fresh process
        if plan.config.workload.patterned:
            row["pattern"] = (rec.get("extra") or {}).get("pattern") or replica_pattern(plan, row)
        rows.append(row)
    return CellResult(rows, notes, cell_bursts(recs, rows))


def replica_pattern(plan: SweepPlan, row: dict[str, Any]) -> str:
    """The pattern a replica followed: the victim's or the neighbours' (:meth:`Workload.pattern_of`)."""
    return plan.config.workload.pattern_of(int(row.get("replica") or 0))


def cell_bursts(recs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bursts.csv rows of a cell (``sharebench.results.bursts``): every burst its replicas recorded."""
    out = []
    for rec, row in zip(recs, rows):
        extra = rec.get("extra") or {}
        for i, arrival, start, end, units in extra.get("bursts") or []:
            out.append(
                dict(
                    sweep_id=row["sweep_id"],
                    cell_id=row["cell_id"],
                    mode=row["mode"],
                    repeat=row["repeat"],
                    warmup=row["warmup"],
                    replica=row["replica"],
                    role=extra.get("role") or role(int(row["replica"])),
                    pattern=row.get("pattern") or extra.get("pattern"),
                    i=i,
                    arrival=arrival,
                    start=start,
                    end=end,
                    units=units,
                )
            )
    return out


def _check_resume(out: Path, plan: SweepPlan, notes: list[str]) -> set[str]:
    """Cells already measured (ok) in out; refuses to mix another device model or class into the folder."""
    if not (out / RESULTS_CSV).exists():
        return set()
    df = load_results(out)
    dev = plan.device

    def model(name: Any) -> str:  # "NVIDIA H200 MIG 1g.18gb" is an H200
        return re.sub(r"\s+MIG\s.*$", "", str(name or "")).strip()

    for r in df[["device_class", "backend", "device_name"]].drop_duplicates().itertuples():
        if (r.device_class, r.backend) != (dev.kind, dev.backend) or (
            model(r.device_name) and model(dev.name) and model(r.device_name) != model(dev.name)
        ):
            raise UserError(
                f"{out} holds results measured on {r.device_name or '?'} ({r.backend}, {r.device_class}); "
                f"this run's device is {dev.name} ({dev.backend}, {dev.kind}): "
                "use another --out (and compare the two with sharebench compare A B)"
            )
    uuids = sorted({u for u in df["parent_uuid"] if isinstance(u, str) and u})
    if dev.uuid and uuids and dev.uuid not in uuids and dev.kind == "gpu":
        notes.append(f"resumed on another physical device of the same model ({dev.uuid}; before: {', '.join(uuids)})")
    # another workload resumed into the folder has its own cells under the same ids
    return set(df.loc[(df["cell_status"] == "ok") & (df["engine"] == plan.workload), "cell_id"])


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


def _weight(plan: SweepPlan, cell: Cell) -> float:
    """A cell's work as the progress bar counts it: its victim's bursts under a pattern (the bar moves
    per burst, :class:`CellProgress`), else millions of particle-turns (it moves per cell)."""
    if plan.config.workload.patterned:
        return victim_bursts(plan.config.workload, plan.replicas(cell.mode))
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


def run_sweep(
    config: SweepConfig,
    out_dir: Path | str,
    *,
    on_cell: Callable[[list[dict[str, Any]]], None] | None = None,
    budget: BudgetOptions | None = None,
    t_start: float | None = None,
    capacity: CapacityOptions | None = None,
) -> Path:
    """Run the sweep into out_dir (results.csv, provenance.json, sweep.json, notes.txt, cells/); returns
    out_dir. The report is built from it by ``sharebench.report.build_report``. ``budget``: the budget
    and adaptive repeats (its ``budget_s`` set); ``t_start``: the budget's clock (``time.monotonic()``
    at the command's start; default now)."""
    start = time.monotonic() if t_start is None else t_start
    out = Path(out_dir)
    if (out / RESULTS_CSV).exists() and not config.resume:
        raise UserError(f"{out} already holds {RESULTS_CSV}; use --resume to continue it, or another --out")
    plan = validate(config)
    budget_plan = None  # planned (and a budget that holds too little refused) before the folder is made
    if budget is not None and budget.budget_s is not None and capacity is None:  # a search plans itself
        resumed = out if config.resume else None
        budget_plan = plan_budget(plan, budget, folder_particles(resumed) if auto_sized(plan) else ())
    check_out_path(out)
    with claim_folder(out):  # one sweep at a time; results.guard says what the folder keeps safe
        if config.resume:
            shared = identity(resume_config(config, out, plan.device.uuid), plan.turns, plan.workload)
            check_same_work(out, shared, plan.workload, device_model=plan.device.name or plan.device.kind)
            torn = set_aside_torn_tail(out)
        else:
            check_new_folder(out)
            torn = None
        return _sweep(plan, out, on_cell, [torn] if torn else [], Clock(budget, start, budget_plan, capacity))


@dataclass(frozen=True)
class Clock:
    """A sweep's budget (None: none; see ``sweep.budget``) and its clock's start (``time.monotonic()``)."""

    budget: BudgetOptions | None
    t_start: float
    plan: BudgetPlan | None = None  # sweep.budget.plan_budget's, when the budget is set
    capacity: CapacityOptions | None = None  # --capacity: the searches (sweep.capacity)

    @property
    def budget_s(self) -> float | None:
        return None if self.budget is None else self.budget.budget_s


def _schedule(
    plan: SweepPlan, out: Path, notes: list[str], clock: Clock
) -> tuple[SweepPlan, Schedule | CapacitySchedule]:
    """The plan at its sizes (a calibration's, or the budget plan's) and what runs: the plan's cells not
    measured yet (on --resume), or with a budget the adaptive queue seeded with the folder's measured rows."""
    config = plan.config
    if clock.capacity is not None:
        return capacity_schedule(plan, out, notes, clock)
    resumed = out if config.resume else None
    bp = clock.plan
    if bp is not None:
        plan = plan.with_particles(bp.particles)
        notes += [f"budget plan: {line.strip()}" for line in bp.describe().splitlines()]
    elif auto_sized(plan):  # sweep.calibrate
        plan, note = calibrate(plan, resumed)
        notes.append(note)
    done = _check_resume(out, plan, notes) if config.resume else set()
    if done:
        notes.append(f"resumed: {len(done)} cell(s) already on disk were kept and not re-run")
    if bp is None or clock.budget is None:
        return plan, Schedule([c for c in plan.cells() if c.id not in done])
    rows: list[Mapping[str, Any]] = []
    if done:
        df = load_results(out)
        rows = df[df["cell_id"].isin(done) & (df["engine"] == plan.workload)].to_dict("records")
    return plan, Schedule.budgeted(bp, clock.budget, rows, clock.t_start)


def capacity_schedule(plan: SweepPlan, out: Path, notes: list[str], clock: Clock) -> tuple[SweepPlan, CapacitySchedule]:
    """The schedule of a capacity search (``sweep.capacity``): the alone cells and any mode given with its
    N first, then each family's probes; with a budget, bounded by it (its clock the command's)."""
    options = clock.capacity
    assert options is not None
    if auto_sized(plan):
        plan, note = calibrate(plan, None)
        notes.append(note)
    starts = {m.label for m in options.start_modes()}
    fixed = [c for c in plan.cells() if c.mode.label not in starts]
    searches = options.searches(plan.config.slo, plan.config.workload.pattern)
    notes += [f"capacity plan: {line.strip()}" for line in options.describe(plan.config.slo)]
    return plan, CapacitySchedule(
        out,
        searches,
        fixed,
        plan.particles[0],
        options,
        lambda m: mode_fits(plan, m),
        budget_s=clock.budget_s,
        t_start=clock.t_start,
        end_s=clock.plan.overheads.end_s if clock.plan is not None else 10.0,
    )


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


def run_bound(plan: SweepPlan, out: Path, notes: list[str], calibration: Calibration | None = None) -> RunBound:
    """The sweep's run timeouts (:class:`RunBound`), seeded with a resumed folder's exclusive runs; before
    one is measured, predicted from ``calibration`` (a budget's) or the recorded results of the GPU model."""
    bound = RunBound(plan.config.run_timeout_s)
    if bound.given is None:
        if plan.config.resume and (out / RESULTS_CSV).exists():
            df = load_results(out)
            bound.learn(df[df["engine"] == plan.workload].to_dict("records"))
        source = predict_exclusive(bound, plan, calibration)
        notes.append(
            f"run timeout: no --run-timeout; a cell may track max({RUN_TIMEOUT_FLOOR_S:g} s, "
            f"{RUN_TIMEOUT_FACTOR:g} x the exclusive run's track_s + setup_s) at its size; before an exclusive "
            f"run is measured, the same from {source}, at most {FIRST_RUN_TIMEOUT_S:g} s"
        )
        first = bound.waiting(plan.particles[0]) if plan.particles else ""
        if first:
            tqdm.write(f"sharebench: first cell: {first}", file=sys.stderr)
    return bound


def predict_exclusive(bound: RunBound, plan: SweepPlan, calibration: Calibration | None) -> str:
    """Give ``bound`` a predicted exclusive run (the calibration's, else the recorded results of the
    plan's GPU model for the recorded engine and default lattice) and say where it comes from."""
    if calibration is not None and calibration.rates:
        bound.predicted, bound.predicted_setup_s = calibration, PREDICTED_SETUP_S
        return f"the calibration ({calibration.source})"
    model = model_key(plan.device.name)
    if not model or plan.workload != RECORDED_ENGINE or not plan.particles:
        return "nothing (no recorded results apply to this device and workload)"
    if plan.run_config(plan.particles[0]).lattice is not None:
        return "nothing (the recorded results track the default lattice)"
    try:
        recorded, _ = recorded_calibration(model, RECORDED_ROOT, plan.turns, backend=plan.device.backend)
    except (UserError, ValueError, KeyError, OSError) as exc:
        return f"nothing ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
    bound.predicted, bound.predicted_setup_s = recorded, PREDICTED_SETUP_S
    return f"the recorded results of {model} ({recorded.source})"


def _say_stopped(notes: list[str], schedule: Schedule | CapacitySchedule, out: Path, why: str) -> None:
    """A sweep that stopped with cells left (``--stop-after``, or the budget spent): a note and a line on stderr."""
    left = schedule.unfinished() if schedule.plan is not None else schedule.queue
    msg = f"{why}: {len(left)} of {schedule.ran + len(left)} cell(s) not run; continue with --resume --out {out}"
    notes.append(msg)
    # through tqdm: the progress bar's line is cleared first and redrawn after, never glued to this one
    tqdm.write(f"sharebench: {msg}", file=sys.stderr)


def sweep_deadline(config: SweepConfig, clock: Clock) -> Deadline:
    """When the sweep's cells end (``sweep.deadline``): the budget's end less the report's time, else
    ``--stop-after`` seconds from now (the first cell), else never. The prediction of a cell not measured
    yet: the budget plan's cost of its block."""
    bp = clock.plan

    def estimate(cell: Cell) -> float | None:
        block = bp.block(cell.mode.label, cell.particles) if bp is not None else None
        return bp.cost_s(block) if bp is not None and block is not None else None

    if clock.budget_s is not None:
        end_s = bp.overheads.end_s if bp is not None else REPORT_S
        return Deadline(clock.t_start + clock.budget_s - end_s, clock.budget_s, estimate)
    if config.stop_after_s is not None:
        return Deadline(time.monotonic() + config.stop_after_s, config.stop_after_s, estimate)
    return Deadline(None)


def _stop_reason(config: SweepConfig, clock: Clock) -> str:
    if clock.budget_s is not None:
        return f"budget {fmt_duration(clock.budget_s)} reached"
    return f"stopped after {config.stop_after_s:g} s (--stop-after)"


@dataclass(frozen=True)
class Within:
    """What a sweep's cells run within: its id, kept replicas, run timeouts and deadline."""

    sweep_id: str
    kept: Kept
    bound: RunBound
    deadline: Deadline
    on_progress: Callable[[int], None] | None = None  # a patterned cell's victim's bursts done


def measure_within(plan: SweepPlan, cell: Cell, out: Path, within: Within) -> CellResult:
    """One cell of the sweep within its deadline: an unpatterned cell's run timeout cut to the time left
    (plus a grace), a patterned cell stopped at the deadline with its bursts kept and marked."""
    sweep_id, kept, bound, deadline = within.sweep_id, within.kept, within.bound, within.deadline
    t0 = time.monotonic()
    job = plan.replica_job(cell.particles)
    timeout_s = bound.timeout_s(cell.particles)
    if not job.patterned:
        timeout_s = deadline.run_timeout_s(timeout_s)
    stop_file = out / CELLS_DIR / cell.folder / STOP
    with StopAt(stop_file, deadline.ends_at if job.patterned else None) as stop:
        result = measure_cell(
            plan, cell, out, sweep_id=sweep_id, kept=kept, run_timeout_s=timeout_s, on_progress=within.on_progress
        )
    if stop.fired.is_set():
        asked = victim_bursts(plan.config.workload, plan.plans[cell.mode.label].n)
        note = mark_stopped(result.rows, result.bursts, asked)
        if note is not None:
            result.notes.append(note)
    elif result.ok:
        deadline.learn(cell, time.monotonic() - t0)
    return result


def _sweep(
    plan: SweepPlan,
    out: Path,
    on_cell: Callable[[list[dict[str, Any]]], None] | None,
    notes: list[str],
    clock: Clock,
) -> Path:
    config = plan.config
    writer = ResultsWriter(out)
    sweep_id = new_sweep_id()
    notes = list(plan.notes) + notes
    plan, load_rec = resolve_sweep_load(plan, out, notes, lambda p, c: capacity_bursts(p, c, out, sweep_id, writer))
    plan, schedule = _schedule(plan, out, notes, clock)
    cells = schedule.queue
    _record_sweep(out, sweep_id, plan, load_rec)
    probe, probe_notes = sweep_probe(plan)  # the GPU's time slices, before any replica is on it (sweep.probe)
    notes += probe_notes
    bar = _progress(cells, plan)
    bound = run_bound(plan, out, notes, clock.plan.calibration if clock.plan is not None else None)
    # warm replicas and the sampler: kept from cell to cell (sharebench.sharing.pool); --fresh-replicas
    # starts new ones for every cell
    kept = Kept(launcher=FreshLauncher() if config.fresh_replicas else WarmLauncher(ReplicaPool(out / WARM_DIR)))
    provenance = Provenance(out, sweep_id, plan, probe)
    provenance.start()
    try:
        notes += _prime(kept, plan, cells)  # while the provenance is collected
        notes += provenance.result()
        deadline = sweep_deadline(config, clock)  # --stop-after counts from the first cell
        while cells:
            cell = cells[0]
            refused = deadline.refuses(cell)
            if refused is not None:
                notes.append(refused)
                _say_stopped(notes, schedule, out, _stop_reason(config, clock))
                break
            plan = plan_mode(plan, cell.mode)  # a capacity search's next N, planned on demand
            if bar is not None:
                bar.set_postfix_str(
                    " ".join(filter(None, (cell.id, bound.waiting(cell.particles, brief=True)))), refresh=True
                )
            moving = CellProgress(bar, _weight(plan, cell)) if bar is not None else None
            result = measure_within(plan, cell, out, Within(sweep_id, kept, bound, deadline, moving))
            bound.learn(result.rows)
            if isinstance(kept.launcher, WarmLauncher):  # idle replicas found stopped and replaced (sharing.pool)
                notes += kept.launcher.pool.replaced
                kept.launcher.pool.replaced.clear()
            notes += result.notes
            writer.append(result.rows)
            append_bursts(out, result.bursts)
            if on_cell is not None:
                on_cell(result.rows)
            cells = schedule.after(cell, result.rows)
            if bar is not None and moving is not None:
                moving.finish()
                bar.total = max(bar.total, bar.n + sum(_weight(plan, c) for c in cells))
        else:
            if clock.budget_s is not None and schedule.unfinished():  # the budget spent: as --stop-after
                _say_stopped(notes, schedule, out, f"budget {fmt_duration(clock.budget_s)} reached")
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


def capacity_bursts(
    plan: SweepPlan, cell: Cell, out: Path, sweep_id: str, writer: ResultsWriter
) -> list[dict[str, Any]]:
    """The capacity alone of a ``serve:load=F`` sweep (``sweep.load``): its cell measured and kept in the
    folder (a warm-up row); its bursts. A failed cell: a one-line UserError (its rows stay on disk)."""
    result = measure_cell(plan, cell, out, sweep_id=sweep_id)
    for row in result.rows:  # its work (requests back to back) is not the sweep's: resume checks its GPU instead
        row["work_key"] = ""
    writer.append(result.rows)
    append_bursts(out, result.bursts)
    if not result.ok:
        errors = (
            "; ".join(dict.fromkeys(str(r.get("cell_error") or r.get("error")) for r in result.rows)) or "no replica"
        )
        raise UserError(f"the capacity cell {cell.id} failed: {errors}")
    return result.bursts


def check_cell(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mark a cell made of several pods failed when a pod's replica failed or, in a mode whose replicas
    share one whole device (time-slicing, MPS), the pods ran on different devices (the node's device plugin
    may hand a multi-GPU node's replicas out on several GPUs). A cell already failed stays failed."""
    if not rows:
        return rows
    errors = [f"replica {r.get('replica')}: {r.get('error')}" for r in rows if r.get("status") != "ok"]
    shared = parse_mode(str(rows[0].get("mode") or BASELINE)).spec.shared
    devices = sorted({str(r.get("device_uuid") or "?") for r in rows})
    if not errors and shared and len(devices) > 1:
        errors.append("replicas ran on different devices: " + ", ".join(devices))
    failed = [str(r["cell_error"]) for r in rows if r.get("cell_status") == "failed" and r.get("cell_error")]
    cell_error = "; ".join(dict.fromkeys(failed + errors))
    for r in rows:
        r["cell_status"] = "failed" if cell_error or r.get("cell_status") == "failed" else "ok"
        r["cell_error"] = cell_error
    return rows
