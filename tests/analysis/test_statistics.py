"""Intervals that respect their quantity (sharebench.analysis.statistics, .sequential, .format): a time,
a throughput or a rate never gets an interval below zero, a ratio's interval stays positive, and no
interval is ever inverted, whatever the samples; printed intervals are never inverted either."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sharebench.analysis import analyse, fmt_ci, fmt_interval, fmt_num, fmt_sec, known_interval, significant
from sharebench.analysis.sequential import look_confidence, positive_mean_interval, should_continue
from sharebench.analysis.statistics import (
    CONFIDENCE,
    MIN_CI_REPEATS,
    agreement,
    at_least_repeats,
    independent_repeats,
    mean_ci,
    positive_mean_ci,
    quantile_ci,
    quantile_ci_from_summary,
    quantile_ranks,
    ratio_ci,
    ratio_loss_ci,
)
from support.paths import ROOT

# timings as they come: from microseconds to hours, any scatter, a few to tens of repeats
times = st.lists(st.floats(min_value=1e-6, max_value=1e5, allow_nan=False), min_size=0, max_size=30)
signed = st.lists(st.floats(min_value=-1e5, max_value=1e5, allow_nan=False), min_size=0, max_size=30)


def no_width(x: list[float]) -> bool:
    """Whether the Student-t interval of ``x`` collapses to its mean in floating point (denormal spreads)."""
    a = np.asarray(x, float)
    half = float(stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size))
    m = float(a.mean())
    return m - half == m + half or m * math.exp(-half / m if m else 0) == m * math.exp(half / m if m else 0)


def ordered(lo: float, mid: float, hi: float, rel: float = 1e-9) -> bool:
    slack = rel * max(abs(lo), abs(mid), abs(hi))
    return lo <= mid + slack and mid <= hi + slack


@settings(max_examples=300, deadline=None)
@given(times, st.floats(min_value=1e-3, max_value=1e3))
def test_a_positive_quantitys_interval_is_positive_and_ordered(x, scale):
    mean, lo, hi = positive_mean_ci(x, scale)
    if independent_repeats(x) < 3 or (math.isnan(lo) and no_width(x)):  # rule 2: a zero width is no interval
        assert math.isnan(lo) and math.isnan(hi)
        return
    assert mean > 0 and 0 < lo <= hi and ordered(lo, mean, hi)
    # the interval of the mean of x · scale is scale times that of x
    m1, lo1, hi1 = positive_mean_ci(x)
    assert np.allclose([mean, lo, hi], [m1 * scale, lo1 * scale, hi1 * scale], rtol=1e-9)


@settings(max_examples=300, deadline=None)
@given(times, st.floats(min_value=1.0, max_value=1e12))
def test_a_throughput_from_a_time_interval_is_ordered(spans, work):
    # as sharebench.analysis.tables.throughput_row: work / mean span, its ends swapped
    s, s_lo, s_hi = positive_mean_ci(spans)
    if not known_interval(s_lo, s_hi):
        return
    thr, lo, hi = work / s, work / s_hi, work / s_lo
    assert 0 < lo <= hi and ordered(lo, thr, hi)


@settings(max_examples=300, deadline=None)
@given(times, times, st.floats(min_value=1e-3, max_value=1e3))
def test_a_ratios_interval_is_positive_and_ordered(a, b, factor):
    r, lo, hi = ratio_ci(a, b, factor)
    if not known_interval(lo, hi):
        return
    assert 0 < lo <= hi and ordered(lo, r, hi)
    loss, l_lo, l_hi = ratio_loss_ci(a, b, factor)
    assert -100 < l_lo <= l_hi and ordered(l_lo, loss, l_hi, 1e-6)


@settings(max_examples=300, deadline=None)
@given(signed)
def test_a_signed_mean_keeps_its_symmetric_interval(x):
    mean, lo, hi = mean_ci(x)
    if independent_repeats(x) < 3 or (math.isnan(lo) and no_width(x)):
        assert math.isnan(lo)
        return
    assert lo <= hi and ordered(lo, mean, hi)
    assert math.isclose(mean - lo, hi - mean, rel_tol=1e-6, abs_tol=1e-6)


@settings(max_examples=200, deadline=None)
@given(times, st.integers(min_value=3, max_value=20))
def test_the_adaptive_repeats_mean_track_time_is_never_below_zero(x, max_repeats):
    iv = positive_mean_interval(x, look_confidence(3, max_repeats))
    if len(x) >= 2:
        assert 0 < iv.low <= iv.high and ordered(iv.low, iv.estimate, iv.high)
    d = should_continue(x, precision=5, relative=True, max_repeats=max_repeats)
    assert not d.interval.known or 0 < d.interval.low <= d.interval.high


def test_the_reported_examples():
    # the shapes of `make run` and `--budget 2m` that printed T_1 [-0.024, 15.954], throughput
    # 1,255.48 [626.79, -4.11e+05] and a mean track time 2.455 s [-1.009, 5.919]: three scattered timings
    scattered = [0.9, 1.2, 21.8]
    t_mean, t_lo, t_hi = mean_ci(scattered)
    assert t_lo < 0  # what a symmetric t interval gives a time
    mean, lo, hi = positive_mean_ci(scattered)
    assert mean == t_mean and 0 < lo < mean < hi
    assert fmt_ci(1e4 / hi, 1e4 / lo, fmt_num).startswith("[") and 1e4 / hi < 1e4 / lo
    iv = should_continue([0.5, 4.4, 2.465], precision=5, relative=True).interval
    assert iv.low > 0 and iv.estimate == np.mean([0.5, 4.4, 2.465])


def test_coverage_of_a_positive_mean_on_skewed_timings():
    # lognormal timings, 20% spread, 3 to 10 repeats: the log-scale interval holds the true mean at ~95%
    rng = np.random.default_rng(7)
    sigma, truth = 0.2, 2.0
    mu = math.log(truth) - sigma * sigma / 2
    for n in (3, 5, 10):
        hits = 0
        for _ in range(2000):
            _, lo, hi = positive_mean_ci(rng.lognormal(mu, sigma, n))
            hits += lo <= truth <= hi
        assert hits / 2000 >= CONFIDENCE - 0.02, (n, hits / 2000)


@given(
    st.one_of(st.floats(allow_nan=True), st.none(), st.text(max_size=3)),
    st.one_of(st.floats(allow_nan=True), st.none(), st.text(max_size=3)),
)
def test_no_printed_interval_is_inverted(lo, hi):
    for text in (
        fmt_ci(lo, hi, fmt_sec),
        fmt_interval(lo, hi) if isinstance(lo, float) and isinstance(hi, float) else "",
    ):
        if text.strip().startswith("["):
            a, b = (float(v.replace(",", "")) for v in text.strip()[1:-1].split(", "))
            assert a <= b
    if isinstance(lo, float) and isinstance(hi, float) and lo > hi:
        assert fmt_ci(lo, hi, fmt_sec) == "" and fmt_interval(lo, hi) == " (no interval)"
        assert significant(lo, hi) == ""


POSITIVE_PREFIXES = ("T1", "TN", "full", "mig", "slice", "throughput", "emulated")  # times and rates


@pytest.mark.parametrize("folder", ["results/cpu-default", "results/cpu-example", "results/h200/cuda"])
def test_no_table_of_a_committed_folder_holds_an_impossible_interval(folder):
    """Every ``X_ci_low``/``X_ci_high`` pair of every table is ordered, and a time's or a rate's is above zero
    (``make run``'s folder printed throughput 1,255.48 [626.79, -4.11e+05] and T_1 [-0.024, 15.954])."""
    tables = analyse(ROOT / folder)
    checked = 0
    for name, t in tables.to_dict().items():
        for low in [c for c in t.columns if c.endswith("_ci_low")]:
            high = low.replace("_ci_low", "_ci_high")
            lo, hi = t[low].astype(float).to_numpy(), t[high].astype(float).to_numpy()
            both = np.isfinite(lo) & np.isfinite(hi)
            assert (lo[both] <= hi[both]).all(), (name, low)
            if low.startswith(POSITIVE_PREFIXES):
                assert (lo[both] > 0).all(), (name, low)
            checked += int(both.sum())
    assert checked > 10


# --- the interval rule: no interval narrower than its independent repeats allow ---------------------------

rates = st.lists(st.floats(min_value=1e-3, max_value=1e3, allow_nan=False), min_size=0, max_size=12)


def t_half(x: list[float]) -> float:
    a = np.asarray(x, float)
    return float(stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1) / math.sqrt(a.size))


