"""A killed sweep cannot reach the next one (issue 46, item 3). Real sweeps, real replica processes, real
signals: a sweep SIGKILLed while its replicas' programs sit in a C call with SIGTERM ignored loses every
replica within a second or two (the parent watch's half second, not the 5 s grace of a clean stop), and
``--resume`` reads no record of the killed attempt; a record of another attempt that lands in a cell's
folder last is refused, naming the attempt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sharebench import processes
from sharebench.results import load_results
from sharebench.sharing import cell_run, run_cell
from sharebench.sharing.executor import read_record
from sharebench.sharing.launch import FreshLauncher
from sharebench.workloads import ReplicaJob, Workload, attempt_of
from support.contexts import device_of

pytestmark = [pytest.mark.faults]

# A protocol program that ignores SIGTERM and, in a cell of two replicas (not the pool's priming: a cell has a
# result file) while $STUCK_FLAG exists, sleeps in libc's sleep(3): a C call no Python handler interrupts. It
# marks that it is inside it with a file named for its replica, holding its pid.
STUCK = """
import ctypes, os, signal, time
from pathlib import Path
from sharebench.workloads.protocol import ready, wait_for_start, write_result

signal.signal(signal.SIGTERM, signal.SIG_IGN)
ready()
wait_for_start()
start = time.time()
cell = os.environ.get("SHAREBENCH_RESULT_FILE") and os.environ.get("SHAREBENCH_REPLICAS") == "2"
if cell and Path(os.environ["STUCK_FLAG"]).exists():
    Path(os.environ["STUCK_MARKS"], os.environ["SHAREBENCH_REPLICA"]).write_text(str(os.getpid()))
    ctypes.CDLL(None).sleep(120)
write_result(start, time.time(), 1, "step")
"""


def stuck_sweep(tmp_path: Path) -> tuple[list[str], dict[str, str], Path]:
    prog = tmp_path / "stuck.py"
    prog.write_text(STUCK)
    marks = tmp_path / "marks"
    marks.mkdir()
    flag = tmp_path / "stuck"
    flag.touch()
    env = {**os.environ, "STUCK_FLAG": str(flag), "STUCK_MARKS": str(marks)}
    argv = ["--device", "cpu", "--engine", "exec", "--exec", f"{sys.executable} {prog}", "--work", "1"]
    argv += ["--modes", "timeslice:2", "--repeats", "1", "--warmup-repeats", "0", "--no-progress", "--no-telemetry"]
    return argv, env, flag


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"{what} after {timeout_s} s")


def gone_within(procs: list[psutil.Process], timeout_s: float) -> float:
    """Seconds until every process of ``procs`` has ended (a zombie counts as ended)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        alive = []
        for p in procs:
            try:
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.NoSuchProcess:
                continue
        if not alive:
            return time.monotonic() - t0
        time.sleep(0.01)
    raise AssertionError(f"still running {timeout_s} s after the sweep's SIGKILL: {[p.cmdline() for p in alive]}")


