"""What each sharing mode costs a pod, by its load and its neighbours', from results folders: per workload.

Each measured cell (:class:`Cost`) is a victim's p95 slowdown with ``n`` sharers of a family (timeslice,
mps) or on an instance of a MIG profile, with the victim's busy fraction alone (``busy_victim``: the
exclusive cell of its pattern) and its neighbours' (``busy_neighbours``), the workload that measured it
(the program, or the tracker and its lattice) and its folder. A cell of ``tables/latency.csv`` is decided
by interval at advise's target (:mod:`sharebench.advise.decided`): its slowdown with its interval, its
upper bound only where it is undecided, nothing where it has no bound or lies below 1 (:attr:`Costs.left`
says which and why). The batch tables' points (T_N / T_1, median over the work sizes, with their
intervals) are throughput ratios, not percentiles, and are used as measured.

The surface (:meth:`Costs.surface`), of **one workload**: per family and n, one curve per measured pattern
(its level: the victim's busy alone), each a function of the neighbours' busy with knots at 0 (no
neighbour work: slowdown 1) and at each measured neighbour busy; slowdowns below 1 count as 1 and curves
never fall as neighbours get busier; the interval's ends are curves of their own. A pod's slowdown is the
curve interpolated at its neighbours' busy, then between the curves at its own level: within the
workload, never across workloads. Outside the measured levels: a lighter pod takes the lightest curve (an
upper bound for a shared GPU, said in a note); a pod busier than every curve is not costed (the option
is left out), never extrapolated. MIG profiles not measured for the workload are **predicted** from the
slice's SM share and labelled so (no interval).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np

from sharebench.advise.decided import CellCost, cell_cost, redecide
from sharebench.analysis.tail import Decision, TailRule
from sharebench.gpus import GpuModel, MigProfile
from sharebench.modes import KINDS, kinds_where
from sharebench.patterns import BATCH, DEFAULT_SLO, PatternSpec, saturated

# the kind of a GPU cut into instances (MIG): the cost family its measured and emulated layouts go to
MIG = next(k for k, spec in KINDS.items() if spec.device_instances)

SHARED_FAMILIES = kinds_where(family="shared")  # N replicas on one whole device: timeslice, mps
BATCH_LABEL = BATCH.label  # the batch tables' points: the saturated pattern beside itself
LEVEL_SLACK = 1.1  # a pod up to 10 % busier than the heaviest measured curve still takes it
UNBOUNDED = 1e9  # the upper end of a cell above the target whose interval has no upper bound


@dataclass(frozen=True)
class Cost:
    """One measured p95 slowdown of a victim of ``pattern`` (its kind's name, as measured; ``label`` the full
    pattern; ``beside`` the neighbours' kinds, joined by ``+``) by ``workload``, in ``folder``.
    ``decision``: the cell's verdict by interval (None for a batch table's throughput ratio); the
    slowdown and its interval are what the decision gives at :attr:`Costs.slo`."""

    family: str  # timeslice | mps | mig
    n: int  # sharers (mig: instances)
    pattern: str
    beside: str
    slowdown_p95: float
    source: str
    label: str = ""
    busy_victim: float = 1.0
    busy_neighbours: float = 1.0
    lo: float = math.nan
    hi: float = math.nan
    profile: str = ""  # mig only
    emulated: bool = False
    workload: str = ""
    folder: str = ""
    decision: Decision | None = None
    used: str = "measured"  # measured | upper bound | predicted
    why_not: str = ""  # a cell that gives no cost at any target (not decided at all)


def decided(c: Cost, slo: float) -> tuple[Cost | None, str]:
    """The cost a cell gives at ``slo`` (None and the reason where it gives none)."""
    if c.why_not:
        return None, c.why_not
    if c.decision is None:
        return c, ""
    got: CellCost = cell_cost(redecide(c.decision, TailRule(slo)))
    if not got.usable:
        return None, got.why
    return replace(c, slowdown_p95=got.slowdown, lo=got.lo, hi=got.hi, used=got.used), ""


@dataclass(frozen=True)
class Curve:
    """Slowdown against the neighbours' busy for a victim of one pattern at busy ``level``; ``lo``/``hi``
    the interval's ends as curves."""

    label: str
    level: float
    x: np.ndarray  # neighbours' mean busy (knots, ascending, from 0)
    y: np.ndarray  # slowdown at the knots (>= 1, non-decreasing)
    sources: tuple[str, ...]
    lo: np.ndarray = field(default_factory=lambda: np.ones(1))
    hi: np.ndarray = field(default_factory=lambda: np.ones(1))


