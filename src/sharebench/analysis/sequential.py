"""Adaptive repeats: repeat a cell only while its answer is not settled, with intervals that stay honest.

After ``min_repeats`` (3) a cell is repeated again only while its interval is wider than the wanted
precision (half-width, in the quantity's units: points of loss) or straddles a decision threshold
(the Answer's practical-gain threshold as a loss, a target slowdown, ...), and never beyond
``max_repeats``. Deciding when to stop from the data themselves makes an ordinary 95% interval too
narrow: looking after every repeat and stopping when it looks settled picks the lucky draws.

The correction here is Bonferroni over the looks: a cell is looked at after ``min_repeats``,
``min_repeats + 1``, ..., ``max_repeats`` repeats, at most ``K = max_repeats - min_repeats + 1``
times, and every look's interval is built at confidence ``1 - alpha / K`` (:func:`look_confidence`).
The event "the interval reported when the cell stopped misses the true value" lies inside the union
of the events "the interval of look k misses", whose probabilities add up to at most ``alpha``; so
the reported interval covers the true value with probability at least ``1 - alpha`` (95%) whatever
rule decides the stopping, exactly when each look's interval has its nominal coverage (Student-t
for a mean of normal repeats; for a ratio, the delta method on its logarithm with Welch degrees of
freedom, as ``sharebench.analysis.statistics`` does at 95%). tests/analysis/test_sequential.py
checks the coverage by simulation on normal and skewed (lognormal) noise. The price: at 3 repeats
and ``max_repeats`` 10 the per-look quantile is t(0.9969, 2) = 12.9 instead of t(0.975, 2) = 4.3.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scipy import special

from sharebench.analysis.statistics import CONFIDENCE

# the repeats' bounds and the default precision: defined in parse, where the CLI reads them without scipy
from sharebench.parse import DEFAULT_MAX_REPEATS as DEFAULT_MAX_REPEATS
from sharebench.parse import DEFAULT_PRECISION as DEFAULT_PRECISION
from sharebench.parse import MIN_REPEATS as MIN_REPEATS

# the Answer's practical gain of 2% as a loss of T_N against N·T_1: gain = 1 / (1 + loss / 100)
PRACTICAL_GAIN = 1.02
GAIN_THRESHOLD_LOSS_PCT = (1 / PRACTICAL_GAIN - 1) * 100  # -1.96 points


@dataclass(frozen=True)
class Interval:
    """An estimate and its interval at ``confidence`` (per look; the stated coverage is ``covers``)."""

    estimate: float
    low: float
    high: float
    confidence: float  # the confidence each look's interval is built at
    covers: float  # the coverage stated for the interval at the stopping time (0.95)

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    @property
    def known(self) -> bool:
        return math.isfinite(self.low) and math.isfinite(self.high)

    def straddles(self, threshold: float) -> bool:
        """True when ``threshold`` lies inside the closed interval (the decision is not settled)."""
        return self.known and self.low <= threshold <= self.high

    def contains(self, value: float) -> bool:
        return self.known and self.low <= value <= self.high


@dataclass(frozen=True)
class Decision:
    """Whether a cell stops (``stop``), why, after how many repeats, and its interval as reported."""

    stop: bool
    reason: str
    interval: Interval
    repeats: int


def look_confidence(min_repeats: int, max_repeats: int, confidence: float = CONFIDENCE) -> float:
    """The confidence each look's interval is built at: ``1 - (1 - confidence) / K`` with K the possible
    looks (``max_repeats - min_repeats + 1``)."""
    looks = max(1, max_repeats - min_repeats + 1)
    return 1 - (1 - confidence) / looks


def t_quantile(confidence: float, df: float) -> float:
    """The two-sided Student-t quantile for ``confidence`` with ``df`` degrees of freedom (the
    value of ``scipy.stats.t.ppf``, from its ufunc ``scipy.special.stdtrit``: ~10 µs instead of ~500 µs)."""
    return float(special.stdtrit(df, 0.5 + confidence / 2))


def nan_interval(estimate: float, confidence: float, covers: float) -> Interval:
    return Interval(estimate, math.nan, math.nan, confidence, covers)


def finite_list(samples: Iterable[float]) -> list[float]:
    """The finite samples (NaN: a failed repeat, left out). Plain Python: a cell has tens of repeats, and
    numpy's per-call cost on arrays this small is what a coverage simulation would spend its time on."""
    return [float(v) for v in samples if math.isfinite(v)]


def mean_var(x: Sequence[float]) -> tuple[float, float]:
    """Mean and sample variance (ddof 1; 0 for one value)."""
    m = math.fsum(x) / len(x)
    return m, (math.fsum((v - m) ** 2 for v in x) / (len(x) - 1) if len(x) > 1 else 0.0)


def mean_interval(samples: Iterable[float], confidence: float, covers: float = CONFIDENCE) -> Interval:
    """The mean of the finite samples and its Student-t interval at ``confidence`` (none below 2)."""
    x = finite_list(samples)
    if not x:
        return nan_interval(math.nan, confidence, covers)
    mean, var = mean_var(x)
    if len(x) < 2:
        return nan_interval(mean, confidence, covers)
    half = t_quantile(confidence, len(x) - 1) * math.sqrt(var / len(x))
    return Interval(mean, mean - half, mean + half, confidence, covers)


