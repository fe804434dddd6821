"""Child processes: the one place sharebench starts, stops and reaps one (issue 22, issue 27).

:func:`spawn` starts a child in a process group (and session) of its own, with the Linux
parent-death signal (SIGTERM when sharebench dies, so no replica waits at a barrier forever) and its
output in a log file. :func:`stop` ends children as whole groups: SIGTERM to each group, a grace period,
then SIGKILL to each group, then the leaders are reaped. A group is killed even when its leader has
already ended, so what a child started (a shell shim, a ``sleep``, a program that ignores SIGTERM)
ends with it. A child started with ``own_group=False`` (a program a replica runs, which then belongs
to the replica's group and ends with it) is stopped alone.

:func:`end_processes` ends processes that are not our children (an orphaned daemon found by its
environment): SIGTERM, a grace period, SIGKILL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import psutil

GRACE_S = 5.0  # seconds between SIGTERM and SIGKILL


class Child(subprocess.Popen):
    """A started child; ``own_group``: it leads a process group (and session) of its own."""

    own_group: bool = True


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the child gets SIGTERM if its parent dies (PR_SET_PDEATHSIG)."""
    import ctypes  # noqa: PLC0415 - only in the child

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - no glibc prctl here: the child runs without the parent-death signal
        pass


def spawn(
    argv: Sequence[str],
    *,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    stdin: int | IO[Any] | None = subprocess.DEVNULL,
    stdout: int | IO[Any] | None = None,
    stderr: int | IO[Any] | None = None,
    text: bool = False,
    own_group: bool = True,
) -> Child:
    """Start ``argv``: its stdout and stderr to the file ``log`` (when given; else ``stdout``/``stderr``),
    in a process group of its own (``own_group``), with the parent-death signal on Linux."""
    kwargs: dict[str, Any] = {
        "env": None if env is None else dict(env),
        "stdin": stdin,
        "text": text,
        "start_new_session": own_group,
        "preexec_fn": die_with_parent if sys.platform == "linux" else None,
    }
    if log is not None:
        with log.open("w") as out:
            child = Child(list(argv), stdout=out, stderr=subprocess.STDOUT, **kwargs)
    else:
        child = Child(list(argv), stdout=stdout, stderr=stderr, **kwargs)
    child.own_group = own_group
    return child


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to the child's whole group (to the child alone when it does not lead one); a group
    already empty is no error."""
    try:
        if getattr(proc, "own_group", False):
            os.killpg(proc.pid, sig)
        elif proc.poll() is None:
            proc.send_signal(sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(procs: Iterable[subprocess.Popen], grace_s: float = GRACE_S) -> None:
    """End children and everything in their groups: SIGTERM to each group, up to ``grace_s`` for the
    leaders to end, SIGKILL to each group, then reap the leaders."""
    procs = list(procs)
    for p in procs:
        signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:  # what ignored SIGTERM, and what the leaders left behind in their groups
        signal_group(p, signal.SIGKILL)
    for p in procs:
        p.wait()


def end_processes(procs: list[psutil.Process], grace_s: float = 10.0) -> None:
    """End processes that are not our children: SIGTERM, up to ``grace_s``, then SIGKILL."""
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _gone, alive = psutil.wait_procs(procs, timeout=grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass


def end_own_group(grace_s: float = GRACE_S) -> None:
    """End every other process of this process's group, when this process leads one (a replica that
    sharebench started): what its program left behind ends with it, even when sharebench is gone."""
    me = os.getpid()
    if os.getpgid(0) != me:
        return  # run by hand, in someone else's group: not ours to end
    others = []
    for p in psutil.process_iter():
        try:
            if p.pid != me and os.getpgid(p.pid) == me:
                others.append(p)
        except (OSError, psutil.Error):
            continue
    end_processes(others, grace_s)
