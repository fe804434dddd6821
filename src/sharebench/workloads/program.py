"""The harness's side of the replica protocol (``sharebench.workloads.protocol``): one replica of a
program (the exec engine) runs its command with the protocol's environment, relays the barrier and
turns the program's result into the replica's record (:func:`run_exec`).

A warm replica keeps its program from one cell to the next (:class:`ProgramHost`, the protocol's
serving cells): the program is started with ``SHAREBENCH_SERVE=1`` and a pipe on its stdin; once it
has written a result marked ``"serving": true`` and is still running, the next cell of the same command
on the same device is handed to it as a line (:func:`sharebench.workloads.protocol.cell_line`) instead
of a new process. A program that exits after its result, or fails (exit, malformed result, timeout,
interrupt: it is stopped), is started fresh for the next cell. The record's ``warm_cells`` counts the
cells the program served before this one (0: a fresh start); ``setup_s`` runs from the spawn or the
line to the program's start instant."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from sharebench import processes
from sharebench.devices import resolve_device
from sharebench.errors import UserError, one_line
from sharebench.files import write_atomic
from sharebench.kernel import RunRecord
from sharebench.kernel.run import read_start_instant, wait_at_barrier
from sharebench.workloads.bursts import (
    BURSTS,
    COUNT,
    MAX_BURSTS_BYTES,
    PATTERN,
    PROGRESS,
    SECONDS,
    SEED,
    STOP_FILE,
    read_bursts,
)
from sharebench.workloads.forkserver import SOCKET_ENV, ForkedProgram, fork_program
from sharebench.workloads.job import ReplicaJob
from sharebench.workloads.protocol import (
    DEVICE,
    MAX_RESULT_BYTES,
    PRIMED,
    READY_FILE,
    RECORD_KEYS,
    REPLICA,
    REPLICAS,
    RESULT_FILE,
    RESULT_KEYS,
    SERVE,
    START_FILE,
    WORK,
    cell_line,
    check_exec_timing,
    read_oversized_away,
    read_result,
    split_command,
)


def program_env(job: ReplicaJob, result_file: Path | None) -> dict[str, str]:
    """The program's environment: ours (device pinning, MPS, OMP_NUM_THREADS) plus the protocol's."""
    env = dict(os.environ)
    env.update(
        {
            READY_FILE: job.barrier.ready_file or "",
            START_FILE: job.barrier.start_file or "",
            RESULT_FILE: str(result_file) if result_file is not None else "",
            REPLICA: str(job.replica),
            REPLICAS: str(job.replicas),
            WORK: str(job.run.particles),
            DEVICE: job.run.device,
        }
    )
    return env


def _stderr_tail(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return one_line(" | ".join(lines[-3:]), 240)


def run_exec(job: ReplicaJob, host: ProgramHost | None = None) -> RunRecord:
    """Run the workload's command as this replica (protocol or process timing; under protocol timing in
    ``host``'s kept program when one is given); its record. UserError with a one-line reason when the
    command is missing, exits non-zero, or writes no or a malformed result."""
    command = job.workload.command
    argv = split_command(command)
    if shutil.which(argv[0]) is None:
        raise UserError(
            f"command {argv[0]!r} not found (--exec {command!r}): give a program on the PATH "
            "or a path to an executable file"
        )
    timing = check_exec_timing(job.workload.timing)
    barrier, replica = job.barrier, job.replica
    base = Path(barrier.ready_file).parent if barrier.ready_file else Path.cwd()
    result_file = base / f"result.{replica}.json"
    log_file = base / f"program.{replica}.log"
    result_file.unlink(missing_ok=True)
    env = program_env(job, result_file)
    bursts_file = base / f"bursts.{replica}.jsonl" if job.patterned else None
    if bursts_file is not None:
        bursts_file.unlink(missing_ok=True)
        env.update(pattern_env(job, bursts_file))
    if timing == "protocol" and barrier.start_at is not None:  # pods of one cell: the program starts at start_at
        env[START_FILE] = str(relay_start(job, base / f"start.{replica}"))
    if timing == "protocol" and host is not None:
        doc, setup_s, served = host.run(job, argv, log_file, env, result_file)
        rec = exec_record(job, doc, timing, setup_s)
        rec.extra["warm_cells"] = served
    else:
        rec = run_fresh(job, argv, log_file, env, result_file)
    if bursts_file is not None and bursts_file.exists():  # a program that ignores SHAREBENCH_BURSTS writes none
        header, bursts = read_oversized_away(bursts_file, read_bursts, MAX_BURSTS_BYTES)
        rec.extra.update(
            pattern=str(header.get("pattern") or job.own_pattern),
            role=job.role,
            pattern_seed=header.get("seed"),
            bursts=[[b.i, b.arrival, b.start, b.end, b.units] for b in bursts],
        )
    return rec


def run_fresh(job: ReplicaJob, argv: list[str], log_file: Path, env: dict[str, str], result_file: Path) -> RunRecord:
    """The program started for this cell alone and run to its end; the cell's record."""
    timing = job.workload.timing
    t_setup = time.perf_counter()
    if timing == "process":
        wait_at_barrier(job.barrier)
    start, end, rc = run_program(job, argv, log_file, env)
    if rc != 0:
        tail = _stderr_tail(log_file)
        raise UserError(f"command {argv[0]!r} exited with status {rc}" + (f": {tail}" if tail else ""))
    if timing == "process":
        doc: dict[str, Any] = {"start": start, "end": end, "work": job.run.particles, "unit": "work"}
        setup_s = 0.0
    else:
        doc = read_oversized_away(result_file, read_result, MAX_RESULT_BYTES)
        setup_s = max(0.0, doc["start"] - start) if start else time.perf_counter() - t_setup
    return exec_record(job, doc, timing, setup_s)


