"""Capacity by search (issue 33): the most users (replicas of a pattern) per GPU whose p95 slowdown stays
within the target, found by measuring, not by the list of modes given.

Per mode family (``timeslice``, ``mps``, ``timeslice/long``, ``mps@25``) one :class:`CapacitySearch`: N
starts at the stated minimum (``--users LO..HI``) and doubles while the p95 slowdown is within the
target, until its interval lies above it; then it bisects between the last N within and the first N
above, until they are one apart. A probe's verdict (:func:`verdict`): ``above`` when the interval's
low end exceeds the target, ``within`` when its high end does not, else ``unsure``: one more repeat of
that N while repeats < ``max_repeats``, then decided by the point estimate (and said). The verdicts are
the early stopping: no repeat once the interval is clear of the target.

The answer (:func:`answer`, a :class:`Capacity`): a number with the N measured; "≥ N" only when a stated
limit stopped the search within the target (``memory``: the GPU's memory holds no more replicas;
``maximum``: ``--users ..HI``; ``kind``: the kind's own limit, MPS's 48 clients); a budget stop gives
"between LO and HI" (never "≥"). :func:`next_n` is pure: the runner's :class:`CapacitySchedule` asks it
after each cell, with the latency rows recomputed from the folder's bursts.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from sharebench.analysis.latency import latency_table
from sharebench.analysis.samples import cell_samples, expected_bursts
from sharebench.errors import UserError

# the families' and --users' grammar, kept light in modes (the CLI checks --modes and --users with it)
from sharebench.modes import DEFAULT_USERS as DEFAULT_USERS
from sharebench.modes import KINDS, MAX_REPLICAS, Mode, parse_mode
from sharebench.modes import families_of as families_of
from sharebench.modes import family_kind as family_kind
from sharebench.modes import family_mode as family_mode
from sharebench.modes import parse_family as parse_family
from sharebench.modes import parse_users as parse_users
from sharebench.parse import fmt_duration
from sharebench.patterns import parse_pattern
from sharebench.results.bursts import load_bursts
from sharebench.sweep.load import MIN_REQUESTS, capacity_cell, needs_capacity
from sharebench.sweep.plan import Cell, SweepPlan, plan_header
from sharebench.sweep.schedule import Measured, Stop

Verdict = Literal["within", "above", "unsure"]
LimitWhy = Literal["memory", "maximum", "kind", "budget"]
DEFAULT_MIN_REPEATS = 2
DEFAULT_MAX_REPEATS = 4
KIND_MAX = {"mps": 48}  # MPS: at most 48 clients per control daemon (Volta and later)
MEMORY_HEADROOM = 0.95  # of the GPU's memory the replicas may hold together
CAPACITY_JSON = "capacity.json"
CAPACITY_CSV = "capacity.csv"
CAPACITY_COLUMNS = ["family", "pattern", "slo", "users", "bound", "limit", "answer", "measured", "note"]


@dataclass(frozen=True)
class Probe:
    """One N measured: its p95 slowdown with the interval, the verdict against the target, the repeats."""

    n: int
    mode: str
    slowdown: float
    lo: float
    hi: float
    verdict: Verdict
    repeats: int

    @property
    def text(self) -> str:
        mark = {"within": "✓", "above": "✗", "unsure": "?"}[self.verdict]
        return f"{self.n} {mark} {self.slowdown:.2f}×"


@dataclass(frozen=True)
class Limit:
    """What stopped a search before its answer: ``n`` the largest N it could measure (memory, maximum,
    kind) or would have measured next (budget)."""

    n: int
    why: LimitWhy
    text: str


@dataclass(frozen=True)
class Capacity:
    """A family's answer: ``users`` (None: no N >= 2 within the target); ``bound``: ``exact``,
    ``at_least`` (a stated limit reached within the target) or ``between`` (``users`` .. ``upper``: the
    budget stopped it)."""

    family: str
    pattern: str
    slo: float
    users: int | None
    bound: Literal["exact", "at_least", "between", "none"]
    upper: int | None
    limit: Limit | None
    probes: tuple[Probe, ...]
    note: str = ""

    @property
    def measured(self) -> str:
        return ", ".join(p.text for p in self.probes)

    @property
    def answer(self) -> str:
        """The short line: ``12 users`` / ``≥ 16 users (the stated maximum --users ..16)`` / ``between 8 and 16``."""
        if self.bound == "at_least" and self.limit is not None:
            return f"≥ {self.users} users ({self.limit.text})"
        if self.bound == "between":
            return f"between {self.users or 1} and {self.upper} users (the budget stopped the search)"
        if self.users is None:
            return f"no sharing within {self.slo:g}×"
        return f"{self.users} users"

    @property
    def requests(self) -> str:
        """A serving pattern's requests/s per GPU at the answer (users x rate; with ``load=F``, rate = F x
        the capacity alone): ``24.66 requests/s per GPU (12 × 2.055/s; load 0.3 of 6.85/s alone)``; '' else."""
        p = parse_pattern(self.pattern) if self.pattern else None
        if p is None or not p.spec.capacity_unit or not p.rate_per_s or not self.users:
            return ""
        sign = "≥ " if self.bound == "at_least" else ""
        alone = f"; load {p.load:g} of {p.rate_per_s / p.load:.4g}/s alone" if p.load else ""
        total = f"{self.users * p.rate_per_s:.4g}"
        if self.bound == "between" and self.upper:
            total = f"between {total} and {self.upper * p.rate_per_s:.4g}"
        return f"{sign}{total} {p.spec.capacity_unit} per GPU ({self.users} × {p.rate_per_s:g}/s{alone})"

    def line(self) -> str:
        """The Answer's line: ``timeslice: 12 users per GPU at p95 ≤ 2× (measured 8 ✓ 1.27×, ...)``; a
        serving pattern's requests/s per GPU beside (:attr:`requests`)."""
        note = f"; {self.note}" if self.note else ""
        req = f" per GPU, {self.requests}" if self.requests else " per GPU"
        return f"{self.family}: {self.answer}{req} at p95 ≤ {self.slo:g}× (measured {self.measured}){note}"


