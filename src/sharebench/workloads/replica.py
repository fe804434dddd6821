"""Replica process entry used by the sharing executors:

    python -m sharebench.workloads.replica --config JOB.json --out REC.json
    python -m sharebench.workloads.replica --serve     # a warm replica: cell after cell

JOB.json is the replica's :class:`~sharebench.workloads.job.ReplicaJob` (``ReplicaJob.to_dict``). A warm
replica (:class:`sharebench.kernel.run.WarmRunner`) reads one job per line on stdin, a JSON object
``{"config": JOB.json, "out": REC.json, "log": LOG}``; for each it sends its output to LOG, runs the
cell and writes the record to REC.json (the parent waits for that file); it ends at end of input.
``{"prime": JOB.json, "out": F, "log": LOG}`` sets up without tracking and writes "ok" (or the error) to F.
A program (the exec engine, ``sharebench.workloads.program``) that serves cells is kept by a warm replica
from one cell to the next (:class:`~sharebench.workloads.program.ProgramHost`; a prime starts it and lets
it set up); one that does not is started fresh for every cell.

Under a replica pattern (``Workload.patterned``, sharebench.patterns) the timed window is the pattern's
bursts on the warm particle set (:func:`pattern_track`): a burst of ``units`` is that many turns; every
replica runs until the cell's stop file exists (the sweep writes it once the cell is decided), replica 0
(the victim) at most its cap (``ReplicaJob.count``, or an open loop's window in seconds) and then creates
it; every user appends each burst to its live record as it ends (``ReplicaJob.progress_file``). The record keeps every burst under ``extra["bursts"]`` (``[i, arrival, start, end,
units]``) with the pattern, role and seed; ``turns`` is the turns run and ``track_s`` the window from the
start instant to the last burst's end.

Writes the RunRecord to REC.json as the document of kind ``"record"`` (``sharebench.results.store``;
read it back with ``read_json(path, "record")``); on failure writes ``{"error": "<one line>"}``
there, of the same kind, and exits 1. Either carries the job's cell ``attempt`` (:attr:`ReplicaJob.attempt`):
the executor reads no record of another attempt.

A replica lives no longer than its parent (issue 46): the parent-death signal (SIGTERM) ends it cleanly
where it can, and :func:`sharebench.processes.watch_parent` kills it and everything it started half a
second later, even inside a kernel or its program's C call. A replica whose parent is gone writes no
record: no sweep waits for it, and the sweep that resumes the folder runs the cell again.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

from sharebench import processes
from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.kernel import RunRecord
from sharebench.kernel.run import Prepared, Track, WarmRunner, pin_cpus, record, track_and_record, wait_at_barrier
from sharebench.patterns import parse_pattern
from sharebench.results.store import write_json
from sharebench.workloads.bursts import Burst, epoch_clock, run_pattern, stop_when_file
from sharebench.workloads.job import ReplicaJob, attempt_of
from sharebench.workloads.program import ProgramHost, run_exec, signal_stop

# failures a user can act on from the one-line message alone: no traceback on stderr
EXPECTED_ERRORS = (UserError, KeyboardInterrupt, SystemExit, OSError, ValueError)


def one_line_error(exc: BaseException) -> str:
    """The failure as the one line the record keeps."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, UserError):
        return str(exc)
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def burst_extra(job: ReplicaJob, bursts: list[Burst]) -> dict:
    """What a patterned replica's record keeps of its pattern: label, role, seed and every burst."""
    return {
        "pattern": job.own_pattern,
        "role": job.role,
        "pattern_seed": job.replica_seed,
        "bursts": [[b.i, b.arrival, b.start, b.end, b.units] for b in bursts],
    }


def pattern_track(job: ReplicaJob, run: Prepared) -> RunRecord:
    """From the barrier: the replica's pattern over the warm particle set (a unit = a turn; batch calls of
    the run's turns) until the stop file, the victim at most its cap or window; its record."""
    cfg = job.run
    pattern = parse_pattern(job.own_pattern)
    wait_at_barrier(job.barrier)
    clock = epoch_clock()
    t0 = clock()
    window = job.victim_window_s
    limit = {"duration_s": window} if window is not None else {"count": job.victim_count}
    try:
        bursts = run_pattern(
            pattern,
            run.engine.track,
            stop=stop_when_file(job.stop_file),  # every replica: the cell decided, at its limit, or the deadline
            seed=job.replica_seed,
            batch_units=cfg.turns,
            clock=clock,
            progress=job.progress_file,
            **limit,
        )
    finally:
        signal_stop(job)
    end = bursts[-1].end if bursts else clock()
    t_download = time.perf_counter()
    coords, counters = run.engine.download()
    download_s = time.perf_counter() - t_download
    run.engine.release()
    units = sum(b.units for b in bursts)
    rec = record(cfg, run, t0, end - t0, download_s, coords, counters)
    track_s = max(end - t0, 1e-12)
    rec.turns = units
    rec.particle_turns_per_s = cfg.particles * units / track_s
    rec.element_passes_per_s = cfg.particles * units * run.n_elements / track_s
    rec.extra.update(burst_extra(job, bursts))
    return rec


