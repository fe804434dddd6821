"""The harness's side of the replica protocol (``sharebench.workloads.protocol``): one replica of a
program (the exec engine) runs its command with the protocol's environment, relays the barrier and
turns the program's result into the replica's record (:func:`run_exec`)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from sharebench import processes
from sharebench.devices import resolve_device
from sharebench.errors import UserError, one_line
from sharebench.files import write_atomic
from sharebench.kernel import RunRecord
from sharebench.kernel.run import read_start_instant, wait_at_barrier
from sharebench.workloads.bursts import BURSTS, COUNT, MAX_BURSTS_BYTES, PATTERN, SEED, STOP_FILE, read_bursts
from sharebench.workloads.job import ReplicaJob
from sharebench.workloads.protocol import (
    DEVICE,
    MAX_RESULT_BYTES,
    READY_FILE,
    RECORD_KEYS,
    REPLICA,
    REPLICAS,
    RESULT_FILE,
    RESULT_KEYS,
    START_FILE,
    WORK,
    check_exec_timing,
    read_oversized_away,
    read_result,
    split_command,
)


def program_env(job: ReplicaJob, result_file: Path) -> dict[str, str]:
    """The program's environment: ours (device pinning, MPS, OMP_NUM_THREADS) plus the protocol's."""
    env = dict(os.environ)
    env.update(
        {
            READY_FILE: job.barrier.ready_file or "",
            START_FILE: job.barrier.start_file or "",
            RESULT_FILE: str(result_file),
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


def run_exec(job: ReplicaJob) -> RunRecord:
    """Run the workload's command as this replica (protocol or process timing); its record. UserError with
    a one-line reason when the command is missing, exits non-zero, or writes no or a malformed result."""
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
    t_setup = time.perf_counter()
    if timing == "process":
        wait_at_barrier(barrier)
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
    rec = exec_record(job, doc, timing, setup_s)
    if bursts_file is not None and bursts_file.exists():  # a program that ignores SHAREBENCH_BURSTS writes none
        header, bursts = read_oversized_away(bursts_file, read_bursts, MAX_BURSTS_BYTES)
        rec.extra.update(
            pattern=str(header.get("pattern") or job.own_pattern),
            role=job.role,
            pattern_seed=header.get("seed"),
            bursts=[[b.i, b.arrival, b.start, b.end, b.units] for b in bursts],
        )
    return rec


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
    write its bursts, its pattern and seed, and the victim's count or a neighbour's stop file."""
    env = {
        BURSTS: str(bursts_file),
        PATTERN: job.own_pattern,
        SEED: str(int(np.random.SeedSequence(job.replica_seed).generate_state(1)[0])),
    }
    if job.victim:
        env[COUNT] = str(job.workload.bursts)
    elif job.stop_file:
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
