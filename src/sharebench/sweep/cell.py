"""One cell of a sweep measured: its replicas behind one start barrier, telemetry around them, its rows in the
results schema. ``measure_cell`` is the step both the local sweep (``sweep.runner``) and the KFP components run
for one cell (or one pod's part of it); ``check_cell`` marks a cell made of several pods failed when its pods
disagree.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sharebench.modes import BASELINE, parse_mode
from sharebench.results import CELLS_DIR, COLUMN_NAMES, EXTRA_PREFIX
from sharebench.sharing import FreshLauncher, Launcher, cell_run, run_cell
from sharebench.sharing.launch import Watch
from sharebench.sharing.timeslice import gpu_timeslice
from sharebench.sweep.bound import RunBound
from sharebench.sweep.plan import Cell, SweepPlan
from sharebench.sweep.resume import identity, work_key
from sharebench.telemetry import make_sampler
from sharebench.telemetry.disturbance import Probe
from sharebench.workloads import ReplicaJob, role


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
    watch: Watch | None = None,
) -> CellResult:
    """Run one cell (its replicas behind one start barrier, telemetry around them) under
    ``out_dir/cells/<cell>/``; returns its rows in the results schema. A failed replica never
    raises: its rows say so (``status``, ``cell_status``). With ``kept`` the replicas come from the
    sweep's launcher (warm ones kept from earlier cells, ``sharebench.sharing.launch``) and the sampler
    is the sweep's; without, fresh processes. ``run_timeout_s``: how long it may track (default: the
    config's ``run_timeout_s``, else :data:`FIRST_RUN_TIMEOUT_S`; a sweep passes its :class:`RunBound`'s);
    ``on_progress``: a patterned cell's victim's bursts done, while it runs (its progress bar); ``watch``: a
    patterned cell's watcher (``sweep.watch.CellWatch``: its early stop); without one it runs to its cap."""
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
            run = cell_run(
                cell.mode,
                cell_job(plan, cell, watched=watch is not None),
                cdir,
                plan=cell_plan,
                ready_timeout_s=plan.config.ready_timeout_s,
                run_timeout_s=run_timeout_s,
                on_progress=on_progress,
                watch=watch,
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


def cell_job(plan: SweepPlan, cell: Cell, watched: bool = False) -> ReplicaJob:
    """The job every replica of ``cell`` starts from; under a pattern, its seed (think times and arrivals:
    per cell, and per replica in the replica) and its sample rule's limit: the victim's most bursts (its cap;
    ``watched``: a few caps, the watcher ends the cell at its fewest user's, ``Samples.victim_count``), or an
    open loop's window in seconds (``SweepPlan.samples``)."""
    job = plan.replica_job(cell.particles)
    if not job.patterned:
        return job
    samples = plan.samples(cell)
    count = samples.victim_count(watched)
    return replace(job, pattern_seed=zlib.crc32(cell.id.encode()), count=count, window_s=samples.window_s)


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