def track_of(job: ReplicaJob) -> Track:
    """What a tracker replica of ``job`` runs from its barrier on: its pattern, or the one timed window."""
    if job.patterned:
        return lambda run: pattern_track(job, run)
    return lambda run: track_and_record(job.run, run, job.barrier)


def write_record(out: str, attempt: str, data: dict) -> bool:
    """Write the record (or error record) ``data`` of ``attempt`` at ``out``; nothing when this replica's
    parent is gone (a killed sweep's: nobody reads it, and the folder may be another sweep's by now)."""
    if processes.parent_gone():
        return False
    write_json(out, "record", {**data, "attempt": attempt})
    return True


def run_one(config: str, out: str, warm: WarmRunner | None = None, host: ProgramHost | None = None) -> int:
    """Run one replica from its job file and write its record (or its error); the exit status. ``host``:
    a warm replica's kept program (a program's cell runs in it when it serves cells)."""
    attempt = attempt_of(config)
    try:
        job = ReplicaJob.from_json(config)
        pin_cpus(job.run.cpus)  # before anything creates an OpenCL or OpenMP runtime
        runner = warm or WarmRunner(keep=False)  # a fresh replica: a runner for one cell
        rec = run_exec(job, host) if job.workload.is_program else runner.run(job.run, track_of(job))
    except BaseException as exc:  # noqa: BLE001 - any failure becomes the one-line error record
        msg = one_line_error(exc)
        write_record(out, attempt, {"error": msg})
        print(f"replica: error: {msg}", file=sys.stderr)
        if not isinstance(exc, EXPECTED_ERRORS):
            traceback.print_exc()
        return 1
    write_record(out, attempt, rec.to_dict())
    return 0


def prime_one(config: str, out: str, warm: WarmRunner, host: ProgramHost | None = None) -> None:
    """Set up as for the job ``config`` (device, engine, particles, warm-up; a program: started and set
    up in ``host``), track nothing; write "ok" or the one-line error to ``out``."""
    try:
        job = ReplicaJob.from_json(config)
        pin_cpus(job.run.cpus)
        if job.workload.is_program:
            (host or ProgramHost()).prime(job, Path(config).parent)
        else:
            warm.prime(job.run)
        msg = "ok"
    except BaseException as exc:  # noqa: BLE001 - the pool ends a replica that could not set up
        msg = one_line_error(exc)
        print(f"replica: error: {msg}", file=sys.stderr)
    write_atomic(out, msg + "\n")


def redirect_output(log: str) -> None:
    """Send this process's stdout and stderr (Python's and the libraries') to the file log."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)


def _end_serving(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def serve(jobs: Iterable[str] | None = None) -> int:
    """A warm replica: the jobs on stdin (a JSON object a line), one after the other, in this process.
    SIGTERM (the sweep's end, or its death through the parent-death signal) ends it through its
    ``finally``, so that the kept program and what it started end with it."""
    warm = WarmRunner()
    host = ProgramHost()  # a program that serves cells, kept from one cell to the next
    previous = signal.signal(signal.SIGTERM, _end_serving)
    try:
        for line in jobs if jobs is not None else sys.stdin:
            if not line.strip():
                continue
            job = json.loads(line)
            if job.get("log"):
                redirect_output(job["log"])
            if job.get("prime"):
                prime_one(job["prime"], job["out"], warm, host)
            else:
                run_one(job["config"], job["out"], warm, host)
            sys.stdout.flush()
    finally:
        with processes.deferred(signal.SIGTERM):  # a second SIGTERM: after the clean-up
            host.drop()
            processes.end_own_group()  # what a program left behind (the replica leads its group, a subreaper)
        signal.signal(signal.SIGTERM, previous)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one replica (or serve cell after cell with --serve); the exit status."""
    ap = argparse.ArgumentParser(prog="python -m sharebench.workloads.replica", description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="the replica's job (ReplicaJob) as JSON")
    ap.add_argument("--out", help="where to write the RunRecord JSON")
    ap.add_argument("--serve", action="store_true", help="a warm replica: jobs on stdin, one JSON object a line")
    args = ap.parse_args(argv)
    if args.serve:
        return serve()
    if not args.config or not args.out:
        ap.error("--config and --out are needed (or --serve)")
    return run_one(args.config, args.out)


if __name__ == "__main__":
    processes.watch_parent()  # a killed sweep's replica ends within a second, whatever it is doing
    sys.exit(main())
