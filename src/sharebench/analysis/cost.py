"""What a patterned cell costs in seconds (issue 35, item 3): pure arithmetic below the sweep's plans.

A patterned cell lasts as long as its victim's bursts (the neighbours stop when it is done). One unit
of work (a turn of Simpletrack) takes ``unit_s`` alone; beside ``N - 1`` neighbours, each busy a fraction
``u`` of the time, it takes ``s = 1 + (N - 1) * u * f`` times that, ``f`` the mode's recorded factor
(span / (N * T_1) of a batch cell; 1 when none). A batch neighbour is always busy (``u = 1``); an
interactive one is busy ``b / (b + think)`` of the time, ``b`` its burst's slowed time (a fixed point);
a service ``min(1, rate * S)``.

Each pattern kind has its model in :data:`COST_MODELS` (keyed by ``PatternSpec.name``;
``tests/vocabulary/test_pattern_kinds.py`` checks every kind has one):

* ``batch`` (:data:`SATURATED`): busy 1; the cell ``N * T_1 * f``, as
  :meth:`sharebench.sweep.budget.Calibration.cell_s` has it;
* ``interactive`` (:data:`THINKING`): busy ``b / (b + think)``; the cell
  ``think + B * (think + units * unit_s * s)`` (the first think is its phase);
* ``serve`` (:data:`QUEUEING`): busy ``min(1, rate * S)``, ``S = units * unit_s * s``, ``rho = rate * S``;
  below 1 the requests' arrival span plus the M/D/1 wait ``B / rate + S + rho * S / (2 (1 - rho))``; at 1
  or above the requests queue and the cell lasts ``1 / rate + B * S`` (and the estimate says it is
  overloaded); with no rate yet, the saturated model.

How many bursts a cell runs is the sample rule's (``analysis.samples``, issue 42): a watched cell stops at
the first look (n₀ · 2^j samples a user) that decides it, else at its cap. :func:`patterned_cell` predicts
that look from the expected order statistics the rule reads (:func:`expected_samples`): each user's
latencies a lognormal of the workload's recorded spread (:data:`SPREAD`: a tracker's, a program's, a
service's) scaled by the model's slowdown ``s``, the bounds at the look's ranks (``tail.rank_bounds``)
against the alone cell's interval; the alone cell runs until its interval is precise (:func:`alone_looks`),
a sharing cell until ``s`` times its bound is clear of the target (:func:`users_looks`), averaged over the
model's slowdown and one :data:`SLOWDOWN_SPREAD` either side of it (near the target the look jumps: the mean
lies between). A slowdown near the target takes more looks than one far from it: on the 2-core CPU a
time-sliced pair of a small Simpletrack user at about 1.8x against 2x ran to its cap (452 samples). For a
closed loop of several users it adds the wait for the slowest of them (a cell stops once its *fewest* user
reaches the look: B exponential think times sum to B·think ± √B·think, and the last of N users is E[max of
N normals] ≈ Φ⁻¹((N − 0.375) / (N + 0.25)) standard deviations late, Blom's approximation); :func:`cell_range`
adds the cap (every look undecided).

Around the cells (:class:`Overheads`): the recorded gap between cells and set-up before the first
(:data:`DEFAULT_OVERHEADS`), and the report after the last, from its work (:func:`report_seconds`).

A capacity search (``sweep.capacity``) is predicted the same way (:func:`search_cost`): the N it measures
are those it would if each N's verdict were the model's (:func:`search_path`: N doubling from the first,
then bisection, as ``sweep.capacity_answer.next_n`` goes; an N left undecided ends it), each probe's cells
until decided (:func:`probe_cost`: another cell while undecided, its samples pooled, at most the search's
``--max-repeats``). Its dry run and the Answer's suggested searches (``analysis.suggest``) both say this.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from statistics import NormalDist

from sharebench.analysis.samples import ALONE_PRECISION, Samples, cell_samples
from sharebench.analysis.tail import TailRule, look_of, rank_bounds
from sharebench.errors import UserError
from sharebench.patterns import DEFAULT_SLO, Pattern, parse_pattern, resolve_load
from sharebench.workloads import Workload

FIXED_POINT_ROUNDS = 20


@dataclass(frozen=True)
class Overheads:
    """Seconds a sweep spends not tracking: between two cells, from the start to the first cell
    (validation, provenance, the warm replicas' set-up), and after the last (the report)."""

    per_cell_s: float
    start_s: float
    end_s: float
    source: str


# The report after the last cell (``sharebench.report.build_report``, its modules already imported by the run):
# timed on the 2-core dev machine (2026-12-04, load about 2): 1.5 s for a capacity search's 5 cells, 2.1 s for
# the CPU default's 16 (results/cpu-default), 5.3 s for the 27 cells of an H200 users folder whose per-cell
# records are packed; a fixed part and a part per cell, both rounded up
REPORT_BASE_S = 1.5
REPORT_PER_CELL_S = 0.15
# The medians of the committed warm-replica sweeps (``sweep.budget.measured_overheads``; python -m
# tools.cell_overhead shows each sweep): results/cpu-default (gap 0.55 s, start 5.3 s) and the warm sweeps under
# results/h200 (45 gaps, median 0.82 s; start 5.26 s); the report of a sweep of 16 cells
DEFAULT_OVERHEADS = {
    "cpu": Overheads(
        0.55, 5.3, REPORT_BASE_S + 16 * REPORT_PER_CELL_S, "recorded: results/cpu-default (warm replicas)"
    ),
    "gpu": Overheads(
        0.82, 5.26, REPORT_BASE_S + 16 * REPORT_PER_CELL_S, "recorded: results/h200 (warm-replica sweeps)"
    ),
}


def report_seconds(cells: int) -> float:
    """The report's seconds after a run of ``cells`` cells: :data:`REPORT_BASE_S` and :data:`REPORT_PER_CELL_S`
    a cell (its tables, plots and per-cell records)."""
    return REPORT_BASE_S + REPORT_PER_CELL_S * max(0, cells)


@dataclass(frozen=True)
class CellCost:
    """A patterned cell's predicted seconds: the whole cell, one victim burst, the slowdown used, a note."""

    cell_s: float
    per_burst_s: float
    slowdown: float
    note: str = ""


@dataclass(frozen=True)
class CostModel:
    """What a pattern kind costs: ``busy(p, burst_s)`` the fraction of the time a replica of ``p`` keeps the
    device busy, its burst ``burst_s``; ``cell(p, bursts, burst_s, s)`` a victim's cell of ``bursts``
    bursts of ``burst_s`` each (already slowed by ``s``)."""

    busy: Callable[[Pattern, float], float]
    cell: Callable[[Pattern, int, float, float], CellCost]


def saturated_cell(p: Pattern, bursts: int, burst_s: float, s: float) -> CellCost:
    return CellCost(bursts * burst_s, burst_s, s)


def thinking_busy(p: Pattern, burst_s: float) -> float:
    think = p.think_s or 0.0
    return burst_s / (burst_s + think) if burst_s + think > 0 else 1.0


def thinking_cell(p: Pattern, bursts: int, burst_s: float, s: float) -> CellCost:
    think = p.think_s or 0.0
    return CellCost(think + bursts * (think + burst_s), think + burst_s, s)


def queueing_busy(p: Pattern, burst_s: float) -> float:
    return min(1.0, (p.rate_per_s or 0.0) * burst_s)


def queueing_cell(p: Pattern, bursts: int, burst_s: float, s: float) -> CellCost:
    if not p.rate_per_s:
        return saturated_cell(p, bursts, burst_s, s)
    rate = p.rate_per_s
    rho = rate * burst_s
    if rho < 1.0:
        return CellCost(bursts / rate + burst_s + rho * burst_s / (2 * (1 - rho)), 1 / rate, s)
    note = f"overloaded: rho = {rho:.2f}, requests queue"
    return CellCost(1 / rate + bursts * burst_s, burst_s, s, note)


SATURATED = CostModel(lambda p, burst_s: 1.0, saturated_cell)  # always busy, bursts back to back
THINKING = CostModel(thinking_busy, thinking_cell)  # a closed loop of bursts and think times
QUEUEING = CostModel(queueing_busy, queueing_cell)  # an open loop of requests at a rate, queued (M/D/1)
COST_MODELS: dict[str, CostModel] = {"batch": SATURATED, "interactive": THINKING, "serve": QUEUEING}


def busy(p: Pattern, burst_s: float) -> float:
    """The fraction of the time a replica of pattern ``p`` keeps the device busy, its burst ``burst_s``."""
    return COST_MODELS[p.kind].busy(p, burst_s)


def slowdown(victim: Pattern, neighbour: Pattern, replicas: int, factor: float, unit_s: float) -> float:
    """``s = 1 + (N - 1) * u * f``, ``u`` the neighbours' busy fraction at the slowed burst (a fixed point)."""
    if replicas <= 1:
        return 1.0
    s = 1.0 + (replicas - 1) * factor  # all busy: the batch model
    units = neighbour.units or victim.units or 1
    for _ in range(FIXED_POINT_ROUNDS):
        s = 1.0 + (replicas - 1) * busy(neighbour, units * unit_s * s) * factor
    return s


def cell_seconds(
    patterns: tuple[Pattern, Pattern], replicas: int, bursts: int, unit_s: float, factor: float = 1.0
) -> CellCost:
    """The predicted seconds of one patterned cell (module docstring): ``patterns`` the victim's and the
    neighbours'; ``unit_s``: one unit alone."""
    victim, neighbour = patterns
    s = slowdown(victim, neighbour, replicas, factor, unit_s)
    burst_s = (victim.units or 1) * unit_s * s
    return COST_MODELS[victim.kind].cell(victim, bursts, burst_s, s)


def slowest_of(users: int) -> float:
    """E[max of ``users`` standard normals] (Blom's approximation; 0 for one user)."""
    if users <= 1:
        return 0.0
    return NormalDist().inv_cdf((users - 0.375) / (users + 0.25))


# The spread of one user's latency alone (the standard deviation of its log: a lognormal) that sets the look a
# cell is decided at, from p95 / median = exp(1.645 spread) of committed and measured alone cells' bursts:
# * a tracker's burst (one compiled kernel a turn, in a warm replica): Simpletrack on H200s p95 = median (7 alone
#   cells, results/h200/patterns-*); on the quiet 2-core CPU 0.03-0.05 (500 particles, 2026-12-05), 0.24-0.33
#   when the machine was busy: 0.1 (the alone cell precise at its first look, 99 samples, up to 0.1);
# * a program's (Python around its kernels): ResNet-18 inference on H200s 0.19-0.27 (400-600 bursts each,
#   results/h200/time-to-answer-2026-12-04): 0.25 (the alone cell to its cap, 792);
# * a service's latency, its queueing included: 0.36-0.45 (results/h200/patterns-*/st-serve*, rn-serve-0.3).
SPREAD = {"tracker": 0.1, "program": 0.25, "service": 0.4}


def spread_of(workload: Workload) -> float:
    """The latency spread of ``workload``'s victim (:data:`SPREAD`): a service's, else a program's or a tracker's."""
    if parse_pattern(workload.pattern).spec.loop == "open":
        return SPREAD["service"]
    return SPREAD["program" if workload.is_program else "tracker"]


def quantile_of(rank: int | None, n: int, spread: float) -> float:
    """The expected ``rank``-th smallest of ``n`` latencies, over their median (a lognormal of ``spread``,
    Blom's position); NaN for no rank."""
    if rank is None or n < 1:
        return math.nan
    return math.exp(spread * NormalDist().inv_cdf((rank - 0.375) / (n + 0.25)))


def alone_looks(samples: Samples, rule: TailRule, spread: float) -> tuple[int, float, float]:
    """The alone cell as the model runs it: its samples (looks at n0 · 2^j until its p95 interval's hi / lo
    is at most ``ALONE_PRECISION``, at most its cap) and that interval over the median (lo, hi)."""
    n = min(samples.first_look, samples.cap)
    while True:
        look = look_of(n, samples.first_look)
        low, high = rank_bounds(n, rule.q, rule.alone_alpha(look or 0)) if look is not None else (None, None)
        lo, hi = quantile_of(low, n, spread), quantile_of(high, n, spread)
        if n >= samples.cap or hi / lo <= ALONE_PRECISION:
            return n, lo, hi
        n = min(2 * n, samples.cap)


@dataclass(frozen=True)
class Shared:
    """What decides a sharing cell in the model: its users' slowdown, their latency spread, and the alone
    baseline's p95 interval over its median (``lo``, ``hi``: :func:`alone_interval`)."""

    slowdown: float
    spread: float
    alone_lo: float
    alone_hi: float


def user_verdict(n: int, samples: Samples, shared: Shared, rule: TailRule) -> str:
    """The verdict at ``n`` samples a user (:func:`sharebench.analysis.tail.decide` on the expected order
    statistics of the users' latencies)."""
    look = look_of(n, samples.first_look)
    if look is None:
        return "undecided"
    low, high = rank_bounds(n, rule.q, rule.user_alpha(samples.users, look))
    s = shared.slowdown
    if s * quantile_of(low, n, shared.spread) / shared.alone_hi > rule.slo:
        return "above"
    if s * quantile_of(high, n, shared.spread) / shared.alone_lo <= rule.slo:
        return "within"
    return "undecided"


def users_looks(samples: Samples, shared: Shared, rule: TailRule) -> tuple[int, str]:
    """A sharing cell as the model runs it: the samples a user runs (the first look at which
    :func:`user_verdict` decides, else its cap) and the verdict then."""
    n = samples.first_look
    while n < samples.cap:
        verdict = user_verdict(n, samples, shared, rule)
        if verdict != "undecided":
            return n, verdict
        n *= 2
    return samples.cap, user_verdict(samples.cap, samples, shared, rule)


def shared_of(workload: Workload, s: float, rule: TailRule) -> Shared:
    """The users of ``workload`` slowed ``s`` times against the alone cell as the model runs it
    (:func:`alone_looks`)."""
    spread = spread_of(workload)
    _, lo, hi = alone_looks(cell_samples(workload, 1, rule), rule, spread)
    return Shared(s, spread, lo, hi)


# The model's slowdown is uncertain by about this factor: one unit measured two ways differs by 10-20% (a warm
# replica's burst, a calibration's turns), and a CPU's sharing of one pair moved from 1.4x to 2.1x within an hour.
# Near the target the look that decides a cell jumps (at its first look, or undecided to its cap), so a cell's
# samples and a probe's cells are their mean over the slowdown and one this factor either side of it: a slowdown
# near the target predicts a time between, not one side of the jump
SLOWDOWN_SPREAD = 1.15


def near(s: float) -> tuple[float, ...]:
    """The model's slowdown ``s`` and one :data:`SLOWDOWN_SPREAD` either side of it (none alone, at 1)."""
    return (s,) if s <= 1 else (max(1.0, s / SLOWDOWN_SPREAD), s, s * SLOWDOWN_SPREAD)


def expected_samples(workload: Workload, samples: Samples, s: float, rule: TailRule) -> int:
    """The samples a user of a cell is expected to run: a watched cell's decided look (:func:`alone_looks`,
    :func:`users_looks`; a service at least its floor of seconds), an unwatched one's cap (a warm-up's few)."""
    if not samples.watched:
        return samples.expected
    if samples.alone:
        n = alone_looks(samples, rule, spread_of(workload))[0]
    else:
        looks = [users_looks(samples, shared_of(workload, x, rule), rule)[0] for x in near(s)]
        n = round(sum(looks) / len(looks))
    if samples.window_s is not None and samples.rate_per_s:
        n = max(n, math.ceil(samples.rate_per_s * samples.min_s))
    return min(n, samples.cap)


def patterned_cell(
    workload: Workload,
    replicas: int,
    unit_s: float,
    factor: float = 1.0,
    *,
    rule: TailRule | None = None,
    warmup: bool = False,
    at_cap: bool = False,
) -> CellCost:
    """The predicted seconds of one cell of ``replicas`` replicas of ``workload`` under the sample rule
    (module docstring): the samples it is expected to run (:func:`expected_samples`; ``at_cap``: its cap),
    and for a closed loop of several users the wait for the slowest; ``unit_s``: one unit alone, ``factor``
    the mode's recorded loss."""
    rule = rule or TailRule(DEFAULT_SLO)
    samples = cell_samples(workload, replicas, rule, warmup=warmup)
    victim, neighbour = parse_pattern(workload.pattern), parse_pattern(workload.pattern_of(1))
    s = slowdown(victim, neighbour, replicas, factor, unit_s)
    bursts = samples.cap if at_cap else expected_samples(workload, samples, s, rule)
    cost = cell_seconds((victim, neighbour), replicas, bursts, unit_s, factor)
    return replace(cost, cell_s=cost.cell_s + straggler_s(victim, samples, bursts))


def straggler_s(victim: Pattern, samples: Samples, bursts: int) -> float:
    """How much later than the mean user the slowest of a closed loop's users reaches ``bursts`` (think
    times exponential: a sum of B has a standard deviation of √B·think)."""
    if victim.spec.loop != "closed" or not victim.think_s or samples.users <= 1:
        return 0.0
    return float(victim.think_s) * math.sqrt(bursts) * slowest_of(samples.users)


def cell_range(workload: Workload, replicas: int, unit_s: float, factor: float = 1.0) -> tuple[float, float]:
    """(expected, at most) seconds of one cell: decided at its first look, or run to its cap."""
    return (
        patterned_cell(workload, replicas, unit_s, factor).cell_s,
        patterned_cell(workload, replicas, unit_s, factor, at_cap=True).cell_s,
    )


# ----------------------------------------------------------------- a capacity search


def search_path(lo: int, max_n: int, verdict: Callable[[int], str]) -> list[tuple[int, str]]:
    """The N a capacity search measures, in order, when the verdict of each N is ``verdict(n)`` (within,
    above, or undecided after its most cells): N from ``lo`` doubling while within (at most ``max_n``), then
    bisection between the largest N within and the smallest above; an undecided N ends it, a bracket
    (``sweep.capacity_answer.next_n``; ``tests/analysis/test_cost.py`` checks the two agree)."""
    out: list[tuple[int, str]] = []
    low, top = 1, None
    n: int | None = min(lo, max_n) if max_n >= 2 else None
    while n is not None:
        v = verdict(n)
        out.append((n, v))
        if v == "undecided":
            break
        if v == "within":
            low = max(low, n)
        else:
            top = n if top is None else min(top, n)
        if top is None:
            n = None if low >= max_n else min(2 * low, max_n)
        else:
            n = None if top - low <= 1 else (low + top) // 2
    return out


# a probe's set-up before its first sample (``sweep.capacity``): a program started fresh, a warm replica primed
PROBE_SETUP_S = {"exec": 8.0, "warm": 0.5}


@dataclass(frozen=True)
class SearchAsk:
    """What a capacity search measures, for its cost: each family with its largest N, the first N, the rule
    (its target and sample rule), the cells an N takes at least and at most (the search's ``--repeats`` and
    ``--max-repeats``: another while undecided, its users' samples pooled), the gap before each cell and
    each probe's set-up (its new replicas)."""

    families: tuple[tuple[str, int], ...]
    lo: int
    rule: TailRule
    repeats: int = 1
    gap_s: float = 0.0
    probe_setup_s: float = PROBE_SETUP_S["warm"]
    max_cells: int = 4


@dataclass(frozen=True)
class Probe:
    """One N of a search as the model measures it: the slowdown, the verdict, its cells and their seconds."""

    n: int
    slowdown: float
    verdict: str
    cells: int
    seconds: float


def probe_cost(workload: Workload, n: int, unit_s: float, ask: SearchAsk, scale: float = 1.0) -> Probe:
    """A probe of ``n`` replicas of ``workload``: its first cell until decided (:func:`users_looks`), then,
    while undecided, another cell to its cap (the samples pooled), at most ``ask.max_cells``; a probe within
    at least ``ask.repeats`` cells. Each cell with its gap, and the probe's set-up. ``scale``: the model's
    slowdown times this (at least 1), what decides its looks (:data:`SLOWDOWN_SPREAD`)."""
    samples = cell_samples(workload, n, ask.rule)
    victim, neighbour = parse_pattern(workload.pattern), parse_pattern(workload.pattern_of(1))
    s = slowdown(victim, neighbour, n, 1.0, unit_s)
    shared = shared_of(workload, max(1.0, s * scale), ask.rule)

    def cell_s(bursts: int) -> float:
        cost = cell_seconds((victim, neighbour), n, bursts, unit_s)
        return cost.cell_s + straggler_s(victim, samples, bursts) + ask.gap_s

    first, verdict = users_looks(samples, shared, ask.rule)
    cells, seconds = 1, ask.probe_setup_s + cell_s(first)
    while verdict == "undecided" and cells < ask.max_cells:
        cells += 1
        seconds += cell_s(samples.cap)
        verdict = user_verdict(cells * samples.cap, samples, shared, ask.rule)
    if verdict == "within" and cells < ask.repeats:
        seconds += (ask.repeats - cells) * cell_s(first)
        cells = ask.repeats
    return Probe(n, shared.slowdown, verdict, cells, seconds)


@dataclass(frozen=True)
class SearchCost:
    """A capacity search's probes as the model predicts them: per family its path (its probes in order),
    the probes' cells and their seconds (each with its gap and set-up)."""

    paths: tuple[tuple[str, tuple[Probe, ...]], ...]
    cells: int
    cells_s: float

    def describe(self) -> str:
        """``timeslice N=2 ✓ 1.35×, 4 ✗ 2.49×, 3 ? 1.98× (4 cells); mps ...``."""
        marks = {"within": "✓", "above": "✗", "undecided": "?"}
        return "; ".join(
            f"{family} N="
            + ", ".join(
                f"{p.n} {marks[p.verdict]} {p.slowdown:.2f}×" + (f" ({p.cells} cells)" if p.cells > 1 else "")
                for p in path
            )
            for family, path in self.paths
        )


def at_rate(workload: Workload, unit_s: float) -> Workload:
    """``workload`` with a service of a load (``serve:load=F``: no rate before its capacity alone is
    measured, ``sweep.load``) at the rate that load is of one replica's capacity, ``1 / unit_s`` units a
    second (``patterns.resolve_load``); any other as it is."""
    victim = parse_pattern(workload.pattern)
    if not victim.needs_capacity or not unit_s > 0:
        return workload
    try:
        label = resolve_load(victim, 1.0 / unit_s).label
    except UserError:
        return workload  # a rate out of bounds: the run says so once the capacity is measured
    same = workload.neighbour_pattern == workload.pattern
    return replace(workload, pattern=label, neighbours=None if same else workload.neighbours)


def search_cost(workload: Workload, ask: SearchAsk, unit_s: float) -> SearchCost:
    """The probes of a capacity search of ``workload`` (:func:`search_path` per family of ``ask``, each N's
    verdict and cells :func:`probe_cost`'s: the model's slowdown, a mode factor of 1, against the target), one
    unit ``unit_s`` alone. A service of a load runs at the rate the load is of one replica's capacity
    (:func:`at_rate`). The paths and cells shown are the model's slowdown's; the seconds the mean of the
    searches at it and at :data:`SLOWDOWN_SPREAD` either side (near the target a verdict, and the path after
    it, jumps: the mean lies between)."""
    workload = at_rate(workload, unit_s)
    walks = [walk(workload, ask, unit_s, k) for k in (1 / SLOWDOWN_SPREAD, 1.0, SLOWDOWN_SPREAD)]
    central = walks[1]
    return replace(central, cells_s=sum(w.cells_s for w in walks) / len(walks))


def walk(workload: Workload, ask: SearchAsk, unit_s: float, scale: float) -> SearchCost:
    """The search with every probe's slowdown times ``scale`` (:func:`probe_cost`)."""
    probes: dict[int, Probe] = {}

    def verdict(n: int) -> str:
        if n not in probes:
            probes[n] = probe_cost(workload, n, unit_s, ask, scale)
        return probes[n].verdict

    paths = []
    for family, max_n in ask.families:
        paths.append((family, tuple(probes[n] for n, _ in search_path(ask.lo, max_n, verdict))))
    chosen = [p for _, path in paths for p in path]
    return SearchCost(tuple(paths), sum(p.cells for p in chosen), sum(p.seconds for p in chosen))
