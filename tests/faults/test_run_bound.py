"""Every wait is bounded by default (issue 27): with no ``--run-timeout``, a replica stopped with SIGSTOP
while its cell runs fails that cell with the timeout reason within the default bound, max(60 s, 20 x the
exclusive run's track_s + setup_s), and the sweep goes on; before, the sweep waited forever."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sharebench.results import load_results
from sharebench.sweep.runner import FIRST_RUN_TIMEOUT_S, RUN_TIMEOUT_FLOOR_S, RunBound

pytestmark = [pytest.mark.faults, pytest.mark.slow]  # about 80 s: the 60 s floor of the bound


def replica_of(cell: Path, replica: int, timeout_s: float = 120) -> psutil.Process:
    """The fresh replica process of ``cell`` once it is at the barrier (its ready file written)."""
    config = str(cell / f"config.{replica}.json")
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if (cell / f"ready.{replica}").exists():
            for p in psutil.process_iter(["cmdline"]):
                if config in (p.info["cmdline"] or []):
                    return p
        time.sleep(0.005)
    raise AssertionError(f"no replica {replica} at the barrier of {cell} after {timeout_s} s")


def test_a_replica_stopped_while_tracking_fails_its_cell_within_the_default_bound(lattice, tmp_path):
    out = tmp_path / "r"
    argv = ["--device", "cpu", "--modes", "exclusive,timeslice:2", "--particles", "2000", "--turns", "2000"]
    argv += ["--repeats", "1", "--warmup-repeats", "0", "--fresh-replicas", "--no-progress", "--no-telemetry"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sharebench", "run", *argv, "--lattice", lattice, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        victim = replica_of(out / "cells" / "timeslice-2_p2000_r1", 1)
        victim.suspend()  # SIGSTOP, past the barrier: it never ends its window
        t_stop = time.monotonic()
        _, err = proc.communicate(timeout=RUN_TIMEOUT_FLOOR_S + 90)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - t_stop
    assert "Traceback" not in err, err
    assert took < RUN_TIMEOUT_FLOOR_S + 60, took
    df = load_results(out)
    shared = df[df["mode"] == "timeslice:2"]
    exclusive = df[df["mode"] == "exclusive"]
    assert list(exclusive["cell_status"]) == ["ok"]
    assert set(shared["cell_status"]) == {"failed"}
    assert (
        f"replica 1: still running {RUN_TIMEOUT_FLOOR_S:g} s after the start; stopped" in shared["cell_error"].iloc[0]
    )
    assert not psutil.pid_exists(victim.pid) or victim.status() == psutil.STATUS_ZOMBIE
    assert proc.returncode == 1, err
    assert "run timeout: no --run-timeout" in (out / "notes.txt").read_text()


def test_the_default_bound_follows_the_exclusive_run():
    bound = RunBound()
    assert bound.timeout_s(1000) == FIRST_RUN_TIMEOUT_S  # nothing measured yet
    bound.learn([{"mode_kind": "exclusive", "status": "ok", "particles": 1000, "track_s": 10.0, "setup_s": 5.0}])
    bound.learn([{"mode_kind": "timeslice", "status": "ok", "particles": 1000, "track_s": 99.0, "setup_s": 5.0}])
    bound.learn([{"mode_kind": "exclusive", "status": "failed", "particles": 1000, "track_s": 99.0}])
    assert bound.timeout_s(1000) == 20 * 10.0 + 5.0
    assert bound.timeout_s(4000) == 20 * 40.0 + 5.0  # a size not measured: scaled from the nearest
    assert bound.timeout_s(10) == RUN_TIMEOUT_FLOOR_S
    assert RunBound(given=2.5).timeout_s(1000) == 2.5
