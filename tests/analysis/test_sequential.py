"""The adaptive-repeats stopping rule (sharebench.analysis.sequential): its decisions, and the coverage of
its intervals under data-dependent stopping, by simulation on normal and lognormal noise."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sharebench.analysis import ratio_loss_ci
from sharebench.analysis.sequential import (
    GAIN_THRESHOLD_LOSS_PCT,
    Decision,
    look_confidence,
    loss_interval,
    mean_interval,
    should_continue,
)

CELLS = 1000  # synthetic cells per scenario
CLAIMED = 0.95

Draw = Callable[[np.random.Generator], float]


def run_cell(rng: np.random.Generator, draw: Draw, decide: Callable[[list[float]], Decision]) -> Decision:
    """One synthetic cell: draw repeats until the rule stops."""
    samples: list[float] = []
    while True:
        samples.append(draw(rng))
        d = decide(samples)
        if d.stop:
            return d


def coverage(seed: int, draw: Draw, truth: float, **rule) -> tuple[float, np.ndarray]:
    rng = np.random.default_rng(seed)
    hits, stops = 0, []
    for _ in range(CELLS):
        d = run_cell(rng, draw, lambda s: should_continue(s, **rule))
        hits += d.interval.contains(truth)
        stops.append(d.repeats)
    return hits / CELLS, np.bincount(stops)


def lognormal(mean: float, sigma: float) -> Draw:
    """Skewed noise with the given mean: exp(N(mu, sigma)) with mu = log(mean) - sigma²/2."""
    mu = math.log(mean) - sigma * sigma / 2
    return lambda rng: float(rng.lognormal(mu, sigma))


def test_coverage_normal_noise_near_a_threshold():
    # true value 0 with a threshold at 0.5: whether the interval happens to clear it decides the stop
    cov, stops = coverage(1, lambda rng: float(rng.normal(0.0, 1.0)), 0.0, precision=1.5, thresholds=(0.5,))
    assert cov >= CLAIMED, cov
    assert stops[3:9].sum() > 50  # the stopping really is data-dependent: many cells stop before max


def test_coverage_normal_noise_stopping_on_precision_alone():
    cov, stops = coverage(2, lambda rng: float(rng.normal(0.0, 1.0)), 0.0, precision=1.0, max_repeats=20)
    assert cov >= CLAIMED, cov
    assert stops[3:20].sum() > 500


def test_coverage_skewed_noise_relative_precision():
    # lognormal timings with a 40% spread, judged on the precision of the mean relative to itself (T_1)
    cov, stops = coverage(3, lognormal(2.0, 0.4), 2.0, precision=30, relative=True, max_repeats=20)
    assert cov >= CLAIMED, cov
    assert stops[3:20].sum() > 300


@pytest.mark.parametrize(
    "sigma, true_loss, precision, thresholds, max_repeats, early",
    [
        (0.01, 0.0, 1.5, (GAIN_THRESHOLD_LOSS_PCT,), 10, 300),  # timing-like 1% spread, near the gain threshold
        (0.3, 10.0, 30.0, (), 20, 100),  # strongly skewed 30% spread
    ],
)
def test_coverage_of_a_loss_under_lognormal_noise_on_both_sides(
    sigma, true_loss, precision, thresholds, max_repeats, early
):
    # T_N of 2 replicas against 2·T_1, both lognormal; the loss is the ratio of their means
    rng = np.random.default_rng(4)
    t1, tn = lognormal(1.0, sigma), lognormal(2 * (1 + true_loss / 100), sigma)
    hits, stops = 0, []
    for _ in range(CELLS):
        a: list[float] = []
        b: list[float] = []
        while True:
            a.append(tn(rng))
            b.append(t1(rng))
            d = should_continue(
                a, baseline=b, factor=2, precision=precision, thresholds=thresholds, max_repeats=max_repeats
            )
            if d.stop:
                break
        hits += d.interval.contains(true_loss)
        stops.append(d.repeats)
    assert hits / CELLS >= CLAIMED, hits / CELLS
    assert np.bincount(stops)[3:max_repeats].sum() > early


def test_the_simulation_catches_intervals_that_ignore_the_stopping():
    """Plain 95% intervals with the same stopping rule cover less than they claim: the coverage check can fail."""
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(CELLS):
        samples: list[float] = []
        while True:
            samples.append(float(rng.normal(0.0, 1.0)))
            naive = mean_interval(samples, CLAIMED)
            if len(samples) >= 3 and (naive.half_width <= 1.0 or len(samples) >= 20):
                break
        hits += naive.contains(0.0)
    assert hits / CELLS < CLAIMED - 0.01


def test_look_confidence_is_bonferroni_over_the_looks():
    assert look_confidence(3, 3) == pytest.approx(0.95)
    assert look_confidence(3, 10) == pytest.approx(1 - 0.05 / 8)
    assert look_confidence(3, 12) > look_confidence(3, 10)  # more looks: each one wider


def test_the_loss_interval_at_95_percent_is_the_tables_interval():
    tn, t1 = [21.0, 24.0, 23.0], [10.0, 11.0, 12.0]
    iv = loss_interval(tn, t1, factor=2, confidence=0.95)
    assert (iv.estimate, iv.low, iv.high) == pytest.approx(ratio_loss_ci(tn, t1, factor=2))


def test_decisions_and_their_reasons():
    t3 = stats.t.ppf(1 - 0.05 / 8 / 2, 2)  # 3 repeats, one of the 8 looks of 3..10 at 95% overall
    d = should_continue([1.0, 1.1], precision=1)
    assert (d.stop, d.reason) == (False, "2 of at least 3 repeats")
    d = should_continue([10.0, 10.01, 9.99], precision=1, thresholds=(5.0,))
    assert d.stop and d.reason == f"settled: ±{t3 * 0.01 / math.sqrt(3):.3g} within ±1, clear of 5"
    d = should_continue([10.0, 10.01, 9.99], precision=1, thresholds=(10.0,))
    assert not d.stop and d.reason == "interval [9.93, 10.1] straddles 10"
    d = should_continue([0.0, 5.0, 10.0], precision=1, max_repeats=3)
    assert (
        d.stop
        and d.reason
        == f"max repeats 3 reached (interval ±{stats.t.ppf(0.975, 2) * 5 / math.sqrt(3):.3g} wider than ±1)"
    )
    d = should_continue([1.0, math.nan, math.nan], precision=1)
    assert d.stop and d.reason == "failing: 2 of 3 repeats failed"
    # a relative precision is that of a positive quantity: its interval 2·exp(±h) on the log scale,
    # half as wide as 2·(exp(h) - exp(-h)), i.e. sinh(h) of the mean 2.0
    rel = 100 * math.sinh(t3 * 0.02 / math.sqrt(3) / 2)
    d = should_continue([2.0, 2.02, 1.98], precision=10, relative=True)
    assert d.stop and d.reason == f"settled: ±{rel:.3g}% of the estimate within ±10% of the estimate"
    d = should_continue([2.0, 2.02, 1.98], precision=5, relative=True)
    assert not d.stop and d.reason == f"interval ±{rel:.3g}% of the estimate wider than ±5% of the estimate"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.5, 2.0), min_size=1, max_size=12),
    st.integers(2, 5),
    st.integers(0, 6),
    st.floats(0.01, 10),
)
def test_never_stops_before_the_minimum_and_always_at_the_maximum(samples, lo, extra, precision):
    hi = lo + extra
    d = should_continue(samples, precision=precision, min_repeats=lo, max_repeats=hi)
    if len(samples) < lo:
        assert not d.stop
    elif len(samples) >= hi:
        assert d.stop
    assert d.repeats == len(samples)
    if d.interval.known:
        assert d.interval.low <= d.interval.estimate <= d.interval.high
        assert d.interval.confidence == pytest.approx(look_confidence(lo, hi))
