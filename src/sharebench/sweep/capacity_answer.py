"""A capacity search's state and its answer, decided by the one rule (issue 42, items 4 and 5; issue 46,
item 2): pure, no I/O.

One :class:`CapacitySearch` per mode family (``timeslice``, ``mps``, ``timeslice/long``, ``mps@25``). Each
N measured is a :class:`Probe` whose verdict is ``analysis.tail.decide``'s on every user of the pattern
(``within``, ``above``, ``undecided``), or ``failed`` when a cell of it failed. :func:`next_n` says what to
measure next: N from ``--users LO`` doubling while within, then bisection between the largest N within and
the smallest N above; an undecided N gets another cell (its users' samples pooled) up to ``max_cells``,
after which the search ends there, undecided; a failed N is never measured again: it bounds the search
from above like a limit.

:func:`answer` says only what was measured (a :class:`Capacity`, ``capacity.json``'s shape):

* ``N users``: N within and N + 1 above, both measured; ``no sharing``: 2 measured above;
* ``>= N``: N within and a stated limit reached (``memory``, ``maximum``, ``kind``), or N + 1 failed
  (``failed``);
* ``failed at N``: the first N tried failed, nothing below it to measure;
* ``between A and B``: A within (or 1, alone), B above (or the largest N the search may try), and why
  it ended there: ``budget`` (the deadline refused its next cell), ``interrupt`` (stopped before its
  end), ``undecided`` (an N still undecided after its cells);
* ``not measured``: no N with a verdict (``budget``, ``interrupt``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from sharebench.analysis.tail import Decision
from sharebench.modes import DEFAULT_USERS, Mode, family_kind, family_max, family_mode
from sharebench.modes import KIND_MAX as KIND_MAX
from sharebench.patterns import parse_pattern

ProbeVerdict = Literal["within", "above", "undecided", "failed"]
Why = Literal["none", "budget", "interrupt", "undecided", "memory", "maximum", "kind", "failed"]
Stopped = Literal["budget", "interrupt"]
KIND_UNITS = {"mig-emulated": "instances"}  # what the kind's limit counts (clients when not named)
MARKS = {"within": "✓", "above": "✗", "undecided": "?"}
STOPPED_TEXT = {
    "budget": "the budget stopped the search",
    "interrupt": "the search was stopped before its end: continue it with --resume",
}


@dataclass(frozen=True)
class Probe:
    """One N measured: its verdict (every user of the pattern counted), the cells it took, and the
    decision's numbers: the worst user's p95 slowdown with its interval (``lo``: the largest lower bound
    of a user, ``hi``: the largest upper bound), the pooled p95 slowdown, the fewest samples of a user;
    ``error``: why a failed probe failed."""

    n: int
    mode: str
    verdict: ProbeVerdict
    cells: int = 1
    samples: int = 0
    worst: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    pooled: float = math.nan
    worst_replica: str = ""
    below_one: bool = False
    reason: str = ""
    error: str = ""

    @classmethod
    def decided(cls, n: int, mode: str, d: Decision, cells: int) -> Probe:
        return cls(
            n,
            mode,
            d.verdict,
            cells,
            d.samples,
            d.worst_slowdown,
            d.worst_lo,
            d.worst_hi,
            d.pooled_slowdown,
            d.worst,
            d.below_one,
            d.reason,
        )

    @property
    def text(self) -> str:
        """``4 ✓ 1.52×``, ``6 ? 1.98×``, ``8 failed``."""
        if self.verdict == "failed":
            return f"{self.n} failed"
        worst = f"{self.worst:.2f}×" if math.isfinite(self.worst) else "?×"
        return f"{self.n} {MARKS[self.verdict]} {worst}"

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return round(x, 4) if math.isfinite(x) else None

        return dict(
            n=self.n,
            mode=self.mode,
            verdict=self.verdict,
            worst=num(self.worst),
            lo=num(self.lo),
            hi=num(self.hi),
            samples=self.samples,
            cells=self.cells,
            pooled=num(self.pooled),
            worst_replica=self.worst_replica,
            below_one=self.below_one,
            reason=self.reason,
            error=self.error,
        )


@dataclass(frozen=True)
class Limit:
    """A stated limit of a search: the largest N it may measure and which limit that is."""

    n: int
    why: Literal["memory", "maximum", "kind"]
    text: str


@dataclass
class CapacitySearch:
    """The search of one family: its bounds (``lo``, the stated maximum ``hi``, the memory's ``mem_max``),
    the cells an N may take (``min_cells``..``max_cells``), its probes by N, and what stopped it before its
    answer (``stopped``: the budget, an interrupt)."""

    family: str
    slo: float
    lo: int = DEFAULT_USERS[0]
    hi: int = DEFAULT_USERS[1]
    max_cells: int = 4
    min_cells: int = 1
    mem_max: int | None = None
    probes: dict[int, Probe] = field(default_factory=dict)
    pattern: str = ""
    stopped: Stopped | None = None

    @property
    def kind_max(self) -> int:
        return family_max(self.family)

    @property
    def max_n(self) -> int:
        return min(x for x in (self.hi, self.kind_max, self.mem_max) if x is not None)

    def limit(self) -> Limit:
        """Which stated limit ``max_n`` is (the memory before the kind before the user's maximum)."""
        n = self.max_n
        if self.mem_max is not None and n == self.mem_max and n < self.hi:
            return Limit(n, "memory", f"GPU memory holds {n} replicas")
        if n == self.kind_max and n < self.hi:
            return Limit(
                n,
                "kind",
                f"{family_kind(self.family)} takes at most {n} {KIND_UNITS.get(family_kind(self.family), 'clients')}",
            )
        return Limit(n, "maximum", f"the stated maximum --users ..{self.hi}")

    def mode(self, n: int) -> Mode:
        return family_mode(self.family, n)

    def n_of(self, label: str) -> int | None:
        """The N whose mode in this family is ``label`` (``timeslice:4`` -> 4, ``mig-emulated:3x`` -> 3:
        a layout's label names its instances, not a replica count); None when it is none of its modes."""
        kind = label.split(":", 1)[0]
        if kind != family_kind(self.family):
            return None
        return next((n for n in range(1, self.max_n + 1) if self.mode(n).label == label), None)

    def of(self, verdict: ProbeVerdict) -> list[int]:
        return sorted(n for n, p in self.probes.items() if p.verdict == verdict)

    def top(self) -> int | None:
        """The smallest N measured above the target or failed: the search stays below it."""
        bad = self.of("above") + self.of("failed")
        return min(bad) if bad else None

    def within(self) -> int | None:
        """The largest N measured within the target below :meth:`top`."""
        top = self.top()
        ok = [n for n in self.of("within") if top is None or n < top]
        return max(ok) if ok else None

    def open_undecided(self) -> int | None:
        """The smallest undecided N between :meth:`within` and :meth:`top` (where the knee may be)."""
        low, top = self.within() or 1, self.top()
        und = [n for n in self.of("undecided") if low < n and (top is None or n < top)]
        return min(und) if und else None

    def done(self) -> bool:
        return next_n(self) is None


def next_n(search: CapacitySearch) -> int | None:
    """The N to measure next (a new N, or another cell of an N measured), or None when the search has its
    answer (then :func:`answer` says which). Pure."""
    if not search.probes:
        return min(search.lo, search.max_n) if search.max_n >= 2 else None
    for n, p in sorted(search.probes.items()):  # an N below its fewest cells (not failed, not decided above)
        if p.verdict in ("within", "undecided") and p.cells < search.min_cells:
            return n
    und = search.open_undecided()
    if und is not None:
        return und if search.probes[und].cells < search.max_cells else None  # undecided at its cap: said
    low, top = search.within() or 1, search.top()
    if top is None:
        return None if low >= search.max_n else min(2 * low, search.max_n)
    return None if top - low <= 1 else (low + top) // 2


@dataclass(frozen=True)
class Capacity:
    """A family's answer (``capacity.json``): ``answer`` one of ``N users``, ``no sharing``, ``>= N``,
    ``failed at N``, ``between A and B``, ``not measured``; ``lo`` the largest N within (1: alone), ``hi``
    the smallest N above or failed (or the largest the search may try); ``why`` what ended it (``none``:
    its answer found); ``detail`` says it in words; the probes in the order measured (by N)."""

    family: str
    pattern: str
    slo: float
    answer: str
    lo: int | None
    hi: int | None
    why: Why
    probes: tuple[Probe, ...] = ()
    detail: str = ""
    note: str = ""

    @property
    def users(self) -> int | None:
        """N of an ``N users`` answer; None for any other."""
        return self.lo if self.answer.endswith(" users") and self.lo is not None else None

    @property
    def measured(self) -> str:
        return ", ".join(p.text for p in self.probes)

    @property
    def words(self) -> str:
        """The answer in words: ``12 users``, ``≥ 16 users``, ``between 8 and 12 users``."""
        a = self.answer
        if a.startswith(">= "):
            return f"≥ {a[3:]} users"
        return f"{a} users" if a.startswith("between ") else a

    @property
    def requests(self) -> str:
        """A serving pattern's requests/s per GPU (users x rate; with ``load=F``, rate = F x the capacity
        alone): ``24.66 requests/s per GPU (12 × 2.055/s; load 0.3 of 6.85/s alone)``; '' otherwise."""
        p = parse_pattern(self.pattern) if self.pattern else None
        if p is None or not p.spec.capacity_unit or not p.rate_per_s or self.lo is None or self.lo < 2:
            return ""
        if self.answer.startswith(("failed", "not", "no ")):
            return ""
        sign = "≥ " if self.answer.startswith(">=") else ""
        alone = f"; load {p.load:g} of {p.rate_per_s / p.load:.4g}/s alone" if p.load else ""
        total = f"{self.lo * p.rate_per_s:.4g}"
        if self.answer.startswith("between") and self.hi:
            total = f"between {total} and {self.hi * p.rate_per_s:.4g}"
        return f"{sign}{total} {p.spec.capacity_unit} per GPU ({self.lo} × {p.rate_per_s:g}/s{alone})"

    def line(self) -> str:
        """The Answer's line: ``timeslice: 6 users per GPU at p95 ≤ 2× (measured 2 ✓ 1.14×, ...)``."""
        counted = self.answer.endswith(" users") or self.answer.startswith((">=", "between"))
        req = f" per GPU, {self.requests}" if self.requests else " per GPU" if counted else ""
        said = "; ".join(x for x in (self.detail, f"measured {self.measured}" if self.probes else "") if x)
        note = f"; {self.note}" if self.note else ""
        return f"{self.family}: {self.words}{req} at p95 ≤ {self.slo:g}× ({said or 'nothing measured'}){note}"

    def to_dict(self) -> dict[str, Any]:
        """``capacity.json``'s entry (its shape: sharebench/sweep/capacity.py's docstring)."""
        return dict(
            family=self.family,
            pattern=self.pattern,
            slo=self.slo,
            answer=self.answer,
            lo=self.lo,
            hi=self.hi,
            why=self.why,
            detail=self.detail,
            note=self.note,
            users=self.users,
            line=self.line(),
            probes=[p.to_dict() for p in self.probes],
        )


def answer(search: CapacitySearch) -> Capacity:
    """The family's :class:`Capacity` from its probes: what was measured, never more (module docstring)."""
    probes = tuple(p for _, p in sorted(search.probes.items()))

    def said(text: str, lo: int | None, hi: int | None, why: Why, detail: str) -> Capacity:
        return Capacity(search.family, search.pattern, search.slo, text, lo, hi, why, probes, detail, notes(search))

    low, top = search.within(), search.top()
    found = found_answer(search, low, top)
    if found is not None:
        return said(*found)
    und = search.open_undecided()
    why: Why = "undecided" if und is not None and search.done() else (search.stopped or "interrupt")
    detail = STOPPED_TEXT.get(why, "")
    if why == "undecided" and und is not None:
        p = search.probes[und]
        detail = f"{und} undecided after {p.cells} cell(s)" + (f": {p.reason}" if p.reason else "")
    failed = search.of("failed")
    if failed:
        detail += f"; failed at {failed[0]}: {search.probes[failed[0]].error or 'a cell failed'}"
    if not any(p.verdict != "failed" for p in probes):
        return said("not measured", None, top, why, detail)
    a, b = low or 1, top if top is not None else search.max_n
    return said(f"between {a} and {b}", a, b, why, detail)


def found_answer(
    search: CapacitySearch, low: int | None, top: int | None
) -> tuple[str, int | None, int | None, Why, str] | None:
    """A finished search's answer (answer, lo, hi, why, detail); None when it has none yet."""
    if top is not None and top in search.of("above") and top - (low or 1) <= 1:
        if low is None:
            return "no sharing", 1, 2, "none", f"2 users are above the target: N = 2 measured above {search.slo:g}×"
        return f"{low} users", low, top, "none", ""
    if top is not None and top - (low or 1) <= 1:  # the smallest N above the knee failed
        error = search.probes[top].error or "a cell failed"
        if low is None:
            return f"failed at {top}", None, top, "failed", f"{top} users failed: {error}"
        return f">= {low}", low, None, "failed", f"{low} within; {top} users failed: {error}"
    if top is None and (low or 1) >= search.max_n:
        limit = search.limit()
        if low is None:
            return "not measured", None, None, limit.why, f"{limit.text}: no N >= 2 to measure"
        return f">= {low}", low, None, limit.why, limit.text
    return None


def notes(search: CapacitySearch) -> str:
    """What the answer's reader should know: an N within above one above (noise near the target), an N
    whose every user ran faster than alone (the baseline, not the sharing, is off)."""
    out = []
    top = search.top()
    if top is not None and any(n > top for n in search.of("within")):
        out.append("not monotone: an N above one over the target was within it (noise near the target)")
    fast = [str(n) for n, p in sorted(search.probes.items()) if p.below_one]
    if fast:
        out.append(f"below 1× at {', '.join(fast)}: a user faster than alone (the alone baseline is suspect)")
    return "; ".join(out)
