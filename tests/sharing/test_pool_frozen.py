"""An idle warm replica is checked before it is handed a cell (issue 27): one stopped with SIGSTOP while
idle is ended and replaced, and the cell runs at once instead of waiting out the ready timeout."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from sharebench.sharing import ReplicaPool, WarmLauncher, cell_run, run_cell
from sharebench.workloads import ReplicaJob, Workload
from support.contexts import device_of

pytestmark = pytest.mark.slow  # real replica processes


def test_a_replica_stopped_while_idle_is_replaced_not_waited_for(tmp_path: Path, lattice: str) -> None:
    dev = device_of("cpu")
    cfg = ReplicaJob.of(Workload(device=dev.spec, lattice=str(lattice)), particles=500, turns=2)
    with ReplicaPool(tmp_path / "pool") as pool:
        first = run_cell(cell_run("exclusive", cfg, tmp_path / "c1", device=dev), WarmLauncher(pool))
        assert first[0]["status"] == "ok", first[0]["error"]
        (frozen,) = pool.idle
        os.kill(frozen, signal.SIGSTOP)
        deadline = time.monotonic() + 30  # the kernel stops it when it next runs: a busy host takes a moment
        while psutil.Process(frozen).status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
            time.sleep(0.01)
        assert psutil.Process(frozen).status() == psutil.STATUS_STOPPED
        t0 = time.monotonic()
        # the default ready timeout (900 s): a stopped replica handed this cell would cost all of it
        second = run_cell(cell_run("exclusive", cfg, tmp_path / "c2", device=dev), WarmLauncher(pool))
        took = time.monotonic() - t0
        assert second[0]["status"] == "ok", second[0]["error"]
        assert second[0]["pid"] != frozen and took < 120, took
        assert pool.started == 2
        assert pool.replaced == [f"warm replica {frozen} stopped while idle: ended and replaced"]
        assert not psutil.pid_exists(frozen) or psutil.Process(frozen).status() == psutil.STATUS_ZOMBIE
