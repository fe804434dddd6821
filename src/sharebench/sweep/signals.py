"""Signals that end a sweep cleanly: SIGINT (Ctrl-C), SIGTERM and SIGHUP (a closed terminal, a batch
system's stop) become one interrupt, so every replica is stopped, the rows on disk stay and the
folder's lock is released; the process then exits 128 + the signal's number, as a shell reports it.
SIGKILL cannot be caught: the lock is dropped by the kernel, the rows already appended stay whole
(each batch is fsynced) and a torn tail is set aside by the next ``--resume``.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sharebench.errors import Stopped

CAUGHT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class SignalWatch:
    """The signal received while a sweep ran (None: none). Python drops an exception raised where it
    cannot propagate (a fork hook while a replica starts), so the sweep also calls :meth:`check`
    after each cell, and the CLI reads :attr:`signum` when the sweep returns."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def check(self, *_: Any) -> None:
        if self.signum is not None:
            raise Stopped(self.signum)


@contextmanager
def stop_on_signals() -> Iterator[SignalWatch]:
    """SIGINT, SIGTERM and SIGHUP raise :class:`Stopped` (a KeyboardInterrupt) in the main thread while
    the block runs, and are remembered in the watch it yields."""
    watch = SignalWatch()

    def handler(signum: int, frame: Any) -> None:
        watch.signum = signum
        raise Stopped(signum)

    def unraisable(info: Any) -> None:  # a Stopped Python could not raise: the watch has it
        if not isinstance(info.exc_value, Stopped):
            hook(info)

    hook = sys.unraisablehook
    previous = {s: signal.signal(s, handler) for s in CAUGHT}
    sys.unraisablehook = unraisable
    try:
        yield watch
    finally:
        sys.unraisablehook = hook
        for s, h in previous.items():
            signal.signal(s, h)
