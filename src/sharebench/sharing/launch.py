"""How one cell's replicas are started and ended: one value for the cell's run, one launcher interface.

:class:`CellRun` is everything about one cell's run (its plan, the job every replica's starts from,
its folder, the extra environment, the timeouts, the start delay, the poll interval, an optional check
at the barrier). A :class:`Launcher` starts a replica for it, stops replicas still running, and takes
them back when the cell is over; ``sharebench.sharing.executor.run_cell(run, launcher)`` does the
barrier and the collection the same way for every launcher:

* :class:`FreshLauncher`: a new process per replica and cell (``--fresh-replicas``; a program under
  process timing, which starts fresh, :attr:`Workload.starts_fresh`; the KFP step), ended with its whole
  process group when the cell is over;
* :class:`WarmLauncher`: processes kept from one cell to the next (``sharebench.sharing.pool``),
  set up before the first cell (:meth:`Launcher.prime`); a program under protocol timing is kept by
  its warm replica when it serves cells (``sharebench.workloads.program.ProgramHost``).

What a cell of a mode kind needs around its replicas (:attr:`KindSpec.helper`, e.g. the MPS control
daemon its replicas are clients of) is started by one hook, :meth:`Launcher.helper`, from the
:data:`HELPERS` table: a fresh launcher starts one for the cell, a warm one hands out its pool's.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from sharebench import processes
from sharebench.kernel import Barrier
from sharebench.modes import MPS_DAEMON
from sharebench.sharing.layout import CellPlan, ReplicaPlan
from sharebench.sharing.mps import MpsDaemon, exec_client_check
from sharebench.sharing.pool import ReplicaPool, Worker
from sharebench.workloads import REPLICA_MODULE, ReplicaJob, Workload
from sharebench.workloads.bursts import Burst

# a patterned cell's watcher (CellRun.watch): replica -> its bursts so far (its live record), seconds since the
# cell's start instant -> why to stop the cell now, or '' / None to go on
Watch = Callable[[Mapping[int, Sequence[Burst]], float], "str | None"]


@dataclass(frozen=True)
class CellRun:
    """One cell's run. ``job``: the job every replica's starts from (its workload, kernel run, barrier
    instant and pattern seed); ``env``: environment every replica gets beside its own;
    ``start_delay_s`` None: the launcher's; ``check_ready``: called with the replicas' pids once all
    are at the barrier, '' or why the cell must not start; ``on_progress``: called while a patterned cell
    runs, with the bursts its victim has done (``ReplicaJob.progress_file``), each time that grows;
    ``watch``: called while a patterned cell runs, each time its users' live records grow, with every
    replica's bursts so far and the seconds since the start instant; a reason it returns stops the cell
    (``sharebench.sharing.executor``: the stop file, which every replica watches)."""

    plan: CellPlan
    job: ReplicaJob
    folder: Path
    env: Mapping[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 900.0
    run_timeout_s: float | None = None
    start_delay_s: float | None = None
    poll_s: float = 0.02
    check_ready: Callable[[list[int]], str] | None = None
    on_progress: Callable[[int], None] | None = None  # a patterned cell: called with the victim's bursts done
    watch: Watch | None = None  # a patterned cell: its users' bursts so far -> why to stop it now ('' or None: go on)

    @property
    def workload(self) -> Workload:
        return self.job.workload


@dataclass(frozen=True)
class ReplicaFiles:
    """One replica's files in the cell's folder: its run config, its record, its log."""

    config: Path
    out: Path
    log: Path


class Replica(Protocol):
    """A started replica as the executor sees it."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def poll(self) -> int | None:
        """None while its cell runs; its exit status (0: its record is written) once done."""


def ready_file(folder: Path, replica: int) -> Path:
    """Replica ``replica``'s ready file in its cell's ``folder`` (the barrier's; a program writes its pid in it)."""
    return folder / f"ready.{replica}"


def replica_job(
    job: ReplicaJob, plan: CellPlan, rp: ReplicaPlan, barrier: Barrier | None = None, stop_file: str | None = None
) -> ReplicaJob:
    """One replica's job: the cell's, with its index, the cell's replica count, its device, CPUs and
    memory limit (a MIG instance's, unless the run sets its own), the cell's barrier and stop file."""
    memory = job.run.mem_limit_bytes or rp.memory_bytes or None
    run = replace(job.run, replica=rp.replica, device=rp.device, cpus=rp.cpus, mem_limit_bytes=memory)
    return replace(
        job,
        run=run,
        replicas=plan.n,
        barrier=barrier or job.barrier,
        stop_file=stop_file if stop_file is not None else job.stop_file,
    )


