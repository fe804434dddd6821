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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from statistics import NormalDist

from sharebench.analysis.samples import Samples, cell_samples
from sharebench.analysis.tail import TailRule
from sharebench.patterns import Pattern, parse_pattern
from sharebench.workloads import Workload

FIXED_POINT_ROUNDS = 20


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
