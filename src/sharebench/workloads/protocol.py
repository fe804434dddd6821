"""The replica protocol: how any program, in any language, runs as one replica of a sharing cell.

The harness (``python -m sharebench.workloads.replica`` with ``engine="exec"``) starts the program with
these environment variables, beside the device pinning every replica gets (CUDA_VISIBLE_DEVICES under
MIG, the MPS client settings, the core set under ``partition:N``):

* ``SHAREBENCH_READY_FILE``: touch it when set-up is done;
* ``SHAREBENCH_START_FILE``: wait until it exists and holds an epoch instant, then until that instant;
* ``SHAREBENCH_RESULT_FILE``: write ``{"start": <epoch s>, "end": <epoch s>, "work": <number>,
  "unit": "<name>"}`` there after the timed work (other keys are kept, under the record's ``extra``);
* ``SHAREBENCH_REPLICA`` / ``SHAREBENCH_REPLICAS``: this replica's index and the cell's replica count;
* ``SHAREBENCH_WORK``: the size the sweep asks for (``--work``);
* ``SHAREBENCH_DEVICE``: the device spec the sweep runs on (cpu, cuda:0, opencl:0.0);
* under a replica pattern only (``--pattern``/``--neighbours``, ``sharebench.workloads.bursts``):
  ``SHAREBENCH_PATTERN`` (this replica's pattern), ``SHAREBENCH_PATTERN_SEED``, ``SHAREBENCH_BURSTS`` (write
  the per-burst record there), ``SHAREBENCH_STOP_FILE`` (every replica: stop once it exists),
  ``SHAREBENCH_PATTERN_COUNT`` (the victim: its most bursts) and ``SHAREBENCH_PATTERN_SECONDS`` (an open
  loop's victim: its window in seconds, in place of the count), and ``SHAREBENCH_PROGRESS`` (a user: append
  each burst there as it ends, the live record the sweep decides the cell by while it runs). A program that
  ignores them keeps working; one that writes no live record runs its cell to its limit.

Serving cells (optional; a warm replica keeps the program from one cell to the next): the harness offers
it with ``SHAREBENCH_SERVE=1`` in the environment and a pipe on the program's stdin. The first cell
arrives through the environment as above, so a program that ignores it works unchanged (it is started
fresh for every cell). A serving program writes its result with ``"serving": true`` and then reads ONE
line from stdin: a JSON object of the next cell's variables (the names above: the ready, start and
result files, replica, replicas, work, device, and the pattern's variables; a variable not in the line
is unset for that cell; unknown keys are ignored), sets up what changed (e.g. a new batch size) and
follows the protocol for that cell. End of input: it exits 0. Started with a ready file and no result
file (the harness sets it up before the first cell, "prime"), it sets up, writes the ready file with the
word ``serving`` in it and reads its first cell's line (a primed program that writes no such word is
stopped, and started fresh for its first cell). Python programs iterate :func:`cells` (what ``sharebench.workloads.train``
and ``.infer`` do); a program that exits after its result, or fails, is started fresh for the next cell.

A program that cannot follow the protocol runs with ``exec_timing="process"``: the harness waits at
the barrier itself, starts the program at the barrier instant and times the whole process; every
table says so (the ``exec_timing`` column: ``protocol`` or ``process``).

The harness's side (starting the program, relaying the barrier, reading its result into a record) is
``sharebench.workloads.program``.

Python programs may use :func:`ready`, :func:`wait_for_start` and :func:`write_result` (what
``sharebench.workloads.train`` does); ``examples/workloads/`` holds a shell and a Python program that
follow the protocol by hand.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from sharebench.errors import UserError, one_line
from sharebench.files import write_atomic
from sharebench.kernel.run import read_start_instant, sleep_until

# the exec engine's timings, kept light in parse (the CLI checks --exec-timing before this loads)
from sharebench.parse import EXEC_TIMINGS as EXEC_TIMINGS
from sharebench.parse import check_exec_timing as check_exec_timing

READY_FILE = "SHAREBENCH_READY_FILE"
START_FILE = "SHAREBENCH_START_FILE"
RESULT_FILE = "SHAREBENCH_RESULT_FILE"
REPLICA = "SHAREBENCH_REPLICA"
REPLICAS = "SHAREBENCH_REPLICAS"
WORK = "SHAREBENCH_WORK"
DEVICE = "SHAREBENCH_DEVICE"
SERVE = "SHAREBENCH_SERVE"  # "1": the harness offers to send the next cells on stdin (serving cells)
# the variables a cell's line sets (the pattern's, sharebench.workloads.bursts, named here as text)
CELL_VARS = (
    READY_FILE, START_FILE, RESULT_FILE, REPLICA, REPLICAS, WORK, DEVICE,
    "SHAREBENCH_PATTERN", "SHAREBENCH_PATTERN_SEED", "SHAREBENCH_BURSTS", "SHAREBENCH_PATTERN_COUNT",
    "SHAREBENCH_PATTERN_SECONDS", "SHAREBENCH_STOP_FILE", "SHAREBENCH_PROGRESS",
)  # fmt: skip
MAX_CELL_LINE_BYTES = 64 * 1024
PRIMED = "serving"  # the word a primed program writes in its ready file: it will take its cells as lines
RESULT_KEYS = ("start", "end", "work", "unit")
# result keys that fill the record's own fields rather than its extras
RECORD_KEYS = ("device_name", "device_uuid", "context")
T = TypeVar("T")
# bounds on what a program hands back (issue 27): a result file, and each of its values as JSON, at most
MAX_RESULT_BYTES = 1024 * 1024
MAX_RESULT_VALUE_BYTES = 4096


# ----------------------------------------------------------------- the program's side (Python)


def ready() -> None:
    """Set-up is done: touch the ready file (no-op outside a sharebench cell)."""
    path = os.environ.get(READY_FILE)
    if path:
        Path(path).write_text(f"{os.getpid()} {time.time():.6f}\n")


def wait_for_start() -> float:
    """Wait for the start file and its instant; returns time.time() at the start (at once outside a cell)."""
    path = os.environ.get(START_FILE)
    if path:
        instant = read_start_instant(Path(path))
        if instant is not None:
            sleep_until(instant)
    return time.time()


def write_result(start: float, end: float, work: float, unit: str, **extra: Any) -> None:
    """Write the result file (stdout when run outside a cell)."""
    doc = {"start": start, "end": end, "work": work, "unit": unit, **extra}
    path = os.environ.get(RESULT_FILE)
    if path:
        write_atomic(Path(path), json.dumps(doc))
    else:
        print(json.dumps(doc))


def work_size(default: int) -> int:
    """SHAREBENCH_WORK as a whole number > 0 (default outside a cell); UserError naming a bad value."""
    text = os.environ.get(WORK, "")
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise UserError(f"bad {WORK} {text!r}; allowed: a whole number > 0")
    return int(value)


def offered_serving() -> bool:
    """Whether the harness offers serving cells (SHAREBENCH_SERVE=1)."""
    return os.environ.get(SERVE, "") == "1"


def apply_cell_line(line: str) -> None:
    """Set this process's environment to the cell of ``line`` (a JSON object of :data:`CELL_VARS`; a
    variable it leaves out is unset, unknown keys are ignored); UserError naming a bad line."""
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"bad cell line {one_line(line, 80)!r}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k, ""), str) for k in CELL_VARS):
        raise UserError(f"bad cell line {one_line(line, 80)!r}: a JSON object of strings is allowed")
    for key in CELL_VARS:
        if doc.get(key):
            os.environ[key] = doc[key]
        else:
            os.environ.pop(key, None)


def cells(stdin: IO[str] | None = None) -> Iterator[None]:
    """The cells this program serves, each with the process environment set to it: the environment's
    own cell (when it names a result file; else a prime: :func:`ready` at once, the set-up being done),
    then, when serving is offered, one per line on stdin until its end. Call after the set-up."""
    if os.environ.get(RESULT_FILE):
        yield None
    elif os.environ.get(READY_FILE) and offered_serving():  # a prime: set up, and serving
        write_atomic(Path(os.environ[READY_FILE]), f"{os.getpid()} {time.time():.6f} {PRIMED}\n")
    if not offered_serving():
        return
    source = stdin if stdin is not None else sys.stdin
    while True:
        line = source.readline(MAX_CELL_LINE_BYTES)
        if not line:
            return
        if line.strip():
            apply_cell_line(line)
            yield None


def cell_line(env: dict[str, str]) -> str:
    """The line that hands a serving program its next cell: the :data:`CELL_VARS` of ``env``."""
    return json.dumps({k: env[k] for k in CELL_VARS if env.get(k)}) + "\n"


# ----------------------------------------------------------------- the harness's side


def split_command(command: str | None) -> list[str]:
    """The command as argv (POSIX shell quoting, no shell: wrap in ``sh -c '...'`` for pipes);
    UserError when empty or unparsable."""
    if command is None or not str(command).strip():
        raise UserError("--engine exec needs a command: --exec 'CMD ARGS'")
    try:
        argv = shlex.split(str(command))
    except ValueError as exc:
        raise UserError(f"bad --exec {command!r}: {exc}") from None
    return argv


def check_command(command: str | None) -> str:
    """The command's program as found (on the PATH, or the path given); UserError in one line when it is
    not there or not executable: before a sweep makes its folder, and again in each replica."""
    argv = split_command(command)
    found = shutil.which(argv[0])
    if found is None:
        raise UserError(
            f"command {argv[0]!r} not found (--exec {command!r}): give a program on the PATH "
            "or a path to an executable file"
        )
    return found


def workload_name(command: str | None) -> str:
    """A short name for a command: ``python -m pkg.mod`` -> ``mod``, ``path/to/x.sh`` -> ``x``."""
    try:
        argv = split_command(command)
    except UserError:
        return "exec"
    first = Path(argv[0]).name
    if first.startswith("python") and len(argv) >= 3 and argv[1] == "-m":
        return argv[2].rsplit(".", 1)[-1]
    if first.startswith(("python", "sh", "bash")) and len(argv) >= 2 and not argv[1].startswith("-"):
        first = Path(argv[1]).name
    return Path(first).stem or "exec"


def parse_result(doc: Any, where: str) -> dict[str, Any]:
    """The result document checked: start <= end (epoch s), work > 0, unit a name; UserError naming the fault."""
    if not isinstance(doc, dict):
        raise UserError(
            f"malformed result in {where}: a JSON object with {', '.join(RESULT_KEYS)} is needed, "
            f"got {type(doc).__name__}"
        )
    missing = [k for k in RESULT_KEYS if k not in doc]
    if missing:
        raise UserError(f"malformed result in {where}: missing {', '.join(missing)} (needed: {', '.join(RESULT_KEYS)})")
    for k in ("start", "end", "work"):
        v = doc[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise UserError(f"malformed result in {where}: {k} {v!r} is not a finite number")
    if doc["end"] < doc["start"]:
        raise UserError(f"malformed result in {where}: end {doc['end']!r} before start {doc['start']!r}")
    if doc["work"] <= 0:
        raise UserError(f"malformed result in {where}: work {doc['work']!r}; allowed: a number > 0")
    if not isinstance(doc["unit"], str) or not doc["unit"].strip():
        raise UserError(f"malformed result in {where}: unit {doc['unit']!r}; allowed: a non-empty name")
    for k, v in doc.items():
        size = len(json.dumps(v))
        if size > MAX_RESULT_VALUE_BYTES:
            raise UserError(
                f"result in {where}: value of {one_line(str(k), 40)!r} is {size} bytes as JSON; "
                f"allowed: at most {MAX_RESULT_VALUE_BYTES} bytes per value"
            )
    return doc


def read_result(path: Path) -> dict[str, Any]:
    """The program's result file, checked; UserError when absent, over :data:`MAX_RESULT_BYTES`, not JSON
    or malformed (a value over :data:`MAX_RESULT_VALUE_BYTES`)."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_RESULT_BYTES + 1)  # no further than the limit: a huge file is never read in
            size = max(len(data), os.fstat(f.fileno()).st_size)
    except FileNotFoundError:
        raise UserError(f"the program wrote no result to {path} ({RESULT_FILE})") from None
    except OSError as exc:
        raise UserError(f"result file {path} unreadable: {exc}") from None
    if size > MAX_RESULT_BYTES:
        raise UserError(
            f"result file {path} is {size} bytes; allowed: at most {MAX_RESULT_BYTES} bytes (1 MiB): "
            "the four result keys and a few small extras"
        )
    text = data.decode("utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"malformed result in {path}: not JSON ({exc}): {one_line(text, 80)!r}") from None
    return parse_result(doc, str(path))


def read_oversized_away(path: Path, read: Callable[[Path], T], limit: int) -> T:
    """``read(path)``, removing the file when it is refused for being over ``limit`` bytes (the cell's
    folder keeps the one-line reason, not the file)."""
    try:
        return read(path)
    except UserError:
        with contextlib.suppress(OSError):
            if path.stat().st_size > limit:
                path.unlink()
        raise