@settings(max_examples=300, deadline=None)
@given(signed, st.floats(-1e5, 1e5), st.one_of(st.just(math.nan), st.floats(0, 1e4)))
def test_no_interval_is_narrower_than_the_repeats_allow(per_repeat, estimate, half):
    """A bootstrap or a model's interval (``estimate ± half``) over these repeats, after the rule: none below
    3 independent repeats; otherwise it holds both the computed interval and the Student-t one of the
    per-repeat values about the estimate."""
    lo, hi = at_least_repeats(estimate, estimate - half, estimate + half, per_repeat)
    if independent_repeats(per_repeat) < MIN_CI_REPEATS:
        assert math.isnan(lo) and math.isnan(hi)
        return
    floor = t_half(per_repeat)
    if math.isnan(lo):  # only where the interval would have no width (rule 2: not an interval)
        assert estimate + floor == estimate - floor and not estimate + half > estimate - half
        return
    slack = 1e-9 * max(1.0, abs(estimate), floor)
    assert lo <= estimate - floor + slack and hi >= estimate + floor - slack
    if math.isfinite(half):
        assert lo <= estimate - half + slack and hi >= estimate + half - slack
    assert hi > lo


@settings(max_examples=300, deadline=None)
@given(rates, st.floats(1e-3, 1e3))
def test_a_positive_figures_floor_is_on_the_log_scale(per_repeat, estimate):
    lo, hi = at_least_repeats(estimate, math.nan, math.nan, per_repeat, positive=True)
    if independent_repeats(per_repeat) < MIN_CI_REPEATS:
        assert math.isnan(lo)
        return
    _, m_lo, m_hi = positive_mean_ci(per_repeat)  # the same relative width about the mean
    m = float(np.mean(per_repeat))
    assert lo / estimate == pytest.approx(m_lo / m, rel=1e-9) and hi / estimate == pytest.approx(m_hi / m, rel=1e-9)
    assert 0 < lo < estimate < hi


