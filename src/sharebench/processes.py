"""Child processes: the one place sharebench starts, stops and reaps one (issue 22, issue 27).

:func:`spawn` starts a child in a process group (and session) of its own, with the Linux
parent-death signal (SIGTERM when sharebench dies, so no replica waits at a barrier forever) and its
output in a log file. :func:`stop` ends children as whole groups: SIGTERM to each group, a grace period,
then SIGKILL to each group, then the leaders are reaped. A group is killed even when its leader has
already ended, so what a child started (a shell shim, a ``sleep``, a program that ignores SIGTERM)
ends with it. A child started with ``own_group=False`` (a program a replica runs, which then belongs
to the replica's group and ends with it) is stopped alone.

A group is not a tree: a descendant that calls ``setpgid`` or ``setsid`` leaves its group, and one
whose parent ends is re-parented. So every child that leads a group is also a *child subreaper*
(``PR_SET_CHILD_SUBREAPER``): an orphan below it is re-parented to it, not to init, and stays in its
tree. :func:`stop` ends each child's whole tree as seen before SIGTERM and before SIGKILL, whatever the
group or session; :func:`end_own_group` ends this process's own descendants too; and
:func:`subreaper` makes the sweep itself the subreaper of everything below it and ends what is left
when its block ends, on a normal end and on any exception (a signal turned into one included).

:func:`end_processes` ends processes that are not our children (an orphaned daemon found by its
environment): SIGTERM, a grace period, SIGKILL.

The parent-death signal is SIGTERM, so a replica ends cleanly (its ``finally`` stops its program); but a
Python handler runs only between bytecodes, and a child may ignore SIGTERM, so a replica inside a long
C call (a kernel, a ``sleep`` of its program) would outlive its sweep by the whole grace period and then
write into the folder a resumed sweep reuses (issue 46). :func:`watch_parent` bounds that: a thread
that wakes when the parent process ends (a pidfd; a 0.1 s poll where there is none) and, after
:data:`ORPHAN_GRACE_S` for the clean path, kills every descendant and this process with SIGKILL;
:func:`parent_gone` tells the replica not to write its record then.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import psutil

GRACE_S = 5.0  # seconds between SIGTERM and SIGKILL
ORPHAN_GRACE_S = 0.5  # a child whose parent died: this long for its clean end, then SIGKILL (watch_parent)
WATCH_POLL_S = 0.1  # where the kernel has no pidfd: how often the parent is looked for
_watched: list[int] = []  # the parent watch_parent watches (set once)
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37


class Child(subprocess.Popen):
    """A started child; ``own_group``: it leads a process group (and session) of its own."""

    own_group: bool = True


def _prctl(option: int, value: Any) -> bool:
    """Linux prctl(2) through the C library; False where there is none (another OS) or it fails.
    ``value``: a number, or a pointer (``ctypes.byref``) for the options that answer through one."""
    arg = ctypes.c_ulong(value) if isinstance(value, int) else value
    zero = ctypes.c_ulong(0)
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, arg, zero, zero, zero) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the child gets SIGTERM if its parent dies (PR_SET_PDEATHSIG) and is the subreaper of its
    own descendants (PR_SET_CHILD_SUBREAPER, kept across exec): what it starts stays in its tree."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants: an orphan below it is re-parented to it,
    whatever its group or session. False where the kernel has no such thing (not Linux)."""
    return sys.platform == "linux" and _prctl(PR_SET_CHILD_SUBREAPER, 1)