@dataclass
class CapacitySearch:
    """The search of one family: its bounds, its probes by N, what stopped it."""

    family: str  # timeslice, mps, timeslice/long, mps@25
    slo: float
    lo: int = DEFAULT_USERS[0]
    hi: int = DEFAULT_USERS[1]  # the stated maximum
    max_repeats: int = DEFAULT_MAX_REPEATS
    mem_max: int | None = None  # replicas the GPU's memory holds (None: unknown, no limit)
    probes: dict[int, Probe] = field(default_factory=dict)
    limit: Limit | None = None
    pattern: str = ""

    @property
    def kind_max(self) -> int:
        return min(KIND_MAX.get(family_kind(self.family), MAX_REPLICAS), MAX_REPLICAS)

    @property
    def max_n(self) -> int:
        return min(x for x in (self.hi, self.kind_max, self.mem_max) if x is not None)

    def max_limit(self) -> Limit:
        """Which stated limit ``max_n`` is (memory before the kind before the user's maximum)."""
        n = self.max_n
        if self.mem_max is not None and n == self.mem_max and n < self.hi:
            return Limit(n, "memory", f"GPU memory holds {n} replicas")
        if n == self.kind_max and n < self.hi:
            return Limit(n, "kind", f"{family_kind(self.family)} takes at most {n} clients")
        return Limit(n, "maximum", f"the stated maximum --users ..{self.hi}")

    def mode(self, n: int) -> Mode:
        return family_mode(self.family, n)

    def decided(self) -> dict[int, Verdict]:
        """Each measured N's verdict, an ``unsure`` at max repeats decided by its point estimate."""
        out: dict[int, Verdict] = {}
        for n, p in self.probes.items():
            v = p.verdict
            if v == "unsure" and p.repeats >= self.max_repeats:
                v = "within" if p.slowdown <= self.slo else "above"
            out[n] = v
        return out

    def bracket(self) -> tuple[int | None, int | None]:
        """(largest N within, smallest N above); an N within above an N above does not move ``lo_ok``."""
        d = self.decided()
        above = [n for n, v in d.items() if v == "above"]
        hi_bad = min(above) if above else None
        within = [n for n, v in d.items() if v == "within" and (hi_bad is None or n < hi_bad)]
        return (max(within) if within else None), hi_bad


