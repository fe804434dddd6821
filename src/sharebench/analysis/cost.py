"""What a patterned cell costs in seconds (issue 35, item 3): pure arithmetic below the sweep's plans.

A patterned cell lasts as long as its victim's bursts (the neighbours stop when it is done). One unit
of work (a turn of Simpletrack) takes ``unit_s`` alone; beside ``N - 1`` neighbours, each busy a fraction
``u`` of the time, it takes ``s = 1 + (N - 1) * u * f`` times that, ``f`` the mode's recorded factor
(span / (N * T_1) of a batch cell; 1 when none). A batch neighbour is always busy (``u = 1``); an
interactive one is busy ``b / (b + think)`` of the time, ``b`` its burst's slowed time (a fixed point);
a service ``min(1, rate * S)``.

* interactive victim: ``think + B * (think + units * unit_s * s)`` (the first think is its phase);
* serve victim: ``S = units * unit_s * s``, ``rho = rate * S``; below 1 the requests' arrival span plus the
  M/D/1 wait ``B / rate + S + rho * S / (2 (1 - rho))``; at 1 or above the requests queue and the cell
  lasts ``1 / rate + B * S`` (and the estimate says it is overloaded);
* batch: ``N * T_1 * f``, as :meth:`sharebench.sweep.budget.Calibration.cell_s` has it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharebench.patterns import Pattern

FIXED_POINT_ROUNDS = 20


@dataclass(frozen=True)
class CellCost:
    """A patterned cell's predicted seconds: the whole cell, one victim burst, the slowdown used, a note."""

    cell_s: float
    per_burst_s: float
    slowdown: float
    note: str = ""


def busy(p: Pattern, burst_s: float) -> float:
    """The fraction of the time a replica of pattern ``p`` keeps the device busy, its burst ``burst_s``."""
    if p.kind == "interactive":
        think = p.think_s or 0.0
        return burst_s / (burst_s + think) if burst_s + think > 0 else 1.0
    if p.kind == "serve":
        return min(1.0, (p.rate_per_s or 0.0) * burst_s)
    return 1.0


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
    if victim.kind == "interactive":
        think = victim.think_s or 0.0
        return CellCost(think + bursts * (think + burst_s), think + burst_s, s)
    if victim.kind == "serve" and victim.rate_per_s:
        rate = victim.rate_per_s
        rho = rate * burst_s
        if rho < 1.0:
            return CellCost(bursts / rate + burst_s + rho * burst_s / (2 * (1 - rho)), 1 / rate, s)
        note = f"overloaded: rho = {rho:.2f}, requests queue"
        return CellCost(1 / rate + bursts * burst_s, burst_s, s, note)
    return CellCost(bursts * burst_s, burst_s, s)
