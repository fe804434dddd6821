"""Warm replicas: replica processes kept from one cell of a sweep to the next (issue 15: a cheaper campaign).

A fresh replica starts Python, creates its device context, loads the lattice, builds the kernel and
makes its particles for every cell: seconds per cell on a GPU. A :class:`ReplicaPool` keeps each
replica process (``python -m sharebench.workloads.replica --serve``) once its cell is done, and gives it
the next cell that needs a replica started the same way: same device, same CPUs, same environment
(an MPS client with the same thread percentage and memory limit is interchangeable; a plain process
is not an MPS client). What a warm replica keeps is its context, its built engine and its last
particle state in page-locked memory (``sharebench.kernel.run.WarmRunner``); its timed window is
the same as a fresh one's. A program (the exec engine, protocol timing) that serves cells is kept by its
warm replica too (``sharebench.workloads.program.ProgramHost``): its interpreter, model and device
context stay up between cells.

Idle replicas hold a context on the device but submit no work. The pool holds one MPS control
daemon for all the MPS cells of the sweep, started when the first MPS replica is set up
(``WarmLauncher.prime`` sets every replica up before the first cell); the idle
MPS server then stays up while other cells run. A replica whose cell failed is stopped and not reused. ``close``
ends the replicas (end of input, then SIGTERM) and then the daemon.

A sweep whose program is one of the built-in PyTorch programs (``workloads.forkserver.PROGRAMS``) gets a fork
server before its replicas are primed (:meth:`ReplicaPool.start_fork_server`): it imports PyTorch once, and
each replica's program is a fork of it (CUDA initialised in the fork, never in the server) instead of an
interpreter that imports PyTorch again; its socket reaches the replicas in their environment.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any

import psutil

from sharebench import processes
from sharebench.errors import UserError
from sharebench.sharing.mps import MpsDaemon
from sharebench.workloads import REPLICA_MODULE, ReplicaJob
from sharebench.workloads.forkserver import READY_TIMEOUT_S, SOCKET_ENV, module_of
from sharebench.workloads.protocol import split_command

# process states in which an idle replica cannot take a cell (checked before it is handed one)
FROZEN = (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP, psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
MAX_IDLE = 16  # idle replicas kept at most (each holds a device context and its last particle state)
MAX_PRIMED = 64  # a sweep that primes more (every replica its cells need) keeps up to this many idle


class Worker:
    """One warm replica process; ``key``: how it was started (device, CPUs, environment)."""

    def __init__(self, key: tuple, proc: subprocess.Popen) -> None:
        self.key = key
        self.proc = proc
        self.out: Path | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, config: Path, out: Path, log: Path, *, prime: bool = False) -> None:
        """Give the replica its next cell: it runs it and writes its record at ``out`` (``prime``: it
        only sets up for it and writes "ok" or its error there)."""
        self.out = out
        assert self.proc.stdin is not None
        job = {"prime" if prime else "config": str(config), "out": str(out), "log": str(log)}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    def poll(self) -> int | None:
        """None while the cell runs; 0 when its record is written; the exit status if the process ended."""
        if self.out is not None and self.out.exists():
            return 0
        rc = self.proc.poll()
        if rc is not None and self.out is not None and self.out.exists():
            return 0
        return rc

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def frozen(self) -> str:
        """'' when the process can take a cell; else why not: stopped (SIGSTOP, a debugger) or a zombie.
        A stopped replica would never reach the barrier: handed a cell, it costs the whole ready timeout."""
        try:
            status = psutil.Process(self.proc.pid).status()
        except psutil.Error:
            return "gone"
        return status if status in FROZEN else ""

    def kill(self) -> None:
        """SIGKILL to its group (what a stopped process obeys at once), then reap it."""
        processes.signal_group(self.proc, signal.SIGKILL)
        self.proc.wait()

    def end_input(self) -> None:
        """Close the replica's input: it ends once its current job is done."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except (OSError, ValueError):
            pass

    def stop(self, grace_s: float = processes.GRACE_S) -> None:
        """End the process and its group: end of input, up to 2 s, then SIGTERM, the grace period, SIGKILL
        (``sharebench.processes.stop``)."""
        if self.proc.poll() is None:
            self.end_input()
            try:
                self.proc.wait(timeout=min(grace_s, 2.0))
            except subprocess.TimeoutExpired:
                pass
        processes.stop([self.proc], grace_s=grace_s)

    def terminate(self) -> None:
        """SIGTERM to the replica's group."""
        processes.signal_group(self.proc, signal.SIGTERM)


