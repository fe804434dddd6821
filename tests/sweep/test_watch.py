"""The sweep's watcher of a patterned cell (sharebench.sweep.watch, issue 42) on bursts drawn from known
distributions: it stops a cell at its first look when the verdict is clear (far within, far above, a user
other than replica 0 above), not before a service's floor of seconds, at its cap when undecided or with no
baseline; the alone cell once its p95 is precise; and the verdict columns its rows carry."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sharebench.analysis.samples import cell_samples
from sharebench.analysis.tail import TailRule, alone_bounds
from sharebench.sweep.watch import VERDICT_COLUMNS, CellWatch
from sharebench.workloads import Workload
from sharebench.workloads.bursts import Burst

RULE = TailRule(2.0)
USERS = Workload(pattern="interactive:burst=1,think=0.05")
RNG = np.random.default_rng(42)
ALONE = alone_bounds(0.010 + RNG.exponential(0.002, 2000), RULE)  # p95 about 16 ms, a narrow interval


def bursts_of(latencies: np.ndarray) -> list[Burst]:
    return [Burst(i, 100.0 + i, 100.0 + i, 100.0 + i + float(x), 1) for i, x in enumerate(latencies)]


def feed(watch: CellWatch, users: dict[int, np.ndarray], step: int = 5, elapsed=lambda n: 60.0) -> tuple[int, str]:
    """Hand the watcher its users' bursts ``step`` at a time, as the executor's polls do; (bursts each user had
    when it stopped the cell, its reason), or (the most it got, '') when it never did."""
    n = 0
    most = max(len(v) for v in users.values())
    while n < most:
        n = min(most, n + step)
        why = watch({u: bursts_of(v[:n]) for u, v in users.items()}, elapsed(n))
        if why:
            return n, why
    return n, ""


def at(n: int, level: int) -> bool:
    """``n`` bursts handed over by the last poll that reached ``level`` (a poll hands 5 at a time)."""
    return level <= n < level + 5


def draw(scale: float, n: int = 2000) -> np.ndarray:
    return scale * (0.010 + RNG.exponential(0.002, n))


def test_far_within_stops_at_the_first_look():
    samples = cell_samples(USERS, 2, RULE)
    watch = CellWatch(samples, (0, 1), RULE, ALONE)
    n, why = feed(watch, {0: draw(1.0), 1: draw(1.05)})
    assert at(n, samples.first_look) and why.startswith("decided within at look 0")
    assert watch.stopped_by == "decided" and watch.decision is not None and watch.decision.verdict == "within"


def test_far_above_stops_at_the_first_look():
    watch = CellWatch(cell_samples(USERS, 2, RULE), (0, 1), RULE, ALONE)
    n, why = feed(watch, {0: draw(4.0), 1: draw(4.0)})
    assert n < 120 and why.startswith("decided above at look 0")


def test_a_user_other_than_replica_0_that_misses_the_target_fails_the_cell():
    watch = CellWatch(cell_samples(USERS, 3, RULE), (0, 1, 2), RULE, ALONE)
    n, why = feed(watch, {0: draw(1.0), 1: draw(1.0), 2: draw(5.0)})
    assert why.startswith("decided above") and watch.decision.worst == "2"
    assert watch.decision.per_user["0"][2] <= 2.0  # replica 0 alone would have passed


def test_undecided_goes_from_look_to_look_to_its_cap():
    samples = cell_samples(USERS, 2, RULE)
    watch = CellWatch(samples, (0, 1), RULE, ALONE)
    n, why = feed(watch, {0: draw(2.0), 1: draw(2.0)})  # the p95 slowdown at the target: never clear of it
    assert at(n, samples.cap) and why == f"at its cap of {samples.cap} samples per user"
    assert watch.stopped_by == "cap" and watch.looked == 2  # looked at n0, 2 n0 and 4 n0 (the cap)


def test_no_baseline_runs_to_the_cap():
    samples = cell_samples(USERS, 2, RULE)
    watch = CellWatch(samples, (0, 1), RULE, None)
    n, why = feed(watch, {0: draw(5.0), 1: draw(5.0)})
    assert at(n, samples.cap) and watch.stopped_by == "cap"
    columns = watch.columns([dict(replica=0, arrival=0.0, end=0.02), dict(replica=1, arrival=0.0, end=0.02)])
    assert (
        columns["verdict"] == "undecided" and columns["reason"] == "no alone cell of this pattern and size measured yet"
    )


def test_a_service_does_not_stop_before_its_floor_of_seconds():
    service = Workload(pattern="serve:rate=200")
    samples = cell_samples(service, 2, RULE)
    watch = CellWatch(samples, (0, 1), RULE, ALONE)
    n, why = feed(watch, {0: draw(1.0), 1: draw(1.0)}, elapsed=lambda n: n / 200)  # n requests at 200/s
    assert n >= 5.0 * 200 - 5 and why.startswith("decided within")  # decided at 113, stopped at 5 s


def test_the_alone_cell_stops_once_its_p95_is_precise():
    samples = cell_samples(USERS, 1, RULE)
    watch = CellWatch(samples, (0,), RULE)
    n, why = feed(watch, {0: 0.010 + RNG.normal(0, 0.0002, 2000)})  # a narrow distribution
    assert at(n, samples.first_look) and why.startswith("alone p95 precise: hi/lo")
    wide = CellWatch(samples, (0,), RULE)
    n, why = feed(wide, {0: RNG.lognormal(0, 1.0, 2000)})  # hi/lo far above 1.15 at every look: the cap
    assert at(n, samples.cap) and wide.stopped_by == "cap"
    columns = wide.columns([dict(replica=0, arrival=0.0, end=float(x)) for x in RNG.lognormal(0, 1.0, samples.cap)])
    assert columns["users"] == 1 and columns["samples"] == samples.cap and "> 1.15" in columns["reason"]
    assert columns["stopped_by"] == "cap" and columns["alone_p95_lo_s"] < columns["alone_p95_s"]


def test_the_rows_columns_are_plain_values_and_flag_below_one():
    watch = CellWatch(cell_samples(USERS, 2, RULE), (0, 1), RULE, ALONE)
    fast = [dict(replica=r, arrival=0.0, end=float(x)) for r in (0, 1) for x in draw(0.5, 300)]
    columns = watch.columns(fast, deadline=True)
    assert set(columns) == set(VERDICT_COLUMNS)
    assert columns["below_one"] is True and columns["verdict"] == "within" and columns["stopped_by"] == "deadline"
    assert all(type(v) in (str, int, float, bool) for v in columns.values())
    assert all(math.isfinite(v) for v in columns.values() if isinstance(v, float))


@pytest.mark.parametrize("users", [(0,), (0, 1, 2, 3)])
def test_an_unwatched_cell_is_never_stopped(users):
    warm = cell_samples(USERS, len(users), RULE, warmup=True)
    watch = CellWatch(warm, users, RULE, ALONE)
    assert feed(watch, {u: draw(1.0, 100) for u in users}) == (100, "")
