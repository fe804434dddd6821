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
rate <= 10^6 /s); ``load`` a fraction > 0 and <= 4 (above 1: overload on purpose). A service must
offer a handful of requests (:data:`MIN_REQUESTS`) within a cell's longest planned time
(:data:`MAX_CELL_S`, the first cell's run timeout): ``rate`` at least 5 per hour, ``load`` at least
:data:`MIN_LOAD`, and a load resolved to a rate below that is refused too (issue 46: ``load=1e-9`` was
one request every 159 days).

Every kind is one :class:`PatternSpec` row of :data:`PATTERNS`: its grammar and keys, its label, closed
or open loop, the arrival schedule the per-burst driver runs, the Answer's noun and unit, the capacity
unit, the usage class ``advise`` maps to it, its sample rule's window and the help text. Every layer
routes on those traits (``pattern.spec.saturated``), never on the kind's name; a layer with behaviour
of its own per kind (the dry run's cost models, ``sharebench.analysis.cost.COST_MODELS``) keeps a
table keyed by :attr:`PatternSpec.name`, and ``tests/vocabulary/test_pattern_kinds.py`` fails, naming
the place, when a kind lacks one (``docs/architecture.md``, "Add a workload pattern").
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from sharebench.errors import UserError

if TYPE_CHECKING:
    import numpy as np

DEFAULT_BURST = 10
DEFAULT_THINK_S = 0.5
DEFAULT_RATE_PER_S = 10.0
DEFAULT_SIZE = 1
MAX_UNITS = 10**9
MAX_THINK_S = 86_400.0
MAX_RATE_PER_S = 1e6
MAX_LOAD = 4.0  # serve:load=F: at most 4 x the capacity alone
# a service offers at least a handful of requests in a cell's longest planned time (sweep.bound's first-run
# timeout ceiling): a slower one would leave its cell waiting for hours for requests that never come
MIN_REQUESTS = 5
MAX_CELL_S = 3600.0
MIN_RATE_PER_S = MIN_REQUESTS / MAX_CELL_S
MIN_LOAD = 0.01  # serve:load=F: at least 1% of the capacity alone
MAX_BURSTS = 10**6  # --bursts: the most bursts (or requests) a user runs in a cell (Workload.bursts), at most
MIN_WINDOW_S = 5.0  # a service's cell lasts at least this many seconds of arrivals (PatternSpec.min_window_s)
DEFAULT_SLO = 2.0  # the p95 slowdown target of users per GPU (sharebench.analysis.latency)

Loop = Literal["closed", "open"]
Window = Literal["count", "duration"]
Wait = Callable[["np.random.Generator"], float]  # one wait drawn from the pattern's seeded generator


@dataclass(frozen=True)
class Pattern:
    """One replica pattern. ``units`` is the work of one burst (interactive) or request (serve);
    ``think_s`` the mean think time (interactive); ``rate_per_s`` the mean arrival rate (serve)."""

    kind: str = "batch"  # the name of one PATTERNS row
    units: int | None = None  # interactive: burst; serve: size; batch: None
    think_s: float | None = None  # interactive only
    rate_per_s: float | None = None  # serve only (None: serve:load=F not resolved yet)
    load: float | None = None  # serve only: the rate as a fraction of the capacity alone (serve:load=F)

    @property
    def spec(self) -> PatternSpec:
        """This pattern's kind, as declared in :data:`PATTERNS`."""
        return spec_of(self.kind)

    @property
    def label(self) -> str:
        """The canonical spelling, every key written: ``parse_pattern(p.label) == p``."""
        return self.spec.label(self)

    @property
    def needs_capacity(self) -> bool:
        """A ``serve:load=F`` not resolved yet: its rate waits for the capacity alone (:func:`resolve_load`)."""
        return self.load is not None and self.rate_per_s is None

    @property
    def saturated(self) -> bool:
        """Back to back, the device kept busy (:attr:`PatternSpec.saturated`)."""
        return self.spec.saturated

    def wait(self) -> Wait | None:
        """The wait between its bursts (:attr:`PatternSpec.pace`); None: back to back."""
        return self.spec.pace(self)

    def __str__(self) -> str:
        return self.label


Builder = Callable[["PatternSpec", str, dict[str, str]], Pattern]


@dataclass(frozen=True)
class Form:
    """One spelling of a kind: its grammar (errors, ``--help``, the reference) and what it means."""

    grammar: str
    summary: str


@dataclass(frozen=True)
class PatternSpec:
    """One pattern kind: what every layer needs to know of it, declared once.

    ``forms``: its spellings (grammar and meaning), ``keys`` the settings it takes and ``build`` the
    parser of their values (a one-line UserError naming a bad one); ``label`` its canonical spelling.
    ``loop``: ``closed`` (the next burst waits for the last one to end) or ``open`` (arrivals do not
    wait for the device: a request's latency includes its time queued). ``pace``: the arrival schedule
    :func:`sharebench.workloads.bursts.run_pattern` runs, a wait drawn after each burst (closed: from
    its end; open: from the last arrival) or None (back to back), as locust's wait-time functions are
    a user's pacing. ``saturated``: back to back, the device kept busy: its cells are measured by
    throughput (the loss tables), not by latency, and it is the study's default. ``answer``: the name
    of its line in the Answer; ``noun``: what N replicas of it are per GPU (users, services);
    ``capacity_unit``: the unit of their total where it has a rate (users x rate: requests/s; ''
    none). ``usage``: the usage class of ``sharebench.advise.usage`` (``USAGE_RULES``) a site's pods
    are mapped to this kind by ('' none: only ``--class NAME=KIND`` names it).

    The sample rule (``sharebench.analysis.samples``, issue 42): a cell of a kind that is not saturated runs
    until every user's p95 is decided against the target (or the alone cell's p95 is precise), at most a
    cap; ``window`` says what bounds a cell of it: ``count`` (bursts a user) or ``duration`` (seconds of
    arrivals at the pattern's rate, every request that arrived served: a service's cell lasts a duration,
    never a count that fits in under a second); ``min_window_s``: no cell of it stops before this many
    seconds (the floor of a duration).
    """

    name: str
    forms: tuple[Form, ...]
    keys: tuple[str, ...]
    build: Builder = field(repr=False, compare=False)
    label: Callable[[Pattern], str] = field(repr=False, compare=False)
    loop: Loop
    pace: Callable[[Pattern], Wait | None] = field(repr=False, compare=False)
    answer: str
    noun: str
    saturated: bool = False
    capacity_unit: str = ""
    usage: str = ""
    window: Window = "count"
    min_window_s: float = 0.0

    @property
    def allowed(self) -> str:
        return ", ".join(f.grammar for f in self.forms)

    def __str__(self) -> str:
        return self.name


# ---------------------------------------------------------------- each kind's parser, label, pacing


def no_settings(spec: PatternSpec, text: str, values: dict[str, str]) -> Pattern:
    return Pattern(spec.name)


def burst_and_think(spec: PatternSpec, text: str, values: dict[str, str]) -> Pattern:
    """``burst=N`` (units per burst) and ``think=S`` (mean seconds between bursts)."""
    return Pattern(
        spec.name,
        units=units_value(text, "burst", values.get("burst"), DEFAULT_BURST),
        think_s=positive_value(text, "think", values.get("think"), DEFAULT_THINK_S, MAX_THINK_S, "seconds"),
    )


def requests(spec: PatternSpec, text: str, values: dict[str, str]) -> Pattern:
    """``rate=R`` (requests/s), ``size=N`` (units per request) and ``load=F`` (the rate as a fraction of
    the capacity alone: without ``rate=``, resolved by the sweep)."""
    load = values.get("load")
    rate = values.get("rate")
    pattern = Pattern(
        spec.name,
        units=units_value(text, "size", values.get("size"), DEFAULT_SIZE),
        rate_per_s=(
            None
            if load is not None and rate is None
            else positive_value(text, "rate", rate, DEFAULT_RATE_PER_S, MAX_RATE_PER_S, "requests/s")
        ),
        load=None if load is None else positive_value(text, "load", load, 1.0, MAX_LOAD, "a fraction of capacity"),
    )
    check_requests(text, pattern)
    return pattern


def check_requests(text: str, p: Pattern) -> None:
    """A service offers :data:`MIN_REQUESTS` requests within :data:`MAX_CELL_S`: a one-line UserError for a
    rate (or a load) that offers fewer."""
    if p.rate_per_s is not None and p.rate_per_s < MIN_RATE_PER_S:
        raise UserError(
            f"bad rate {format_number(p.rate_per_s)} requests/s in pattern {text!r}: fewer than {MIN_REQUESTS} "
            f"requests in a cell's {MAX_CELL_S:g} s; allowed: requests/s >= {MIN_RATE_PER_S:.3g} and <= "
            f"{format_number(MAX_RATE_PER_S)}"
        )
    if p.load is not None and p.load < MIN_LOAD:
        raise UserError(
            f"bad load {format_number(p.load)} in pattern {text!r}: a service that idle offers too few requests "
            f"to measure; allowed: a fraction of capacity >= {format_number(MIN_LOAD)} and <= {format_number(MAX_LOAD)}"
        )


def bare_label(p: Pattern) -> str:
    return p.kind


def burst_think_label(p: Pattern) -> str:
    return f"{p.kind}:burst={p.units},think={format_number(p.think_s)}"


def requests_label(p: Pattern) -> str:
    if p.rate_per_s is None:
        return f"{p.kind}:load={format_number(p.load)},size={p.units}"
    load = "" if p.load is None else f",load={format_number(p.load)}"
    return f"{p.kind}:rate={format_number(p.rate_per_s)},size={p.units}{load}"


def exponential(mean: float) -> Wait:
    """Waits drawn from an exponential distribution of ``mean`` (seconds)."""
    return lambda rng: float(rng.exponential(mean))


def back_to_back(p: Pattern) -> Wait | None:
    return None


def think_times(p: Pattern) -> Wait | None:
    """A user's think times: exponential of mean ``think_s`` after each burst's end."""
    think = float(p.think_s or 0)
    return exponential(think) if think else None


def poisson(p: Pattern) -> Wait | None:
    """A Poisson process of ``rate_per_s``: exponential gaps of mean 1 / rate between arrivals."""
    if not p.rate_per_s:  # serve:load=F: the sweep resolves it to a rate (resolve_load)
        raise UserError(f"pattern {p.label!r} has no rate yet: a sweep measures the capacity alone first")
    return exponential(1.0 / float(p.rate_per_s))


PATTERNS: dict[str, PatternSpec] = {
    s.name: s
    for s in (
        PatternSpec(
            "batch",
            (Form("batch", "default: saturated replicas, the study's"),),
            (),
            no_settings,
            bare_label,
            "closed",
            back_to_back,
            answer="batch throughput",
            noun="replicas",
            saturated=True,
            usage="saturating",
        ),
        PatternSpec(
            "interactive",
            (
                Form(
                    "interactive[:burst=N,think=SECONDS]",
                    "bursts of N units, exponential think times of mean SECONDS",
                ),
            ),
            ("burst", "think"),
            burst_and_think,
            burst_think_label,
            "closed",
            think_times,
            answer="interactive",
            noun="users",
            usage="bursty",
        ),
        PatternSpec(
            "serve",
            (
                Form("serve[:rate=PER_SECOND,size=N]", "Poisson requests of N units"),
                Form(
                    "serve:load=FRACTION[,size=N]",
                    "FRACTION of the requests/s one replica serves alone, measured first",
                ),
            ),
            ("rate", "size", "load"),
            requests,
            requests_label,
            "open",
            poisson,
            answer="serving",
            noun="services",
            capacity_unit="requests/s",
            usage="steady",
            # seconds of arrivals, not a count: 120 requests at 200/s were 0.6 s of a service (issue 42)
            window="duration",
            min_window_s=MIN_WINDOW_S,
        ),
    )
}

BATCH = Pattern("batch")  # the default: the study's saturated replica


def spec_of(kind: str) -> PatternSpec:
    """The :class:`PatternSpec` of ``kind`` (a one-line UserError for a kind no row declares)."""
    try:
        return PATTERNS[kind]
    except KeyError:
        raise UserError(f"unknown pattern kind {kind!r}; allowed: {', '.join(PATTERNS)}") from None


def allowed_patterns() -> str:
    """Every kind's grammar, comma-separated (the errors' ``allowed:``)."""
    return ", ".join(s.allowed for s in PATTERNS.values())


def saturated(label: str | Pattern) -> bool:
    """Whether a pattern (or its label as the results store it, or its kind; '' the default) is of a
    saturated kind, its cells measured by throughput; a label of a kind no row declares: False."""
    if isinstance(label, Pattern):
        return label.saturated
    kind = str(label).strip().lower().partition(":")[0] or BATCH.kind
    spec = PATTERNS.get(kind)
    return spec is not None and spec.saturated


def kinds_where(**traits: object) -> tuple[PatternSpec, ...]:
    """The rows with every trait given (``kinds_where(saturated=False)``), in PATTERNS order."""
    return tuple(s for s in PATTERNS.values() if all(getattr(s, k) == v for k, v in traits.items()))


def help_text() -> str:
    """The kinds' forms with what each means, for ``--pattern``'s help and the generated reference."""
    parts = [f"{f.grammar} ({f.summary})" for s in PATTERNS.values() for f in s.forms]
    return ", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else "".join(parts)


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
    spec = PATTERNS.get(kind.strip())
    if spec is None:
        raise UserError(f"unknown pattern {text!r}; allowed: {allowed_patterns()}")
    if not spec.keys and sep:
        raise UserError(f"{spec.name!r} takes no settings (got {text!r}); allowed: {allowed_patterns()}")
    return spec.build(spec, text, settings(text, spec, rest if sep else ""))


def resolve_load(pattern: Pattern, units_per_s: float) -> Pattern:
    """``serve:load=F,size=N`` at a capacity alone of ``units_per_s`` (units of work per second one replica
    serves alone) as ``serve:rate=R,size=N,load=F``, R = F x units_per_s / N requests/s (4 significant
    digits); any other pattern as it is. UserError for a capacity that is not a positive finite number."""
    if not pattern.needs_capacity:
        return pattern
    if not math.isfinite(units_per_s) or units_per_s <= 0:
        raise UserError(f"bad capacity {units_per_s!r} units/s for {pattern.label!r}; allowed: a number > 0")
    rate = float(f"{float(pattern.load or 0) * units_per_s / int(pattern.units or 1):.4g}")
    if 0 < rate < MIN_RATE_PER_S:
        raise UserError(
            f"{pattern.label!r} at a capacity of {units_per_s:.4g} units/s is {rate:g} requests/s: fewer than "
            f"{MIN_REQUESTS} requests in a cell's {MAX_CELL_S:g} s; allowed: >= {MIN_RATE_PER_S:.3g} requests/s "
            "(a larger load= or a smaller size=)"
        )
    if not 0 < rate <= MAX_RATE_PER_S:
        raise UserError(
            f"{pattern.label!r} at a capacity of {units_per_s:.4g} units/s is {rate:g} requests/s; "
            f"allowed: > 0 and <= {format_number(MAX_RATE_PER_S)} (a smaller load=)"
        )
    return dataclasses.replace(pattern, rate_per_s=rate)


def settings(text: str, spec: PatternSpec, rest: str) -> dict[str, str]:
    """``key=value,key=value`` as a dict; UserError for a missing ``=``, an unknown or repeated key."""
    kind = spec.name
    allowed = ", ".join(f"{k}=" for k in spec.keys)
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
        if key not in spec.keys:
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
