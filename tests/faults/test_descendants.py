"""Every descendant ends with its sweep (issue 37, item 3): real processes that leave their process
group (``setpgid``), their session (``setsid``) or their parent (a double fork), real signals. After a
normal end, a run timeout (SIGTERM ignored) and each caught signal, no process they started is left.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from sharebench import processes

pytestmark = [pytest.mark.faults]

# Starts three escapers, writes their pids to $PIDS, then exits (ARG "exit") or waits (ARG "wait"; with
# "stubborn" it also ignores SIGTERM). One escaper leaves the group, one the session, one is orphaned at
# once (fork, setsid, fork; the middle one exits): it is re-parented to the nearest subreaper.
ESCAPER = textwrap.dedent(
    """
    import os, signal, sys, time

    def child(how):
        pid = os.fork()
        if pid:
            return
        if how == "setpgid":
            os.setpgid(0, 0)
        elif how == "setsid":
            os.setsid()
        else:  # daemon: a double fork, the middle process gone at once
            os.setsid()
            if os.fork():
                os._exit(0)
        signal.signal(signal.SIGTERM, signal.SIG_IGN) if "stubborn" in sys.argv else None
        with open(os.environ["PIDS"], "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(300)
        os._exit(0)

    if "stubborn" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for how in ("setpgid", "setsid", "daemon"):
        child(how)
    while len(open(os.environ["PIDS"]).read().split()) < 3:
        time.sleep(0.01)
    if "wait" in sys.argv:
        time.sleep(300)
    """
)

# A sweep in miniature: the subreaper block and the sweep's own signal handling around a child that
# escapes. ARG "end": the block ends normally once the escapers run; else it waits for a signal.
SWEEP = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from sharebench import processes
    from sharebench.sweep import stop_on_signals

    with stop_on_signals(), processes.subreaper(grace_s=1.0):
        subprocess.run([sys.executable, sys.argv[1], "exit"], check=True)
        open(os.environ["PIDS"] + ".ready", "w").close()
        if sys.argv[2] != "end":
            time.sleep(300)
    """
)


