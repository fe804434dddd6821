"""Run one cell: N replica processes sharing one device, started together.

Each replica is ``python -m sharebench.workloads.replica --config CFG.json --out REC.json``.
The start barrier: every replica builds, makes its particles and warms up,
then touches its ready file and waits for the start file. The parent waits for
all ready files (failing fast when a replica dies first, with a timeout), then
writes the start file atomically, holding an epoch instant slightly in the
future, so all N begin tracking at the same moment. Under a replica pattern
(``Workload.patterned``) every replica runs until the cell's stop file exists: the
victim (replica ``VICTIM``) creates it when it reaches its limit, the parent when the
victim ends, and the parent when the cell's watcher says so: while the cell runs,
the parent reads its users' live records (``progress.<replica>``, a line per burst:
``sharebench.workloads.bursts.LiveRecord``) at each poll, tells ``on_progress`` the
victim's bursts done and hands every replica's bursts so far to ``CellRun.watch`` (the
sweep's early stop, :class:`LiveCell`); a reason it returns is written to the stop file.

Each start of a cell is an *attempt* with an id of its own (:attr:`ReplicaJob.attempt`, new in every
job file): a replica writes it into its record, and :func:`read_record` takes no record of another
attempt, so a replica of a killed sweep that writes late into a folder ``--resume`` reuses is never
read as a measurement of the new sweep.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from sharebench.devices import DeviceInfo
from sharebench.errors import UserError, one_line
from sharebench.files import write_atomic
from sharebench.kernel import Barrier
from sharebench.modes import Mode
from sharebench.parse import format_cpu_set
from sharebench.results.store import read_json
from sharebench.sharing.launch import (
    CellRun,
    FreshLauncher,
    Launcher,
    Replica,
    ReplicaFiles,
    ready_file,
    replica_job,
)
from sharebench.sharing.layout import CellPlan, ReplicaPlan, plan_cell
from sharebench.workloads import PROGRESS_NAME, VICTIM, ReplicaJob, attempt_of
from sharebench.workloads.bursts import LiveRecord

_STOPPED = "stopped: another replica of the cell failed first"
STOP = "stop"  # a patterned cell's stop file: the victim is done, the neighbours stop


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        tail = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()][-lines:]
    except OSError:
        return ""
    return " | ".join(tail)


def cell_run(
    mode: Mode | str,
    job: ReplicaJob,
    folder: Path | str,
    *,
    device: DeviceInfo | dict[str, Any] | None = None,
    plan: CellPlan | None = None,
    **settings: Any,
) -> CellRun:
    """The :class:`CellRun` of ``mode`` (planned on ``device`` unless ``plan`` is given) with the
    replicas' job ``job``, in ``folder``; ``settings``: the other CellRun fields (timeouts, start delay, ...)."""
    if plan is None:
        if device is None:
            raise TypeError("cell_run needs device= or plan=")
        plan = plan_cell(mode, device)
    if not isinstance(job, ReplicaJob):
        raise TypeError(f"cell_run needs a ReplicaJob (ReplicaJob.of(workload, ...)), not {job!r}")
    return CellRun(plan=plan, job=job, folder=Path(folder), **settings)


def run_cell(run: CellRun, launcher: Launcher | None = None) -> list[dict[str, Any]]:
    """Run the N replicas of one cell; return one dict per replica (record or error).

    Every dict carries ``replica``, ``status`` ("ok"/"failed"), ``error``,
    ``cell_status``/``cell_error`` and the placement columns (``device_spec``,
    ``cpus``, ``cores``, ``sms``, ``mig_profile``, ``parent_uuid``,
    ``thread_pct``); ok ones carry the RunRecord fields. A crashed replica does
    not lose the others' records: the cell is marked failed with its error.
    KeyboardInterrupt (Ctrl-C, SIGTERM under MPS) stops every replica and the
    MPS daemon, then propagates.

    ``launcher`` (default: a :class:`FreshLauncher`) starts and ends the replicas: fresh processes,
    or warm ones kept from earlier cells (``WarmLauncher``); a program under process timing always
    starts fresh (``Workload.starts_fresh``). What the mode's kind needs around its replicas (an MPS cell: the
    control daemon they are clients of) comes from the launcher's :meth:`Launcher.helper`.
    """
    launcher = (launcher or FreshLauncher()).for_workload(run.workload)
    run.folder.mkdir(parents=True, exist_ok=True)
    if run.start_delay_s is None:
        run = replace(run, start_delay_s=launcher.start_delay_s)
    with launcher.helper(run.plan, run.folder) as helper:
        return _run(helper.client(run) if helper is not None else run, launcher)


def _run(run: CellRun, launcher: Launcher) -> list[dict[str, Any]]:
    replicas: list[Replica] = []
    rows: list[dict[str, Any]] = []
    try:
        rows = _run_replicas(run, launcher, replicas)
    finally:  # fresh replicas end; warm ones of a cell that went well wait for the next
        launcher.finish(replicas, ok=bool(rows) and all(r["cell_status"] == "ok" for r in rows))
    return rows


