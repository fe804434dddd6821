"""How one cell's replicas are started and ended: one value for the cell's run, one launcher interface.

:class:`CellRun` is everything about one cell's run (its plan, the base run config, its folder, the
extra environment, the timeouts, the start delay, the poll interval, an optional check at the
barrier). A :class:`Launcher` starts a replica for it, stops replicas still running, and takes them back
when the cell is over; ``sharebench.sharing.executor.run_cell(run, launcher)`` does the barrier and the
collection the same way for every launcher:

* :class:`FreshLauncher`: a new process per replica and cell (``--fresh-replicas``; the exec engine;
  the KFP step), ended with its whole process group when the cell is over;
* :class:`WarmLauncher`: processes kept from one cell to the next (``sharebench.sharing.pool``),
  set up before the first cell (:meth:`Launcher.prime`).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sharebench import processes
from sharebench.sharing.layout import CellPlan, ReplicaPlan
from sharebench.sharing.mps import MpsDaemon
from sharebench.sharing.pool import ReplicaPool, Worker
from sharebench.workloads import REPLICA_MODULE


@dataclass(frozen=True)
class CellRun:
    """One cell's run. ``base``: the run config every replica's starts from (``RunConfig.to_dict()``);
    ``env``: environment every replica gets beside its own; ``start_delay_s`` None: the launcher's;
    ``check_ready``: called with the replicas' pids once all are at the barrier, '' or why the cell
    must not start."""

    plan: CellPlan
    base: Mapping[str, Any]
    folder: Path
    env: Mapping[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 900.0
    run_timeout_s: float | None = None
    start_delay_s: float | None = None
    poll_s: float = 0.02
    check_ready: Callable[[list[int]], str] | None = None

    @property
    def engine(self) -> str:
        return str(self.base.get("engine") or "")


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


def replica_config(base: Mapping[str, Any], plan: CellPlan, rp: ReplicaPlan, **extra: Any) -> dict[str, Any]:
    """One replica's run config: the cell's, with its index, device, CPUs and memory limit (a MIG
    instance's, unless the run sets its own)."""
    cfg = dict(base, replica=rp.replica, replicas=plan.n, device=rp.device, cpus=rp.cpus, **extra)
    if rp.memory_bytes and not cfg.get("mem_limit_bytes"):
        cfg["mem_limit_bytes"] = rp.memory_bytes
    return cfg


class Launcher(ABC):
    """Starts a cell's replicas and ends them; a context manager that ends what it keeps."""

    start_delay_s: float = 0.5  # the start instant's delay after the barrier, unless the CellRun sets one

    def for_engine(self, engine: str) -> Launcher:
        """The launcher that runs replicas of ``engine`` (this one, unless it cannot)."""
        return self

    @abstractmethod
    def mps(self, plan: CellPlan, folder: Path) -> contextlib.AbstractContextManager[MpsDaemon]:
        """The MPS control daemon an MPS cell's replicas are clients of, for the cell's duration."""

    @abstractmethod
    def start(self, run: CellRun, rp: ReplicaPlan, files: ReplicaFiles) -> Replica:
        """Start (or hand the cell to) replica ``rp``, with ``run.env`` and its own environment."""

    @abstractmethod
    def stop(self, replicas: list[Replica]) -> None:
        """Stop, now, the replicas still running (a failure, a timeout, an interrupt)."""

    @abstractmethod
    def finish(self, replicas: list[Replica], ok: bool) -> None:
        """The cell is over (``ok``: it went well): take its replicas back."""

    def prime(self, plans: list[CellPlan], base: Mapping[str, Any], ready_timeout_s: float = 900.0) -> list[str]:
        """Set up, before the first cell, the replicas the cells of ``plans`` will need; one line per
        replica that could not."""
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

    def mps(self, plan: CellPlan, folder: Path) -> contextlib.AbstractContextManager[MpsDaemon]:
        return MpsDaemon(plan.device, keep_logs_in=folder, mode_label=plan.mode.label)

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
    next; the others are ended. The exec engine's programs start fresh (``fresh``)."""

    def __init__(self, pool: ReplicaPool) -> None:
        self.pool = pool
        self.start_delay_s = pool.start_delay_s  # warm replicas see the start file within a millisecond
        self.fresh = FreshLauncher(pool.python)

    def for_engine(self, engine: str) -> Launcher:
        return self.fresh if engine == "exec" else self

    @contextlib.contextmanager
    def mps(self, plan: CellPlan, folder: Path) -> Iterator[MpsDaemon]:
        yield self.pool.mps_daemon(plan.device, plan.mode.label)  # the pool's, kept until close

    def start(self, run: CellRun, rp: ReplicaPlan, files: ReplicaFiles) -> Replica:
        worker = self.pool.acquire(rp.device, rp.cpus, {**run.env, **rp.env})
        worker.send(files.config, files.out, files.log)
        return worker

    def stop(self, replicas: list[Replica]) -> None:
        # a warm one whose record is written waits for the pool's decision in finish
        processes.stop([w.proc for w in workers(replicas) if w.poll() is None])

    def finish(self, replicas: list[Replica], ok: bool) -> None:
        self.pool.release(workers(replicas), ok=ok)

    def prime(self, plans: list[CellPlan], base: Mapping[str, Any], ready_timeout_s: float = 900.0) -> list[str]:
        """Start, and set up all at once, the warm replicas the cells of ``plans`` will need (as many of
        each kind as the largest of those cells), the MPS cells' under the pool's daemon. The exec
        engine: none started."""
        if base.get("engine") == "exec":
            return []
        need: dict[tuple, list] = {}
        for plan in plans:
            mps = self.pool.mps_daemon(plan.device, plan.mode.label) if plan.mps else None
            env0 = mps.client_env(plan.mode.thread_pct) if mps is not None else {}
            here: dict[tuple, list] = {}
            for rp in plan.replicas:
                env = {**env0, **rp.env}
                job = replica_config(base, plan, rp)
                here.setdefault(self.pool.key(rp.device, rp.cpus, env), []).append((rp.device, rp.cpus, env, job))
            for key, jobs in here.items():
                if len(jobs) > len(need.get(key, [])):
                    need[key] = jobs
        return self.pool.prime([job for jobs in need.values() for job in jobs], timeout_s=ready_timeout_s)

    def close(self) -> None:
        self.pool.close()


def workers(replicas: list[Replica]) -> list[Worker]:
    return [r for r in replicas if isinstance(r, Worker)]
