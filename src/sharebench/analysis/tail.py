"""A latency target decided by interval: distribution-free bounds on a percentile, every user counted,
and one rule (within, above, undecided) that the cells, the search, the Answer, the headline and
``advise`` all apply.

**Bounds on a percentile.** Of n independent latencies, the number at or below the true q-quantile ξ is
Binomial(n, q), whatever the latency distribution. So the order statistics X₍l₎ ≤ ξ ≤ X₍u₎ bracket it
with a coverage read off the binomial (:func:`rank_bounds`; Hahn & Meeker, *Statistical Intervals*,
§5.2; the argument MLPerf LoadGen's early stopping rests on). With too few samples no upper rank
exists: the p95 of 30 samples has no upper bound at 95% (its largest sample is not enough), and
:func:`min_samples` is the smallest n for which one does: ``ceil(ln(tail) / ln(q))``, 59 for a
one-sided 95% bound on a p95, 72 for a two-sided one.

**Every user counted** (:func:`decide`). A cell of N users of one pattern meets a p95 slowdown target
only when *every* user's p95 does, against the same pattern alone: user i's slowdown is bracketed by
``[lo_i / alone_hi, hi_i / alone_lo]``. The N users' intervals and the alone interval hold together
with probability at least :attr:`TailRule.confidence` (Bonferroni: the error ``α = 1 − confidence`` is
split in half between the alone baseline and the users, the users' half evenly between them). The
verdict: ``within`` when the worst user's upper bound is within the target, ``above`` when some user's
lower bound exceeds it, else ``undecided`` (more samples would tell, or the cell is said to be
undecided). The pooled p95 over every user's samples is reported beside it, with its own interval.

**Early stopping.** A cell is looked at while it runs and stops as soon as its verdict is decided
(``sharebench.sweep`` watches its users' bursts). Looking again and again at a growing sample spends
the error: look j (the users' fewest samples having reached ``n₀ · 2ʲ``, :func:`look_of`) is made at
``α_j = α / 2^(j+1)``, so the looks together never spend more than α (the final computation from the
folder's bursts is one more look at the last level, which the halving leaves room for). ``n₀``
(:meth:`TailRule.first_look`) is the smallest sample at which look 0 can have an upper bound: the
minimum number of samples per user that ``--dry-run`` shows.

Assumption, stated where the figures are: the latencies of one user are independent draws. Think
times drawn afresh make a closed-loop user's bursts close to that; a queue carries over from one
request to the next, so a serving cell's intervals are narrower than its true uncertainty when the
service is near saturation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

from sharebench.analysis.kinds import baseline_mask
from sharebench.errors import UserError

Verdict = Literal["within", "above", "undecided"]
VERDICTS: tuple[Verdict, ...] = ("within", "above", "undecided")
DEFAULT_QUANTILE = 0.95
DEFAULT_CONFIDENCE = 0.95
MAX_LOOKS = 12  # n₀ · 2¹¹ samples a user: beyond, a cell is undecided


def rank_bounds(n: int, q: float, alpha: float) -> tuple[int | None, int | None]:
    """The 1-based ranks ``(l, u)`` whose order statistics bracket the ``q``-quantile of ``n`` independent
    samples with two-sided coverage at least ``1 - alpha`` (at most ``alpha / 2`` on each side); None for a
    side no rank reaches with ``n`` samples."""
    if n < 1:
        return None, None
    if not (0 < q < 1 and 0 < alpha < 1):
        raise ValueError(f"q {q} and alpha {alpha} must lie in (0, 1)")
    cdf = stats.binom.cdf(np.arange(n), n, q)  # P(B <= k), k = 0..n-1
    tail = alpha / 2
    below = np.nonzero(cdf <= tail)[0]  # l - 1 = k: P(X_(l) > ξ) = P(B <= l - 1) <= tail
    above = np.nonzero(cdf >= 1 - tail)[0]  # u - 1 = k: P(X_(u) < ξ) = 1 - P(B <= u - 1) <= tail
    lower = int(below[-1]) + 1 if below.size else None
    upper = int(above[0]) + 1 if above.size else None
    return lower, upper


def min_samples(q: float, tail: float) -> int:
    """The fewest independent samples for which an upper bound on the ``q``-quantile exists at one-sided
    error ``tail``: the smallest n with ``q**n <= tail``."""
    if not (0 < q < 1 and 0 < tail < 1):
        raise ValueError(f"q {q} and tail {tail} must lie in (0, 1)")
    n = math.ceil(math.log(tail) / math.log(q))
    return n if q**n <= tail else n + 1  # the float log may round a hair short


@dataclass(frozen=True)
class Bounds:
    """A percentile of one sample: its point (numpy's linear interpolation), its bounds (NaN where none
    exists) and the number of samples."""

    point: float
    lo: float
    hi: float
    n: int

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)


def percentile_bounds(samples: Sequence[float] | np.ndarray, q: float, alpha: float) -> Bounds:
    """The ``q``-quantile of ``samples`` (NaN and infinities left out) and its distribution-free two-sided
    ``1 - alpha`` interval (:func:`rank_bounds`)."""
    x = np.asarray(samples, float)
    x = np.sort(x[np.isfinite(x)])
    if x.size == 0:
        return Bounds(math.nan, math.nan, math.nan, 0)
    lower, upper = rank_bounds(int(x.size), q, alpha)
    return Bounds(
        float(np.percentile(x, q * 100)),
        float(x[lower - 1]) if lower is not None else math.nan,
        float(x[upper - 1]) if upper is not None else math.nan,
        int(x.size),
    )


@dataclass(frozen=True)
class TailRule:
    """What a verdict is decided against: the percentile ``q``, the target ``slo`` (a slowdown of that
    percentile against the same pattern alone) and the joint ``confidence``."""

    slo: float
    q: float = DEFAULT_QUANTILE
    confidence: float = DEFAULT_CONFIDENCE

    def __post_init__(self) -> None:
        if not (math.isfinite(self.slo) and self.slo >= 1):
            raise UserError(f"bad target {self.slo!r}; allowed: a p95 slowdown >= 1")
        if not 0 < self.q < 1:
            raise UserError(f"bad percentile {self.q!r}; allowed: a fraction in (0, 1), e.g. 0.95")
        if not 0.5 <= self.confidence < 1:
            raise UserError(f"bad confidence {self.confidence!r}; allowed: a fraction in [0.5, 1), e.g. 0.95")

    @property
    def alpha(self) -> float:
        return 1 - self.confidence

    @property
    def percentile(self) -> int | float:
        """``q`` as a percentile: 95."""
        p = self.q * 100
        return int(round(p)) if abs(p - round(p)) < 1e-9 else p

    def alone_alpha(self, look: int = 0) -> float:
        """The two-sided error of the alone baseline's interval at ``look``."""
        return self.alpha / 2 / 2 ** (look + 1)

    def user_alpha(self, users: int, look: int = 0) -> float:
        """The two-sided error of one user's interval among ``users`` at ``look``."""
        return self.alpha / 2 / max(users, 1) / 2 ** (look + 1)

    def first_look(self, users: int) -> int:
        """n₀: the fewest samples each of ``users`` needs before look 0 can bound every p95 from above."""
        return min_samples(self.q, self.user_alpha(users, 0) / 2)

    def alone_first_look(self) -> int:
        """The fewest samples alone before the baseline's look 0 can bound its p95 from above."""
        return min_samples(self.q, self.alone_alpha(0) / 2)


