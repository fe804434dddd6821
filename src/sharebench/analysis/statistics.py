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
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
MIN_CI_REPEATS = 3


def finite(x: Iterable[float]) -> np.ndarray:
    """The finite values of ``x`` as a float array (NaN and ±inf left out)."""
    a = np.asarray(list(x), dtype=float)
    return a[np.isfinite(a)]


def mean_ci(samples: Iterable[float], scale: float = 1.0) -> tuple[float, float, float]:
    """Mean of a signed quantity and its 95% Student-t interval (NaN interval below
    :data:`MIN_CI_REPEATS` samples). A time, throughput or rate takes :func:`positive_mean_ci`."""
    x = finite(samples)
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    mean = float(np.mean(x)) * scale
    if x.size < MIN_CI_REPEATS:
        return (mean, math.nan, math.nan)
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, x.size - 1) * np.std(x, ddof=1) / math.sqrt(x.size)) * scale
    return (mean, mean - half, mean + half)


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
    if x.size < MIN_CI_REPEATS or m <= 0 or scale <= 0:
        return (mean, math.nan, math.nan)
    rel = float(np.std(x, ddof=1)) / (math.sqrt(x.size) * m)  # relative standard error of the mean
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, x.size - 1)) * rel
    return (mean, mean * math.exp(-half), mean * math.exp(half))


def ratio_ci(num: Iterable[float], den: Iterable[float], factor: float = 1.0) -> tuple[float, float, float]:
    """mean(num) / (factor·mean(den)) and its 95% interval (delta method on the log, Welch df).

    Two independent samples; NaN interval when either has fewer than :data:`MIN_CI_REPEATS`.
    """
    a, b = finite(num), finite(den)
    if a.size == 0 or b.size == 0 or np.mean(b) == 0:
        return (math.nan, math.nan, math.nan)
    ma, mb = float(np.mean(a)), float(np.mean(b))
    r = ma / (factor * mb)
    if a.size < MIN_CI_REPEATS or b.size < MIN_CI_REPEATS or ma <= 0 or mb <= 0:
        return (r, math.nan, math.nan)
    va = float(np.var(a, ddof=1)) / (a.size * ma * ma)  # relative variance of each mean
    vb = float(np.var(b, ddof=1)) / (b.size * mb * mb)
    if va + vb == 0:
        return (r, r, r)
    df = (va + vb) ** 2 / (va * va / (a.size - 1) + vb * vb / (b.size - 1))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * math.sqrt(va + vb)
    return (r, r * math.exp(-half), r * math.exp(half))


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