def positive_mean_interval(samples: Iterable[float], confidence: float, covers: float = CONFIDENCE) -> Interval:
    """The mean of a positive quantity (a time) and its interval at ``confidence`` on the log scale (delta
    method, ``mean · exp(±t · se / mean)``): never below zero, however few and scattered the repeats."""
    x = finite_list(samples)
    if not x:
        return nan_interval(math.nan, confidence, covers)
    mean, var = mean_var(x)
    if len(x) < 2 or mean <= 0:
        return nan_interval(mean, confidence, covers)
    half = t_quantile(confidence, len(x) - 1) * math.sqrt(var / len(x)) / mean
    return Interval(mean, mean * math.exp(-half), mean * math.exp(half), confidence, covers)


def loss_interval(
    num: Iterable[float], den: Iterable[float], factor: float, confidence: float, covers: float = CONFIDENCE
) -> Interval:
    """Loss % = (mean(num) / (factor·mean(den)) - 1) × 100 and its interval at ``confidence`` (delta method
    on the log of the ratio, Welch–Satterthwaite degrees of freedom; none below 2 samples a side)."""
    a, b = finite_list(num), finite_list(den)
    if not a or not b:
        return nan_interval(math.nan, confidence, covers)
    (ma, sa), (mb, sb) = mean_var(a), mean_var(b)
    if ma <= 0 or mb <= 0:
        return nan_interval(math.nan, confidence, covers)
    r = ma / (factor * mb)
    est = (r - 1) * 100
    if len(a) < 2 or len(b) < 2:
        return nan_interval(est, confidence, covers)
    va = sa / (len(a) * ma * ma)  # relative variance of each mean
    vb = sb / (len(b) * mb * mb)
    if va + vb == 0:
        return Interval(est, est, est, confidence, covers)
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    half = t_quantile(confidence, df) * math.sqrt(va + vb)
    return Interval(est, (r * math.exp(-half) - 1) * 100, (r * math.exp(half) - 1) * 100, confidence, covers)


def should_continue(
    samples: Sequence[float],
    *,
    precision: float = DEFAULT_PRECISION,
    thresholds: Sequence[float] = (),
    min_repeats: int = MIN_REPEATS,
    max_repeats: int = DEFAULT_MAX_REPEATS,
    baseline: Sequence[float] | None = None,
    factor: float = 1.0,
    relative: bool = False,
    confidence: float = CONFIDENCE,
) -> Decision:
    """Whether a cell needs another repeat, after ``len(samples)`` repeats (NaN: a failed repeat).

    The quantity: with ``baseline`` the loss % of mean(samples) against ``factor``·mean(baseline)
    (T_N against N·T_1); without it the mean of ``samples``. ``precision`` is the wanted half-width in
    the quantity's units, or with ``relative`` in % of the estimate (an exclusive cell's T_1): a
    positive quantity, whose interval is then on the log scale (:func:`positive_mean_interval`).
    ``thresholds`` are the values the interval must lie clear of. The interval returned is built at
    :func:`look_confidence` and covers the true value with probability >= ``confidence`` at whatever
    look the cell stops.
    """
    n = len(samples)
    per_look = look_confidence(min_repeats, max_repeats, confidence)
    if baseline is None:
        mean = positive_mean_interval if relative else mean_interval
        interval = mean(samples, per_look, confidence)
    else:
        interval = loss_interval(samples, baseline, factor, per_look, confidence)
    if n < min_repeats:
        return Decision(False, f"{n} of at least {min_repeats} repeats", interval, n)
    ok = len(finite_list(samples))
    if 2 * ok < n:
        return Decision(True, f"failing: {n - ok} of {n} repeats failed", interval, n)
    wide, straddled = unsettled(interval, precision, thresholds, relative)
    why = "; ".join(wide + straddled)
    if n >= max_repeats:
        return Decision(True, f"max repeats {max_repeats} reached" + (f" ({why})" if why else ""), interval, n)
    if why:
        return Decision(False, why, interval, n)
    return Decision(True, settled_reason(interval, precision, thresholds, relative), interval, n)


def unsettled(
    interval: Interval, precision: float, thresholds: Sequence[float], relative: bool
) -> tuple[list[str], list[str]]:
    """What keeps a cell going: its interval too wide (or not known yet), thresholds inside it."""
    if not interval.known:
        return (["no interval yet"], [])
    width = interval.half_width
    wanted = precision * abs(interval.estimate) / 100 if relative else precision
    unit = "% of the estimate" if relative else ""
    shown = 100 * width / abs(interval.estimate) if relative and interval.estimate else width
    wide = [f"interval ±{shown:.3g}{unit} wider than ±{precision:g}{unit}"] if width > wanted else []
    inside = [f"interval [{interval.low:.3g}, {interval.high:.3g}] straddles {t:g}" for t in thresholds]
    return (wide, [s for s, t in zip(inside, thresholds) if interval.straddles(t)])


def settled_reason(interval: Interval, precision: float, thresholds: Sequence[float], relative: bool) -> str:
    unit = "% of the estimate" if relative else ""
    shown = (
        100 * interval.half_width / abs(interval.estimate) if relative and interval.estimate else interval.half_width
    )
    clear = f", clear of {', '.join(f'{t:g}' for t in thresholds)}" if thresholds else ""
    return f"settled: ±{shown:.3g}{unit} within ±{precision:g}{unit}{clear}"
