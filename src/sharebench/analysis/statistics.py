"""Statistics of repeated measurements: means with confidence intervals, ratios of two samples (the
losses and gains), the coefficient of variation.

As pyperf does it, a figure is the mean of the measured repeats. A signed quantity (a loss in
points, an error) gets the Student-t interval of that mean (``scipy.stats.t``, :func:`mean_ci`),
which has the stated coverage when the repeats scatter about normally. A positive quantity (a time,
a throughput, a rate) gets its interval on the log scale (:func:`positive_mean_ci`: the delta method,
``mean · exp(±t · se / mean)``), which never reaches zero and turns into the interval of a reciprocal
(a throughput from a time) by swapping its ends; three scattered timings no longer give a time
interval below zero nor a throughput interval whose low end exceeds its high end. A ratio of two
means (a loss against N·T_1, a gain against exclusive) gets the delta-method interval of its
logarithm with Welch–Satterthwaite degrees of freedom. Below :data:`MIN_CI_REPEATS` measured repeats on either side there is no interval at all
(NaN): two points cannot give one with 95% coverage, and no "≠ 0?" may be claimed from them.
NaN and infinite samples are left out.

**The interval rule** (docs/readme/sweep.md, "The interval rule"): no interval is narrower than what the
number of independent repeats it rests on allows.

1. Below :data:`MIN_CI_REPEATS` independent repeats there is no interval (NaN): a one-repeat cell carries
   none, whatever its samples.
2. Values that do not vary across repeats (one measurement reused for every repeat: a probe's median
   copied into each repeat's split) are one repeat, not n (:func:`independent_repeats`): a zero-width
   interval is not an interval.
3. An interval computed another way over repeats (a hierarchical bootstrap, a model's parts carried
   through) is widened to at least the Student-t interval of the per-repeat values of the same figure
   (:func:`at_least_repeats`: t(0.975, n - 1) · s / √n about its estimate, on the log scale for a
   positive figure): resampling within two or three repeats cannot know more than those repeats.
4. The one exception: a percentile (the median included) of one run's independent samples gets its
   distribution-free order-statistic interval (:func:`quantile_ci`, binomial ranks), valid without
   repeats; where a run kept only a summary of its samples, :func:`quantile_ci_from_summary` bounds that
   interval by the recorded percentiles that enclose its ranks (never narrower).

Two intervals of the same figure measured on two machines that do not overlap (:func:`agreement`) are a
spread between the machines, never agreement.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
MIN_CI_REPEATS = 3


def finite(x: Iterable[float]) -> np.ndarray:
    """The finite values of ``x`` as a float array (NaN and ±inf left out)."""
    a = np.asarray(list(x), dtype=float)
    return a[np.isfinite(a)]


def independent_repeats(x: Iterable[float]) -> int:
    """How many independent repeats the finite values of ``x`` count for: their number, but 1 when more than
    one and all equal (one value reused for every repeat, or repeats the measurement cannot tell apart)."""
    a = finite(x)
    return 1 if a.size > 1 and float(np.ptp(a)) == 0.0 else int(a.size)


def interval(estimate: float, low: float, high: float) -> tuple[float, float, float]:
    """``(estimate, low, high)``, or with a NaN interval where it has no width (rule 2: not an interval)."""
    return (estimate, low, high) if high > low else (estimate, math.nan, math.nan)


def t_quantile(n: int) -> float:
    """t(0.5 + CONFIDENCE / 2, n - 1): the Student-t quantile of a 95% interval of n repeats."""
    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1))


def mean_ci(samples: Iterable[float], scale: float = 1.0) -> tuple[float, float, float]:
    """Mean of a signed quantity and its 95% Student-t interval (NaN interval below
    :data:`MIN_CI_REPEATS` samples). A time, throughput or rate takes :func:`positive_mean_ci`."""
    x = finite(samples)
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(np.mean(x)) * scale
    if independent_repeats(x) < MIN_CI_REPEATS:
        return (mean, math.nan, math.nan)
    half = t_quantile(x.size) * float(np.std(x, ddof=1)) / math.sqrt(x.size) * scale
    return interval(mean, mean - half, mean + half)


def positive_mean_ci(samples: Iterable[float], scale: float = 1.0) -> tuple[float, float, float]:
    """Mean of a positive quantity and its 95% interval on the log scale (delta method, df n − 1).

    ``mean · exp(∓t · s / (√n · mean))``: always inside (0, ∞) and ordered. NaN interval below
    :data:`MIN_CI_REPEATS` samples or when the mean is not positive (not a positive quantity).
    """
    x = finite(samples)
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    m = float(np.mean(x))
    mean = m * scale
    if independent_repeats(x) < MIN_CI_REPEATS or m <= 0 or scale <= 0:
        return (mean, math.nan, math.nan)
    rel = float(np.std(x, ddof=1)) / (math.sqrt(x.size) * m)  # relative standard error of the mean
    half = t_quantile(x.size) * rel
    return interval(mean, mean * math.exp(-half), mean * math.exp(half))


def ratio_ci(num: Iterable[float], den: Iterable[float], factor: float = 1.0) -> tuple[float, float, float]:
    """mean(num) / (factor·mean(den)) and its 95% interval (delta method on the log, Welch df).

    Two independent samples; NaN interval when either has fewer than :data:`MIN_CI_REPEATS` independent
    repeats (:func:`independent_repeats`: a baseline reused for every repeat counts once).
    """
    a, b = finite(num), finite(den)
    if a.size == 0 or b.size == 0 or np.mean(b) == 0:
        return (math.nan, math.nan, math.nan)
    ma, mb = float(np.mean(a)), float(np.mean(b))
    r = ma / (factor * mb)
    if min(independent_repeats(a), independent_repeats(b)) < MIN_CI_REPEATS or ma <= 0 or mb <= 0:
        return (r, math.nan, math.nan)
    va = float(np.var(a, ddof=1)) / (a.size * ma * ma)  # relative variance of each mean
    vb = float(np.var(b, ddof=1)) / (b.size * mb * mb)
    df = (va + vb) ** 2 / (va * va / (a.size - 1) + vb * vb / (b.size - 1))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * math.sqrt(va + vb)
    return interval(r, r * math.exp(-half), r * math.exp(half))


def ratio_loss_ci(num: Iterable[float], den: Iterable[float], factor: float = 1.0) -> tuple[float, float, float]:
    """Loss % = (mean(num) − factor·mean(den)) / (factor·mean(den)) × 100 and its 95% interval."""
    r, lo, hi = ratio_ci(num, den, factor)
    return ((r - 1) * 100.0, (lo - 1) * 100.0, (hi - 1) * 100.0)


def cv_pct(samples: Iterable[float]) -> float:
    """Coefficient of variation in % (sample standard deviation / mean); NaN below 2 samples."""
    x = finite(samples)
    if x.size < 2 or np.mean(x) == 0:
        return math.nan
    return float(np.std(x, ddof=1) / np.mean(x) * 100.0)


# ------------------------------------------------------------------ the interval rule


def at_least_repeats(
    estimate: float, low: float, high: float, per_repeat: Iterable[float], *, positive: bool = False
) -> tuple[float, float]:
    """``(low, high)`` widened to at least the Student-t interval of ``per_repeat`` (the same figure, one
    value per independent repeat) about ``estimate``: rule 3 of the module's docstring. NaN below
    :data:`MIN_CI_REPEATS` independent repeats, whatever ``low`` and ``high`` were. ``positive``: the
    figure is a time, a rate or a ratio (the floor on the log scale, as :func:`positive_mean_ci`)."""
    x = finite(per_repeat)
    n = independent_repeats(x)
    if n < MIN_CI_REPEATS or not math.isfinite(estimate):
        return (math.nan, math.nan)
    sd = float(np.std(x, ddof=1))
    if positive:
        m = float(np.mean(x))
        if m <= 0 or estimate <= 0:
            return (math.nan, math.nan)
        rel = t_quantile(x.size) * sd / (math.sqrt(x.size) * m)
        lo, hi = estimate * math.exp(-rel), estimate * math.exp(rel)
    else:
        half = t_quantile(x.size) * sd / math.sqrt(x.size)
        lo, hi = estimate - half, estimate + half
    if math.isfinite(low) and math.isfinite(high):
        lo, hi = min(lo, low), max(hi, high)
    return interval(estimate, lo, hi)[1:]


def quantile_ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int] | None:
    """The 1-based ranks (l, u) of the equal-tailed distribution-free interval [x_(l), x_(u)] of the ``q``
    quantile of ``n`` independent samples, B ~ Binomial(n, q) the number of samples below the quantile:
    P(B < l) and P(B >= u) each at most (1 - ``confidence``) / 2, the ranks as close as that allows; None
    when even x_(1) or x_(n) leaves a tail above it (too few samples for this quantile)."""
    if n < 1 or not 0 < q < 1:
        return None
    alpha = 1 - confidence
    low = int(stats.binom.ppf(alpha / 2, n, q))  # P(B <= low - 1) < alpha / 2
    high = int(stats.binom.ppf(1 - alpha / 2, n, q)) + 1  # P(B >= high) <= alpha / 2
    return (low, high) if low >= 1 and high <= n else None


def quantile_ci(samples: Iterable[float], q: float, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The ``q`` quantile of one run's independent samples (numpy's, linear) and its distribution-free
    interval from order statistics (:func:`quantile_ranks`); NaN interval when too few samples."""
    x = np.sort(finite(samples))
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    est = float(np.quantile(x, q))
    ranks = quantile_ranks(int(x.size), q, confidence)
    if ranks is None:
        return (est, math.nan, math.nan)
    return (est, float(x[ranks[0] - 1]), float(x[ranks[1] - 1]))