def test_a_sigkilled_sweep_in_a_c_call_leaves_nothing_that_resume_reads(tmp_path):
    argv, env, flag = stuck_sweep(tmp_path)
    out = tmp_path / "out"
    sweep = subprocess.Popen([sys.executable, "-m", "sharebench", "run", *argv, "--out", str(out)], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    kids: list[psutil.Process] = []
    try:
        marks = tmp_path / "marks"
        both = lambda: len(list(marks.iterdir())) == 2 or sweep.poll() is not None  # noqa: E731
        wait_for(both, 180, "the replicas of the timeslice:2 cell did not reach the C call")
        assert sweep.poll() is None, sweep.communicate()[1]
        (cell,) = (out / "cells").glob("timeslice-2_*")
        killed = {attempt_of(c) for c in cell.glob("config.*.json")}
        assert len(killed) == 1 and "" not in killed
        kids = processes.descendants(sweep.pid)
        stuck = [psutil.Process(int(m.read_text())) for m in marks.iterdir()]
        assert stuck and all(p in kids for p in stuck)
        sweep.send_signal(signal.SIGKILL)
        sweep.wait(timeout=30)
        took = gone_within(kids, 30)
        # the parent watch: ORPHAN_GRACE_S then SIGKILL; a clean stop would wait GRACE_S (5 s) for the
        # program that ignores SIGTERM. Bounded here with room for a loaded machine.
        assert took < processes.GRACE_S - 2, f"{took:.2f} s"
        print(f"replicas and programs of the killed sweep gone {took:.2f} s after its SIGKILL")
        left = [r for r in cell.glob("record.*.json") if read_record(r, next(iter(killed))) is not None]
        assert left == []  # an orphan writes no record

        flag.unlink()  # the resumed cell's programs finish at once
        resume = [sys.executable, "-m", "sharebench", "run", "--resume", *argv[:8], "--out", str(out)]
        p = subprocess.run(resume, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        df = load_results(out)
        assert (df["status"] == "ok").all(), df["error"].tolist()
        for rec in cell.glob("record.*.json"):
            attempt = json.loads(rec.read_text())["attempt"]
            assert attempt not in killed and attempt == attempt_of(rec.with_name(rec.name.replace("record", "config")))
    finally:
        if sweep.poll() is None:
            sweep.kill()
        for k in kids:
            try:
                k.kill()
            except psutil.NoSuchProcess:
                continue


class LateWrite:
    """A real replica process, and a killed attempt's replica writing into its record file after it
    ended and before the executor reads it (the order a late straggler's write can land in)."""

    def __init__(self, proc: subprocess.Popen, out: Path, attempt: str) -> None:
        self.proc, self.out, self.attempt, self.written = proc, out, attempt, False

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        rc = self.proc.poll()
        if rc is not None and not self.written:
            doc = {"kind": "record", "schema_version": 1, "attempt": self.attempt, "track_s": 123.0, "turns": 1}
            self.out.write_text(json.dumps(doc))
            self.written = True
        return rc


class Straggling(FreshLauncher):
    def __init__(self, replica: int, attempt: str) -> None:
        super().__init__()
        self.replica, self.attempt = replica, attempt

    def start(self, run, rp, files):
        proc = super().start(run, rp, files)
        return LateWrite(proc, files.out, self.attempt) if rp.replica == self.replica else proc

    def stop(self, replicas):
        super().stop([r.proc if isinstance(r, LateWrite) else r for r in replicas])

    def finish(self, replicas, ok):
        super().finish([r.proc if isinstance(r, LateWrite) else r for r in replicas], ok)


def test_a_record_of_another_attempt_is_not_read(tmp_path):
    prog = Path(__file__).resolve().parents[2] / "examples" / "workloads" / "hash_chain.py"
    job = ReplicaJob.of(
        Workload(engine="exec", device="cpu", command=f"{sys.executable} {prog}"), particles=100, turns=1
    )
    cell = tmp_path / "cell"
    rows = run_cell(
        cell_run("timeslice:2", job, cell, device=device_of("cpu"), run_timeout_s=120), Straggling(1, "dead0")
    )
    assert [r["status"] for r in rows] == ["ok", "failed"]
    expected = attempt_of(cell / "config.1.json")
    assert rows[1]["error"] == (
        f"its record is of another attempt (dead0, not {expected}): a replica of an earlier, killed sweep wrote it; "
        "not read"
    )
    assert "attempt" not in rows[0] and rows[0]["track_s"] != 123.0 and rows[1].get("track_s") != 123.0
    mine = attempt_of(cell / "config.0.json")
    assert read_record(cell / "record.0.json", mine)["extra"]["work"] == 100
    assert read_record(cell / "record.0.json", "dead0") is None and read_record(cell / "record.1.json", mine) is None
