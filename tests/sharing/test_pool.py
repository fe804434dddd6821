"""Warm replicas (sharebench.sharing.pool): real replica processes kept from cell to cell on the CPU and
PoCL; the same particles, the same results as fresh processes; nothing left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sharebench.sharing import ReplicaPool, WarmLauncher, cell_run, plan_cell, run_cell
from sharebench.telemetry.disturbance import Probe
from sharebench.workloads import ReplicaJob, Workload
from support.contexts import device_of

pytestmark = pytest.mark.slow  # real replica processes and sweeps


def cfg(spec: str, lattice: Path, particles: int, turns: int = 3) -> ReplicaJob:
    return ReplicaJob.of(Workload(device=spec, lattice=str(lattice)), particles=particles, turns=turns)


def ok(rows: list[dict]) -> bool:
    return all(r["status"] == "ok" and r["cell_status"] == "ok" for r in rows)


@pytest.mark.parametrize("spec", ["cpu", "opencl"])
def test_warm_replicas_track_the_same_particles_as_fresh_ones(tmp_path, lattice, spec, own_children):
    dev = device_of(spec)
    cells = [("exclusive", 1500), ("timeslice:2", 1500), ("exclusive", 900), ("timeslice:2", 1500)]
    fresh = [
        run_cell(cell_run(m, cfg(dev.spec, lattice, n), tmp_path / f"fresh{i}", device=dev))
        for i, (m, n) in enumerate(cells)
    ]
    with ReplicaPool(tmp_path / "pool") as pool:
        warm = [
            run_cell(cell_run(m, cfg(dev.spec, lattice, n), tmp_path / f"warm{i}", device=dev), WarmLauncher(pool))
            for i, (m, n) in enumerate(cells)
        ]
        assert pool.started == 2  # two processes served all six replicas of the four cells
        assert len(pool.idle) == 2 and not pool.busy
        pids = {r["pid"] for rows in warm for r in rows}
    assert all(ok(rows) for rows in fresh + warm), (fresh, warm)
    assert len(pids) == 2
    for i, rows in enumerate(warm):  # warm replicas too wait for the instant in the start file, then go
        start_at = float((tmp_path / f"warm{i}" / "start").read_text())
        assert all(start_at - 1e-3 <= r["track_start"] < start_at + 1.0 for r in rows), (start_at, rows)
    # a warm replica tracks the very particles a fresh one does, and ends with the same coordinates
    for f_rows, w_rows in zip(fresh, warm):
        assert [r["checksum"] for r in w_rows] == [r["checksum"] for r in f_rows]
        assert [r["survived"] for r in w_rows] == [r["survived"] for r in f_rows]
    assert [r["extra"]["warm_cells"] for r in fresh[3]] == [0, 0]
    assert sorted(r["extra"]["warm_cells"] for r in warm[3]) == [1, 3]  # this cell was their 2nd and 4th
    # set-up after the first cell of a process: no build, no lattice load (the engine was kept)
    assert all(r["compile_s"] == 0 for r in warm[3])
    # each cell still has its own replica log and record
    assert (tmp_path / "warm3" / "replica.1.log").exists() and (tmp_path / "warm3" / "record.1.json").exists()
    assert not own_children()


def test_a_failed_cell_ends_its_replicas_and_the_next_starts_fresh(tmp_path, lattice, own_children):
    dev = device_of("cpu")
    with ReplicaPool(tmp_path / "pool") as pool:
        good = run_cell(cell_run("exclusive", cfg("cpu", lattice, 800), tmp_path / "a", device=dev), WarmLauncher(pool))
        assert ok(good) and len(pool.idle) == 1
        plan = plan_cell("timeslice:2", dev)
        plan.replicas[1].device = "opencl:9.9"  # this replica cannot open its device
        bad = run_cell(cell_run("timeslice:2", cfg("cpu", lattice, 800), tmp_path / "b", plan=plan), WarmLauncher(pool))
        assert bad[1]["status"] == "failed" and "opencl:9.9" in bad[1]["error"]
        assert {r["cell_status"] for r in bad} == {"failed"}
        # both replicas of the failed cell were ended, the one that had served cell a included
        assert not pool.idle and not pool.busy
        assert not own_children()
        again = run_cell(
            cell_run("exclusive", cfg("cpu", lattice, 800), tmp_path / "c", device=dev), WarmLauncher(pool)
        )
        assert ok(again) and again[0]["extra"]["warm_cells"] == 0 and again[0]["checksum"] == good[0]["checksum"]


def test_ctrl_c_in_a_warm_cell_stops_every_replica(tmp_path, lattice, own_children):
    dev = device_of("cpu")
    with ReplicaPool(tmp_path / "pool") as pool:
        assert ok(
            run_cell(cell_run("exclusive", cfg("cpu", lattice, 800), tmp_path / "a", device=dev), WarmLauncher(pool))
        )
        start = tmp_path / "b" / "start"
        timer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"""