Kept = subprocess.Popen | ForkedProgram  # the program a warm replica keeps: a child, or a fork of the fork server


class ProgramHost:
    """The program a warm replica keeps between cells (the protocol's serving cells): started with
    ``SHAREBENCH_SERVE=1`` and a pipe on stdin, in the replica's process group (what ends the replica
    ends it); handed the next cell of the same command, device and CPUs as a line."""

    POLL_S = 0.005
    SETTLE_S = 2.0  # a result file seen while the program runs: how long it may take to be written whole

    def __init__(self) -> None:
        self.proc: Kept | None = None
        self.key: tuple = ()
        self.log: Path | None = None
        self.served = 0  # cells the kept program has served

    @staticmethod
    def key_of(job: ReplicaJob, argv: list[str]) -> tuple:
        return (tuple(argv), job.run.device, tuple(job.run.cpus or ()))

    def spawn(self, argv: list[str], log_file: Path, env: dict[str, str], key: tuple) -> Kept:
        """The program for cells of ``key``: a fork of the sweep's fork server when it runs one of its
        programs (``workloads.forkserver``: PyTorch imported once for all replicas), else a new process in
        the replica's group."""
        self.drop()
        served = {**env, SERVE: "1"}
        proc: Kept | None = fork_program(env.get(SOCKET_ENV, ""), argv, log_file, served)
        if proc is None:
            proc = processes.spawn(argv, log=log_file, env=served, stdin=subprocess.PIPE, text=True, own_group=False)
        self.proc, self.key, self.log, self.served = proc, key, log_file, 0
        return proc

    def hand(self, key: tuple, env: dict[str, str]) -> Kept | None:
        """The kept program, handed the cell of ``env``; None when there is none for ``key`` (or it is gone)."""
        proc = self.proc
        if proc is None or proc.poll() is not None or key != self.key or proc.stdin is None:
            self.drop()
            return None
        try:
            proc.stdin.write(cell_line(env))
            proc.stdin.flush()
        except (OSError, ValueError):
            self.drop()
            return None
        return proc

    def drop(self) -> None:
        """Stop the kept program (end of input first: a serving program exits 0) and forget it. SIGTERM
        (the replica's end) waits until it is stopped: forgotten half-stopped, a program that ignores
        SIGTERM would outlive the replica."""
        proc = self.proc
        if proc is None:
            return
        with processes.deferred(signal.SIGTERM):
            with contextlib.suppress(OSError, ValueError):
                if proc.stdin is not None:
                    proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)
            processes.stop([cast(subprocess.Popen, proc)])  # a fork too: it answers as a Popen does
            self.proc = None

    def prime(self, job: ReplicaJob, folder: Path, timeout_s: float = 900.0) -> None:
        """Start the program for ``job`` with a ready file and no result file: it sets up, writes the ready
        file (with :data:`~sharebench.workloads.protocol.PRIMED` in it: it serves cells; else it is stopped)
        and waits for its first cell. One that exits first is forgotten (each cell starts it fresh and
        fails with its reason); UserError when it is not ready in ``timeout_s``."""
        argv = split_command(job.workload.command)
        if shutil.which(argv[0]) is None:
            return  # each cell fails saying so
        ready_file = folder / f"program-ready.{os.getpid()}"
        ready_file.unlink(missing_ok=True)
        env = program_env(job, None)
        env[READY_FILE] = str(ready_file)
        proc = self.spawn(argv, folder / f"program-prime.{os.getpid()}.log", env, self.key_of(job, argv))
        deadline = time.monotonic() + timeout_s
        while not ready_file.exists():
            if proc.poll() is not None:  # ended without taking cells: it starts fresh for each (its cell says why)
                self.drop()
                return
            if time.monotonic() > deadline:
                self.drop()
                raise UserError(f"command {argv[0]!r} did not set up in {timeout_s:g} s")
            time.sleep(self.POLL_S * 10)
        if PRIMED not in ready_file.read_text(errors="replace"):  # not a serving program: it starts fresh
            self.drop()

    def run(
        self, job: ReplicaJob, argv: list[str], log_file: Path, env: dict[str, str], result_file: Path
    ) -> tuple[dict[str, Any], float, int]:
        """This cell in the kept program (or a new one); its checked result, set-up seconds and the cells
        the program served before it. The program is kept when its result says ``serving`` and it runs."""
        key = self.key_of(job, argv)
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        kept = False
        try:
            start = time.time()
            proc = self.hand(key, env) or self.spawn(argv, log_file, env, key)
            served = self.served
            while not result_file.exists() and proc.poll() is None:
                time.sleep(self.POLL_S)
            settle(result_file, proc, self.SETTLE_S)
            serving = False
            if result_file.exists():
                doc = read_oversized_away(result_file, read_result, MAX_RESULT_BYTES)
                serving = doc.get("serving") is True and proc.poll() is None
            rc = 0 if serving else proc.wait()
            if rc != 0:
                tail = _stderr_tail(self.log) if self.log else ""
                raise UserError(f"command {argv[0]!r} exited with status {rc}" + (f": {tail}" if tail else ""))
            if not result_file.exists():
                read_result(result_file)  # the one-line error: no result
            kept = serving
            self.served += 1
        finally:
            signal.signal(signal.SIGTERM, previous)
            if not kept:
                self.drop()
            signal_stop(job)
        return doc, max(0.0, doc["start"] - start), served