def look_of(n: int, n0: int) -> int | None:
    """The last look ``n`` samples reach when looks are made at ``n0 · 2^j`` (None: not even look 0),
    at most :data:`MAX_LOOKS` - 1."""
    if n < n0 or n0 < 1:
        return None
    return min(int(math.floor(math.log2(n / n0))), MAX_LOOKS - 1)


@dataclass(frozen=True)
class Decision:
    """A cell's verdict against a :class:`TailRule`: the worst user's slowdown and its bounds, the pooled
    slowdown over every user's samples and its bounds, each user's, the look it was made at, and why."""

    verdict: Verdict
    users: int
    samples: int  # the fewest samples of any user
    worst: str  # the worst user (by its point slowdown)
    worst_slowdown: float
    worst_lo: float
    worst_hi: float
    pooled_slowdown: float
    pooled_lo: float
    pooled_hi: float
    alone: Bounds
    look: int | None
    per_user: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    reason: str = ""

    @property
    def fastest_hi(self) -> float:
        """The smallest upper bound of a user's slowdown (nan: no user has one)."""
        his = [s[2] for s in self.per_user.values() if math.isfinite(s[2])]
        return min(his) if his else (self.worst_hi if math.isfinite(self.worst_hi) else math.nan)

    @property
    def below_one(self) -> bool:
        """A user faster shared than alone, beyond doubt (its upper bound below 1): sharing does not make a
        user faster, so the baseline, not the sharing, is off, and every slowdown of the cell reads low."""
        return math.isfinite(self.fastest_hi) and self.fastest_hi < 1


def alone_bounds(alone: Sequence[float] | np.ndarray, rule: TailRule) -> Bounds:
    """The alone baseline's percentile and interval, at the look its sample reaches."""
    n = int(np.isfinite(np.asarray(alone, float)).sum())
    look = look_of(n, rule.alone_first_look())
    return percentile_bounds(alone, rule.q, rule.alone_alpha(look or 0))