def quantile_ci_from_summary(
    summary: Mapping[str, Any], q: float = 0.5, confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """The ``q`` quantile's interval bounded from a recorded summary of one run's samples (``n`` and
    percentiles ``p5``, ``p25``, ... and ``min``/``max``, as the time-slice probe keeps them): the
    order-statistic ranks of :func:`quantile_ranks` as quantile levels, each end the recorded percentile
    at or beyond its level (never narrower than the interval of the samples themselves). NaN interval
    when the summary lacks ``n`` or the percentiles that enclose the ranks."""
    levels = {0.0: "min", 1.0: "max"} | {
        int(k[1:]) / 100: k for k in summary if k.startswith("p") and k[1:].isdigit() and 0 < int(k[1:]) < 100
    }
    est = _num(summary.get(f"p{round(100 * q)}"))
    n = int(_num(summary.get("n"))) if math.isfinite(_num(summary.get("n"))) else 0
    ranks = quantile_ranks(n, q, confidence) if n > 1 else None
    if ranks is None:
        return (est, math.nan, math.nan)
    lo_level, hi_level = (ranks[0] - 1) / (n - 1), (ranks[1] - 1) / (n - 1)
    below = [lv for lv in levels if lv <= lo_level and math.isfinite(_num(summary.get(levels[lv])))]
    above = [lv for lv in levels if lv >= hi_level and math.isfinite(_num(summary.get(levels[lv])))]
    if not below or not above:
        return (est, math.nan, math.nan)
    return (est, _num(summary[levels[max(below)]]), _num(summary[levels[min(above)]]))


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def agreement(intervals: Sequence[tuple[float, float]]) -> str:
    """Whether intervals of the same figure (one per machine or run) agree: ``overlap`` when every pair
    overlaps, ``disjoint`` when some two do not (a spread, never agreement), ``no interval`` when fewer
    than two carry one."""
    known = [(lo, hi) for lo, hi in intervals if math.isfinite(lo) and math.isfinite(hi)]
    if len(known) < 2:
        return "no interval"
    return "disjoint" if max(lo for lo, _ in known) > min(hi for _, hi in known) else "overlap"