def _start(run: CellRun, launcher: Launcher, replicas: list[Replica]) -> list[ReplicaFiles]:
    """Write each replica's config and start it (appending to ``replicas``); their files."""
    start_file = run.folder / "start"
    stale_files = [start_file, run.folder / STOP, *run.folder.glob("ready.*"), *run.folder.glob("record.*.json")]
    for stale in [*stale_files, *run.folder.glob(f"{PROGRESS_NAME}.*")]:
        stale.unlink(missing_ok=True)
    files = []
    stop = str(run.folder / STOP) if run.job.patterned else None
    attempt = uuid.uuid4().hex[:16]  # this start of the cell: in every record its replicas write
    for rp in run.plan.replicas:
        barrier = Barrier(str(ready_file(run.folder, rp.replica)), str(start_file), run.job.barrier.start_at)
        job = replace(replica_job(run.job, run.plan, rp, barrier, stop), attempt=attempt)
        f = ReplicaFiles(
            run.folder / f"config.{rp.replica}.json",
            run.folder / f"record.{rp.replica}.json",
            run.folder / f"replica.{rp.replica}.log",
        )
        f.config.write_text(json.dumps(job.to_dict(), indent=2))
        replicas.append(launcher.start(run, rp, f))
        files.append(f)
    return files


def _run_replicas(run: CellRun, launcher: Launcher, replicas: list[Replica]) -> list[dict[str, Any]]:
    errors: dict[int, str] = {}
    try:
        files = _start(run, launcher, replicas)
        readies = [ready_file(run.folder, rp.replica) for rp in run.plan.replicas]
        # barrier: all ready, or fail fast
        deadline = time.monotonic() + run.ready_timeout_s
        while not all(r.exists() for r in readies):
            dead = [i for i, p in enumerate(replicas) if p.poll() is not None and not readies[i].exists()]
            if dead:
                for i in dead:
                    errors[i] = _replica_error(files[i], replicas[i].returncode, "before the start barrier")
                launcher.stop(replicas)
                break
            if time.monotonic() > deadline:
                for i, r in enumerate(readies):
                    if not r.exists():
                        errors[i] = f"not ready after {run.ready_timeout_s:g} s (setup too slow or hung)"
                launcher.stop(replicas)
                break
            time.sleep(run.poll_s)
        else:
            reason = run.check_ready([p.pid for p in replicas]) if run.check_ready is not None else ""
            if reason:
                launcher.stop(replicas)
                stopped = {
                    rp.replica: "stopped before tracking: the cell's check failed (see cell_error)"
                    for rp in run.plan.replicas
                }
                return _collect(run.plan, files, replicas, stopped, cell_error=reason)
            errors = _track(run, launcher, replicas)
    except BaseException:
        launcher.stop(replicas)
        raise
    return _collect(run.plan, files, replicas, errors)


def _track(run: CellRun, launcher: Launcher, replicas: list[Replica]) -> dict[int, str]:
    """Write the start file, then wait for the replicas to end (stopping them after ``run_timeout_s``), a
    patterned cell's live records read at each poll (:class:`LiveCell`); the replicas stopped, with why."""
    delay = run.start_delay_s or 0.0
    started = time.time() + delay
    write_atomic(run.folder / "start", repr(started))
    run_deadline = None if run.run_timeout_s is None else time.monotonic() + delay + run.run_timeout_s
    errors: dict[int, str] = {}
    stop = run.folder / STOP if run.job.patterned else None
    live = LiveCell(run, started) if stop is not None else None
    while any(p.poll() is None for p in replicas):
        if live is not None:
            live.look()
        if stop is not None and replicas[VICTIM].poll() is not None and not stop.exists():
            write_atomic(stop, "victim ended\n")  # the victim ended (a failure too): the neighbours stop
        if run_deadline is not None and time.monotonic() > run_deadline:
            for i, p in enumerate(replicas):
                if p.poll() is None:
                    errors[i] = f"still running {run.run_timeout_s:g} s after the start; stopped"
            launcher.stop(replicas)
            break
        time.sleep(run.poll_s)
    if live is not None:
        live.look(watch=False)  # the last bursts, done after the last look: the progress bar's
    return errors


class LiveCell:
    """A patterned cell's live records, read at each poll (``progress.<replica>``, one per user): the
    victim's bursts done told to ``run.on_progress`` when they grow; every replica's bursts so far handed to
    ``run.watch`` (with the seconds since the ``started`` instant) when any grew, and the stop file written
    once with the reason it returns. A watch that fails is dropped (the cell runs to its limit; ``error``
    says why): what the replicas measure is never lost to it."""

    def __init__(self, run: CellRun, started: float) -> None:
        self.records = {
            rp.replica: LiveRecord(run.folder / f"{PROGRESS_NAME}.{rp.replica}") for rp in run.plan.replicas
        }
        self.on_progress, self.watch, self.started = run.on_progress, run.watch, started
        self.stop_file = run.folder / STOP
        self.stopped = ""  # the watch's reason, once it gave one
        self.error = ""
        self.done = 0

    def look(self, watch: bool = True) -> None:
        grew = sum(record.read() for record in self.records.values())
        victim = self.records.get(VICTIM)
        if self.on_progress is not None and victim is not None and victim.done > self.done:
            self.done = victim.done
            self.on_progress(victim.done)
        if not (watch and grew and self.watch is not None and not self.stopped):
            return
        try:
            why = self.watch({i: r.bursts for i, r in self.records.items()}, time.time() - self.started)
        except Exception as exc:  # noqa: BLE001 - the measurement goes on without its early stop
            self.error, self.watch = one_line(f"{type(exc).__name__}: {exc}", 200), None
            return
        if why:
            self.stopped = why
            if not self.stop_file.exists():
                write_atomic(self.stop_file, f"{why}\n")


