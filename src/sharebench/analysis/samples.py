"""How many samples a patterned cell takes (issue 42, item 2): the fewest from the percentile, the
confidence and the users, and the most (the cap), per cell.

A sharing cell's users are the replicas of the victim's pattern (:func:`cell_users`; a neighbour of
another pattern is the aggressor and is not counted). The cell runs until every user's p95 is decided
against the target (``sharebench.analysis.tail.decide``, looked at when the users' fewest samples reach
``n₀ · 2^j``), or until its cap; the alone cell (one replica: every slowdown's denominator) runs until
its p95 interval is precise, ``hi / lo <=`` :data:`ALONE_PRECISION`, or until its cap. The sweep watches
the cells while they run (``sharebench.sweep.watch``). The numbers of one cell (:func:`cell_samples`):

* ``first_look``: n₀, the fewest samples per user before any verdict (``TailRule.first_look(N)``; alone
  ``TailRule.alone_first_look()``): 99 alone, 113 for 2 users, 140 for 8, 181 for 64 (p95, 95%);
* ``cap``: the most samples per user: ``--bursts N`` (``Workload.bursts``), else the rule's own,
  n₀ · 2^(:data:`DEFAULT_LOOKS` - 1) (the third look: 452 for 2 users, 560 for 8); the alone cell, which
  runs once per sweep and sets every slowdown, n₀ · 2^(:data:`ALONE_LOOKS` - 1) (792);
* a kind whose cells last a duration (``PatternSpec.window == "duration"``: a service) runs a window of
  seconds of arrivals at its rate: ``cap / rate``, at least ``PatternSpec.min_window_s`` (5 s); every
  request that arrived in it is served; no cell of it stops before that floor. Its ``cap`` is then the
  requests the window expects (what a program that only knows a count runs);
* a warm-up cell (discarded) runs :data:`WARMUP_BURSTS` bursts, unwatched; a cell whose victim is of a
  saturated kind (batch) is not watched and runs to its cap.

The watcher stops a count-bound cell once its fewest user reaches the cap; the victim's own limit
(:meth:`Samples.victim_count`) is then :data:`VICTIM_CAPS` caps, so that a user slower than the victim still
gets its samples (the victim keeps running beside it: the sharing it measures stays the same), and only a
program that writes no live record runs that far.

What a cell is expected to take (``--dry-run``'s prediction) is ``analysis.cost``'s: the look at which the
expected order statistics of its users' latencies decide it (the alone cell: make its interval precise), its
cap bounding it; :attr:`Samples.expected` is the fewest, the first look.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sharebench.analysis.tail import TailRule
from sharebench.patterns import DEFAULT_SLO, parse_pattern
from sharebench.workloads import Workload

DEFAULT_LOOKS = 3  # without --bursts a sharing cell's cap is its third look: n₀ · 4 samples a user
ALONE_LOOKS = 4  # and the alone cell's its fourth, n₀ · 8: it runs once per sweep, and sets every slowdown
ALONE_PRECISION = 1.15  # the alone cell stops once its p95 interval's hi / lo is at most this
WARMUP_BURSTS = 20  # a warm-up cell's bursts (it is discarded: it only warms the replicas up)
# a watched cell's victim's own limit, in caps: the watcher stops the cell once its *fewest* user reaches the
# cap (a user beside the victim may be many times slower), so the victim's count only ends a cell whose program
# writes no live record (and then at this many caps)
VICTIM_CAPS = 4


@dataclass(frozen=True)
class Samples:
    """One cell's sample rule: its ``users``, the fewest samples a user needs (``first_look``), the most it
    runs (``cap``), a duration window's seconds (``window_s``, None: a count), the seconds before which it
    does not stop (``min_s``), whether it is watched while it runs, and whether it is the alone cell."""

    users: int
    first_look: int
    cap: int
    window_s: float | None = None
    min_s: float = 0.0
    watched: bool = True
    alone: bool = False
    rate_per_s: float | None = None

    @property
    def expected(self) -> int:
        """The samples a user is expected to run: the first look (a duration: the requests of its first
        look's seconds, at least the floor's), never more than the cap."""
        if self.window_s is not None and self.rate_per_s:
            return min(self.cap, math.ceil(self.rate_per_s * max(self.first_look / self.rate_per_s, self.min_s)))
        return min(self.first_look, self.cap)

    def victim_count(self, watched: bool) -> int:
        """The victim's own limit (``SHAREBENCH_PATTERN_COUNT``): the cap; a watched count-bound cell's
        :data:`VICTIM_CAPS` caps when it has several users (the watcher ends it at its fewest user's cap)."""
        several = self.users > 1  # one user: the victim is the fewest, its own cap ends the cell
        return self.cap * VICTIM_CAPS if watched and several and self.watched and self.window_s is None else self.cap

    @property
    def decidable(self) -> bool:
        """Whether the cap reaches the first look (a cap below it leaves every cell undecided)."""
        return self.cap >= self.first_look

    def describe(self) -> str:
        """The dry run's words: ``>= 113 samples per user (2 users), at most 452``."""
        who = "alone" if self.alone else f"{self.users} user{'s' if self.users != 1 else ''}"
        if not self.watched:
            return f"{self.cap} bursts ({who}; not watched: a saturated victim)"
        per = "" if self.alone else " per user"
        text = f">= {self.first_look} samples{per} ({who}), at most {self.cap}"
        if self.window_s is not None:
            text += f" (a window of at most {self.window_s:.3g} s of arrivals, at least {self.min_s:g} s)"
        if self.alone:
            text += f"; stops once its p95 interval's hi/lo <= {ALONE_PRECISION:g}"
        if not self.decidable:
            text += f"; the cap is below the {self.first_look} a verdict needs: undecided"
        return text


def cell_users(workload: Workload, replicas: int) -> tuple[int, ...]:
    """The replicas of a cell of ``replicas`` that are its users: those of the victim's pattern."""
    return tuple(r for r in range(max(1, int(replicas))) if workload.pattern_of(r) == workload.pattern)


def cell_samples(workload: Workload, replicas: int, rule: TailRule | None = None, *, warmup: bool = False) -> Samples:
    """The sample rule of a cell of ``replicas`` replicas of ``workload`` (module docstring); ``rule``: the
    sweep's (its percentile and confidence set n₀; default p95 at 95%)."""
    rule = rule or TailRule(DEFAULT_SLO)
    pattern = parse_pattern(workload.pattern)
    spec = pattern.spec
    alone = int(replicas) <= 1
    users = len(cell_users(workload, replicas))
    n0 = rule.alone_first_look() if alone else rule.first_look(users)
    looks = ALONE_LOOKS if alone else DEFAULT_LOOKS
    cap = int(workload.bursts) if workload.bursts is not None else n0 * 2 ** (looks - 1)
    if warmup:
        return Samples(users, n0, min(cap, WARMUP_BURSTS), watched=False, alone=alone)
    rate = pattern.rate_per_s
    if spec.window == "duration" and rate:
        window = max(cap / rate, spec.min_window_s)
        return Samples(users, n0, math.ceil(window * rate), window, spec.min_window_s, not spec.saturated, alone, rate)
    return Samples(users, n0, cap, None, spec.min_window_s, not spec.saturated, alone)


def victim_bursts(workload: Workload, replicas: int) -> int:
    """The most bursts (or requests) a user of a cell of ``replicas`` runs: its :attr:`Samples.cap`."""
    return cell_samples(workload, replicas).cap


def expected_bursts(workload: Workload, replicas: int) -> int:
    """The bursts (or requests) a user of a cell of ``replicas`` is expected to run: :attr:`Samples.expected`."""
    return cell_samples(workload, replicas).expected
