"""The cost of a patterned cell and of a capacity search in seconds (sharebench.analysis.cost): hand-computed
cases, and the search's path against the search itself."""

from __future__ import annotations

import dataclasses
import math

import pytest

from sharebench.analysis.cost import (
    SLOWDOWN_SPREAD,
    SPREAD,
    SearchAsk,
    Shared,
    alone_looks,
    cell_seconds,
    patterned_cell,
    probe_cost,
    quantile_of,
    search_cost,
    search_path,
    shared_of,
    slowdown,
    spread_of,
    user_verdict,
    users_looks,
    walk,
)
from sharebench.analysis.samples import cell_samples
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


@pytest.mark.parametrize(
    ("lo", "hi", "knee", "unsure"),
    [(2, 64, 11, 0), (2, 64, 2, 0), (2, 8, 99, 0), (8, 64, 5, 0), (2, 7, 6, 0), (2, 64, 11, 12)],
)
def test_the_search_path_is_the_one_the_search_takes(lo, hi, knee, unsure):
    """``search_path`` (the dry run's and the suggestions' model of a search) against the search itself
    (``sweep.capacity_answer.next_n``) driven by the same verdicts: within below ``knee``, above from it, and
    ``unsure`` undecided after its most cells (the search ends there: a bracket)."""

    def verdict(n: int) -> str:
        return "undecided" if n == unsure else "within" if n < knee else "above"

    search = CapacitySearch("timeslice", 2.0, lo, hi, max_cells=1)
    order = []
    while (n := next_n(search)) is not None:
        search.probes[n] = Probe(n, f"timeslice:{n}", verdict(n))  # type: ignore[arg-type]
        order.append(n)
    assert [n for n, _ in search_path(lo, hi, verdict)] == order


USER = Workload(pattern="interactive:burst=1,think=0.05")
PROGRAM = Workload(engine="exec", command="python -m x", pattern=USER.pattern)  # a program's latencies spread more


def test_a_steady_cell_decides_at_its_first_look_and_a_spread_one_later():
    """No spread (a user's every burst alike, Simpletrack on an H200): the alone cell is precise at its first
    look and a pair is within or above at its first; a tracker's recorded spread (0.1) keeps the alone cell at its
    first look; a program's (0.25, ResNet-18's): the alone cell runs to its cap (792 samples), a pair at 1.6x
    against 2x is within at its second look, at 1.7x at its third (its cap), at 1.8x undecided there (on the CPU
    a tracker's pair at about 1.8x ran to its cap of 452 undecided), while one at 1.1x or 3x is decided at once."""
    rule = TailRule(2.0)
    alone, pair = cell_samples(USER, 1, rule), cell_samples(USER, 2, rule)
    assert alone_looks(alone, rule, 0.0) == (99, 1.0, 1.0)
    assert users_looks(pair, Shared(1.9, 0.0, 1.0, 1.0), rule) == (113, "within")
    assert users_looks(pair, Shared(2.1, 0.0, 1.0, 1.0), rule) == (113, "above")
    assert spread_of(USER) == SPREAD["tracker"] and alone_looks(alone, rule, SPREAD["tracker"])[0] == 99
    assert spread_of(PROGRAM) == SPREAD["program"] and spread_of(Workload(pattern="serve:rate=5")) == SPREAD["service"]
    n, lo, hi = alone_looks(alone, rule, SPREAD["program"])
    assert n == 792 and 1 < lo < hi < 1.15 * lo * 1.01
    shared = shared_of(PROGRAM, 1.6, rule)
    assert (shared.alone_lo, shared.alone_hi) == (lo, hi)
    assert users_looks(pair, shared, rule) == (226, "within")
    assert users_looks(pair, shared_of(PROGRAM, 1.7, rule), rule) == (452, "within")
    assert users_looks(pair, shared_of(PROGRAM, 1.8, rule), rule) == (452, "undecided")
    assert users_looks(pair, shared_of(PROGRAM, 1.1, rule), rule) == (113, "within")
    assert users_looks(pair, shared_of(PROGRAM, 3.0, rule), rule) == (113, "above")
    # the expected order statistics: the median of a lognormal is 1, its 95th percentile exp(1.645 spread)
    assert quantile_of(500, 999, 0.25) == pytest.approx(1.0)
    assert quantile_of(950, 999, 0.25) == pytest.approx(math.exp(0.25 * 1.645), rel=0.01)


