"""What the fault-injection tests (tests/faults) share: a small CPU sweep run as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SWEEP = [
    "--device",
    "cpu",
    "--modes",
    "exclusive",
    "--particles",
    "2000",
    "--turns",
    "20",
    "--warmup-repeats",
    "0",
    "--no-progress",
    "--no-telemetry",
]


def sharebench(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`sharebench ARGV` as a user runs it: its own process, its exit status and its stderr."""
    return subprocess.run([sys.executable, "-m", "sharebench", *argv], capture_output=True, text=True, timeout=timeout)


def sweep_argv(lattice: str, out: Path, *extra: str) -> list[str]:
    return ["run", *SWEEP, "--lattice", lattice, "--out", str(out), *extra]


def one_line_error(stderr: str) -> str:
    """The one message line of a refused run (no traceback)."""
    assert "Traceback" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("sharebench: ")]
    assert len(lines) == 1, stderr
    return lines[0]