@settings(max_examples=300, deadline=None)
@given(times, times)
def test_no_interval_of_repeats_has_zero_width(a, b):
    for lo, hi in (mean_ci(a)[1:], positive_mean_ci(a)[1:], ratio_ci(a, b)[1:]):
        assert not (math.isfinite(lo) and math.isfinite(hi)) or hi > lo


@pytest.mark.parametrize("n", [1, 2, 3, 6, 30])
def test_a_value_reused_for_every_repeat_is_one_repeat(n):
    """One probe's median copied into every repeat (the switch of a split) carries no interval; a baseline
    reused for every repeat gives a ratio none either."""
    reused = [0.151] * n
    assert independent_repeats(reused) == min(n, 1)
    assert math.isnan(mean_ci(reused)[1]) and math.isnan(positive_mean_ci(reused)[1])
    assert math.isnan(ratio_ci([1.0, 1.1, 0.9, 1.05], reused)[1])


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 400), st.sampled_from([0.05, 0.25, 0.5, 0.75, 0.95]))
def test_order_statistic_ranks_against_the_binomial(n, q):
    """The ranks from scipy's binomial pmf summed independently: each tail outside them holds at most 2.5%
    (so the interval covers at least 95%), moving either rank inward breaks that, and none is offered when
    even the extreme ranks leave a tail above 2.5% (too few samples for this quantile)."""
    ranks = quantile_ranks(n, q)
    pmf = stats.binom.pmf(np.arange(n + 1), n, q)
    tail = (1 - CONFIDENCE) / 2
    if ranks is None:
        assert pmf[0] > tail or pmf[n] > tail
        return
    lo, hi = ranks  # [x_(lo), x_(hi)] covers when lo <= B <= hi - 1, B the samples below the quantile
    assert 1 <= lo < hi <= n
    assert pmf[:lo].sum() <= tail + 1e-12 and pmf[hi:].sum() <= tail + 1e-12
    assert pmf[: lo + 1].sum() > tail and pmf[hi - 1 :].sum() > tail
    assert float(pmf[lo:hi].sum()) >= CONFIDENCE - 1e-12


def test_the_median_interval_of_one_run_covers():
    rng = np.random.default_rng(3)
    hits = 0
    for _ in range(2000):
        _, lo, hi = quantile_ci(rng.exponential(1.0, 40), 0.5)
        hits += lo <= math.log(2) <= hi
    assert hits / 2000 >= CONFIDENCE - 0.01


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.01, 10.0), min_size=1, max_size=200))
def test_an_interval_from_a_recorded_summary_is_never_narrower(x):
    """The probe keeps n and p5..p95, min, max of its switches: the median's interval bounded from them holds
    the interval of the samples themselves."""
    a = np.asarray(x)
    summary = {"n": a.size, "min": a.min(), "max": a.max()}
    summary |= {f"p{k}": float(np.percentile(a, k)) for k in (5, 25, 50, 75, 95)}
    est, lo, hi = quantile_ci_from_summary(summary)
    s_est, s_lo, s_hi = quantile_ci(x, 0.5)
    assert est == pytest.approx(s_est)
    if math.isnan(s_lo):
        assert math.isnan(lo)
    elif math.isfinite(lo):
        assert lo <= s_lo and hi >= s_hi


@given(st.lists(st.tuples(st.floats(-10, 10), st.floats(0, 5)), max_size=6))
def test_disjoint_intervals_are_never_agreement(pairs):
    intervals = [(c - w, c + w) for c, w in pairs]
    verdict = agreement(intervals)
    if len(intervals) < 2:
        assert verdict == "no interval"
        return
    apart = any(a[1] < b[0] or b[1] < a[0] for a in intervals for b in intervals)
    assert verdict == ("disjoint" if apart else "overlap")