@dataclass(frozen=True)
class Lookup:
    """Slowdowns of samples: the point, the interval's ends, and which samples' neighbours were busier than
    any measured at their n (the last knot used)."""

    point: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    clamped: np.ndarray


@dataclass(frozen=True)
class Surface:
    """Per measured n, the curves (ascending level) of one family for one pattern kind (``pattern``: its name)
    of one ``workload``."""

    family: str
    pattern: str
    curves: dict[int, tuple[Curve, ...]]
    workload: str = ""

    def ns(self) -> list[int]:
        return sorted(self.curves)

    def n_for(self, k: int) -> int | None:
        """The smallest measured n >= k (a cost for more sharers bounds fewer)."""
        return next((n for n in self.ns() if n >= k), None)

    def top_level(self, n: int) -> float:
        return max(c.level for c in self.curves[n])

    def lookup(self, n: int, level: float, bn: np.ndarray) -> Lookup:
        """The slowdowns at neighbours' busy ``bn`` for a victim at ``level`` with ``n`` sharers."""
        curves = self.curves[n]
        clamped = bn > min(float(c.x[-1]) for c in curves) + 1e-9
        levels = np.array([c.level for c in curves])
        if len(curves) == 1 or level <= levels[0]:
            j, w = 0, 0.0
        else:
            j = int(np.clip(np.searchsorted(levels, level) - 1, 0, len(curves) - 2))
            w = float(np.clip((level - levels[j]) / max(levels[j + 1] - levels[j], 1e-12), 0.0, 1.0))
        ends = [
            between(curves, j, w, bn, attr) if len(curves) > 1 else np.interp(bn, curves[0].x, getattr(curves[0], attr))
            for attr in ("y", "lo", "hi")
        ]
        return Lookup(ends[0], ends[1], ends[2], clamped)


def between(curves: tuple[Curve, ...], j: int, w: float, bn: np.ndarray, attr: str) -> np.ndarray:
    """Curve ``j`` and ``j + 1``'s ``attr`` at ``bn``, weighted ``1 - w`` and ``w``."""
    a = np.interp(bn, curves[j].x, getattr(curves[j], attr))
    if w <= 0:
        return a
    b = np.interp(bn, curves[j + 1].x, getattr(curves[j + 1], attr))
    return a * (1 - w) + b * w


@dataclass(frozen=True)
class MigCost:
    """A pod's slowdown alone on an instance at its load, with its interval and where it comes from."""

    slowdown: float
    lo: float
    hi: float
    source: str

    @property
    def predicted(self) -> bool:
        return self.source.startswith("predicted")