def settle(result_file: Path, proc: Kept, limit_s: float) -> None:
    """Wait until a result file that exists reads as a result, the program ends, or ``limit_s`` passes: a
    program that writes it in place (``echo ... > $SHAREBENCH_RESULT_FILE``) makes it before it fills it."""
    deadline = time.monotonic() + limit_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            read_result(result_file)
            return
        except UserError:
            time.sleep(ProgramHost.POLL_S)


def run_program(job: ReplicaJob, argv: list[str], log_file: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """Run the program to its end in this replica's process group (SIGTERM: an interrupt); its start and
    end (epoch s) and exit status. The victim of a patterned cell then signals the neighbours to stop."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        start = time.time()
        # in the replica's process group: what stops the replica's group stops the program and its children
        proc = processes.spawn(argv, log=log_file, env=env, own_group=False)
        try:
            rc = proc.wait()
        finally:
            processes.stop([proc])
            processes.end_own_group()  # what the program started (a shim's children, a stray `sleep`)
        end = time.time()
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal_stop(job)
    return start, end, rc


def signal_stop(job: ReplicaJob) -> None:
    """The victim of a patterned cell is done: create the cell's stop file (the neighbours stop at it)."""
    if job.patterned and job.victim and job.stop_file:
        write_atomic(Path(job.stop_file), "victim done\n")


def pattern_env(job: ReplicaJob, bursts_file: Path) -> dict[str, str]:
    """The pattern's variables of a patterned cell's program (``sharebench.workloads.bursts``): where to
    write its bursts, its pattern and seed, the cell's stop file, the victim's cap (a count and, under an
    open loop, its window in seconds) and a user's live record."""
    env = {
        BURSTS: str(bursts_file),
        PATTERN: job.own_pattern,
        SEED: str(int(np.random.SeedSequence(job.replica_seed).generate_state(1)[0])),
    }
    if job.victim_count is not None:
        env[COUNT] = str(job.victim_count)
    if job.victim_window_s is not None:
        env[SECONDS] = repr(job.victim_window_s)
    if job.progress_file is not None:
        env[PROGRESS] = str(job.progress_file)
    if job.stop_file:  # every replica: the sweep writes it once the cell is decided, the victim when done
        env[STOP_FILE] = job.stop_file
    return env


def relay_start(job: ReplicaJob, proxy: Path) -> Path:
    """A start file of this replica's own that holds the later of the cell's start instant and the
    barrier's ``start_at`` (the instant the pods of a cell agreed on), written when the cell's start file is."""
    proxy.unlink(missing_ok=True)
    barrier = job.barrier

    def relay() -> None:
        instant = read_start_instant(Path(barrier.start_file)) if barrier.start_file else None
        write_atomic(proxy, repr(max(instant or 0.0, float(barrier.start_at or 0.0))))

    threading.Thread(target=relay, name="start-relay", daemon=True).start()
    return proxy


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def exec_record(job: ReplicaJob, doc: dict[str, Any], timing: str, setup_s: float) -> RunRecord:
    """The replica's record from a checked result document."""
    track_s = float(doc["end"]) - float(doc["start"])
    work = float(doc["work"])
    device = job.run.device
    extra = {k: v for k, v in doc.items() if k not in RESULT_KEYS and k not in RECORD_KEYS}
    extra.update(unit=doc["unit"], work=work, command=job.workload.command)
    name, uuid = str(doc.get("device_name") or ""), str(doc.get("device_uuid") or "")
    if device == "cpu" and not (name or uuid):  # the host's CPU (a GPU is the program's to report)
        cpu = resolve_device("cpu")
        name, uuid = cpu.name, cpu.uuid
    return RunRecord(
        engine=job.workload.label,
        context=str(doc.get("context") or device),
        device=device,
        device_name=name,
        device_uuid=uuid,
        particles=job.run.particles,
        turns=1,
        elements=0,
        setup_s=setup_s,
        transfer_s=0.0,
        track_s=track_s,
        track_start=float(doc["start"]),
        track_end=float(doc["end"]),
        particle_turns_per_s=work / track_s if track_s > 0 else float("inf"),
        element_passes_per_s=0.0,
        survived=0,
        checksum=0.0,
        host=socket.gethostname(),
        pid=os.getpid(),
        replica=job.replica,
        extra=extra,
        exec_timing=timing,
    )