def descendants(pid: int | None = None) -> list[psutil.Process]:
    """Every process below ``pid`` (default: this one), whatever its group or session."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


@contextmanager
def subreaper(grace_s: float = GRACE_S) -> Iterator[bool]:
    """The block runs as the subreaper of everything it starts (yields whether the kernel agreed);
    when it ends (normally, by an exception, by a signal turned into one) every descendant still
    running is ended: SIGTERM, up to ``grace_s``, SIGKILL, reaped. What was already running below this
    process before the block (a test runner's session server) is not the block's and is left alone."""
    was = ctypes.c_int(0)
    known = sys.platform == "linux" and _prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(was))
    before = set(descendants())  # psutil.Process compares pid and start time: a reused pid is a new one
    ok = become_subreaper()
    try:
        yield ok
    finally:
        end_processes([p for p in descendants() if p not in before], grace_s)
        if ok and known and not was.value:
            _prctl(PR_SET_CHILD_SUBREAPER, 0)


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
    """End children, everything in their groups and everything below them: SIGTERM to each group, up
    to ``grace_s`` for the leaders to end, SIGKILL to each group and to every descendant seen before
    either signal (one that left the group by ``setpgid``/``setsid`` included), then reap the leaders."""
    procs = list(procs)
    tree = {q.pid: q for p in procs if p.poll() is None for q in descendants(p.pid)}
    for p in procs:
        signal_group(p, signal.SIGTERM)
    _signal_each(tree.values(), signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.05, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    tree.update({q.pid: q for p in procs if p.poll() is None for q in descendants(p.pid)})
    for p in procs:  # what ignored SIGTERM, and what the leaders left behind in their groups
        signal_group(p, signal.SIGKILL)
    _signal_each(tree.values(), signal.SIGKILL)
    for p in procs:
        p.wait()
    _reap(tree.values())


def _signal_each(procs: Iterable[psutil.Process], sig: int) -> None:
    """``sig`` to each process still the one psutil saw (a pid reused since is left alone)."""
    for q in procs:
        try:
            q.send_signal(sig)
        except psutil.Error:
            continue


def _reap(procs: Iterable[psutil.Process]) -> None:
    """Collect those that became our children (re-parented to this subreaper) once they end."""
    me = os.getpid()
    for q in procs:
        try:
            if q.ppid() == me:
                q.wait(timeout=1.0)
        except (psutil.Error, psutil.TimeoutExpired):
            continue


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
    psutil.wait_procs(alive, timeout=1.0)  # reaps those that are our children (adopted as subreaper)


def parent_gone() -> bool:
    """True once the parent :func:`watch_parent` watches has ended (this process was re-parented)."""
    return bool(_watched) and os.getppid() != _watched[0]


def _wait_for_parent(ppid: int) -> None:
    """Return once process ``ppid`` (this process's parent when called) has ended."""
    try:
        fd = os.pidfd_open(ppid)
    except (AttributeError, OSError):  # no pidfd (not Linux >= 5.3): look every WATCH_POLL_S
        while os.getppid() == ppid:
            time.sleep(WATCH_POLL_S)
        return
    try:
        if os.getppid() == ppid:  # the fd is the parent's (not a process that reused its pid)
            select.select([fd], [], [])  # readable when the process ends; no GIL held while waiting
    finally:
        os.close(fd)


def kill_tree_now(code: int = 128 + signal.SIGKILL) -> None:  # pragma: no cover - ends this process
    """SIGKILL to every descendant and every other process of this process's group (when it leads
    one), then end this process at once with ``code``: no clean-up, nothing written."""
    me = os.getpid()
    targets = {p.pid: p for p in descendants()}
    if os.getpgid(0) == me:
        for p in psutil.process_iter():
            try:
                if p.pid != me and os.getpgid(p.pid) == me:
                    targets.setdefault(p.pid, p)
            except (OSError, psutil.Error):
                continue
    _signal_each(targets.values(), signal.SIGKILL)
    os._exit(code)


def watch_parent(grace_s: float = ORPHAN_GRACE_S) -> threading.Thread | None:
    """Bound this process's life by its parent's: a daemon thread that, once the parent ends, waits
    ``grace_s`` for the clean path (the parent-death signal's handler) and then kills every descendant
    and this process (:func:`kill_tree_now`), even while the main thread is inside a C call. None when
    there is no parent to watch (started by init) or it is watched already."""
    ppid = os.getppid()
    if ppid <= 1 or _watched:
        return None
    _watched.append(ppid)

    def watch() -> None:
        _wait_for_parent(ppid)
        time.sleep(grace_s)
        kill_tree_now()

    thread = threading.Thread(target=watch, name="sharebench-parent-watch", daemon=True)
    thread.start()
    return thread


@contextmanager
def deferred(sig: int = signal.SIGTERM) -> Iterator[None]:
    """Hold ``sig`` back while the block runs (a clean-up that must finish: stopping a program that
    ignores SIGTERM takes the grace period, and a signal raising in the middle of it would leave the
    program running); one that arrived is raised again after the block, to the handler that was set.
    Outside the main thread (where no handler can be set) the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    previous = signal.signal(sig, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(sig, previous)
        if got:
            signal.raise_signal(sig)


def end_own_group(grace_s: float = GRACE_S) -> None:
    """End every other process of this process's group and every descendant, when this process leads
    a group (a replica that sharebench started, a subreaper): what its program left behind ends with
    it, a descendant that left the group by ``setpgid``/``setsid`` included, even when sharebench is
    gone."""
    me = os.getpid()
    if os.getpgid(0) != me:
        return  # run by hand, in someone else's group: not ours to end
    others = {p.pid: p for p in descendants()}
    for p in psutil.process_iter():
        try:
            if p.pid != me and os.getpgid(p.pid) == me:
                others.setdefault(p.pid, p)
        except (OSError, psutil.Error):
            continue
    end_processes(list(others.values()), grace_s)
