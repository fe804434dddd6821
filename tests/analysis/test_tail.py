"""The percentile bounds and the one decision rule (sharebench.analysis.tail), against tables computed
independently from scipy's binomial and against simulated coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sharebench.analysis.tail import (
    Bounds,
    TailRule,
    alone_bounds,
    decide,
    look_of,
    min_samples,
    percentile_bounds,
    rank_bounds,
)
from sharebench.errors import UserError


def brute_min_samples(q: float, tail: float) -> int:
    """The smallest n whose largest sample bounds the q-quantile from above with error <= tail, searched."""
    n = 1
    while stats.binom.cdf(n - 1, n, q) < 1 - tail:
        n += 1
    return n


@pytest.mark.parametrize(
    ("q", "tail", "expected"),
    [(0.95, 0.05, 59), (0.95, 0.025, 72), (0.95, 0.01, 90), (0.99, 0.05, 299), (0.5, 0.025, 6), (0.9, 0.05, 29)],
)
def test_min_samples_matches_the_binomial(q, tail, expected):
    assert min_samples(q, tail) == expected == brute_min_samples(q, tail)


@settings(max_examples=60, deadline=None)
@given(q=st.sampled_from([0.5, 0.9, 0.95, 0.99]), tail=st.floats(1e-6, 0.25))
def test_min_samples_is_the_smallest_that_bounds(q, tail):
    n = min_samples(q, tail)
    assert stats.binom.cdf(n - 1, n, q) >= 1 - tail - 1e-12
    assert n == 1 or stats.binom.cdf(n - 2, n - 1, q) < 1 - tail + 1e-12


@pytest.mark.parametrize("n", [1, 10, 30, 59, 71, 72, 100, 113, 500, 2000])
@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.003])
def test_rank_bounds_cover_and_are_the_tightest(n, alpha):
    q = 0.95
    lower, upper = rank_bounds(n, q, alpha)
    b = stats.binom(n, q)
    # independently: P(X_(l) <= xi) = P(B >= l) = sf(l - 1); P(X_(u) >= xi) = cdf(u - 1)
    if lower is None:
        assert b.sf(0) < 1 - alpha / 2  # not even the smallest sample is a bound
    else:
        assert b.sf(lower - 1) >= 1 - alpha / 2
        assert lower == n or b.sf(lower) < 1 - alpha / 2  # one rank higher would not cover
    if upper is None:
        assert b.cdf(n - 1) < 1 - alpha / 2
        assert n < min_samples(q, alpha / 2)
    else:
        assert b.cdf(upper - 1) >= 1 - alpha / 2
        assert upper == 1 or b.cdf(upper - 2) < 1 - alpha / 2
        assert n >= min_samples(q, alpha / 2)


def test_a_p95_of_30_samples_has_no_upper_bound():
    x = np.arange(1, 31, dtype=float)
    b = percentile_bounds(x, 0.95, 0.05)
    assert b.n == 30 and math.isnan(b.hi) and not b.bounded
    assert b.point == pytest.approx(np.percentile(x, 95))


def test_the_interval_covers_as_stated():
    """Simulated: exponential latencies, n = 200, the true p95 known; the 95% interval covers it at
    least 95% of the time (binomial slack for 4000 trials)."""
    rng = np.random.default_rng(7)
    truth = -math.log(0.05)
    hits = 0
    trials = 4000
    for _ in range(trials):
        b = percentile_bounds(rng.exponential(1.0, 200), 0.95, 0.05)
        hits += b.lo <= truth <= b.hi
    assert hits / trials >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / trials)


def test_rule_numbers():
    rule = TailRule(slo=2.0)
    assert rule.alpha == pytest.approx(0.05)
    # the users share half the error; look 0 spends half of that: one user's two-sided error at look 0
    assert rule.user_alpha(1, 0) == pytest.approx(0.0125)
    assert rule.user_alpha(4, 1) == pytest.approx(0.05 / 2 / 4 / 4)
    assert rule.first_look(2) == brute_min_samples(0.95, 0.05 / 2 / 2 / 2 / 2)
    assert rule.first_look(8) > rule.first_look(2)
    assert rule.alone_first_look() == brute_min_samples(0.95, 0.05 / 2 / 2 / 2)
    # the looks' errors add up to at most alpha, with one more look at the last level
    for looks in range(1, 12):
        spent = sum(rule.user_alpha(1, j) for j in range(looks)) + rule.user_alpha(1, looks - 1)
        assert spent <= rule.alpha / 2 + 1e-15


@pytest.mark.parametrize("bad", [0.5, math.nan, math.inf, -1])
def test_bad_targets_are_one_line(bad):
    with pytest.raises(UserError, match="bad target"):
        TailRule(slo=bad)


def test_look_of():
    assert look_of(10, 113) is None
    assert look_of(113, 113) == 0
    assert look_of(225, 113) == 0
    assert look_of(226, 113) == 1
    assert look_of(10**9, 113) == 11


def alone_of(rng: np.random.Generator, n: int = 2000) -> Bounds:
    return alone_bounds(rng.lognormal(math.log(0.010), 0.2, n), TailRule(2.0))


def test_one_user_above_fails_the_cell_though_replica_0_is_within():
    rng = np.random.default_rng(1)
    alone = alone_of(rng)
    users = {
        "0": rng.lognormal(math.log(0.011), 0.2, 400),  # replica 0: about 1.1x
        "1": rng.lognormal(math.log(0.011), 0.2, 400),
        "2": rng.lognormal(math.log(0.040), 0.2, 400),  # about 4x: above for sure
    }
    d = decide(users, alone, TailRule(2.0))
    assert d.verdict == "above"
    assert d.worst == "2"
    assert d.per_user["0"][2] < 2.0  # replica 0 alone would have met it
    only_0 = decide({"0": users["0"]}, alone, TailRule(2.0))
    assert only_0.verdict == "within"


def test_every_user_within_is_within_and_pooled_is_reported():
    rng = np.random.default_rng(2)
    alone = alone_of(rng)
    users = {str(i): rng.lognormal(math.log(0.012), 0.2, 600) for i in range(4)}
    d = decide(users, alone, TailRule(2.0))
    assert d.verdict == "within"
    assert d.worst_hi <= 2.0
    assert d.pooled_lo <= d.pooled_slowdown <= d.pooled_hi
    assert d.samples == 600 and d.users == 4 and d.look == look_of(600, TailRule(2.0).first_look(4))


def test_too_few_samples_are_undecided_even_far_above():
    rng = np.random.default_rng(3)
    alone = alone_of(rng)
    rule = TailRule(2.0)
    users = {
        "0": rng.lognormal(math.log(0.1), 0.2, rule.first_look(2) - 1),
        "1": rng.lognormal(math.log(0.1), 0.2, 500),
    }
    d = decide(users, alone, rule)
    assert d.verdict == "undecided"
    assert "needed for 2 users" in d.reason


def test_no_alone_interval_is_undecided():
    rule = TailRule(2.0)
    alone = alone_bounds(np.full(20, 0.01), rule)
    d = decide({"0": np.full(500, 0.011)}, alone, rule)
    assert d.verdict == "undecided" and "alone" in d.reason


def test_straddling_the_target_is_undecided():
    rng = np.random.default_rng(4)
    alone = alone_of(rng, 400)
    users = {"0": rng.lognormal(math.log(0.010 * 1.95), 0.2, 200), "1": rng.lognormal(math.log(0.010 * 1.9), 0.2, 200)}
    d = decide(users, alone, TailRule(2.0))
    assert d.verdict == "undecided"
    assert d.worst_lo <= 2.0 < d.worst_hi


def test_below_one_is_seen():
    rng = np.random.default_rng(5)
    alone = alone_of(rng)
    d = decide({"0": rng.lognormal(math.log(0.006), 0.2, 800)}, alone, TailRule(2.0))
    assert d.verdict == "within" and d.below_one


def test_one_user_faster_than_alone_beyond_doubt_makes_the_cell_below_one():
    """Two users, one at 1.2x, one at 0.6x its time alone beyond doubt: the worst user is within, but sharing
    does not make a user faster, so the baseline is off and the cell is below 1 (an H200's ResNet-18 serving
    cell read 0.89x for the worst user and 0.67x [0.54, 0.87] for the other, 2026-12-05)."""
    rng = np.random.default_rng(8)
    alone = alone_of(rng)
    users = {"0": rng.lognormal(math.log(0.012), 0.2, 800), "1": rng.lognormal(math.log(0.006), 0.2, 800)}
    d = decide(users, alone, TailRule(2.0))
    assert d.verdict == "within" and d.worst_hi > 1 > d.fastest_hi and d.below_one
    both = decide({"0": users["0"], "1": rng.lognormal(math.log(0.011), 0.2, 800)}, alone, TailRule(2.0))
    assert both.fastest_hi > 1 and not both.below_one


def burst_rows(cell: str, mode: str, latencies: dict[int, np.ndarray], patterns: dict[int, str]) -> list[dict]:
    rows = []
    for replica, lat in latencies.items():
        t = 1000.0
        for i, x in enumerate(lat):
            rows.append(
                dict(
                    cell_id=cell,
                    mode=mode,
                    replica=replica,
                    role="victim" if replica == 0 else "neighbour",
                    pattern=patterns[replica],
                    repeat=1,
                    arrival=t,
                    start=t,
                    end=t + float(x),
                    units=1,
                    i=i,
                )
            )
            t += float(x) + 0.1
    return rows


def test_a_folder_is_decided_per_mode_with_every_user_and_no_aggressor():
    from sharebench.analysis.latency import burst_frame
    from sharebench.analysis.tail import decisions

    rng = np.random.default_rng(6)
    lat = lambda s, n=500: rng.lognormal(math.log(s), 0.2, n)  # noqa: E731
    user = "interactive:burst=1,think=0.1"
    rows = burst_rows("exclusive_p1_r1", "exclusive", {0: lat(0.01, 2000)}, {0: user})
    # mps:3: replica 0 within, replica 2 about 5x: the cell is above although replica 0 meets the target
    rows += burst_rows(
        "mps-3_p1_r1", "mps:3", {0: lat(0.011), 1: lat(0.012), 2: lat(0.05)}, {0: user, 1: user, 2: user}
    )
    # timeslice:2 beside a batch job: the batch neighbour is no user, so its slow bursts do not count
    rows += burst_rows("timeslice-2_p1_r1", "timeslice:2", {0: lat(0.012), 1: lat(0.5, 50)}, {0: user, 1: "batch"})
    got = decisions(burst_frame(rows), TailRule(2.0))
    assert set(got) == {("mps:3", user, user), ("timeslice:2", user, "batch")}
    mps = got[("mps:3", user, user)]
    assert (mps.verdict, mps.users, mps.worst) == ("above", 3, "2")
    assert mps.per_user["0"][2] < 2
    beside = got[("timeslice:2", user, "batch")]
    assert (beside.verdict, beside.users) == ("within", 1)


def test_a_user_without_bounds_never_makes_the_cell_below_one_nor_hides_another_users_bound():
    """Regression (issue 42, the cells' watcher): a slow user with fewer samples than its interval needs has no
    bounds; the worst upper bound is then unknown (not the fast users' < 1), and another user's lower bound
    still counts whichever order the users come in. The fast user, at half its time alone beyond doubt, makes
    the cell below 1 by its own bound (sharing does not make a user faster: the baseline is off)."""
    rule = TailRule(2.0)
    rng = np.random.default_rng(7)
    alone = alone_bounds(0.010 + rng.exponential(0.002, 2000), rule)
    fast, slow = 0.5 * (0.010 + rng.exponential(0.002, 400)), 8 * (0.010 + rng.exponential(0.002, 30))
    for users in ({"0": fast, "1": slow}, {"1": slow, "0": fast}):
        d = decide(users, alone, rule)
        assert math.isnan(d.worst_hi) and d.verdict == "undecided"
        assert d.below_one and d.fastest_hi < 1
    above = 8 * (0.010 + rng.exponential(0.002, 400))
    for users in ({"0": slow, "1": above}, {"1": above, "0": slow}):
        assert decide(users, alone, rule).worst_lo > 2