def decide(users: Mapping[str, Sequence[float] | np.ndarray], alone: Bounds, rule: TailRule) -> Decision:
    """The verdict of one cell: ``users`` maps each user (replica) of the pattern to its latencies, ``alone``
    is the baseline's :func:`alone_bounds`. Every user within -> ``within``; a user above for sure ->
    ``above``; else ``undecided`` (fewer than n₀ samples a user, no alone baseline, or intervals that
    straddle the target)."""
    n_users = len(users)
    arrays = {k: np.asarray(v, float) for k, v in users.items()}
    counts = [int(np.isfinite(a).sum()) for a in arrays.values()]
    fewest = min(counts) if counts else 0
    look = look_of(fewest, rule.first_look(n_users)) if n_users else None
    alpha = rule.user_alpha(n_users, look or 0)
    per = {k: percentile_bounds(a, rule.q, alpha) for k, a in arrays.items()}
    base = alone.point if alone.point > 0 else math.nan
    slow = {k: (b.point / base, b.lo / alone.hi, b.hi / alone.lo) for k, b in per.items()}
    pooled = percentile_bounds(np.concatenate(list(arrays.values())) if arrays else [], rule.q, rule.alpha / 2)
    worst = max(slow, key=lambda k: slow[k][0] if math.isfinite(slow[k][0]) else -math.inf, default="")
    his = [s[2] for s in slow.values()]
    # a user with no upper bound leaves the worst one unknown (never below 1 by default); one with no lower
    # bound does not lower the largest lower bound of the others
    worst_hi = max(his) if his and all(math.isfinite(h) for h in his) else math.nan
    top_lo = max((s[1] for s in slow.values() if math.isfinite(s[1])), default=math.nan)
    verdict, reason = verdict_of(rule, n_users, fewest, look, alone, worst_hi, top_lo)
    w = slow.get(worst, (math.nan,) * 3)
    return Decision(
        verdict,
        n_users,
        fewest,
        str(worst),
        w[0],
        top_lo,
        worst_hi,
        pooled.point / base,
        pooled.lo / alone.hi,
        pooled.hi / alone.lo,
        alone,
        look,
        slow,
        reason,
    )


def verdict_of(
    rule: TailRule, n_users: int, fewest: int, look: int | None, alone: Bounds, worst_hi: float, top_lo: float
) -> tuple[Verdict, str]:
    """The rule itself, on numbers: ``worst_hi`` the largest upper bound of a user's slowdown, ``top_lo``
    the largest lower bound."""
    p = f"p{rule.percentile}"
    if n_users == 0:
        return "undecided", "no user of the pattern measured"
    if not alone.bounded:
        return "undecided", f"the alone {p} has no interval ({alone.n} samples; {rule.alone_first_look()} needed)"
    if look is None:
        return "undecided", f"{fewest} samples a user; {rule.first_look(n_users)} needed for {n_users} users"
    if math.isfinite(top_lo) and top_lo > rule.slo:
        return "above", f"a user's {p} slowdown is above {rule.slo:g}x for sure (lower bound {top_lo:.2f}x)"
    if math.isfinite(worst_hi) and worst_hi <= rule.slo:
        return "within", f"every user's {p} slowdown within {rule.slo:g}x (worst upper bound {worst_hi:.2f}x)"
    return "undecided", f"the worst user's {p} slowdown interval reaches {worst_hi:.2f}x, across {rule.slo:g}x"


# ----------------------------------------------------------------- a folder's cells, decided


def users_of(frame: pd.DataFrame, pattern: str) -> dict[str, np.ndarray]:
    """The users of ``pattern`` among a group's bursts (``frame``: rows of one mode), each replica's
    latencies pooled over its repeats: the replicas that follow ``pattern`` (a neighbour of another
    pattern is the aggressor, not a user)."""
    mine = frame[frame["pattern"] == pattern]
    return {str(r): np.asarray(g["latency_s"], float) for r, g in mine.groupby("replica", sort=True)}


def alone_of(frame: pd.DataFrame, pattern: str) -> np.ndarray:
    """The alone baseline of ``pattern``: the latencies of its bursts in the baseline cells (one replica
    alone on the device), over every repeat."""
    alone = frame[baseline_mask(frame["mode"]) & (frame["pattern"] == pattern)]
    return np.asarray(alone["latency_s"], float)


def decisions(frame: pd.DataFrame, rule: TailRule) -> dict[tuple[str, str, str], Decision]:
    """Every sharing mode's verdict per victim pattern: ``frame`` is
    ``sharebench.analysis.latency.burst_frame`` of a folder's bursts (warm-ups left out by the caller);
    the key is (mode, pattern, beside), ``beside`` the other pattern of the cell ('' none), as the
    latency table keys its victim rows."""
    out: dict[tuple[str, str, str], Decision] = {}
    if frame.empty:
        return out
    victims = frame[(frame["role"] == "victim") & ~baseline_mask(frame["mode"])]
    for (mode, pattern, beside), v in victims.groupby(["mode", "pattern", "beside"], sort=False):
        cells = frame[frame["cell_id"].isin(set(v["cell_id"]))]  # the cells whose victim is of this key
        alone = alone_bounds(alone_of(frame, str(pattern)), rule)
        out[(str(mode), str(pattern), str(beside))] = decide(users_of(cells, str(pattern)), alone, rule)
    return out
