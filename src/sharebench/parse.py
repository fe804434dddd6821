"""Values a user types, parsed in one place: whole numbers, lists of counts, numbers that may be
missing. Each parser names the bad value and what is allowed in a one-line :class:`UserError`."""

from __future__ import annotations

import math
import re
import urllib.parse
from pathlib import Path
from typing import Any

from sharebench.errors import UserError

# Defaults the CLI's help shows whose owners import pandas or scipy: kept here, light, read by both
DEFAULT_THRESHOLD_PTS = 2.0  # history check: a change is larger than this, in loss points (history.check)
DEFAULT_ALPHA = 0.01  # history check: the significance level of Welch's t-test
DEFAULT_BASELINE_RUNS = 5  # history check: the runs before the newest that form its baseline
DEFAULT_NODE_LABEL = "node"  # the DCGM series' node label, added by the ServiceMonitor (telemetry.prometheus)
# a sweep's bounds, checked before anything is allocated: a typo must not start a sweep of years (sweep.plan)
MAX_REPEATS = 1000
MAX_TURNS = 10**9
# adaptive repeats (analysis.sequential): the fewest repeats an interval is judged on, the default most, and
# the default precision (half-width of a loss interval, points)
MIN_REPEATS = 3
DEFAULT_MAX_REPEATS = 10
DEFAULT_PRECISION = 1.0
# what a replica runs (sharebench.kernel.engines: the trackers; sharebench.workloads.protocol: any program)
ENGINES = ("simpletrack", "xtrack")
RUN_ENGINES = (*ENGINES, "exec")
# the work keys `sharebench compare --ignore` may leave out of the match (sharebench.analysis.compare)
COMPARE_IGNORABLE = ("engine", "backend", "lattice", "device_class")
EXEC_TIMINGS = ("protocol", "process")  # the exec engine's timed window: the program's report, or the process


def whole_number(name: str, value: Any, lo: int = 0, hi: int | None = None) -> int:
    """``value`` (an int, ``"3"``, ``"1e6"`` or a float with no fraction, as KFP passes numbers) as an
    int >= ``lo`` (and <= ``hi`` when given); a bool is refused."""
    allowed = f"a whole number >= {lo}" if hi is None else f"a whole number {lo}..{hi}"
    if isinstance(value, bool):
        raise UserError(f"bad {name} {value!r}; allowed: {allowed}")
    try:
        number = float(str(value).strip().replace("_", ""))
    except (ValueError, OverflowError):
        number = math.nan
    if not math.isfinite(number) or number != int(number) or int(number) < lo or (hi is not None and number > hi):
        raise UserError(f"bad {name} {value!r}; allowed: {allowed}")
    return int(number)


def seconds(name: str, value: Any, lo: float = 0.0, hi: float = 10**7) -> float:
    """A duration in seconds: finite, > ``lo`` (>= 0 when ``lo`` is 0 and zero is meant), <= ``hi``;
    nan and inf are refused (they would switch a limit off)."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        number = math.nan
    if not math.isfinite(number) or number < lo or number > hi:
        raise UserError(f"bad {name} {value!r}; allowed: seconds {lo:g}..{hi:g}")
    return number


def counts(name: str, values: str | list[Any], example: str = "5e6,1e7") -> list[int]:
    """``"5e6,1e7,1.5e7"`` or a list -> [5000000, 10000000, 15000000]: whole numbers > 0, duplicates
    dropped (first kept)."""
    items = values.split(",") if isinstance(values, str) else list(values)
    out = []
    for item in items:
        text = str(item).strip().replace("_", "")
        if not text:
            continue
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number <= 0 or number != int(number):
            raise UserError(f"bad {name} {item!r}; allowed: whole numbers > 0 such as 10000 or 5e6")
        out.append(int(number))
    if not out:
        raise UserError(f"no {name} given; allowed: a comma-separated list such as {example}")
    return list(dict.fromkeys(out))


MAX_BUDGET_S = 30 * 86400.0  # the longest duration a budget may be
DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?")
DURATION_ALLOWED = "a duration such as 90s, 10m, 1h30m (h, m, s; at most 30 days)"


def parse_duration(text: str | float, name: str = "--budget") -> float:
    """``"90s"`` -> 90.0, ``"10m"`` -> 600.0, ``"1h30m"`` -> 5400.0; a bare number, zero or a typo is a
    one-line UserError naming the value."""
    s = str(text).strip().lower().replace(" ", "")
    m = DURATION.fullmatch(s)
    if not s or m is None or not any(m.groups()):
        raise UserError(f"bad {name} {text!r}; allowed: {DURATION_ALLOWED}")
    h, mi, sec = (float(g) if g else 0.0 for g in m.groups())
    total = h * 3600 + mi * 60 + sec
    if not 0 < total <= MAX_BUDGET_S:
        raise UserError(f"bad {name} {text!r}; allowed: {DURATION_ALLOWED}, more than 0 s")
    return total


def fmt_duration(seconds: float) -> str:
    """600 -> "10m", 5400 -> "1h30m", 95.5 -> "1m35.5s"."""
    h, rest = divmod(float(seconds), 3600)
    m, s = divmod(rest, 60)
    parts = [f"{int(h)}h" if h else "", f"{int(m)}m" if m else "", f"{s:.3g}s" if s or not (h or m) else ""]
    return "".join(parts)


def number_or_nan(value: Any) -> float:
    """A float, or NaN where the value is missing or not a number (a table cell not measured)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def cpu_set(text: str) -> list[int]:
    """``"0-3,6"`` -> [0, 1, 2, 3, 6]."""
    out: list[int] = []
    try:
        for part in str(text).split(","):
            part = part.strip()
            if "-" in part:
                first, last = part.split("-")
                out += list(range(int(first), int(last) + 1))
            elif part:
                out.append(int(part))
    except ValueError:
        out = []
    if not out or min(out) < 0:
        raise UserError(f"bad cpus {text!r}; allowed: a list of core numbers like 0-3,6")
    return out