def verdict(slowdown: float, lo: float, hi: float, slo: float) -> Verdict:
    """``above`` when the interval lies above the target, ``within`` when it does not reach above it,
    ``unsure`` when it straddles it (or there is none: then the point estimate decides at max repeats)."""
    if math.isfinite(lo) and lo > slo:
        return "above"
    if math.isfinite(hi) and hi <= slo:
        return "within"
    return "unsure"


def next_n(search: CapacitySearch, min_repeats: int = 1) -> tuple[int, bool] | None:
    """What to measure next: (N, a further repeat of an N measured) or None when the search is done
    (then :attr:`CapacitySearch.limit` says why, if a limit stopped it). Pure: no I/O."""
    for n, p in search.probes.items():  # an N below its minimum repeats, or unsure and not at max repeats
        if p.repeats < min_repeats or (p.verdict == "unsure" and p.repeats < search.max_repeats):
            return n, True
    lo_ok, hi_bad = search.bracket()
    if not search.probes:
        return min(search.lo, search.max_n), False
    if hi_bad is None:
        top = lo_ok if lo_ok is not None else 1
        if top >= search.max_n:
            search.limit = search.max_limit()
            return None
        return min(2 * top, search.max_n), False
    low = lo_ok if lo_ok is not None else 1  # N = 1 is the alone cell itself: 1x by definition
    if hi_bad - low <= 1:
        return None
    return (low + hi_bad) // 2, False


def answer(search: CapacitySearch, budget_stop: bool = False) -> Capacity:
    """The family's :class:`Capacity` from its probes (``budget_stop``: the budget ended it unfinished)."""
    lo_ok, hi_bad = search.bracket()
    d = search.decided()
    probes = tuple(replace(p, verdict=d[n]) for n, p in search.probes.items())  # unsure at max repeats: decided
    notes = []
    if any(v == "within" for n, v in d.items() if hi_bad is not None and n > hi_bad):
        notes.append("not monotone: an N above a failing one was within the target (noise near the target)")
    if any(p.verdict == "unsure" and p.repeats >= search.max_repeats for p in search.probes.values()):
        notes.append(f"at the target within noise after {search.max_repeats} repeats: the point estimate decided")
    kw = dict(family=search.family, pattern=search.pattern, slo=search.slo, probes=probes, note="; ".join(notes))
    finished = hi_bad is not None and hi_bad - (lo_ok or 1) <= 1
    if budget_stop and not finished and search.limit is None:
        upper = hi_bad if hi_bad is not None else search.max_n
        limit = Limit(upper, "budget", "the budget")
        return Capacity(users=lo_ok, bound="between", upper=upper, limit=limit, **kw)  # type: ignore[arg-type]
    if hi_bad is None and search.limit is not None and lo_ok is not None:
        return Capacity(users=lo_ok, bound="at_least", upper=None, limit=search.limit, **kw)  # type: ignore[arg-type]
    bound = "exact" if lo_ok is not None else "none"
    return Capacity(users=lo_ok, bound=bound, upper=hi_bad, limit=search.limit, **kw)  # type: ignore[arg-type]


def probe_of(search: CapacitySearch, row: Mapping[str, Any], n: int) -> Probe:
    """A latency.csv victim row of ``search``'s mode at ``n`` as a :class:`Probe`."""
    s, lo, hi = (float(row.get(k, math.nan)) for k in ("slowdown_p95", "slowdown_p95_lo", "slowdown_p95_hi"))
    return Probe(n, search.mode(n).label, s, lo, hi, verdict(s, lo, hi, search.slo), int(row.get("repeats") or 0))


