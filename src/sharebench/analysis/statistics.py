"""Statistics of repeated measurements: medians with bootstrap confidence intervals, ratios of
two samples (the losses), the coefficient of variation.

Every median comes with a 95% bootstrap CI (``scipy.stats.bootstrap``, percentile method, fixed
seed) when there are at least two samples. NaN and infinite samples are left out.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from scipy import stats

N_RESAMPLES = 4999
SEED = 12345


def finite(x) -> np.ndarray:
    a = np.asarray(list(x), dtype=float)
    return a[np.isfinite(a)]


def median_ci(samples, scale: float = 1.0) -> tuple[float, float, float]:
    """Median and 95% bootstrap CI of the median (NaN CI with fewer than 2 samples)."""
    x = finite(samples)
    if x.size == 0:
        return (math.nan, math.nan, math.nan)
    med = float(np.median(x)) * scale
    if x.size < 2:
        return (med, math.nan, math.nan)
    if np.all(x == x[0]):
        return (med, med, med)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((x,), np.median, confidence_level=0.95, n_resamples=N_RESAMPLES,
                              method="percentile", random_state=np.random.default_rng(SEED))
    return (med, float(res.confidence_interval.low) * scale, float(res.confidence_interval.high) * scale)


def ratio_loss_ci(num, den, factor: float = 1.0) -> tuple[float, float, float]:
    """Loss % = (median(num) - factor*median(den)) / (factor*median(den)) x 100 and its CI.

    Two independent samples, resampled separately (unpaired bootstrap).
    """
    a, b = finite(num), finite(den)
    if a.size == 0 or b.size == 0:
        return (math.nan, math.nan, math.nan)

    def stat(x, y, axis=-1):
        ref = factor * np.median(y, axis=axis)
        return (np.median(x, axis=axis) - ref) / ref * 100.0

    point = float(stat(a, b))
    if a.size < 2 or b.size < 2:
        return (point, math.nan, math.nan)
    if np.all(a == a[0]) and np.all(b == b[0]):
        return (point, point, point)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.bootstrap((a, b), stat, paired=False, vectorized=True, confidence_level=0.95,
                              n_resamples=N_RESAMPLES, method="percentile",
                              random_state=np.random.default_rng(SEED))
    return (point, float(res.confidence_interval.low), float(res.confidence_interval.high))


def cv_pct(samples) -> float:
    """Coefficient of variation in % (sample standard deviation / mean); NaN below 2 samples."""
    x = finite(samples)
    if x.size < 2 or np.mean(x) == 0:
        return math.nan
    return float(np.std(x, ddof=1) / np.mean(x) * 100.0)
