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

How many bursts a cell runs is the sample rule's (``analysis.samples``, issue 42): :func:`patterned_cell`
predicts a cell of a workload at its expected samples (the first look: decided at once) and, for a closed
loop of several users, the wait for the slowest of them (a cell stops once its *fewest* user reaches the
look: B exponential think times sum to B·think ± √B·think, and the last of N users is E[max of N normals]
≈ Φ⁻¹((N − 0.375) / (N + 0.25)) standard deviations late, Blom's approximation); :func:`cell_range` adds
the cap (every look undecided).

Around the cells (:class:`Overheads`): the recorded gap between cells and set-up before the first
(:data:`DEFAULT_OVERHEADS`), and the report after the last, from its work (:func:`report_seconds`).

A capacity search (``sweep.capacity``) is predicted the same way (:func:`search_cost`): the N it measures
are those it would if each N's verdict were the model's, within while ``s(N) <= target`` (:func:`search_path`:
N doubling from the first, then bisection, as ``sweep.capacity_answer.next_n`` goes on decided probes), each
probe one cell decided at its first look. Its dry run and the Answer's suggested searches
(``analysis.suggest``) both say this.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from statistics import NormalDist

from sharebench.analysis.samples import Samples, cell_samples
from sharebench.analysis.tail import TailRule
from sharebench.errors import UserError
from sharebench.patterns import Pattern, parse_pattern, resolve_load
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
    (module docstring): its expected samples (``at_cap``: its cap), and for a closed loop of several users
    the wait for the slowest; ``unit_s``: one unit alone, ``factor`` the mode's recorded loss."""
    samples = cell_samples(workload, replicas, rule, warmup=warmup)
    bursts = samples.cap if at_cap else samples.expected
    victim, neighbour = parse_pattern(workload.pattern), parse_pattern(workload.pattern_of(1))
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


def search_path(lo: int, max_n: int, within: Callable[[int], bool]) -> list[tuple[int, bool]]:
    """The N a capacity search measures, in order, when the verdict of each N is ``within(n)`` and every
    probe is decided by its cell: N from ``lo`` doubling while within (at most ``max_n``), then bisection
    between the largest N within and the smallest above (``sweep.capacity_answer.next_n`` on decided
    probes; ``tests/analysis/test_cost.py`` checks the two agree)."""
    out: list[tuple[int, bool]] = []
    low, top = 1, None
    n: int | None = min(lo, max_n) if max_n >= 2 else None
    while n is not None:
        ok = within(n)
        out.append((n, ok))
        if ok:
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
    (its target and sample rule), the cells an N (the search's ``--repeats``, its fewest), the gap before
    each cell and each probe's set-up (its new replicas)."""

    families: tuple[tuple[str, int], ...]
    lo: int
    rule: TailRule
    repeats: int = 1
    gap_s: float = 0.0
    probe_setup_s: float = PROBE_SETUP_S["warm"]


@dataclass(frozen=True)
class SearchCost:
    """A capacity search's probes as the model predicts them: per family its path (N, the model's
    slowdown, within), the probes' cells and their seconds (each with its gap and set-up)."""

    paths: tuple[tuple[str, tuple[tuple[int, float, bool], ...]], ...]
    cells: int
    cells_s: float

    def describe(self) -> str:
        """``timeslice N=2 ✓ 1.35×, 4 ✗ 2.49×, 3 ✓ 1.84×; mps ...``."""
        return "; ".join(
            f"{family} N=" + ", ".join(f"{n} {'✓' if ok else '✗'} {s:.2f}×" for n, s, ok in path)
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
    """The probes of a capacity search of ``workload`` (:func:`search_path` per family of ``ask``), one unit
    ``unit_s`` alone, within while the model's slowdown (:func:`slowdown`, a mode factor of 1) is at most
    the target: ``ask.repeats`` cells a probe at their expected samples, each with ``ask.gap_s`` before it,
    and ``ask.probe_setup_s`` a probe. A service of a load runs at the rate the load is of one replica's
    capacity (:func:`at_rate`)."""
    workload = at_rate(workload, unit_s)
    victim, neighbour = parse_pattern(workload.pattern), parse_pattern(workload.pattern_of(1))
    total, cells, paths = 0.0, 0, []
    for family, max_n in ask.families:
        speed = {n: slowdown(victim, neighbour, n, 1.0, unit_s) for n in range(1, max(2, max_n) + 1)}
        within = {n: s <= ask.rule.slo for n, s in speed.items()}
        path = search_path(ask.lo, max_n, within.__getitem__)
        paths.append((family, tuple((n, speed[n], ok) for n, ok in path)))
        for n, _ in path:
            cell_s = patterned_cell(workload, n, unit_s, rule=ask.rule).cell_s
            total += (cell_s + ask.gap_s) * ask.repeats + ask.probe_setup_s
        cells += len(path) * ask.repeats
    return SearchCost(tuple(paths), cells, total)