def format_cpu_set(cpus: list[int] | tuple[int, ...] | set[int] | None) -> str:
    """[0, 1, 2, 5] -> ``"0-2,5"`` (the inverse of :func:`cpu_set`); empty -> ``""``."""
    if not cpus:
        return ""
    ordered = sorted({int(c) for c in cpus})
    parts, start, prev = [], ordered[0], ordered[0]
    for c in [*ordered[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if c is not None:
            start = prev = c
    return ",".join(parts)


def check_engine(engine: str, allowed: tuple[str, ...] = ENGINES) -> str:
    """The engine name, lowercased; UserError naming the allowed ones."""
    e = str(engine).strip().lower()
    if e not in allowed:
        raise UserError(f"bad engine {engine!r}: allowed are {', '.join(allowed)}")
    return e


def check_exec_timing(value: str) -> str:
    """The exec engine's timing (:data:`EXEC_TIMINGS`), lowercased."""
    v = str(value).strip().lower()
    if v not in EXEC_TIMINGS:
        raise UserError(f"bad exec timing {value!r}; allowed: {', '.join(EXEC_TIMINGS)}")
    return v


def check_slo(slo: float | str) -> float:
    """The slowdown target: a finite number >= 1; UserError naming a bad one."""
    try:
        value = float(slo)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 1:
        raise UserError(f"bad --slo {slo!r}; allowed: a p95 slowdown target >= 1 (e.g. 2 for twice as slow)")
    return value


def check_precision(precision: float | str) -> float:
    """``--precision``: points of loss > 0 (the half-width a repeated cell's interval must reach)."""
    try:
        p = float(precision)
    except (TypeError, ValueError):
        p = math.nan
    if not math.isfinite(p) or p <= 0:
        raise UserError(f"bad --precision {precision!r}; allowed: points of loss > 0, such as 1 or 0.5")
    return p


def size_name(engine: str | None) -> str:
    """What a size of a sweep is called in an error: a program's work size (the exec engine), a tracker's
    particle count."""
    return "work size (--work)" if str(engine or "").strip().lower() == "exec" else "particle count"


def lattice_file(path: str) -> str:
    """A lattice file that is there (its content is the lattice loader's to check)."""
    if not Path(path).is_file():
        raise UserError(f"lattice file {path!r} not found; give an Xsuite line JSON or JSON.gz")
    return path


def check_http_url(what: str, url: str) -> str:
    """An http(s) URL with a host (``what``: whose, for the error: "Prometheus URL", "Grafana URL")."""
    p = urllib.parse.urlparse(url or "")
    if p.scheme not in ("http", "https") or not p.netloc:
        raise UserError(f"bad {what} {url!r}; allowed: http(s)://HOST[:PORT][/PATH]")
    return url


def check_ignore(text: str) -> tuple[str, ...]:
    """``compare --ignore``: work keys of :data:`COMPARE_IGNORABLE`, comma-separated."""
    keys = tuple(k.strip() for k in str(text).split(",") if k.strip())
    bad = [k for k in keys if k not in COMPARE_IGNORABLE]
    if bad:
        raise UserError(f"bad --ignore {','.join(bad)!r}; allowed: {', '.join(COMPARE_IGNORABLE)}")
    return keys


MIN_POLL_S = 0.1  # the command line's floor on --poll: each look at the node is one or more API requests


def check_times(
    timeout_s: float,
    poll_s: float | None,
    names: tuple[str, str] = ("timeout_s", "poll_s"),
    *,
    min_poll_s: float = 0.0,
) -> None:
    """Raise a ``UserError`` unless ``timeout_s`` (and ``poll_s``, when given) are finite seconds > 0 (``inf``
    would wait forever on a frozen API server) and ``poll_s`` is at least ``min_poll_s`` (the command line
    passes :data:`MIN_POLL_S`: ``--poll 1e-9`` sent thousands of requests a second); ``names``: how the caller
    calls them (the CLI: ``--timeout``, ``--poll``)."""
    for name, value in ((names[0], timeout_s), (names[1], poll_s)):
        if value is None and name == names[1]:
            continue
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise UserError(f"{name} must be a finite number of seconds > 0 (got {value!r})")
    if poll_s is not None and poll_s < min_poll_s:
        raise UserError(f"{names[1]} must be at least {min_poll_s:g} s (got {poll_s!r}): each check is an API request")