@dataclass
class Costs:
    """The cells read for a pool of GPU ``model``, decided at ``slo``: ``points`` the costs they give,
    ``left`` the cells that give none and why, ``cells`` every cell as read."""

    model: GpuModel
    folders: list[str]
    points: list[Cost] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    models_read: dict[str, str] = field(default_factory=dict)  # folder -> its model key
    workloads: dict[str, str] = field(default_factory=dict)  # folder -> its workload
    left: list[str] = field(default_factory=list)
    slo: float = DEFAULT_SLO
    cells: list[Cost] = field(default_factory=list)

    @property
    def shared(self) -> list[Cost]:
        return [c for c in self.points if c.family in SHARED_FAMILIES]

    def at(self, slo: float) -> Costs:
        """These cells decided at ``slo``: the costs they give and the ones they do not."""
        points, left = [], []
        for c in self.cells:
            got, why = decided(c, slo)
            if got is not None:
                points.append(got)
            else:
                left.append(f"{c.source.split(': ', 1)[-1]}: {why}")
        return replace(self, points=points, left=left, slo=slo)

    def kinds(self) -> set[str]:
        """The pattern kinds with at least one measured sharing cost."""
        return {c.pattern for c in self.points}

    def of_workload(self, workload: str) -> list[Cost]:
        return [c for c in self.points if c.workload == workload]

    def usable(self, pattern: PatternSpec, workload: str) -> list[Cost]:
        """The workload's points that can cost a class of ``pattern``: its own kind's, and a saturated
        kind's (batch: the saturated level)."""
        return [c for c in self.of_workload(workload) if c.pattern == pattern.name or saturated(c.pattern)]

    def surface(self, family: str, pattern: PatternSpec, workload: str) -> Surface:
        by_n: dict[int, dict[str, list[Cost]]] = defaultdict(lambda: defaultdict(list))
        for c in self.usable(pattern, workload):
            if c.family == family and c.n >= 2:
                by_n[c.n][c.label].append(c)
        curves = {n: curves_of(labels) for n, labels in sorted(by_n.items())}
        return Surface(family, pattern.name, curves, workload)

    def mig(self, profile: MigProfile, pattern: PatternSpec, level: float, workload: str) -> MigCost:
        """A pod at busy ``level`` alone on an instance of ``profile``: interpolated between the workload's
        measured levels; above them the SM-share prediction at busy 1; none measured: predicted."""
        pts = sorted(
            (c for c in self.usable(pattern, workload) if c.family == MIG and c.profile == profile.name),
            key=lambda c: c.busy_victim,
        )
        predicted = self.model.sms / profile.sms
        if not pts:
            text = f"predicted: SM share {profile.sms}/{self.model.sms} (slowdown {predicted:.2f}x, no interval)"
            return MigCost(predicted, predicted, predicted, text)
        x = [c.busy_victim for c in pts]
        ys = [list(np.maximum.accumulate([max(1.0, getattr(c, a)) for c in pts])) for a in ("slowdown_p95", "lo", "hi")]
        source = "; ".join(dict.fromkeys(c.source for c in pts))
        if level < x[0] / LEVEL_SLACK:
            source += f"; busy {level:.2f} below the lightest measured {x[0]:.2f}: its cost used"
        if x[-1] < 1.0 - 1e-9 and level > x[-1]:
            x = [*x, 1.0]
            ys = [[*y, max(y[-1], predicted)] for y in ys]
            source += f"; above busy {pts[-1].busy_victim:.2f} predicted (SM share)"
        got = [float(np.interp(level, x, y)) for y in ys]
        return MigCost(got[0], got[1], got[2], f"measured: {source}")


def curves_of(labels: dict[str, list[Cost]]) -> tuple[Curve, ...]:
    out = []
    for label, pts in labels.items():
        knots: dict[float, tuple[float, float, float]] = {0.0: (1.0, 1.0, 1.0)}
        for c in pts:
            b = round(c.busy_neighbours, 4)
            old = knots.get(b, (1.0, 1.0, 1.0))
            lo = c.lo if math.isfinite(c.lo) else c.slowdown_p95
            hi = c.hi if math.isfinite(c.hi) else (UNBOUNDED if c.hi == math.inf else c.slowdown_p95)
            knots[b] = (max(old[0], c.slowdown_p95, 1.0), max(old[1], lo, 1.0), max(old[2], hi, 1.0))
        x = np.array(sorted(knots))
        y, y_lo, y_hi = (np.maximum.accumulate(np.array([knots[b][i] for b in x])) for i in range(3))
        level = float(np.mean([c.busy_victim for c in pts]))
        sources = tuple(dict.fromkeys(c.source for c in pts))
        out.append(Curve(label, level, x, y, sources, np.minimum(y_lo, y), np.maximum(y_hi, y)))
    return tuple(sorted(out, key=lambda c: c.level))