def read_record(path: Path, attempt: str) -> dict[str, Any] | None:
    """A replica's record (or its error record) of cell attempt ``attempt``, without the attempt; None
    when it wrote none, a torn one, or one of another attempt (a replica of a killed sweep, late)."""
    try:
        data = read_json(path, "record")
    except UserError:
        return None
    if data.pop("attempt", "") != attempt:
        return None
    return data


def _record(files: ReplicaFiles) -> dict[str, Any] | None:
    """The record of this attempt's replica: the attempt its job file (written by :func:`_start`) names."""
    return read_record(files.out, attempt_of(files.config))


def _replica_error(files: ReplicaFiles, rc: int | None, when: str = "") -> str:
    data = _record(files)
    if data and data.get("error"):
        return one_line(data["error"], 400)
    if data is None and files.out.exists():
        expected = attempt_of(files.config)
        try:
            found = read_json(files.out, "record").get("attempt") or "none"
        except UserError:
            found = expected
        if found != expected:
            return (
                f"its record is of another attempt ({found}, not {expected}): a replica of an earlier, killed "
                "sweep wrote it; not read"
            )
    tail = _log_tail(files.log)
    what = f"exited with status {rc}" + (f" {when}" if when else "")
    return one_line(f"{what}: {tail}" if tail else what, 400)


def _collect(
    plan: CellPlan, files: list[ReplicaFiles], replicas: list[Replica], errors: dict[int, str], cell_error: str = ""
) -> list[dict[str, Any]]:
    rows = []
    for rp, f, p in zip(plan.replicas, files, replicas):
        row: dict[str, Any] = {}
        err = errors.get(rp.replica)
        if err is None:
            data = _record(f)
            if data and not data.get("error") and p.returncode == 0:
                row.update(data)
            elif (errors or cell_error) and p.returncode is not None and p.returncode < 0:
                err = _STOPPED
            else:
                err = _replica_error(f, p.returncode)
        row.update(
            replica=rp.replica,
            device_spec=plan.device.spec or rp.device,
            cpus=format_cpu_set(rp.cpus) if rp.cpus else "",
            cores=rp.cores,
            sms=rp.sms,
            mig_profile=rp.mig_profile,
            # the physical GPU: the MIG instance's parent, else the device the replica itself reported
            parent_uuid=(rp.parent_uuid if rp.mig_uuid else row.get("device_uuid") or rp.parent_uuid),
            thread_pct=replica_thread_pct(plan, rp),
            status="failed" if err else "ok",
            error=err or "",
        )
        rows.append(row)
    failed = [r for r in rows if r["status"] == "failed"]
    causes = [r for r in failed if r["error"] != _STOPPED] or failed  # the root cause, not its victims
    if not cell_error:
        cell_error = "; ".join(f"replica {r['replica']}: {r['error']}" for r in causes)
    if not cell_error:
        cell_error = check_devices(plan, rows)
    for r in rows:
        r["cell_status"] = "failed" if cell_error else "ok"
        r["cell_error"] = cell_error
    return rows


def replica_thread_pct(plan: CellPlan, rp: ReplicaPlan) -> int | None:
    """The MPS thread percentage a replica ran with: its own (mig-emulated), else the mode's (mps:N@PCT)."""
    own = rp.env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
    if own:
        return int(own)
    return plan.mode.thread_pct if plan.mps else None


def check_devices(plan: CellPlan, rows: list[dict[str, Any]]) -> str:
    """'' if all replicas ran on the same physical device (MIG: the assigned instances of one GPU)."""
    seen = [str(r.get("device_uuid") or "") for r in rows]
    if plan.mode.spec.device_instances:  # one instance of the device each (MIG)
        wrong = [
            f"replica {rp.replica} on {u or '?'} instead of {rp.mig_uuid}"
            for rp, u in zip(plan.replicas, seen)
            if u and u != rp.mig_uuid
        ]
        parents = {rp.parent_uuid for rp in plan.replicas}
        if wrong:
            return "replicas not on their MIG instances: " + ", ".join(wrong)
        if len(parents) > 1:
            return "MIG instances on different GPUs: " + ", ".join(sorted(parents))
        return ""
    distinct = sorted(set(seen))
    if len(distinct) > 1:
        return "replicas ran on different devices: " + ", ".join(d or "?" for d in distinct)
    return ""