# ---------------------------------------------------------------- what a cell needs around its replicas


class CellHelper(Protocol):
    """A running helper of a cell (:attr:`KindSpec.helper`): what each replica's environment gets from
    it, and the cell's run as its clients."""

    def env(self, plan: CellPlan) -> dict[str, str]:
        """What every replica's environment gets from the helper (before the replica's own)."""

    def client(self, run: CellRun) -> CellRun:
        """``run`` with its replicas as the helper's clients (its environment, its check at the barrier)."""


@dataclass(frozen=True)
class MpsClients:
    """The replicas of an MPS cell as clients of one MPS control ``daemon``."""

    daemon: MpsDaemon

    def env(self, plan: CellPlan) -> dict[str, str]:
        return self.daemon.client_env(plan.mode.thread_pct)

    def client(self, run: CellRun) -> CellRun:
        """The client environment, and the check that every replica is a client (SHAREBENCH_MPS_CHECK=0
        skips it, e.g. where the daemon sees other PID namespaces); a program's replicas: the programs
        they start are the clients."""
        check: Callable[[list[int]], str] | None = self.daemon.check_clients
        if os.environ.get("SHAREBENCH_MPS_CHECK", "1") == "0":
            check = None
        if run.workload.is_program:
            readies = [ready_file(run.folder, rp.replica) for rp in run.plan.replicas]
            check = exec_client_check(check, run.workload.timing, readies)
        return replace(run, env={**self.env(run.plan), **run.env}, check_ready=check)


@contextlib.contextmanager
def cell_mps(plan: CellPlan, folder: Path) -> Iterator[CellHelper]:
    """A private MPS control daemon for one cell, its logs kept in the cell's folder; stopped after it."""
    with MpsDaemon(plan.device, keep_logs_in=folder, mode_label=plan.mode.label) as daemon:
        yield MpsClients(daemon)


def pool_mps(pool: ReplicaPool, plan: CellPlan) -> CellHelper:
    """The pool's MPS control daemon (started on first use, kept until the pool closes)."""
    return MpsClients(pool.mps_daemon(plan.device, plan.mode.label))


@dataclass(frozen=True)
class HelperKind:
    """How a helper named in :attr:`KindSpec.helper` is had: started for one cell (``for_cell``), or
    the one a pool of warm replicas keeps (``kept``)."""

    for_cell: Callable[[CellPlan, Path], contextlib.AbstractContextManager[CellHelper]]
    kept: Callable[[ReplicaPool, CellPlan], CellHelper]


# one row per helper a mode kind may name (KindSpec.helper); tests/vocabulary/test_kinds.py walks KINDS
HELPERS: dict[str, HelperKind] = {MPS_DAEMON: HelperKind(for_cell=cell_mps, kept=pool_mps)}


def helper_kind(plan: CellPlan) -> HelperKind | None:
    """The :data:`HELPERS` row of the plan's kind (None: its cells need none)."""
    return HELPERS[plan.helper] if plan.helper else None


