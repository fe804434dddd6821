"""Signals that end a sweep cleanly: SIGTERM and SIGHUP (a closed terminal, a batch system's stop)
become the same interrupt as Ctrl-C, so every replica is stopped, the rows on disk stay and the
folder's lock is released; the process then exits 128 + the signal's number, as a shell reports it.
SIGKILL cannot be caught: the lock is dropped by the kernel, the rows already appended stay whole
(each batch is fsynced) and a torn tail is set aside by the next ``--resume``.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

CAUGHT = (signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """The sweep was stopped by a signal; ``exit_status`` is 128 + its number."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_status = 128 + signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise :class:`Stopped` in the main thread while the block runs."""

    def handler(signum: int, frame: Any) -> None:
        raise Stopped(signum)

    previous = {s: signal.signal(s, handler) for s in CAUGHT}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
