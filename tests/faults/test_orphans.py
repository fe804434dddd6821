"""An MPS daemon a SIGKILLed sweep left behind is found by its dead owner and stopped by
``sharebench cleanup`` (and by the next MPS cell). No GPU needed: the daemon here is a real process
named as NVIDIA's control daemon is, whose environment names the orphaned pipe folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import psutil
import pytest

from sharebench.sharing import find_orphans

pytestmark = [pytest.mark.faults, pytest.mark.slow]


def daemon_folder(tmp, owner_pid):
    root = tmp / f"sbmps-{owner_pid}"
    (root / "pipe").mkdir(parents=True)
    (root / "log").mkdir()
    (root / "owner.pid").write_text(f"{owner_pid}\n")
    return root


def test_cleanup_stops_the_daemon_of_a_killed_sweep_only(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a sweep that is gone
    orphan = daemon_folder(tmp_path, gone.pid)
    alive = daemon_folder(tmp_path, os.getpid())  # a sweep still running: not touched
    fake = tmp_path / "bin" / "nvidia-cuda-mps-control"
    fake.parent.mkdir()
    shutil.copy(shutil.which("sleep"), fake)
    daemon = subprocess.Popen(
        [str(fake), "300"], env={**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(orphan / "pipe")}, start_new_session=True
    )
    try:
        assert find_orphans(tmp_path) == [orphan]
        env = {**os.environ, "TMPDIR": str(tmp_path)}
        p = subprocess.run(
            [sys.executable, "-m", "sharebench", "cleanup"], capture_output=True, text=True, env=env, timeout=120
        )
        assert p.returncode == 0, p.stderr
        assert p.stdout == f"stopped an orphaned MPS daemon (pid {daemon.pid}) and removed {orphan}\n"
        assert daemon.wait(timeout=10) is not None
        assert not orphan.exists() and alive.exists()
        p = subprocess.run(
            [sys.executable, "-m", "sharebench", "cleanup"], capture_output=True, text=True, env=env, timeout=120
        )
        assert p.stdout.startswith("nothing to clean up")
    finally:
        if psutil.pid_exists(daemon.pid):
            daemon.kill()
