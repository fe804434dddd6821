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
    serve:load=F[,size=N]                 the same at a load relative to capacity: F (0 < F <= 4) of the
                                          requests/s one replica serves alone, measured first by the
                                          sweep (``sharebench.sweep.load``), which resolves it to
                                          ``serve:rate=R,size=N,load=F`` (R = F x capacity) before any
                                          replica runs it; ``load=`` there only records where R came from

A *unit* is what the workload counts as one piece of work: a turn of the warm particle set for
Simpletrack, one batch through the model for inference, one call of the program's own work
function for an exec program. A burst is a number of units, not a duration, so that the work a
burst asks for is the same alone and beside neighbours, and its latency is what sharing changes.

Defaults: ``interactive`` = ``interactive:burst=10,think=0.5`` (the user of issue 23: ten matmuls,
half a second of thought); ``serve`` = ``serve:rate=10,size=1``. Numbers: ``burst`` and ``size``
whole numbers 1..10^9; ``think`` seconds and ``rate`` requests/s finite and > 0 (think <= 86400 s,
rate <= 10^6 /s); ``load`` a fraction > 0 and <= 4 (above 1: overload on purpose).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sharebench.errors import UserError

PATTERN_KINDS = ("batch", "interactive", "serve")
ALLOWED_PATTERNS = (
    "batch, interactive[:burst=N,think=SECONDS], serve[:rate=PER_SECOND,size=N], serve:load=FRACTION[,size=N]"
)
KEYS = {"batch": (), "interactive": ("burst", "think"), "serve": ("rate", "size", "load")}
DEFAULT_BURST = 10
DEFAULT_THINK_S = 0.5
DEFAULT_RATE_PER_S = 10.0
DEFAULT_SIZE = 1
MAX_UNITS = 10**9
MAX_THINK_S = 86_400.0
MAX_RATE_PER_S = 1e6
MAX_LOAD = 4.0  # serve:load=F: at most 4 x the capacity alone
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
    rate_per_s: float | None = None  # serve only (None: serve:load=F not resolved yet)
    load: float | None = None  # serve only: the rate as a fraction of the capacity alone (serve:load=F)

    @property
    def label(self) -> str:
        """The canonical spelling, every key written: ``parse_pattern(p.label) == p``."""
        if self.kind == "interactive":
            return f"interactive:burst={self.units},think={format_number(self.think_s)}"
        if self.kind == "serve":
            rate = "" if self.rate_per_s is None else f"rate={format_number(self.rate_per_s)},"
            load = "" if self.load is None else f",load={format_number(self.load)}"
            return (
                f"serve:{rate}size={self.units}{load}"
                if rate
                else f"serve:load={format_number(self.load)},size={self.units}"
            )
        return self.kind

    @property
    def needs_capacity(self) -> bool:
        """A ``serve:load=F`` not resolved yet: its rate waits for the capacity alone (:func:`resolve_load`)."""
        return self.kind == "serve" and self.rate_per_s is None

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
    load = values.get("load")
    rate = values.get("rate")
    return Pattern(
        "serve",
        units=units_value(text, "size", values.get("size"), DEFAULT_SIZE),
        rate_per_s=(
            None
            if load is not None and rate is None
            else positive_value(text, "rate", rate, DEFAULT_RATE_PER_S, MAX_RATE_PER_S, "requests/s")
        ),
        load=None if load is None else positive_value(text, "load", load, 1.0, MAX_LOAD, "a fraction of capacity"),
    )


def resolve_load(pattern: Pattern, units_per_s: float) -> Pattern:
    """``serve:load=F,size=N`` at a capacity alone of ``units_per_s`` (units of work per second one replica
    serves alone) as ``serve:rate=R,size=N,load=F``, R = F x units_per_s / N requests/s (4 significant
    digits); any other pattern as it is. UserError for a capacity that is not a positive finite number."""
    if not pattern.needs_capacity:
        return pattern
    if not math.isfinite(units_per_s) or units_per_s <= 0:
        raise UserError(f"bad capacity {units_per_s!r} units/s for {pattern.label!r}; allowed: a number > 0")
    rate = float(f"{float(pattern.load or 0) * units_per_s / int(pattern.units or 1):.4g}")
    if not 0 < rate <= MAX_RATE_PER_S:
        raise UserError(
            f"{pattern.label!r} at a capacity of {units_per_s:.4g} units/s is {rate:g} requests/s; "
            f"allowed: > 0 and <= {format_number(MAX_RATE_PER_S)} (a smaller load=)"
        )
    return Pattern("serve", units=pattern.units, rate_per_s=rate, load=pattern.load)


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
