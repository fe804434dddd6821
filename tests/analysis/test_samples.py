"""How many samples a patterned cell takes (sharebench.analysis.samples, issue 42): the fewest per user from
the percentile, the confidence and the users (against the binomial, searched independently), the cap, a
service's window of seconds, a warm-up's few, and the dry run's words; and the seconds analysis.cost predicts
from them."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from sharebench.analysis.cost import cell_range, cell_seconds, patterned_cell, slowest_of
from sharebench.analysis.samples import ALONE_LOOKS, DEFAULT_LOOKS, WARMUP_BURSTS, cell_samples, cell_users
from sharebench.analysis.tail import TailRule
from sharebench.patterns import parse_pattern
from sharebench.workloads import Workload

USER = "interactive:burst=1,think=0.05"


def brute_first_look(users: int, confidence: float = 0.95, q: float = 0.95) -> int:
    """The fewest samples whose largest one bounds a user's p95 from above with the error a user gets at look 0
    (half of 1 - confidence to the users, split evenly, halved for the first of the doubling looks, one
    side of a two-sided interval), searched on scipy's binomial."""
    tail = (1 - confidence) / 2 / users / 2 / 2
    n = 1
    while stats.binom.cdf(n - 1, n, q) < 1 - tail:
        n += 1
    return n


@pytest.mark.parametrize("users", [1, 2, 3, 4, 8, 16, 64])
def test_the_fewest_samples_per_user_follow_from_the_percentile_the_confidence_and_the_users(users):
    w = Workload(pattern=USER)
    s = cell_samples(w, users)
    assert s.first_look == brute_first_look(users) and s.users == users
    looks = ALONE_LOOKS if users == 1 else DEFAULT_LOOKS
    assert s.cap == s.first_look * 2 ** (looks - 1) and s.expected == s.first_look and s.watched and s.decidable
    assert s.alone == (users == 1) and s.window_s is None


def test_the_numbers_the_docs_quote():
    w = Workload(pattern=USER)
    assert [(cell_samples(w, n).first_look, cell_samples(w, n).cap) for n in (1, 2, 8, 64)] == [
        (99, 792),
        (113, 452),
        (140, 560),
        (181, 724),
    ]
    assert cell_samples(w, 2, TailRule(2.0, confidence=0.99)).first_look == brute_first_look(2, 0.99)


def test_a_neighbour_of_another_pattern_is_not_a_user():
    beside = Workload(pattern=USER, neighbours="batch")
    assert cell_users(beside, 4) == (0,) and cell_samples(beside, 4).users == 1
    assert cell_users(Workload(pattern=USER), 3) == (0, 1, 2)
    assert not cell_samples(Workload(pattern="batch", neighbours=USER), 2).watched  # a saturated victim


def test_bursts_is_a_cap_and_one_below_the_minimum_says_so():
    capped = cell_samples(Workload(pattern=USER, bursts=50), 2)
    assert (capped.cap, capped.expected, capped.decidable) == (50, 50, False)
    assert "the cap is below the 113 a verdict needs: undecided" in capped.describe()
    assert cell_samples(Workload(pattern=USER, bursts=1000), 2).cap == 1000


def test_a_service_lasts_a_duration_of_arrivals_never_under_its_floor():
    fast = cell_samples(Workload(pattern="serve:rate=200"), 2)  # 452 requests at 200/s: 2.26 s, so the 5 s floor
    assert (fast.window_s, fast.min_s, fast.cap, fast.expected) == (5.0, 5.0, 1000, 1000)
    slow = cell_samples(Workload(pattern="serve:rate=10"), 2)  # 452 at 10/s: 45.2 s; its first look 11.3 s
    assert slow.window_s == pytest.approx(45.2) and slow.cap == 452 and slow.expected == 113
    assert "a window of at most 45.2 s of arrivals, at least 5 s" in slow.describe()
    unresolved = cell_samples(Workload(pattern="serve:load=0.3"), 2)  # no rate before the capacity: a count
    assert unresolved.window_s is None and unresolved.cap == 452


def test_a_warm_up_runs_a_few_bursts_unwatched():
    s = cell_samples(Workload(pattern="serve:rate=200"), 2, warmup=True)
    assert (s.cap, s.window_s, s.watched) == (WARMUP_BURSTS, None, False)
    assert cell_samples(Workload(pattern=USER, bursts=5), 1, warmup=True).cap == 5


def test_the_dry_run_words():
    assert cell_samples(Workload(pattern=USER), 2).describe() == ">= 113 samples per user (2 users), at most 452"
    assert cell_samples(Workload(pattern=USER), 1).describe() == (
        ">= 99 samples (alone), at most 792; stops once its p95 interval's hi/lo <= 1.15"
    )


def test_a_cell_is_predicted_at_the_look_that_decides_it_and_waits_for_its_slowest_user():
    w = Workload(pattern=USER, neighbours="batch")  # one user: no wait for another
    clear = TailRule(4.0)  # beside batch (always busy) the user is slowed 2x, clearly within 4x: the first look
    one = patterned_cell(w, 2, unit_s=0.1, rule=clear)
    assert one.cell_s == pytest.approx(cell_seconds((parse_pattern(USER), parse_pattern("batch")), 2, 99, 0.1).cell_s)
    # four users slowed 1.79x against 2x (a tracker's spread, 0.1): within at their cap (504); at 1.79 / 1.15 at
    # the first look (126), at 1.79 x 1.15 undecided to the cap: the mean, 378 samples a user
    users = Workload(pattern=USER)
    four = patterned_cell(users, 4, unit_s=0.01)
    plain = cell_seconds((parse_pattern(USER), parse_pattern(USER)), 4, 378, 0.01).cell_s
    assert four.cell_s == pytest.approx(plain + 0.05 * math.sqrt(378) * slowest_of(4))
    assert slowest_of(1) == 0 and slowest_of(2) == pytest.approx(0.5642, abs=0.03)  # E[max of 2] = 1/sqrt(pi), Blom
    expected, most = cell_range(users, 2, 0.01)
    assert most > 3.5 * expected  # at its cap: four times the samples