class Launcher(ABC):
    """Starts a cell's replicas and ends them; a context manager that ends what it keeps."""

    start_delay_s: float = 0.5  # the start instant's delay after the barrier, unless the CellRun sets one

    def for_workload(self, workload: Workload) -> Launcher:
        """The launcher that runs replicas of ``workload`` (this one, unless it cannot)."""
        return self

    @abstractmethod
    def helper(self, plan: CellPlan, folder: Path) -> contextlib.AbstractContextManager[CellHelper | None]:
        """What the cell's kind needs around its replicas (:data:`HELPERS`; None: nothing), for the
        cell's duration."""

    @abstractmethod
    def start(self, run: CellRun, rp: ReplicaPlan, files: ReplicaFiles) -> Replica:
        """Start (or hand the cell to) replica ``rp``, with ``run.env`` and its own environment."""

    @abstractmethod
    def stop(self, replicas: list[Replica]) -> None:
        """Stop, now, the replicas still running (a failure, a timeout, an interrupt)."""

    @abstractmethod
    def finish(self, replicas: list[Replica], ok: bool) -> None:
        """The cell is over (``ok``: it went well): take its replicas back."""

    def prime(self, plans: list[CellPlan], job: ReplicaJob, ready_timeout_s: float = 900.0) -> list[str]:
        """Set up, before the first cell, the replicas the cells of ``plans`` (with ``job``) will need;
        one line per replica that could not."""
        return []

    def close(self) -> None:
        """End whatever the launcher keeps (a fresh launcher keeps nothing)."""
        return None

    def __enter__(self) -> Launcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FreshLauncher(Launcher):
    """A new replica process per replica and cell (``python -m sharebench.workloads.replica``), in a
    process group of its own; the cell's end ends every group."""

    def __init__(self, python: str = sys.executable, start_delay_s: float = 0.5) -> None:
        self.python = python
        self.start_delay_s = start_delay_s

    def helper(self, plan: CellPlan, folder: Path) -> contextlib.AbstractContextManager[CellHelper | None]:
        kind = helper_kind(plan)
        return kind.for_cell(plan, folder) if kind is not None else contextlib.nullcontext()

    def start(self, run: CellRun, rp: ReplicaPlan, files: ReplicaFiles) -> Replica:
        return processes.spawn(
            [self.python, "-m", REPLICA_MODULE, "--config", str(files.config), "--out", str(files.out)],
            log=files.log,
            env=dict(os.environ, **run.env, **rp.env, PYTHONUNBUFFERED="1"),
        )

    def stop(self, replicas: list[Replica]) -> None:
        processes.stop(fresh_processes(replicas))

    def finish(self, replicas: list[Replica], ok: bool) -> None:
        # the replicas have ended; what they started (an exec program's children) ends with them
        processes.stop(fresh_processes(replicas))


def fresh_processes(replicas: list[Replica]) -> list[subprocess.Popen]:
    return [r for r in replicas if isinstance(r, subprocess.Popen)]


class WarmLauncher(Launcher):
    """Warm replicas from a :class:`ReplicaPool`: a cell that went well leaves its replicas idle for the
    next; the others are ended. A program under process timing starts fresh (``fresh``,
    :attr:`Workload.starts_fresh`); under protocol timing a warm replica keeps it when it serves cells."""

    def __init__(self, pool: ReplicaPool) -> None:
        self.pool = pool
        self.start_delay_s = pool.start_delay_s  # warm replicas see the start file within a millisecond
        self.fresh = FreshLauncher(pool.python)

    def for_workload(self, workload: Workload) -> Launcher:
        return self.fresh if workload.starts_fresh else self

    def helper(self, plan: CellPlan, folder: Path) -> contextlib.AbstractContextManager[CellHelper | None]:
        kind = helper_kind(plan)  # the pool's, kept until close
        return contextlib.nullcontext(kind.kept(self.pool, plan) if kind is not None else None)

    def start(self, run: CellRun, rp: ReplicaPlan, files: ReplicaFiles) -> Replica:
        worker = self.pool.acquire(rp.device, rp.cpus, {**run.env, **rp.env})
        worker.send(files.config, files.out, files.log)
        return worker

    def stop(self, replicas: list[Replica]) -> None:
        # a warm one whose record is written waits for the pool's decision in finish
        processes.stop([w.proc for w in workers(replicas) if w.poll() is None])

    def finish(self, replicas: list[Replica], ok: bool) -> None:
        self.pool.release(workers(replicas), ok=ok)

    def prime(self, plans: list[CellPlan], job: ReplicaJob, ready_timeout_s: float = 900.0) -> list[str]:
        """Start, and set up all at once, the warm replicas the cells of ``plans`` will need (as many of
        each kind as the largest of those cells), the cells with a helper under the pool's (the MPS
        cells' under its daemon); a program's replicas start it and let it set up. A program that starts
        fresh (process timing): none started."""
        if job.workload.starts_fresh:
            return []
        need: dict[tuple, list] = {}
        for plan in plans:
            kind = helper_kind(plan)
            env0 = kind.kept(self.pool, plan).env(plan) if kind is not None else {}
            here: dict[tuple, list] = {}
            for rp in plan.replicas:
                env = {**env0, **rp.env}
                one = replica_job(job, plan, rp)
                here.setdefault(self.pool.key(rp.device, rp.cpus, env), []).append((rp.device, rp.cpus, env, one))
            for key, jobs in here.items():
                if len(jobs) > len(need.get(key, [])):
                    need[key] = jobs
        return self.pool.prime([job for jobs in need.values() for job in jobs], timeout_s=ready_timeout_s)

    def close(self) -> None:
        self.pool.close()


def workers(replicas: list[Replica]) -> list[Worker]:
    return [r for r in replicas if isinstance(r, Worker)]
