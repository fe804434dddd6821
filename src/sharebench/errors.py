"""The one error type for what a user can fix, and the one way a message becomes one line."""

from __future__ import annotations


def one_line(text: object, limit: int | None = None) -> str:
    """``text`` (a message or an exception) on one line, cut to ``limit`` characters with "...";
    an exception with no message reads as its type's name."""
    s = " ".join(str(text).split())
    if not s and isinstance(text, BaseException):
        s = type(text).__name__
    if limit is not None and len(s) > limit:
        s = s[: limit - 3] + "..."
    return s


class UserError(Exception):
    """A problem the user can fix: bad option, missing node, absent backend.

    The message is one line naming the bad value and what is allowed; the CLI
    prints it without a traceback and exits with status 2. Everything else
    keeps its traceback.
    """

    def __init__(self, message: str):
        super().__init__(one_line(message))


class Stopped(KeyboardInterrupt):
    """Stopped by a signal (SIGTERM, SIGHUP): unwinds like Ctrl-C; ``exit_status`` is 128 + its number."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum
        self.exit_status = 128 + signum