@pytest.fixture
def pids(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "pids"
    path.touch()
    monkeypatch.setenv("PIDS", str(path))
    return path


def script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def started(pids: Path, n: int = 3, timeout_s: float = 30) -> list[int]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        found = [int(p) for p in pids.read_text().split()]
        if len(found) >= n:
            return found
        time.sleep(0.02)
    raise AssertionError(f"the escapers did not start: {pids.read_text()!r}")


def survivors(pids: list[int], timeout_s: float = 10) -> list[str]:
    """The pids still running after up to timeout_s (a zombie counts as gone)."""
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
        time.sleep(0.05)


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def escapers_left_their_group_and_session(found: list[int], leader: int) -> None:
    groups = {os.getpgid(p) for p in found}
    sessions = {os.getsid(p) for p in found}
    assert leader not in groups and len(groups) == 3, groups
    assert len(sessions) >= 2, sessions


@pytest.mark.parametrize("stubborn", [False, True], ids=["sigterm", "sigterm-ignored"])
def test_stop_ends_what_left_the_group_and_the_session(tmp_path, pids, stubborn):
    """A spawned child (a replica) is a subreaper: stop() ends its whole tree, the double-forked orphan
    included, also when everything ignores SIGTERM (the run timeout's path)."""
    argv = [sys.executable, script(tmp_path, "escape.py", ESCAPER), "wait", *(["stubborn"] if stubborn else [])]
    child = processes.spawn(argv, log=tmp_path / "log")
    found = started(pids)
    try:
        escapers_left_their_group_and_session(found, child.pid)
        daemon = psutil.Process(found[2])
        assert daemon.ppid() == child.pid  # re-parented to the subreaper, not to init
        t0 = time.monotonic()
        processes.stop([child], grace_s=0.5)
        assert time.monotonic() - t0 < 10
        assert survivors(found) == []
    finally:
        kill_all(found)


def test_end_own_group_ends_every_descendant(tmp_path, pids):
    """A replica's exit (protocol.run_program's end_own_group) ends its program's escapers too."""
    code = (
        "import subprocess, sys; from sharebench import processes\n"
        f"subprocess.run([sys.executable, {script(tmp_path, 'escape.py', ESCAPER)!r}, 'exit'], check=True)\n"
        "processes.end_own_group(grace_s=1.0)\n"
    )
    replica = processes.spawn([sys.executable, "-c", code], log=tmp_path / "log")
    try:
        assert replica.wait(timeout=60) == 0, (tmp_path / "log").read_text()
        found = started(pids)
        assert survivors(found) == []
    finally:
        kill_all([int(p) for p in pids.read_text().split()])


@pytest.mark.parametrize(
    "how", ["end", signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["normal-end", "sigterm", "sigint", "sighup"]
)
def test_the_sweeps_subreaper_ends_every_descendant(tmp_path, pids, how):
    """The sweep as subreaper: orphans that left group and session come back to it and end with it."""
    argv = [sys.executable, script(tmp_path, "sweep.py", SWEEP), script(tmp_path, "escape.py", ESCAPER)]
    sweep = subprocess.Popen([*argv, "end" if how == "end" else "wait"], stderr=subprocess.PIPE, text=True)
    found: list[int] = []
    try:
        found = started(pids)
        ready = Path(f"{pids}.ready")
        while not ready.exists() and sweep.poll() is None:
            time.sleep(0.02)
        if how != "end":
            assert {psutil.Process(p).ppid() for p in found} == {sweep.pid}  # all adopted by the sweep
            sweep.send_signal(how)
        sweep.communicate(timeout=60)
        assert survivors(found) == []
        assert sweep.returncode == (0 if how == "end" else 1)  # 1: the Stopped the signal raised
    finally:
        if sweep.poll() is None:
            sweep.kill()
        kill_all(found)


def is_subreaper() -> int:
    value = ctypes.c_int(-1)
    assert ctypes.CDLL(None).prctl(processes.PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) == 0
    return value.value


@pytest.mark.skipif(sys.platform != "linux", reason="PR_SET_CHILD_SUBREAPER is Linux's")
def test_subreaper_is_given_back_when_the_block_ends():
    assert is_subreaper() == 0
    with processes.subreaper(grace_s=0.1) as ok:
        assert ok is True
        assert is_subreaper() == 1
    assert is_subreaper() == 0


def test_the_subreaper_leaves_what_ran_before_it():
    """A child started before the block (a test runner's session server) is not the sweep's: it stays;
    one started inside ends with the block."""
    older = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        with processes.subreaper(grace_s=0.5):
            inner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        assert inner.wait(timeout=10) is not None
        assert older.poll() is None
    finally:
        older.kill()
        older.wait()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [None, signal.SIGTERM, signal.SIGKILL], ids=["normal-end", "sigterm", "sigkill"])
def test_a_real_sweep_leaves_no_escaper_behind(tmp_path, pids, sig):
    """`sharebench run --engine exec` with a program whose children leave its group and session: none
    is left after the sweep ends, is stopped, or is killed (the replicas' parent-death signal)."""
    prog = tmp_path / "prog.sh"
    prog.write_text(
        f"#!/bin/sh\nexec {sys.executable} {script(tmp_path, 'escape.py', ESCAPER)} {'exit' if sig is None else 'wait'}\n"
    )
    prog.chmod(0o755)
    argv = [
        *("run", "--device", "cpu", "--modes", "exclusive", "--engine", "exec", "--exec", str(prog)),
        *("--exec-timing", "process", "--work", "1", "--warmup-repeats", "0", "--repeats", "1"),
        *("--no-progress", "--no-telemetry", "--out", str(tmp_path / "r")),
    ]
    sweep = subprocess.Popen([sys.executable, "-m", "sharebench", *argv], stderr=subprocess.PIPE, text=True)
    found: list[int] = []
    try:
        found = started(pids, timeout_s=120)
        if sig is not None:
            sweep.send_signal(sig)
        _, err = sweep.communicate(timeout=120)
        assert "Traceback" not in err, err
        assert survivors(found, timeout_s=20) == []
    finally:
        if sweep.poll() is None:
            sweep.kill()
        kill_all(found)