def test_a_search_costs_each_probes_cells_on_the_models_path():
    """Each probe's cells (probe_cost: until decided, another while undecided, pooled) with their gaps and its
    set-up, per family; two families cost twice one. Against 4x: 2 (1.78x) within at once, 4 (3.64x) too near
    4x to decide in four cells: the search ends there."""
    rule = TailRule(4.0)
    ask = SearchAsk((("timeslice", 64),), 2, rule, gap_s=0.5, probe_setup_s=0.5)
    one = search_cost(PROGRAM, ask, 0.1)
    probes = one.paths[0][1]
    assert [(p.n, p.verdict, p.cells) for p in probes] == [(2, "within", 1), (4, "undecided", 4)]
    assert all(p == probe_cost(PROGRAM, p.n, 0.1, ask) for p in probes)
    # the seconds: the mean of the searches at the model's slowdowns and SLOWDOWN_SPREAD either side of them
    walks = [walk(PROGRAM, ask, 0.1, k) for k in (1 / SLOWDOWN_SPREAD, 1.0, SLOWDOWN_SPREAD)]
    assert walks[1].paths == one.paths and walks[1].cells_s == pytest.approx(sum(p.seconds for p in probes))
    assert one.cells == sum(p.cells for p in probes) and one.cells_s == pytest.approx(sum(w.cells_s for w in walks) / 3)
    # at 1.15x less slowdown 4 is within (3.16x) and the search goes on: 8 and 6 above, 5 at 4.01x undecided
    assert [(p.n, p.verdict) for p in walks[0].paths[0][1]] == [
        (2, "within"),
        (4, "within"),
        (8, "above"),
        (6, "above"),
        (5, "undecided"),
    ]
    first = probes[0]  # decided at its first look: one cell of 113 bursts a user, its gap and set-up
    assert first.cells == 1 and first.seconds == pytest.approx(patterned_cell(PROGRAM, 2, 0.1, rule=rule).cell_s + 1.0)
    two = search_cost(PROGRAM, dataclasses.replace(ask, families=(("timeslice", 64), ("mps", 48))), 0.1)
    assert two.cells == 2 * one.cells and two.cells_s == pytest.approx(2 * one.cells_s)
    # s(N) = 1 + (N - 1) u, u = 0.1 s / (0.1 s + 0.05): s(2)^2 - 1.5 s(2) - 0.5 = 0
    assert probes[0].slowdown == pytest.approx((1.5 + math.sqrt(4.25)) / 2)
    assert one.describe() == "timeslice N=2 ✓ 1.78×, 4 ? 3.64× (4 cells)"


def test_a_probe_decided_by_pooling_its_cells():
    """Against 2x the pair at 1.78x is undecided at its first cell's cap (452 a user); a second cell pools
    904 samples a user; the probe ends when pooled samples decide it or at the search's most cells."""
    rule = TailRule(2.0)
    ask = SearchAsk((("timeslice", 64),), 2, rule, max_cells=4)
    probe = probe_cost(PROGRAM, 2, 0.1, ask)
    pair = cell_samples(PROGRAM, 2, rule)
    shared = shared_of(PROGRAM, probe.slowdown, rule)
    assert users_looks(pair, shared, rule) == (452, "undecided") and probe.cells > 1
    pooled = [user_verdict(k * 452, pair, shared, rule) for k in range(2, 5)]
    assert probe.verdict == next((v for v in pooled if v != "undecided"), "undecided")
    assert probe.cells == 1 + next((k for k, v in enumerate(pooled, 1) if v != "undecided"), 3)
