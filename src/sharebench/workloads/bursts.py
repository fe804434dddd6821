"""The per-burst driver: runs a replica pattern (``sharebench.patterns``) over any unit of work, and the
per-burst record a program writes for the harness.

``run_pattern(pattern, do_work, count=N | duration_s=S, seed=..., phase=True)`` calls ``do_work(units)``
on the pattern's schedule and returns one :class:`Burst` per call: its ``arrival`` (when the work was
asked for), ``start`` and ``end`` (when ``do_work`` began and returned) and ``units``. ``do_work`` must
return only when its work is done (synchronise the device). Times are epoch seconds, read from a
monotonic clock anchored to ``time.time()`` once, so they compare with the other replicas' records.
The schedule is the pattern kind's (``PatternSpec.loop`` and ``PatternSpec.pace``, ``sharebench.patterns``):
a closed loop waits for each burst to end, then for the pace's wait; an open loop's arrivals are the
pace's waits one after another from the start. Today's kinds:

* ``batch``: ``do_work(batch_units)`` back to back; a call arrives when the last ends.
* ``interactive``: a burst of ``pattern.units``, then a think time drawn from an exponential
  distribution of mean ``pattern.think_s``; the next burst arrives at the end of the think (closed loop).
  With ``phase=True`` the user starts with a think time of its own (drawn the same way), so that users
  started at one instant are out of step; ``phase=False`` starts at once (users in lockstep).
* ``serve``: requests of ``pattern.units`` arrive as a Poisson process of rate ``pattern.rate_per_s``
  (exponential gaps from the start, so ``phase`` changes nothing); a request that arrives while the last
  is running waits for it, so its latency (end - arrival) includes the time it queued. All arrivals are
  drawn from the seed before the first request runs.

The draws come from ``numpy.random.default_rng(seed)`` (seed: an int or a sequence of ints, e.g.
``(sweep_seed, replica, repeat)``), so a seed gives the same schedule. The driver waits for an arrival
by sleeping to :data:`SPIN_S` before it and spinning the rest, so a late wake-up does not count as the
device's latency (``benchmarks/burst_overhead.py`` measures what the driver adds to a burst of no work).
With ``count`` exactly that many bursts run; with ``duration_s`` bursts keep arriving until that many
seconds after the first instant, and every request that arrived in the window is served. ``stop`` (a
neighbour: "is the victim done?", :func:`stop_when_file`) is asked before each burst and every
:data:`STOP_POLL_S` of a wait: once true no further burst starts (a request then queued is not served);
with ``stop`` the count and duration may both be left out (serve's arrivals are then drawn one by one).

The record (protocol extension): a program run by ``--engine exec`` finds a file name in
:data:`BURSTS` (``SHAREBENCH_BURSTS``), its pattern in :data:`PATTERN`, its seed in :data:`SEED`, the
cell's stop file in :data:`STOP_FILE` (every replica stops once it exists: the harness writes it when the
cell is decided, at its limit, or when the victim is done) and, for the victim, the most bursts it runs in
:data:`COUNT` (its own limit: the sweep stops a watched cell earlier, once decided or once its fewest user has
the cap, so a cell of several users gives its victim a few caps) and, under an open loop (``serve``), the seconds of
arrivals in :data:`SECONDS` (its window, which a program that knows it uses in place of the count);
:func:`limit_from_env` reads them. :func:`record_bursts` writes the JSON-lines record there (nothing
outside a cell, and a program that ignores the variables keeps working). First line: ``{"kind":
"bursts", "schema_version": 1, "pattern": label, "seed": ..., "unit": ..., ...}``; then one ``{"i",
"arrival", "start", "end", "units"}`` line per burst. :func:`read_bursts` reads it back.

The live record (protocol extension, issue 42): every user of a patterned cell (a replica of the victim's
pattern) finds a file in :data:`PROGRESS` and appends one line to it per burst, as the burst ends: the
same JSON object as the record's burst lines (``{"i", "arrival", "start", "end", "units"}``, one
``write`` of a whole line ending in a newline). The harness reads it while the cell runs
(:class:`LiveRecord`): its progress bar, and the sweep's early stop, which writes the stop file once every
user's p95 is decided. ``run_pattern(progress=...)`` writes it (:func:`progress_from_env` names the file).
The earlier form, a byte ``.`` per burst, still counts a burst done (with no latency). A program that
writes no live record still runs: its cell runs to its limit (the victim's count or window) and is
decided afterwards from the final record.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sharebench.errors import UserError, one_line
from sharebench.files import write_atomic
from sharebench.patterns import BATCH, Pattern, Wait, parse_pattern

BURSTS = "SHAREBENCH_BURSTS"  # where a program writes its per-burst record (JSON lines)
PATTERN = "SHAREBENCH_PATTERN"  # the pattern a program follows (a sharebench.patterns label)
SEED = "SHAREBENCH_PATTERN_SEED"  # the seed of its think times or arrivals
COUNT = "SHAREBENCH_PATTERN_COUNT"  # the victim's most bursts (or requests), a cap; unset for a neighbour
SECONDS = "SHAREBENCH_PATTERN_SECONDS"  # an open loop's victim: seconds of arrivals (its window), in place of the count
STOP_FILE = (
    "SHAREBENCH_STOP_FILE"  # every replica stops once this file exists (the cell decided, at its limit, or done)
)
PROGRESS = "SHAREBENCH_PROGRESS"  # a user appends a line per burst here as it ends (the live record the harness reads)
STOP_POLL_S = 0.01  # how often a wait for an arrival looks for the stop file
BURSTS_KIND = "bursts"
# 1: a header line {kind, schema_version, pattern, seed, ...}, then {i, arrival, start, end, units} a burst
BURSTS_SCHEMA_VERSION = 1
BURST_KEYS = ("i", "arrival", "start", "end", "units")
# bounds on a burst record read back (issue 27): its size, its lines, each line
MAX_BURSTS_BYTES = 64 * 1024 * 1024
MAX_BURST_LINES = 500_000
MAX_BURST_LINE_BYTES = 4096
SPIN_S = 0.002  # the last 2 ms before an arrival are spun, not slept (a sleep can wake ~1 ms late)

Clock = Callable[[], float]
Sleep = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class Burst:
    """One burst or request: ``i`` its index, times in epoch seconds, ``units`` the work it asked for."""

    i: int
    arrival: float
    start: float
    end: float
    units: int

    @property
    def latency_s(self) -> float:
        """From arrival to end: the time the work took, and for a request the time it queued."""
        return self.end - self.arrival


def epoch_clock() -> Clock:
    """A clock in epoch seconds that never goes back: ``time.perf_counter`` anchored to ``time.time`` once."""
    offset = time.time() - time.perf_counter()
    return lambda: time.perf_counter() + offset


def wait_until(instant: float, clock: Clock, sleep: Sleep = time.sleep) -> None:
    """Return at ``instant`` of ``clock``: sleep to :data:`SPIN_S` before it, spin the rest."""
    remaining = instant - clock()
    if remaining > SPIN_S:
        sleep(remaining - SPIN_S)
    while clock() < instant:
        pass


def pattern_rng(seed: int | Sequence[int]) -> np.random.Generator:
    return np.random.default_rng(list(seed) if isinstance(seed, Sequence) else seed)


def run_pattern(
    pattern: Pattern,
    do_work: Callable[[int], object],
    *,
    count: int | None = None,
    duration_s: float | None = None,
    seed: int | Sequence[int] = 0,
    phase: bool = True,
    batch_units: int = 1,
    clock: Clock | None = None,
    sleep: Sleep = time.sleep,
    stop: Callable[[], bool] | None = None,
    progress: str | os.PathLike[str] | None = None,
) -> list[Burst]:
    """Run ``pattern`` over ``do_work`` for ``count`` bursts or ``duration_s`` seconds (exactly one, unless
    ``stop`` is given: then at most one), or until ``stop()``; one :class:`Burst` per call of ``do_work``.
    ``batch_units`` is the work of one call under ``batch``; ``progress``: the live record, a file that gets
    one line appended per burst as it ends (:func:`progress_from_env`; the harness reads it while the cell
    runs, :class:`LiveRecord`)."""
    check_limit(pattern, count, duration_s, stop)
    tick = live_writer(progress)
    now = clock or epoch_clock()
    t0 = now()
    until = math.inf if duration_s is None else t0 + duration_s
    limit = count if count is not None else math.inf
    rng = pattern_rng(seed)
    wait = pattern.wait()  # the pattern's pacing (PatternSpec.pace): None, back to back
    units = batch_units if pattern.units is None else int(pattern.units)

    def burst(i: int, arrival: float) -> Burst | None:
        return run_burst(i, arrival, units, do_work, now, sleep, stop)

    out: list[Burst] = []
    if pattern.spec.loop == "open":
        arrivals = OpenLoop(wait or (lambda _: 0.0), rng, t0, until, count)
        out = open_loop(arrivals, burst, tick, lazy=stop is not None)
    else:
        arrival = t0 + (wait(rng) if wait is not None and phase else 0.0)
        while len(out) < limit and arrival < until:
            next_burst = burst(len(out), arrival)
            if next_burst is None:
                break
            out.append(next_burst)
            tick(next_burst)
            arrival = next_burst.end + (wait(rng) if wait is not None else 0.0)
    idle_until(until, now, sleep, stop)
    return out


@dataclass(frozen=True)
class OpenLoop:
    """The arrivals of an open loop: gaps drawn by ``wait`` from ``rng``, from ``t0``, ``count`` of them or
    all before ``until``."""

    wait: Wait
    rng: np.random.Generator
    t0: float
    until: float
    count: int | None


def open_loop(
    arrivals: OpenLoop, burst: Callable[[int, float], Burst | None], tick: Callable[[Burst], None], lazy: bool
) -> list[Burst]:
    """Requests arriving on their own schedule (all drawn before the first runs, or one by one when ``lazy``:
    a stop may end the window early); one that arrives while the last is running waits for it."""
    instants: Iterable[float] = lazy_arrivals(arrivals) if lazy else open_arrivals(arrivals)
    out: list[Burst] = []
    for i, a in enumerate(instants):
        done = burst(i, a)
        if done is None:
            break
        out.append(done)
        tick(done)
    return out


def check_limit(pattern: Pattern, count: int | None, duration_s: float | None, stop: Callable[[], bool] | None) -> None:
    """ValueError unless exactly one of ``count`` and ``duration_s`` is given (or ``stop``) and it is
    valid; UserError for a pattern whose rate the sweep has not resolved yet."""
    if count is not None and duration_s is not None or (count is None and duration_s is None and stop is None):
        raise ValueError("run_pattern needs exactly one of count and duration_s (or stop)")
    if count is not None and count < 0:
        raise ValueError(f"count {count} < 0")
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s >= 0):
        raise ValueError(f"duration_s {duration_s} is not a finite number >= 0")
    if pattern.needs_capacity:  # serve:load=F: the sweep resolves it to a rate (patterns.resolve_load)
        raise UserError(f"pattern {pattern.label!r} has no rate yet: a sweep measures the capacity alone first")


def burst_line(b: Burst) -> str:
    """A burst as one line of the record (and of the live record): its JSON object and a newline."""
    return json.dumps(asdict(b)) + "\n"


def live_writer(path: str | os.PathLike[str] | None) -> Callable[[Burst], None]:
    """The live record's writer: each burst appended to ``path`` as one line (:func:`burst_line`, one
    ``write`` of an append-only file, opened and closed each time after the burst's end is read: nothing of
    it falls in a burst); a no-op without a path, and a file that cannot be written costs the bursts
    nothing."""
    if not path:
        return lambda _b: None
    target = os.fspath(path)

    def tick(b: Burst) -> None:
        with contextlib.suppress(OSError), open(target, "ab") as fh:
            fh.write(burst_line(b).encode())

    return tick


def progress_from_env() -> str | None:
    """The live record the harness gives a user of a patterned cell (:data:`PROGRESS`); None outside a sweep."""
    return os.environ.get(PROGRESS, "").strip() or None


LIVE_CHUNK_BYTES = 1 << 20  # the most of a live record read at one look


class LiveRecord:
    """A replica's live record (:data:`PROGRESS`), read as it grows: :meth:`read` takes what was appended
    since the last read; ``bursts`` holds every complete, well-formed burst line so far (in order) and
    ``done`` counts them with the earlier form's bytes (``.`` a burst). A torn last line waits for its
    end; a malformed line is skipped; past :data:`MAX_BURST_LINES` lines nothing more is kept. A file not
    there yet is no burst."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.offset = 0
        self.pending = b""
        self.bursts: list[Burst] = []
        self.ticks = 0

    @property
    def done(self) -> int:
        return len(self.bursts) + self.ticks

    def read(self) -> int:
        """Take in what was appended since the last read; the number of bursts it added."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read(LIVE_CHUNK_BYTES)
        except OSError:
            return 0
        self.offset += len(data)
        before = self.done
        buffer = self.pending + data
        while buffer:
            dots = len(buffer) - len(buffer.lstrip(b"."))
            if dots:
                self.ticks += dots
                buffer = buffer[dots:]
                continue
            line, newline, rest = buffer.partition(b"\n")
            if not newline:
                break
            buffer = rest
            self.take(line)
        self.pending = buffer if len(buffer) <= MAX_BURST_LINE_BYTES else b""  # a line too long: dropped
        return self.done - before

    def take(self, line: bytes) -> None:
        """One complete line: a burst kept when well formed (and below the line limit), else skipped."""
        if not line.strip() or len(line) > MAX_BURST_LINE_BYTES or self.done >= MAX_BURST_LINES:
            return
        try:
            doc = json.loads(line)
            if not isinstance(doc, dict):
                return
            self.bursts.append(burst_of(self.path, self.done + 1, doc))
        except (ValueError, UserError):
            return


def idle_until(until: float, now: Clock, sleep: Sleep, stop: Callable[[], bool] | None) -> None:
    """A window bound by a duration is that duration: after its last burst the user thinks (or the
    server waits) on to ``until``; no wait for a count-bound window, nor once ``stop()`` turns true."""
    while math.isfinite(until) and (left := until - now()) > 0:
        if stop is not None and stop():
            return
        sleep(left if stop is None else min(left, STOP_POLL_S))


def open_arrivals(arrivals: OpenLoop) -> list[float]:
    """The instants of an open loop (a Poisson process under ``serve``): ``count`` of them, or all before
    ``until``."""
    return list(lazy_arrivals(arrivals))


def lazy_arrivals(arrivals: OpenLoop) -> Iterator[float]:
    """The instants of :func:`open_arrivals` (the same draws), drawn one at a time."""
    t, n = arrivals.t0, 0
    while arrivals.count is None or n < arrivals.count:
        t += arrivals.wait(arrivals.rng)
        if t >= arrivals.until:
            return
        n += 1
        yield t


def run_burst(
    i: int,
    arrival: float,
    units: int,
    do_work: Callable[[int], object],
    now: Clock,
    sleep: Sleep,
    stop: Callable[[], bool] | None = None,
) -> Burst | None:
    """Wait for ``arrival``, run the burst; None (nothing run) when ``stop()`` turns true first."""
    if stop is not None:
        while arrival - now() > SPIN_S + STOP_POLL_S:
            if stop():
                return None
            sleep(STOP_POLL_S)
        if stop():
            return None
    wait_until(arrival, now, sleep)
    start = now()
    do_work(units)
    return Burst(i, arrival, start, now(), units)


def stop_when_file(path: str | os.PathLike[str] | None) -> Callable[[], bool] | None:
    """A ``stop`` for :func:`run_pattern`: true once ``path`` exists (None when no path)."""
    if not path:
        return None
    target = os.fspath(path)
    return lambda: os.path.exists(target)


def limit_from_env(default: dict[str, Any]) -> tuple[dict[str, Any], Callable[[], bool] | None]:
    """A program's ``run_pattern`` limit and stop under a sweep: ``{"duration_s": S}`` from :data:`SECONDS`
    (an open loop's victim: its window) or ``{"count": N}`` from :data:`COUNT` (the victim's cap), or no limit
    (a neighbour), each with a stop at :data:`STOP_FILE`; ``default`` (and no stop) outside a patterned cell.
    UserError naming a bad count or window."""
    stop = stop_when_file(os.environ.get(STOP_FILE, "").strip())
    seconds = os.environ.get(SECONDS, "").strip()
    if seconds:
        try:
            window = float(seconds)
        except ValueError:
            window = math.nan
        if not math.isfinite(window) or window <= 0:
            raise UserError(f"bad {SECONDS} {seconds!r}; allowed: seconds > 0")
        return {"duration_s": window}, stop
    text = os.environ.get(COUNT, "").strip()
    if text:
        if not text.isdigit() or int(text) < 1:
            raise UserError(f"bad {COUNT} {text!r}; allowed: a whole number >= 1")
        return {"count": int(text)}, stop
    return ({}, stop) if stop is not None else (default, None)


# ----------------------------------------------------------------- the per-burst record


def pattern_from_env(default: Pattern = BATCH) -> Pattern:
    """The pattern in :data:`PATTERN` (``default`` when unset); UserError naming a bad one."""
    text = os.environ.get(PATTERN, "").strip()
    return parse_pattern(text) if text else default


def seed_from_env(default: int = 0) -> int:
    """The seed in :data:`SEED` (``default`` when unset); UserError naming a bad one."""
    text = os.environ.get(SEED, "").strip()
    if not text:
        return default
    if not text.isdigit():
        raise UserError(f"bad {SEED} {text!r}; allowed: a whole number >= 0")
    return int(text)


def bursts_text(bursts: Sequence[Burst], header: dict[str, Any]) -> str:
    head = {"kind": BURSTS_KIND, "schema_version": BURSTS_SCHEMA_VERSION, **header}
    return json.dumps(head) + "\n" + "".join(burst_line(b) for b in bursts)


def write_bursts(path: Path, bursts: Sequence[Burst], pattern: Pattern, seed: object, **header: Any) -> None:
    """Write the record (atomically): the header (pattern label, seed, ``header``'s keys), one line a burst."""
    write_atomic(Path(path), bursts_text(bursts, {"pattern": pattern.label, "seed": seed, **header}))


def record_bursts(bursts: Sequence[Burst], pattern: Pattern, seed: object, **header: Any) -> Path | None:
    """Write the record to the file named by :data:`BURSTS`; nothing (None) when it is unset."""
    path = os.environ.get(BURSTS, "").strip()
    if not path:
        return None
    write_bursts(Path(path), bursts, pattern, seed, **header)
    return Path(path)


def read_bursts(path: Path) -> tuple[dict[str, Any], list[Burst]]:
    """The record's header and bursts; UserError (one line) when absent, of another kind, newer than this
    sharebench reads, or malformed (naming the line)."""
    lines = bounded_lines(Path(path))
    if not lines:
        raise UserError(f"burst record {path} is empty; a header line is needed")
    header = parse_line(path, 1, lines[0])
    if header.get("kind") != BURSTS_KIND:
        raise UserError(f"{path} is not a burst record (kind {header.get('kind')!r}, expected {BURSTS_KIND!r})")
    version = header.get("schema_version")
    if not isinstance(version, int) or not 1 <= version <= BURSTS_SCHEMA_VERSION:
        raise UserError(
            f"burst record {path} has schema_version {version!r}; this sharebench reads 1..{BURSTS_SCHEMA_VERSION} "
            "(a newer record needs a newer sharebench)"
        )
    return header, [burst_of(path, n, parse_line(path, n, ln)) for n, ln in enumerate(lines[1:], start=2)]


def bounded_lines(path: Path) -> list[str]:
    """The record's non-blank lines; UserError naming the limit when it holds more than
    :data:`MAX_BURSTS_BYTES`, :data:`MAX_BURST_LINES` lines or a line over :data:`MAX_BURST_LINE_BYTES`."""
    try:
        with path.open("rb") as f:
            data = f.read(MAX_BURSTS_BYTES + 1)  # never more than the limit read in
            size = max(len(data), os.fstat(f.fileno()).st_size)
    except OSError as exc:
        raise UserError(f"burst record {path} unreadable: {one_line(exc)}") from None
    if size > MAX_BURSTS_BYTES:
        raise UserError(f"burst record {path} is {size} bytes; allowed: at most {MAX_BURSTS_BYTES} bytes (64 MiB)")
    lines = [ln for ln in data.decode("utf-8", errors="replace").splitlines() if ln.strip()]
    if len(lines) > MAX_BURST_LINES:
        raise UserError(f"burst record {path} has {len(lines)} lines; allowed: at most {MAX_BURST_LINES}")
    for n, ln in enumerate(lines, start=1):
        if len(ln) > MAX_BURST_LINE_BYTES:
            raise UserError(
                f"burst record {path} line {n} is {len(ln)} characters; allowed: at most {MAX_BURST_LINE_BYTES}"
            )
    return lines


def parse_line(path: Path, n: int, line: str) -> dict[str, Any]:
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UserError(f"burst record {path} line {n}: not JSON ({exc.msg}): {one_line(line, 60)!r}") from None
    if not isinstance(doc, dict):
        raise UserError(f"burst record {path} line {n}: a JSON object is needed, got {type(doc).__name__}")
    return doc


def burst_of(path: Path, n: int, doc: dict[str, Any]) -> Burst:
    missing = [k for k in BURST_KEYS if k not in doc]
    if missing:
        raise UserError(f"burst record {path} line {n}: missing {', '.join(missing)} (needed: {', '.join(BURST_KEYS)})")
    for k in BURST_KEYS:
        v = doc[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise UserError(f"burst record {path} line {n}: {k} {v!r} is not a finite number")
    if not doc["arrival"] <= doc["end"] or not doc["start"] <= doc["end"]:
        raise UserError(f"burst record {path} line {n}: end {doc['end']!r} before its arrival or start")
    return Burst(int(doc["i"]), float(doc["arrival"]), float(doc["start"]), float(doc["end"]), int(doc["units"]))