class ReplicaPool:
    """Warm replica processes for the cells of one sweep; a context manager that ends them all.

    >>> with WarmLauncher(ReplicaPool(out / "workers")) as launcher:   # doctest: +SKIP
    ...     rows = run_cell(cell_run(mode, job, cell_dir, plan=plan), launcher)
    """

    def __init__(
        self, folder: Path | str, *, python: str = sys.executable, max_idle: int = MAX_IDLE, start_delay_s: float = 0.05
    ) -> None:
        self.folder = Path(folder)
        self.python = python
        self.max_idle = max_idle
        self.start_delay_s = start_delay_s  # warm replicas see the start file within a millisecond
        self.idle: OrderedDict[int, Worker] = OrderedDict()  # pid -> worker, least recently used first
        self.busy: dict[int, Worker] = {}
        self.mps: MpsDaemon | None = None
        self.started = 0  # replica processes started (a cell reused the others)
        self.replaced: list[str] = []  # idle replicas found unable to take a cell (stopped, ended), why
        self.forkserver: processes.Child | None = None  # imports PyTorch once for the replicas' programs
        self.forkserver_env: dict[str, str] = {}

    def __enter__(self) -> ReplicaPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def mps_daemon(self, device: Any, mode_label: str) -> MpsDaemon:
        """The pool's MPS control daemon, started on first use and kept until :meth:`close`."""
        if self.mps is None or not self.mps.running:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.mps = MpsDaemon(device, keep_logs_in=self.folder, mode_label=mode_label).start()
        return self.mps

    @staticmethod
    def key(device: str, cpus: list[int] | None, env: dict[str, str]) -> tuple:
        """What makes two replicas interchangeable: the device, the CPUs, the environment."""
        return (device, tuple(cpus or ()), tuple(sorted(env.items())))

    def acquire(self, device: str, cpus: list[int] | None, env: dict[str, str]) -> Worker:
        """An idle replica started this way, or a new one."""
        key = self.key(device, cpus, env)
        for pid, w in list(self.idle.items()):
            if w.key == key:
                del self.idle[pid]
                why = w.frozen() if w.alive() else "ended"
                if not why:
                    self.busy[pid] = w
                    return w
                if why == "ended":
                    w.stop()  # died while idle: start another
                else:
                    w.kill()
                self.replaced.append(f"warm replica {pid} {why} while idle: ended and replaced")
        proc = processes.spawn(
            [self.python, "-m", REPLICA_MODULE, "--serve"],
            env=dict(os.environ, **env, **self.forkserver_env, PYTHONUNBUFFERED="1"),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.started += 1
        w = Worker(key, proc)
        self.busy[proc.pid] = w
        return w

    def prime(
        self,
        jobs: list[tuple[str, list[int] | None, dict[str, str], ReplicaJob]],
        timeout_s: float = 900.0,
        poll_s: float = 0.05,
    ) -> list[str]:
        """Start a replica for each ``(device, cpus, env, job)`` and let all of them set up at
        once (context, engine, particles, warm-up; no timed window), before any cell is measured, so no
        cell waits for that. Jobs beyond ``max_idle`` are left out. Returns one line per replica that
        could not set up (it is ended; the cell that needs it starts another and reports the error), then
        one line saying how many set up and how long it took. The pool keeps what it primed idle (up to
        :data:`MAX_PRIMED`, beyond ``max_idle``): a sweep's cells never start a replica the priming had."""
        self.max_idle = max(self.max_idle, min(len(jobs), MAX_PRIMED))
        folder = self.folder / "prime"
        folder.mkdir(parents=True, exist_ok=True)
        started = []
        t0 = time.monotonic()
        server = self.start_fork_server([job for *_, job in jobs])
        for i, (device, cpus, env, job) in enumerate(jobs[: self.max_idle]):
            cfg_path, out, log = folder / f"config.{i}.json", folder / f"primed.{i}.txt", folder / f"replica.{i}.log"
            out.unlink(missing_ok=True)
            cfg_path.write_text(json.dumps(job.to_dict(), indent=2))
            w = self.acquire(device, cpus, env)
            w.send(cfg_path, out, log, prime=True)
            started.append(w)
        deadline = time.monotonic() + timeout_s
        failed: list[str] = []
        try:
            while any(w.poll() is None for w in started) and time.monotonic() < deadline:
                time.sleep(poll_s)
        finally:
            good = []
            for w in started:
                text = w.out.read_text() if w.out is not None and w.out.exists() else ""
                if text.strip() == "ok":
                    good.append(w)
                else:
                    failed.append(f"warm replica {w.pid} did not set up: {text.strip() or 'no answer in time'}")
                    self.release([w], ok=False)
            self.release(good, ok=True)
        left = len(jobs) - len(started)
        return [
            *failed,
            *server,
            f"warm replicas: {len(good)} of {len(started)} set up at once in {time.monotonic() - t0:.1f} s, "
            "before the first cell" + (f"; {left} more than the pool keeps, started by their cells" if left else ""),
        ]

    def start_fork_server(self, jobs: list[ReplicaJob], timeout_s: float = READY_TIMEOUT_S) -> list[str]:
        """The fork server (``workloads.forkserver``), once, when a job's program is one of its programs:
        started and waited for (its imports) before any replica, its socket then in every replica's
        environment. A line saying what it did; none when no job needs it, or it is running."""
        if self.forkserver is not None or not any(forkable(job) for job in jobs):
            return []
        home = Path(tempfile.mkdtemp(prefix="sbfork-"))  # a socket's path is short (108 bytes): not the folder
        path, log = home / "s", self.folder / "forkserver.log"
        self.folder.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        server = processes.spawn([self.python, "-m", "sharebench.workloads.forkserver", str(path)], log=log)
        while not path.exists() and server.poll() is None and time.monotonic() - t0 < timeout_s:
            time.sleep(0.02)
        if not path.exists():
            processes.stop([server])
            shutil.rmtree(home, ignore_errors=True)
            return [f"fork server: not ready ({log}); each program imports PyTorch itself"]
        self.forkserver, self.forkserver_env = server, {SOCKET_ENV: str(path)}
        return [f"fork server: PyTorch imported once in {time.monotonic() - t0:.1f} s; the programs are its forks"]

    def release(self, workers: list[Worker], ok: bool) -> None:
        """Take back a cell's replicas: kept idle when the cell went well, else ended."""
        for w in workers:
            self.busy.pop(w.pid, None)
            if ok and w.alive():
                w.out = None
                self.idle[w.pid] = w
            else:
                w.stop()
        while len(self.idle) > self.max_idle:
            _, oldest = self.idle.popitem(last=False)
            oldest.stop()

    def close(self) -> None:
        """End every replica (end of input, then signals), then the MPS daemon."""
        workers = [*self.busy.values(), *self.idle.values()]
        self.busy.clear()
        self.idle.clear()
        for w in workers:  # end of input first, for all: they exit together
            w.end_input()
        deadline = time.monotonic() + 5.0
        for w in workers:
            try:
                w.proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        processes.stop([w.proc for w in workers])  # SIGTERM, SIGKILL: to what is left of each group
        if self.forkserver is not None:  # after the replicas: it kills what it forked and exits
            processes.stop([self.forkserver])
            shutil.rmtree(Path(self.forkserver_env[SOCKET_ENV]).parent, ignore_errors=True)
            self.forkserver, self.forkserver_env = None, {}
        if self.mps is not None:
            self.mps.stop()
            self.mps = None


def forkable(job: ReplicaJob) -> bool:
    """Whether ``job`` runs a program the fork server forks (a built-in PyTorch program, protocol timing)."""
    w = job.workload
    if not w.is_program or w.timing != "protocol" or not w.command:
        return False
    try:
        return module_of(split_command(w.command)) is not None
    except UserError:  # a command that does not parse is the cell's to report
        return False
