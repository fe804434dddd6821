"""The cost of a patterned cell and of a capacity search in seconds (sharebench.analysis.cost): hand-computed
cases, and the search's path against the search itself."""

from __future__ import annotations

import math

import pytest

from sharebench.analysis.cost import SearchAsk, cell_seconds, patterned_cell, search_cost, search_path, slowdown
from sharebench.analysis.tail import TailRule
from sharebench.patterns import parse_pattern
from sharebench.sweep.capacity_answer import CapacitySearch, Probe, next_n
from sharebench.workloads import Workload

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


@pytest.mark.parametrize(("lo", "hi", "knee"), [(2, 64, 11), (2, 64, 2), (2, 8, 99), (8, 64, 5), (2, 7, 6)])
def test_the_search_path_is_the_one_the_search_takes_on_decided_probes(lo, hi, knee):
    """``search_path`` (the dry run's and the suggestions' model of a search) against the search itself
    (``sweep.capacity_answer.next_n``) driven by the same verdicts: within below ``knee``, above from it."""
    search = CapacitySearch("timeslice", 2.0, lo, hi)
    order = []
    while (n := next_n(search)) is not None:
        verdict = "within" if n < knee else "above"
        search.probes[n] = Probe(n, f"timeslice:{n}", verdict)
        order.append(n)
    assert [n for n, _ in search_path(lo, hi, lambda n: n < knee)] == order


def test_a_search_costs_one_cell_a_probe_on_the_models_path():
    """Each probe one cell at its first look plus its gap and set-up, per family; two families cost twice one."""
    workload = Workload(pattern="interactive:burst=1,think=0.05")
    rule = TailRule(2.0)
    one = search_cost(workload, SearchAsk((("timeslice", 64),), 2, rule, gap_s=0.5, probe_setup_s=0.5), 0.1)
    path = [n for n, _, _ in one.paths[0][1]]
    # s(N) = 1 + (N - 1) u, u = 0.1 s / (0.1 s + 0.05): s(2)^2 - 1.5 s(2) - 0.5 = 0, s(2) = 1.78 within 2x
    assert path == [2, 4, 3] and one.cells == 3
    expected = sum(patterned_cell(workload, n, 0.1, rule=rule).cell_s + 1.0 for n in path)
    assert one.cells_s == pytest.approx(expected)
    two = search_cost(workload, SearchAsk((("timeslice", 64), ("mps", 48)), 2, rule, 1, 0.5, 0.5), 0.1)
    assert two.cells == 6 and two.cells_s == pytest.approx(2 * expected)
    assert one.describe() == "timeslice N=2 ✓ 1.78×, 4 ✗ 3.64×, 3 ✗ 2.69×"
    assert slowdown(parse_pattern(workload.pattern), parse_pattern(workload.pattern), 2, 1.0, 0.1) == pytest.approx(
        (1.5 + math.sqrt(4.25)) / 2
    )
