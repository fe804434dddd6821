"""The cost of a patterned cell in seconds (sharebench.analysis.cost): hand-computed cases."""

from __future__ import annotations

import math

import pytest

from sharebench.analysis.cost import cell_seconds, slowdown
from sharebench.patterns import parse_pattern

VICTIM = parse_pattern("interactive:burst=1,think=0.05")
BATCH = parse_pattern("batch")


def test_an_interactive_victim_alone_and_beside_a_batch_neighbour():
    alone = cell_seconds((VICTIM, BATCH), 1, 10, unit_s=0.1)
    assert alone.cell_s == pytest.approx(0.05 + 10 * (0.05 + 0.1)) and alone.slowdown == 1.0
    shared = cell_seconds((VICTIM, BATCH), 2, 10, unit_s=0.1)  # the neighbour always busy: s = 2
    assert shared.cell_s == pytest.approx(0.05 + 10 * (0.05 + 0.2)) and shared.per_burst_s == pytest.approx(0.25)
    slower = cell_seconds((VICTIM, BATCH), 2, 10, unit_s=0.1, factor=1.5)  # a mode that loses: s = 2.5
    assert slower.cell_s == pytest.approx(0.05 + 10 * (0.05 + 0.25))


def test_interactive_neighbours_converge_to_their_fixed_point():
    neighbour = parse_pattern("interactive:burst=1,think=0.1")
    # s = 1 + u, u = 0.1 s / (0.1 s + 0.1): s^2 - s - 1 = 0, the golden ratio
    assert slowdown(VICTIM, neighbour, 2, 1.0, 0.1) == pytest.approx((1 + math.sqrt(5)) / 2, rel=1e-6)


def test_a_service_below_and_above_its_capacity():
    light = cell_seconds((parse_pattern("serve:rate=2,size=1"), BATCH), 1, 10, unit_s=0.1)
    assert light.cell_s == pytest.approx(10 / 2 + 0.1 + 0.2 * 0.1 / (2 * 0.8)) and not light.note
    heavy = cell_seconds((parse_pattern("serve:rate=20,size=1"), BATCH), 1, 10, unit_s=0.1)
    assert heavy.cell_s == pytest.approx(1 / 20 + 10 * 0.1)
    assert heavy.note == "overloaded: rho = 2.00, requests queue"