def update_probes(search: CapacitySearch, table: pd.DataFrame) -> None:
    """The search's probes from the latency table (``analysis.latency.latency_table`` of the folder's
    bursts): the victim rows of its modes among replicas of the victim's own pattern."""
    if table is None or table.empty:
        return
    rows = table[
        (table["role"] == "victim")
        & ((table["beside"].fillna("") == "") | (table["beside"] == table["pattern"]))
        & ((table["pattern"] == search.pattern) if search.pattern else True)
    ]
    for r in rows.to_dict("records"):
        try:
            m = parse_mode(str(r["mode"]))
        except UserError:
            continue
        if m.spec.shared and m.replicas and search.mode(m.replicas).label == m.label:
            search.probes[m.replicas] = probe_of(search, r, m.replicas)


def memory_max(device_memory_bytes: float | None, per_replica_bytes: float | None) -> int | None:
    """Replicas of ``per_replica_bytes`` peak each that the GPU's memory holds (None: unknown)."""
    if not device_memory_bytes or not per_replica_bytes or per_replica_bytes <= 0:
        return None
    return max(1, int(MEMORY_HEADROOM * device_memory_bytes // per_replica_bytes))


def probe_bounds(lo: int, max_n: int) -> tuple[int, int]:
    """The fewest and most probes (distinct N) of one family: doubling to ``max_n``, then bisection."""
    doublings = max(0, math.ceil(math.log2(max(max_n, 1) / max(lo, 1))))
    return doublings + 1, doublings + 1 + max(0, math.ceil(math.log2(max(max_n, 2) / 2)))


def capacity_rows(caps: Sequence[Capacity]) -> pd.DataFrame:
    """``tables/capacity.csv``: one row per family (:data:`CAPACITY_COLUMNS`)."""
    rows = [
        dict(
            family=c.family,
            pattern=c.pattern,
            slo=c.slo,
            users=c.users if c.users is not None else math.nan,
            bound=c.bound,
            limit=c.limit.why if c.limit is not None else "",
            answer=c.answer,
            measured=c.measured,
            note=c.note,
        )
        for c in caps
    ]
    return pd.DataFrame(rows, columns=CAPACITY_COLUMNS)


def write_capacity(out: Path, caps: Sequence[Capacity], extra: Mapping[str, Any] | None = None) -> None:
    """``capacity.json`` (the answers and their probes) in the results folder, rewritten after each cell."""
    doc = {"capacity": [asdict(c) | {"answer": c.answer, "line": c.line()} for c in caps], **(extra or {})}
    tmp = out / (CAPACITY_JSON + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(out / CAPACITY_JSON)


def read_capacity(out: Path) -> list[dict[str, Any]]:
    """The answers ``capacity.json`` holds (none when the folder ran no capacity search)."""
    path = Path(out) / CAPACITY_JSON
    if not path.is_file():
        return []
    try:
        return list(json.loads(path.read_text()).get("capacity") or [])
    except (OSError, ValueError, AttributeError):
        return []


def capacity_lines(out: Path) -> list[str]:
    """The Answer's capacity lines of a results folder (one per family searched), for the report."""
    return [str(c.get("line")) for c in read_capacity(out) if c.get("line")]


def write_capacity_table(out: Path) -> Path | None:
    """``tables/capacity.csv`` from ``capacity.json`` (the report calls it); None when no search ran."""
    caps = read_capacity(out)
    if not caps:
        return None
    rows = [{k: c.get(k) for k in CAPACITY_COLUMNS} for c in caps]
    for r, c in zip(rows, caps):
        r["limit"] = (c.get("limit") or {}).get("why", "") if isinstance(c.get("limit"), dict) else ""
        r["measured"] = ", ".join(
            f"{p['n']} {dict(within='✓', above='✗', unsure='?')[p['verdict']]} {p['slowdown']:.2f}×"
            for p in c.get("probes") or []
        )
    path = Path(out) / "tables" / CAPACITY_CSV
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=CAPACITY_COLUMNS).to_csv(path, index=False)
    return path


# ----------------------------------------------------------------- running the search (the runner's schedule)

# under a budget, the shared kinds searched first: the later-declared first (MPS, which holds more users,
# before time-slicing)
FAMILY_ORDER = tuple(sorted((k for k, spec in KINDS.items() if spec.shared), key=lambda k: -KINDS[k].order))
ESTIMATE_FACTOR = 1.5  # a probe's span, before one of its family is measured: the alone span x target x this


@dataclass(frozen=True)
class CapacityOptions:
    """``--capacity``: the families searched, ``--users LO..HI``, the repeats of each N (min, max)."""

    families: tuple[str, ...]
    users: tuple[int, int] = DEFAULT_USERS
    min_repeats: int = DEFAULT_MIN_REPEATS
    max_repeats: int = DEFAULT_MAX_REPEATS

    def __post_init__(self) -> None:
        if not self.families:
            raise UserError("--capacity needs a mode family to search: --modes timeslice,mps (no N)")
        if not 1 <= self.min_repeats <= self.max_repeats:
            raise UserError(
                f"bad capacity repeats {self.min_repeats}..{self.max_repeats}; allowed: 1 <= --repeats <= --max-repeats"
            )

    def start_modes(self) -> tuple[Mode, ...]:
        """Each family at the smallest N: what the sweep plans (and checks) before anything runs."""
        return tuple(family_mode(f, self.users[0]) for f in self.families)

    def searches(self, slo: float, pattern: str) -> list[CapacitySearch]:
        order = sorted(self.families, key=lambda f: (FAMILY_ORDER + (family_kind(f),)).index(family_kind(f)))
        lo, hi = self.users
        return [CapacitySearch(f, slo, lo, hi, self.max_repeats, pattern=pattern) for f in order]

    def describe(self, slo: float, cell_s: Callable[[int], float] | None = None) -> list[str]:
        """The dry run's lines: per family the probe (distinct N) range and, with ``cell_s`` (N -> seconds of
        one cell), the time range; then the total."""
        lo, hi = self.users
        lines = [f"capacity search: N from {lo} doubling to at most {hi}, then bisection; p95 target {slo:g}×; "
                 f"{self.min_repeats}..{self.max_repeats} repeats per N"]  # fmt: skip
        total = [0.0, 0.0]
        for f in self.families:
            max_n = min(hi, KIND_MAX.get(family_kind(f), MAX_REPLICAS))
            best, worst = probe_bounds(lo, max_n)
            text = f"  {f}: {best}–{worst} N probed ({best * self.min_repeats}–{worst * self.max_repeats} cells)"
            if cell_s is not None:
                ns = doubling(lo, max_n)
                t_best = sum(cell_s(n) for n in ns[:best]) * self.min_repeats
                t_worst = (sum(cell_s(n) for n in ns) + (worst - len(ns)) * cell_s(max_n)) * self.max_repeats
                total[0] += t_best
                total[1] += t_worst
                text += f", {t_best / 60:.1f}–{t_worst / 60:.1f} min"
            lines.append(text)
        if cell_s is not None:
            lines.append(f"  total: {total[0] / 60:.1f}–{total[1] / 60:.1f} min of probes (a --budget bounds it)")
        return lines


def doubling(lo: int, max_n: int) -> list[int]:
    out = [min(lo, max_n)]
    while out[-1] < max_n:
        out.append(min(2 * out[-1], max_n))
    return out


def cell_span_s(rows: Iterable[Mapping[str, Any]]) -> float:
    """A cell's span (its first tracking start to its last end) from its rows; NaN when none."""
    starts = [float(r["track_start"]) for r in rows if r.get("track_start") is not None]
    ends = [float(r["track_end"]) for r in rows if r.get("track_end") is not None]
    return max(ends) - min(starts) if starts and ends else math.nan


@dataclass
class CapacitySchedule:
    """The cells of a capacity sweep, decided after each cell (a schedule, ``sweep.schedule``): the fixed
    cells first (the alone cells, T_1, and any mode given with its N), then one probe of each family's
    search at a time (:func:`next_n`), from the latency rows of the folder's bursts. ``fits(mode)``: the
    planner's check of a new N (None: fits; else the one-line reason, a memory limit). With ``budget_s``
    (seconds since ``t_start`` on ``clock``) a probe that no longer fits the time left stops its family: a
    budget answer ("between"). ``sweep``: the sweep searched (its dry run)."""

    out: Path
    searches: list[CapacitySearch]
    fixed: list[Cell]
    particles: int
    options: CapacityOptions
    fits: Callable[[Mode], str | None]
    budget_s: float | None = None
    t_start: float = field(default_factory=time.monotonic)
    end_s: float = 0.0  # kept for the report at the end of a budget
    queue: list[Cell] = field(default_factory=list)
    spans: dict[str, float] = field(default_factory=dict)  # mode label -> the longest span of its cells
    budget_stopped: set[str] = field(default_factory=set)
    clock: Callable[[], float] = time.monotonic
    sweep: SweepPlan | None = None

    def __post_init__(self) -> None:
        self.queue = self.decide()

    def elapsed_s(self) -> float:
        return self.clock() - self.t_start

    def learn(self, measured: Measured) -> None:
        """A cell measured (its rows): the searches updated, the next cells decided, capacity.json written."""
        cell, rows = measured.cell, list(measured.rows)
        span = cell_span_s(rows)
        if math.isfinite(span):
            self.spans[cell.mode.label] = max(span, self.spans.get(cell.mode.label, 0.0))
        self.fixed = [c for c in self.fixed if c.id != cell.id]
        self.refresh()
        self.queue = self.decide()
        write_capacity(self.out, self.answers())
        write_capacity_table(self.out)

    def next_cell(self) -> Cell | None:
        return self.queue[0] if self.queue else None

    def ahead(self) -> list[Cell]:
        return list(self.queue)

    def left(self) -> list[Cell]:
        """The cells decided next (one probe per family still searching; the fixed cells first)."""
        return list(self.queue)

    def stopped(self) -> Stop | None:
        """The budget spent with a search unfinished."""
        if self.budget_s is None or self.queue or not self.unfinished():
            return None
        return Stop(f"budget {fmt_duration(self.budget_s)} reached")

    def ends_at(self) -> float | None:
        return None  # the budget's deadline wraps it (sweep.deadline)

    def describe(self) -> list[str]:
        return [capacity_dry_run(self.sweep, self.options)] if self.sweep is not None else []

    def refresh(self) -> None:
        """Each search's probes from the latency table of the folder's measured (not warm-up) bursts."""
        bursts = load_bursts(self.out)
        if bursts.empty:
            return
        bursts = bursts[~bursts["warmup"].astype(bool)]
        table = latency_table(bursts, n_resamples=1000)
        for s in self.searches:
            update_probes(s, table)

    def probe_s(self, mode: Mode) -> float:
        """What a probe of ``mode`` is expected to cost: its family's longest span so far, else the alone span
        x the target x :data:`ESTIMATE_FACTOR` (a service's arrivals do not wait for the device: its span
        is the alone span x :data:`ESTIMATE_FACTOR`); the largest measured gap between cells is not known: 10 %."""
        fam = [v for k, v in self.spans.items() if k.split(":")[0] == mode.kind]
        alone = max((v for k, v in self.spans.items() if ":" not in k), default=0.0)
        serve = bool(self.searches) and parse_pattern(self.searches[0].pattern or "batch").spec.loop == "open"
        stretch = 1.0 if serve else (self.searches[0].slo if self.searches else 2.0)
        base = max(fam) if fam else alone * stretch * ESTIMATE_FACTOR
        return 1.1 * base

    def next_probe(self, search: CapacitySearch) -> Cell | None:
        """The search's next cell, or None (done, a limit, or the budget: then said in its answer)."""
        while True:
            step = next_n(search, self.options.min_repeats)
            if step is None:
                return None
            n, _ = step
            mode = search.mode(n)
            why = self.fits(mode)
            if why is None:
                break
            search.mem_max = max(1, n - 1) if search.mem_max is None else min(search.mem_max, n - 1)
        repeat = search.probes[n].repeats + 1 if n in search.probes else 1
        cell = Cell(mode, self.particles, repeat)
        if self.budget_s is not None:
            left = self.budget_s - self.elapsed_s() - self.end_s
            if self.probe_s(mode) > left:
                self.budget_stopped.add(search.family)
                return None
        return cell

    def decide(self) -> list[Cell]:
        if self.fixed:
            return list(self.fixed)
        cells = [self.next_probe(s) for s in self.searches if s.family not in self.budget_stopped]
        return [c for c in cells if c is not None]

    def answers(self) -> list[Capacity]:
        return [answer(s, budget_stop=s.family in self.budget_stopped) for s in self.searches]

    def unfinished(self) -> list[Cell]:
        """What the searches would still measure with no time limit."""
        if self.fixed:
            return list(self.fixed)
        out = []
        for s in self.searches:
            step = next_n(s, self.options.min_repeats) if s.limit is None else None
            if step is not None:
                out.append(Cell(s.mode(step[0]), self.particles, s.probes[step[0]].repeats + 1 if step[1] else 1))
        return out

    def report(self) -> list[str]:
        """The notes' lines: each family's answer."""
        return [f"capacity: {c.line()}" for c in self.answers()]


SETUP_S = {"exec": 8.0, "warm": 0.5}  # a cell's set-up: a fresh program (the H200's ResNet-18), a warm replica


def cell_estimate(plan: SweepPlan, slo: float) -> Callable[[int], float]:
    """N -> the seconds one cell of N replicas of the plan's pattern takes, before anything is measured:
    serve, its requests over the rate (queueing not counted); interactive, the think times and bursts whose
    work is not known yet (a floor: burst time taken as the think time x min(N, target x 1.5) / 10)."""
    w = plan.config.workload
    setup = SETUP_S["exec" if w.is_program else "warm"]
    p = parse_pattern(w.pattern)
    if p.spec.loop == "open" and p.rate_per_s:
        rate = p.rate_per_s
        return lambda n: setup + w.bursts / rate
    think = float(p.think_s or 0.0)
    return lambda n: setup + expected_bursts(w, n) * think * (1 + min(n, slo * ESTIMATE_FACTOR) / 10)


def capacity_dry_run(plan: SweepPlan, options: CapacityOptions) -> str:
    """``--capacity --dry-run``: the device, the pattern, the alone cells and each family's search with its
    probe and time range (:meth:`CapacityOptions.describe`)."""
    slo = plan.config.slo
    starts = {m.label for m in options.start_modes()}
    fixed = [c for c in plan.cells() if c.mode.label not in starts]
    est = cell_estimate(plan, slo)
    alone_s = sum(est(1) for _ in fixed)
    lines = [
        *plan_header(plan),
        f"pattern:   {plan.config.workload.pattern} ({cell_samples(plan.config.workload, 2).describe()})",
        f"fixed:     {len(fixed)} cell(s) first ({', '.join(c.id for c in fixed)}), about {alone_s:.0f} s",
        *load_lines(plan),
        *options.describe(slo, est),
        "estimate:  set-up, think times and arrivals before any burst is measured; the run re-estimates "
        "each probe from the cells measured",
    ]
    return "\n".join([*lines, *(f"note: {n}" for n in plan.notes)])


def load_lines(plan: SweepPlan) -> list[str]:
    """The dry run's line of a ``serve:load=F`` sweep: the capacity cell measured first (``sweep.load``)."""
    if not needs_capacity(plan.config.workload):
        return []
    cell = capacity_cell(plan)
    return [
        f"load:      {plan.config.workload.pattern}: the capacity alone is measured first (cell {cell.id}, one "
        f"replica serving at least {MIN_REQUESTS} requests back to back), then the rate set to F x it; the "
        "serving cells' times below are not known before it (set-up only)"
    ]
