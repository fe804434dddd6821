"""Replica patterns: how a replica offers its work to the device, parsed in one place.

Grammar (lowercase; keys in any order, each at most once, every key optional)::

    batch                                 back-to-back work, the device kept saturated (the default:
                                          the study's replica, results unchanged)
    interactive[:burst=N,think=S]         a user: a burst of N units of work, then a think time drawn
                                          from an exponential distribution of mean S seconds, again
                                          and again (closed loop: the next burst waits for the last)
    serve[:rate=R,size=N]                 a service: requests of N units arrive at R per second, a
                                          Poisson process (open loop: arrivals do not wait for the
                                          device, so a request's latency includes its time queued)

A *unit* is what the workload counts as one piece of work: a turn of the warm particle set for
Simpletrack, one batch through the model for inference, one call of the program's own work
function for an exec program. A burst is a number of units, not a duration, so that the work a
burst asks for is the same alone and beside neighbours, and its latency is what sharing changes.

Defaults: ``interactive`` = ``interactive:burst=10,think=0.5`` (the user of issue 23: ten matmuls,
half a second of thought); ``serve`` = ``serve:rate=10,size=1``. Numbers: ``burst`` and ``size``
whole numbers 1..10^9; ``think`` seconds and ``rate`` requests/s finite and > 0 (think <= 86400 s,
rate <= 10^6 /s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sharebench.errors import UserError

PATTERN_KINDS = ("batch", "interactive", "serve")
ALLOWED_PATTERNS = "batch, interactive[:burst=N,think=SECONDS], serve[:rate=PER_SECOND,size=N]"
KEYS = {"batch": (), "interactive": ("burst", "think"), "serve": ("rate", "size")}
DEFAULT_BURST = 10
DEFAULT_THINK_S = 0.5
DEFAULT_RATE_PER_S = 10.0
DEFAULT_SIZE = 1
MAX_UNITS = 10**9
MAX_THINK_S = 86_400.0
MAX_RATE_PER_S = 1e6
DEFAULT_BURSTS = 30  # the victim's bursts (or requests) per cell under a pattern (Workload.bursts)
MAX_BURSTS = 10**6
DEFAULT_SLO = 2.0  # the p95 slowdown target of users per GPU (sharebench.analysis.latency)


@dataclass(frozen=True)
class Pattern:
    """One replica pattern. ``units`` is the work of one burst (interactive) or request (serve);
    ``think_s`` the mean think time (interactive); ``rate_per_s`` the mean arrival rate (serve)."""

    kind: str = "batch"  # one of PATTERN_KINDS
    units: int | None = None  # interactive: burst; serve: size; batch: None
    think_s: float | None = None  # interactive only
    rate_per_s: float | None = None  # serve only

    @property
    def label(self) -> str:
        """The canonical spelling, every key written: ``parse_pattern(p.label) == p``."""
        if self.kind == "interactive":
            return f"interactive:burst={self.units},think={format_number(self.think_s)}"
        if self.kind == "serve":
            return f"serve:rate={format_number(self.rate_per_s)},size={self.units}"
        return self.kind

    @property
    def is_batch(self) -> bool:
        return self.kind == "batch"

    def __str__(self) -> str:
        return self.label


BATCH = Pattern("batch")


def format_number(x: float | None) -> str:
    """The shortest spelling that reads back as the same float: 0.5, 10, 1e-05, 2.5e+20."""
    if x is None:
        return ""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def parse_pattern(text: str) -> Pattern:
    """``text`` as a :class:`Pattern`; one-line :class:`UserError` naming the bad part otherwise."""
    s = str(text).strip().lower()
    kind, sep, rest = s.partition(":")
    kind = kind.strip()
    if kind not in PATTERN_KINDS:
        raise UserError(f"unknown pattern {text!r}; allowed: {ALLOWED_PATTERNS}")
    if kind == "batch":
        if sep:
            raise UserError(f"'batch' takes no settings (got {text!r}); allowed: {ALLOWED_PATTERNS}")
        return BATCH
    values = settings(text, kind, rest if sep else "")
    if kind == "interactive":
        return Pattern(
            "interactive",
            units=units_value(text, "burst", values.get("burst"), DEFAULT_BURST),
            think_s=positive_value(text, "think", values.get("think"), DEFAULT_THINK_S, MAX_THINK_S, "seconds"),
        )
    return Pattern(
        "serve",
        units=units_value(text, "size", values.get("size"), DEFAULT_SIZE),
        rate_per_s=positive_value(text, "rate", values.get("rate"), DEFAULT_RATE_PER_S, MAX_RATE_PER_S, "requests/s"),
    )


def settings(text: str, kind: str, rest: str) -> dict[str, str]:
    """``key=value,key=value`` as a dict; UserError for a missing ``=``, an unknown or repeated key."""
    allowed = ", ".join(f"{k}=" for k in KEYS[kind])
    out: dict[str, str] = {}
    if not rest.strip():
        if rest or text.strip().endswith(":"):
            raise UserError(f"empty settings in pattern {text!r}; allowed keys for {kind}: {allowed}")
        return out
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise UserError(f"bad setting {item.strip()!r} in pattern {text!r}; allowed: {allowed} (key=value)")
        if key not in KEYS[kind]:
            raise UserError(f"unknown key {key!r} in pattern {text!r}; allowed keys for {kind}: {allowed}")
        if key in out:
            raise UserError(f"key {key!r} given twice in pattern {text!r}")
        out[key] = value
    return out


def units_value(text: str, key: str, value: str | None, default: int) -> int:
    if value is None:
        return default
    try:
        number = float(value.replace("_", ""))
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number != int(number) or not 1 <= number <= MAX_UNITS:
        raise UserError(f"bad {key} {value!r} in pattern {text!r}; allowed: a whole number of units 1..{MAX_UNITS}")
    return int(number)


def positive_value(text: str, key: str, value: str | None, default: float, hi: float, unit: str) -> float:
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or not 0 < number <= hi:
        raise UserError(f"bad {key} {value!r} in pattern {text!r}; allowed: {unit} > 0 and <= {format_number(hi)}")
    return number
