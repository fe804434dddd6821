"""Every process a cell starts ends with it (issue 27): real ``--exec`` programs that start children of
their own (a shell shim, a ``sleep``) or ignore SIGTERM, run through real cells and a real sweep; after
each exit path (success, run timeout, barrier timeout, Ctrl-C, the sweep killed) no process they started
is left (psutil)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from sharebench.sharing import cell_run, run_cell
from sharebench.workloads import ReplicaJob, Workload
from support.contexts import device_of

# a protocol program whose `sleep` outlives it, unless its group is ended
LEAVES_A_CHILD = """#!/bin/sh
sleep 300 &
echo $! >> "$PIDS"
echo $$ >> "$PIDS"
touch "$SHAREBENCH_READY_FILE"
while [ ! -s "$SHAREBENCH_START_FILE" ]; do sleep 0.01; done
now=$(date +%s)
echo "{\\"start\\": $now, \\"end\\": $now.5, \\"work\\": 1, \\"unit\\": \\"op\\"}" > "$SHAREBENCH_RESULT_FILE"
"""

# ignores SIGTERM (and so does its child), at the barrier or past it, until killed
STUBBORN = """#!/bin/sh
trap '' TERM
sleep 300 &
echo $! >> "$PIDS"
echo $$ >> "$PIDS"
[ -n "$READY" ] && touch "$SHAREBENCH_READY_FILE"
while true; do sleep 0.05; done
"""


def program(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def exec_cfg(command: str, timing: str = "protocol") -> ReplicaJob:
    return ReplicaJob.of(Workload(engine="exec", device="cpu", command=command, timing=timing), particles=1, turns=1)


def started(pids_file: Path, n: int, timeout_s: float = 30) -> list[int]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if pids_file.exists() and len(pids_file.read_text().split()) >= n:
            return [int(p) for p in pids_file.read_text().split()]
        time.sleep(0.05)
    raise AssertionError(f"the programs did not start: {pids_file}")


def survivors(pids: list[int], timeout_s: float = 10) -> list[str]:
    """The pids still running (zombies waiting for init count as gone) after up to timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = []
        for pid in pids:
            try:
                p = psutil.Process(pid)
                if p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{pid} {p.cmdline()}")
            except psutil.NoSuchProcess:
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


@pytest.fixture
def pids_env(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("PIDS", str(pids))
    return pids


def test_a_program_that_leaves_a_child_ends_with_its_cell(tmp_path, pids_env):
    prog = program(tmp_path, "shim.sh", LEAVES_A_CHILD)
    rows = run_cell(cell_run("timeslice:2", exec_cfg(str(prog)), tmp_path / "cell", device=device_of("cpu")))
    assert [r["status"] for r in rows] == ["ok", "ok"], rows
    pids = started(pids_env, 4)
    assert survivors(pids) == []


@pytest.mark.parametrize("timing", ["protocol", "process"])
def test_a_program_ignoring_sigterm_is_killed_at_the_run_timeout(tmp_path, pids_env, monkeypatch, timing):
    monkeypatch.setenv("READY", "1")
    prog = program(tmp_path, "stubborn.sh", STUBBORN)
    t0 = time.monotonic()
    run = cell_run(
        "exclusive", exec_cfg(str(prog), timing), tmp_path / "cell", device=device_of("cpu"), run_timeout_s=1
    )
    rows = run_cell(run)
    assert rows[0]["status"] == "failed" and "still running 1 s after the start; stopped" in rows[0]["error"]
    assert time.monotonic() - t0 < 30
    assert survivors(started(pids_env, 2)) == []


def test_a_program_ignoring_sigterm_at_the_barrier_is_killed_at_the_ready_timeout(tmp_path, pids_env):
    prog = program(tmp_path, "stubborn.sh", STUBBORN)  # never ready
    run = cell_run("exclusive", exec_cfg(str(prog)), tmp_path / "cell", device=device_of("cpu"), ready_timeout_s=2)
    rows = run_cell(run)
    assert rows[0]["status"] == "failed" and "not ready after 2 s" in rows[0]["error"]
    assert survivors(started(pids_env, 2)) == []


def test_ctrl_c_ends_a_program_ignoring_sigterm_and_its_children(tmp_path, pids_env, monkeypatch, own_children):
    monkeypatch.setenv("READY", "1")
    prog = program(tmp_path, "stubborn.sh", STUBBORN)
    run = cell_run("timeslice:2", exec_cfg(str(prog)), tmp_path / "cell", device=device_of("cpu"))
    timer = threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_cell(run)
    finally:
        timer.cancel()
    assert survivors(started(pids_env, 4)) == []
    assert not [p for p in own_children() if p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_sweep_leaves_no_program_behind(tmp_path, pids_env, monkeypatch, sig, warm):
    """SIGTERM: the sweep ends its replicas' groups; SIGKILL: each replica gets the parent-death signal
    and ends what its program started. Warm replicas too: the program primed (then stopped: it does not
    serve cells, and ignores SIGTERM for the grace period) and the one the first cell started."""
    monkeypatch.setenv("READY", "1")
    prog = program(tmp_path, "stubborn.sh", STUBBORN)
    argv = [
        *("run", "--device", "cpu", "--modes", "timeslice:2", "--engine", "exec", "--exec", str(prog)),
        *("--work", "1", "--warmup-repeats", "0", "--no-progress", "--no-telemetry", "--out", str(tmp_path / "r")),
        *(() if warm else ("--fresh-replicas",)),
    ]
    sweep = subprocess.Popen([sys.executable, "-m", "sharebench", *argv], stderr=subprocess.PIPE, text=True)
    try:
        # the first cell (exclusive, one replica); warm: after the primed program (2 pids) was stopped
        pids = started(pids_env, 4 if warm else 2, timeout_s=120)
        replicas = [p.pid for p in psutil.Process(sweep.pid).children(recursive=True)]
        sweep.send_signal(sig)
        sweep.communicate(timeout=60)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert survivors(pids + replicas, timeout_s=20) == []