import os, pathlib, signal, time
p = pathlib.Path({str(start)!r})
while not p.exists(): time.sleep(0.01)
time.sleep(0.5)
os.kill({os.getpid()}, signal.SIGINT)
""",
            ]
        )
        with pytest.raises(KeyboardInterrupt):
            run_cell(
                cell_run("timeslice:2", cfg("cpu", lattice, 20000, turns=400), tmp_path / "b", device=dev),
                WarmLauncher(pool),
            )
        timer.wait(timeout=30)
        assert not pool.idle and not pool.busy
    assert not own_children()


def test_a_replica_killed_while_idle_is_replaced(tmp_path, lattice, own_children):
    dev = device_of("cpu")
    with ReplicaPool(tmp_path / "pool") as pool:
        first = run_cell(
            cell_run("exclusive", cfg("cpu", lattice, 800), tmp_path / "a", device=dev), WarmLauncher(pool)
        )
        os.kill(first[0]["pid"], signal.SIGKILL)
        time.sleep(0.2)
        second = run_cell(
            cell_run("exclusive", cfg("cpu", lattice, 800), tmp_path / "b", device=dev), WarmLauncher(pool)
        )
        assert ok(second) and second[0]["pid"] != first[0]["pid"] and pool.started == 2
    assert not own_children()


def test_idle_replicas_beyond_the_cap_are_ended(tmp_path, lattice, own_children):
    dev = device_of("cpu")
    with ReplicaPool(tmp_path / "pool", max_idle=1) as pool:
        assert ok(
            run_cell(cell_run("timeslice:2", cfg("cpu", lattice, 800), tmp_path / "a", device=dev), WarmLauncher(pool))
        )
        assert len(pool.idle) == 1 and len([p for p in own_children() if p.ppid() == os.getpid()]) == 1
    assert not own_children()


SIBLING_PROBE = """
import json, sys
from sharebench.telemetry.disturbance import Probe
probe = Probe()
print("ready", flush=True)
sys.stdin.read()  # until the test closes it
print(json.dumps(probe.stop()), flush=True)
"""


def test_cpu_of_live_replicas_is_not_foreign(tmp_path):
    """The disturbance probe counts a warm replica (a live child) as ours, not as another job. Measured
    against a sibling process probing the same window, to which the child is another job's: the sibling
    counts about the child's CPU more as foreign (whatever else loads the host, both windows see it)."""
    busy = subprocess.Popen([sys.executable, "-c", "import time\nt=time.time()\nwhile time.time()-t<4: pass"])
    sibling = subprocess.Popen(
        [sys.executable, "-c", SIBLING_PROBE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert sibling.stdout is not None and sibling.stdout.readline().strip() == "ready"
        child = psutil.Process(busy.pid)
        child0, t0 = sum(child.cpu_times()[:2]), time.monotonic()
        probe = Probe()
        time.sleep(1.5)
        out = probe.stop()
        child_cores = (sum(child.cpu_times()[:2]) - child0) / (time.monotonic() - t0)
        theirs, _ = sibling.communicate(timeout=30)
    finally:
        busy.kill()
        busy.wait()
        sibling.kill()
        sibling.wait()
    assert busy.pid not in probe.others and child_cores > 0.3  # the child did run in the window
    foreign_to_sibling = json.loads(theirs.strip().splitlines()[-1])["tel_foreign_cpu_cores"]
    # ours: the child is not foreign, so the sibling's count exceeds ours by about the child's cores
    assert foreign_to_sibling - out["tel_foreign_cpu_cores"] > 0.6 * child_cores, (out, foreign_to_sibling, child_cores)


def test_primed_replicas_set_up_before_the_first_cell(tmp_path, lattice, own_children):
    """A warm launcher's prime starts as many replicas as the largest cell needs and sets them up at once; the cells
    then start none, and the first cell of each still reports the build it did not wait for."""
    dev = device_of("cpu")
    plans = [plan_cell("exclusive", dev), plan_cell("timeslice:2", dev)]
    with ReplicaPool(tmp_path / "pool") as pool:
        (said,) = WarmLauncher(pool).prime(plans, cfg("cpu", lattice, 1200))
        assert re.fullmatch(r"warm replicas: 2 of 2 set up at once in \d+\.\d s, before the first cell", said)
        assert pool.started == 2 and len(pool.idle) == 2
        assert sorted(p.read_text() for p in (tmp_path / "pool" / "prime").glob("primed.*")) == ["ok\n", "ok\n"]
        rows = run_cell(
            cell_run("timeslice:2", cfg("cpu", lattice, 1200), tmp_path / "a", plan=plans[1]), WarmLauncher(pool)
        )
        assert ok(rows) and pool.started == 2
        assert [r["extra"]["warm_cells"] for r in rows] == [0, 0]
        assert all(r["compile_s"] > 0 for r in rows)  # the build happened while priming, and is reported
        fresh = run_cell(cell_run("timeslice:2", cfg("cpu", lattice, 1200), tmp_path / "b", plan=plans[1]))
        assert [r["checksum"] for r in rows] == [r["checksum"] for r in fresh]
        # a replica that cannot set up is reported and ended, not kept
        bad = plan_cell("exclusive", dev)
        bad.replicas[0].device = "opencl:9.9"
        problems = WarmLauncher(pool).prime([bad], cfg("cpu", lattice, 1200))
        assert len(problems) == 2 and "opencl:9.9" in problems[0] and pool.started == 3 and len(pool.idle) == 2
        assert problems[1].startswith("warm replicas: 0 of 1 set up")
    assert not own_children()
