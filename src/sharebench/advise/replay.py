"""Replay a usage trace on a candidate layout: pack pods onto GPUs, slow what overlaps, every pod's p95.

Options per class (:func:`class_options`), costed from one workload's points (:mod:`sharebench.advise.classes`):
``exclusive`` (one pod per GPU at a time, never slowed); every ``timeslice:N`` and ``mps:N`` measured
whose measured loads cover the class's pods; every MIG profile of the pool's GPU model
(``mig:all-<profile>``, measured or predicted). A class that needs isolation is offered only the modes
that isolate memory and faults (whole GPUs and MIG).

Packing by presence (:func:`pack`): time is cut into segments at every pod's start and end; a pod goes,
first-fit decreasing on its mean busy while present, to the first GPU with, over its whole presence, a
free slot (N for timeslice/mps, the profile's instance count for MIG), room for its peak memory (a whole
GPU's for exclusive; shared GPUs and instances less the pool's headroom, :class:`sharebench.advise.pool.Pool`)
and, for timeslice/mps, mean busy summed <= 1. Pods whose presence does not overlap share a slot: 48 pods
never more than 4 at once fit 4 whole GPUs. Pods of several classes pack together when their modes agree
(:func:`replay_members`); each is costed by its own class's option.

Replay, at every step and for every GPU: a present pod with work (busy above
:data:`sharebench.advise.usage.ACTIVE`) runs at the measured slowdown for the k pods present (the smallest
measured N >= k), its own load (mean busy while present) and its neighbours' busy in that step (their
mean), never faster than the GPU's capacity allows (slowdown >= the busy fractions summed). A pod on a MIG
instance runs at the instance's slowdown for its load. **Every pod's** p95 slowdown is taken over its own
active steps, with the interval the costs carry (the same replay at the costs' lower and upper ends);
an option is within the target when every pod's upper end is (:func:`verdict`), above it when some pod's
lower end is above, else undecided. Each pod is computed over its presence only, so a month of churned
pods costs what its present pod-steps cost (benchmark: ``python -m tools.advise_replay``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from sharebench.advise.costs import LEVEL_SLACK, SHARED_FAMILIES, UNBOUNDED, Costs, MigCost, Surface
from sharebench.advise.isolation import ISOLATION
from sharebench.advise.pool import GB, Pool
from sharebench.advise.usage import ACTIVE, Usage
from sharebench.gpus import MigProfile
from sharebench.modes import BASELINE
from sharebench.patterns import PatternSpec, saturated

LIGHT = 0.5  # a class whose pods are busy less than this on average is "lightly used"
PERCENTILE = 95


@dataclass(frozen=True, eq=False)
class Option:
    """One way to run a class: ``slots`` pods per GPU (or instances per GPU under MIG)."""

    mode: str
    slots: int
    memory_bytes: float  # per GPU (shared modes) or per instance (MIG)
    shared_memory: bool
    source: str
    surface: Surface | None = None  # timeslice/mps: the measured costs
    profile: MigProfile | None = None  # MIG: the instance's profile, costed by ``costs`` for ``pattern``
    costs: Costs | None = None
    pattern: PatternSpec | None = None
    workload: str = ""

    def instance_cost(self, level: float) -> MigCost:
        """MIG: a pod's slowdown on one instance at its load (with its interval); 1 for a whole GPU."""
        if self.profile is None or self.costs is None or self.pattern is None:
            return MigCost(1.0, 1.0, 1.0, self.source)
        return self.costs.mig(self.profile, self.pattern, level, self.workload)

    @property
    def predicted(self) -> bool:
        return self.source.startswith("predicted")

    @property
    def kind(self) -> str:
        return self.mode.partition(":")[0]


@dataclass(frozen=True)
class PodP95:
    """Each pod's p95 slowdown (indices into the usage), with the interval's ends (NaN: no active step)."""

    pods: np.ndarray
    point: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def active(self) -> np.ndarray:
        return np.isfinite(self.point)

    def worst(self) -> int | None:
        """The position of the worst pod (by the upper end, then the point); None: no pod worked."""
        ok = np.flatnonzero(self.active())
        if not ok.size:
            return None
        return int(ok[np.lexsort((self.point[ok], self.hi[ok]))[-1]])

    def quantiles(self) -> dict[str, float]:
        """The distribution of the pods' p95 (point): min, median, p90, max."""
        x = self.point[self.active()]
        if not x.size:
            return {}
        q = np.percentile(x, [0, 50, 90, 100])
        return {"min": float(q[0]), "median": float(q[1]), "p90": float(q[2]), "max": float(q[3])}

    def over(self, slo: float) -> int:
        """Pods not shown within ``slo`` (their upper end above it)."""
        return int(np.sum(self.hi[self.active()] > slo))


def empty_pods() -> PodP95:
    return PodP95(np.zeros(0, int), np.zeros(0), np.zeros(0), np.zeros(0))


@dataclass(frozen=True)
class Outcome:
    """A class replayed under one option: the GPUs, every pod's p95 and the verdict by interval."""

    cls: str
    option: Option
    gpus: int
    p95: float  # the worst pod's p95 (point)
    feasible: bool  # packed and every pod within the target
    reason: str
    bins: tuple[tuple[int, ...], ...]  # pod indices per GPU
    work_in_s: float
    work_replayed_s: float
    clamped: float = 0.0  # share of samples whose neighbours were busier than any measured
    verdict: str = "within"  # within | above | undecided | not packed
    p95_hi: float = math.nan  # the worst pod's upper end
    p95_lo: float = math.nan  # the largest lower end
    pods: PodP95 = field(default_factory=empty_pods)
    worst_pod: str = ""


@dataclass
class ClassOptions:
    options: list[Option]
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Costing:
    """How a class is costed: the workload whose points cost it (None: none of its kind measured), and
    whether it needs isolation."""

    workload: str | None
    isolation: bool = False


def class_options(costs: Costs, pattern: PatternSpec, levels: np.ndarray, costing: Costing, pool: Pool) -> ClassOptions:
    """The options of a class of ``pattern`` whose pods run at ``levels`` (mean busy while present)."""
    out = ClassOptions([Option(BASELINE, 1, pool.whole_bytes, True, "whole GPU: no neighbour")])
    workload = costing.workload or ""
    for family in SHARED_FAMILIES:
        if costing.isolation and not ISOLATION[family].isolates:
            out.left_out.append(f"{family}: not offered: the class needs isolation ({ISOLATION[family].line()})")
            continue
        shared_options(out, costs.surface(family, pattern, workload), levels, pool.shared_bytes)
    seen: set[str] = set()
    for profile in sorted(pool.model.profiles, key=lambda p: -p.max_count):
        if profile.name not in seen:
            seen.add(profile.name)
            out.options.append(mig_option(costs, profile, pattern, levels, (workload, pool)))
    return out


def shared_options(out: ClassOptions, surf: Surface, levels: np.ndarray, mem: float) -> None:
    """The timeslice:N or mps:N options whose measured loads cover the class's pods, into ``out``."""
    top, low, mean = (float(levels.max()), float(levels.min()), float(levels.mean())) if levels.size else (0, 0, 0)
    if not surf.ns():
        out.left_out.append(f"{surf.family}: not measured for {surf.pattern} by {surf.workload or 'any workload'}")
    covered: list[int] = []
    for big in (n for n in surf.ns() if n >= 2):
        used = [n for n in surf.ns() if n <= big]
        short = [n for n in used if top > surf.top_level(n) * LEVEL_SLACK]
        if short:
            n = short[0]
            out.left_out.append(
                f"{surf.family}:{big}: with {n} sharers measured up to busy {surf.top_level(n):.2f}, "
                f"pods of this class reach {top:.2f} (not extrapolated)"
            )
            continue
        covered = used
        out.options.append(Option(f"{surf.family}:{big}", big, mem, True, surface_source(surf, used), surf))
    if not covered:
        return
    lightest = min(c.level for n in covered for c in surf.curves[n])
    if low < lightest / LEVEL_SLACK:
        out.notes.append(
            f"{surf.family}: {surf.pattern} busy {low:.2f} below the lightest measured {lightest:.2f}: "
            "its cost used, an upper bound"
        )
    if mean < LIGHT and any(all(saturated(c.label) for c in surf.curves[n]) for n in covered):
        out.notes.append(
            f"warning: {surf.family}: saturated batch costs applied to a lightly used class "
            f"(mean busy {mean:.2f}); measure its pattern for a fair cost"
        )


def surface_source(surf: Surface, ns: list[int]) -> str:
    labels = sorted({f"{c.label} at busy {c.level:.2f}" for n in ns for c in surf.curves[n]})
    return f"measured ({surf.workload}): {surf.family} N={','.join(map(str, ns))}; {'; '.join(labels)}"


def mig_option(
    costs: Costs, profile: MigProfile, pattern: PatternSpec, levels: np.ndarray, where: tuple[str, Pool]
) -> Option:
    workload, pool = where
    got = costs.mig(profile, pattern, float(np.mean(levels)) if levels.size else 0.0, workload)
    mem = pool.instance_bytes(profile)
    return Option(
        f"mig:all-{profile.name}", profile.max_count, mem, False, got.source, None, profile, costs, pattern, workload
    )


# ------------------------------------------------------------------------------------------ packing


@dataclass
class Bins:
    """GPUs of one option over the segments of time: pods present, memory and load per segment."""

    option: Option
    cuts: np.ndarray  # segment boundaries (steps)
    pods: list[list[int]] = field(default_factory=list)
    count: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), np.int32))
    memory: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    load: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def segment(self, first: int, last: int) -> slice:
        return slice(int(np.searchsorted(self.cuts, first)), int(np.searchsorted(self.cuts, last)))

    def reserve(self, gpus: int) -> None:
        """Room for ``gpus`` GPUs (empty ones appended)."""
        width = len(self.cuts) - 1
        more = gpus - len(self.pods)
        if more > 0:
            self.pods.extend([] for _ in range(more))
            self.count = np.vstack([self.count.reshape(-1, width), np.zeros((more, width), np.int32)])
            self.memory = np.vstack([self.memory.reshape(-1, width), np.zeros((more, width))])
            self.load = np.vstack([self.load.reshape(-1, width), np.zeros((more, width))])

    def add(self, gpu: int, pod: int, seg: slice, memory: float, load: float) -> None:
        self.reserve(gpu + 1)
        self.pods[gpu].append(pod)
        self.count[gpu, seg] += 1
        self.memory[gpu, seg] += memory
        self.load[gpu, seg] += load

    def first_fit(self, seg: slice, memory: float, load: float) -> int:
        """The first GPU that holds a pod over ``seg``; a new one's index where none does."""
        if not self.pods:
            return 0
        ok = self.count[:, seg].max(axis=1) < self.option.slots
        if self.option.shared_memory:
            ok &= self.memory[:, seg].max(axis=1) + memory <= self.option.memory_bytes
            ok &= self.load[:, seg].max(axis=1) + load <= 1.0 + 1e-9
        hit = np.flatnonzero(ok)
        return int(hit[0]) if hit.size else len(self.pods)


def pack(
    usage: Usage, pods: np.ndarray, option: Option, pinned: list[list[int]] | None = None
) -> tuple[list[list[int]], str]:
    """First-fit of ``pods`` by presence into GPUs of ``option`` after the ``pinned`` GPUs (pods already
    placed, kept where they are), in decreasing load and in order of arrival: the fewer GPUs of the two;
    ("" or the reason it cannot hold them)."""
    pods = np.asarray(pods, int)
    level = usage.level(pods)
    peak = usage.memory_peak[pods]
    big = np.flatnonzero(peak > option.memory_bytes)
    if big.size:
        pod, m = int(pods[big[0]]), float(peak[big[0]])
        held = option.memory_bytes / GB
        return [], f"pod {usage.pods[pod]} peaks at {m / GB:.1f} GB, more than {option.mode} holds ({held:.3g} GB)"
    by_load = np.argsort(-level, kind="stable")
    by_arrival = np.lexsort((-level, usage.first[pods]))
    loads = PodLoads(pods, level, peak)
    packs = [first_fit(usage, loads, option, pinned, order) for order in (by_load, by_arrival)]
    return min(packs, key=len), ""


@dataclass(frozen=True, eq=False)
class PodLoads:
    """Pods to pack (indices into the usage) with, position for position, their load and peak memory."""

    pods: np.ndarray
    level: np.ndarray  # mean busy while present
    peak: np.ndarray  # peak memory, bytes


def first_fit(
    usage: Usage, loads: PodLoads, option: Option, pinned: list[list[int]] | None, order: np.ndarray
) -> list[list[int]]:
    """``loads``' pods, in ``order`` (positions in ``loads``), first-fit after the ``pinned`` GPUs."""
    pods, level, peak = loads.pods, loads.level, loads.peak
    cuts = np.unique(np.concatenate([usage.first[pods], usage.last[pods], [0, usage.steps]]))
    bins = Bins(option, cuts)
    where = {int(p): j for j, p in enumerate(pods)}
    bins.reserve(len(pinned or []))
    for g, placed in enumerate(pinned or []):
        for p in placed:
            j = where[p]
            bins.add(g, p, bins.segment(usage.first[p], usage.last[p]), float(peak[j]), float(level[j]))
    done = {p for placed in pinned or [] for p in placed}
    for j in order:
        pod, m, b = int(pods[j]), float(peak[j]), float(level[j])
        if pod not in done:
            seg = bins.segment(usage.first[pod], usage.last[pod])
            bins.add(bins.first_fit(seg, m, b), pod, seg, m, b)
    return bins.pods


# ------------------------------------------------------------------------------------------ replay


@dataclass
class Samples:
    """Each replayed pod's p95 (point, lower, upper end) and how many samples were clamped."""

    p95: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    clamped: int = 0
    count: int = 0

    def add(self, pod: int, ends: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        self.count += int(ends[0].size)
        got = np.percentile(np.stack(ends), PERCENTILE, axis=1)  # one call for the three ends
        self.p95[pod] = (float(got[0]), float(got[1]), float(got[2]))

    def of(self, pods: np.ndarray) -> PodP95:
        rows = np.array([self.p95.get(int(p), (math.nan,) * 3) for p in pods], float).reshape(-1, 3)
        return PodP95(np.asarray(pods, int), rows[:, 0], rows[:, 1], rows[:, 2])


@dataclass(frozen=True, eq=False)
class StepLoads:
    """One pod's active steps on a shared GPU: its own busy, the GPU's busy summed, the pods present."""

    own: np.ndarray
    total: np.ndarray
    k: np.ndarray


def replay_gpu(
    usage: Usage, pods: list[int], options: dict[int, Option], levels: dict[int, float], out: Samples
) -> None:
    """The p95 slowdowns of the pods of one GPU (each costed by its own option), into ``out``."""
    lo = int(min(usage.first[p] for p in pods))
    hi = int(max(usage.last[p] for p in pods))
    busy = usage.busy[pods, lo:hi].astype(np.float64)
    present = (np.arange(lo, hi) >= usage.first[pods, None]) & (np.arange(lo, hi) < usage.last[pods, None])
    k = present.sum(axis=0)
    total = busy.sum(axis=0)
    for i, pod in enumerate(pods):
        a, b = int(usage.first[pod]) - lo, int(usage.last[pod]) - lo
        active = np.flatnonzero(busy[i, a:b] > ACTIVE) + a
        if not active.size:
            continue
        option = options[pod]
        if option.surface is None:
            got = option.instance_cost(levels[pod])
            ends = tuple(np.full(active.size, v) for v in (got.slowdown, got.lo, got.hi))
            out.add(pod, (ends[0], ends[1], ends[2]))
        else:
            steps = StepLoads(busy[i, active], total[active], k[active])
            out.add(pod, shared_slowdown(option.surface, levels[pod], steps, out))


def shared_slowdown(
    surf: Surface, level: float, steps: StepLoads, out: Samples
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A pod's slowdown at each of its active steps on a shared GPU: the point and the interval's ends."""
    own, total, k = steps.own, steps.total, steps.k
    ends = [np.ones(own.size) for _ in range(3)]
    for kk in np.unique(k[k >= 2]):
        n = surf.n_for(int(kk))
        cols = np.flatnonzero(k == kk)
        if n is None:
            continue
        bn = (total[cols] - own[cols]) / (kk - 1)
        got = surf.lookup(n, level, bn)
        for e, v in zip(ends, (got.point, got.lo, got.hi)):
            e[cols] = v
        out.clamped += int(got.clamped.sum())
    return (np.maximum(ends[0], total), np.maximum(ends[1], total), np.maximum(ends[2], total))


def verdict(pods: PodP95, slo: float) -> tuple[str, str]:
    """Every pod within ``slo`` by its upper end -> within; a pod above it by its lower end -> above."""
    worst = pods.worst()
    if worst is None:
        return "within", "no pod had work: never slowed"
    hi, lo = float(np.max(pods.hi[pods.active()])), float(np.max(pods.lo[pods.active()]))
    shown = f"{pods.point[worst]:.2f}x, up to {upper_text(pods.hi[worst])}"
    if hi <= slo:
        return "within", f"every pod within {slo:g}x (worst {shown})"
    if lo > slo:
        return "above", f"{pods.over(slo)} pod(s) above {slo:g}x (worst {shown}; lower end {lo:.2f}x)"
    return "undecided", f"{pods.over(slo)} pod(s) not shown within {slo:g}x (worst {shown})"


def upper_text(hi: float) -> str:
    return "no upper bound" if not math.isfinite(hi) or hi >= UNBOUNDED / 10 else f"{hi:.2f}x"


@dataclass(frozen=True)
class Member:
    """A class packed into a group of GPUs: its name, its pods and the option that costs them."""

    cls: str
    pods: np.ndarray
    option: Option


def replay_members(
    usage: Usage, members: list[Member], slo: float, pinned: list[list[int]] | None = None
) -> tuple[list[list[int]], dict[str, Outcome]]:
    """Pack the members' pods together (their modes agree: the first member's slots and memory) after
    ``pinned``, replay every GPU, and each class's outcome (its pods' p95s; the GPUs holding its pods)."""
    option = members[0].option
    pods = np.concatenate([m.pods for m in members]) if members else np.zeros(0, int)
    bins, why = pack(usage, pods, option, pinned)
    if why:
        return [], {m.cls: unpacked(usage, m, why) for m in members}
    options = {int(p): m.option for m in members for p in m.pods}
    levels = dict(zip(map(int, pods), map(float, usage.level(pods))))
    samples = Samples()
    for b in bins:
        if b:
            replay_gpu(usage, b, options, levels, samples)
    return bins, {m.cls: outcome_of(usage, m, (bins, samples), slo) for m in members}


def unpacked(usage: Usage, m: Member, why: str) -> Outcome:
    work = float(usage.busy[m.pods].sum(dtype=np.float64) * usage.step_s)
    return Outcome(m.cls, m.option, 0, math.nan, False, why, (), work, 0.0, verdict="not packed")


def outcome_of(usage: Usage, m: Member, packed: tuple[list[list[int]], Samples], slo: float) -> Outcome:
    """A member's outcome: the GPUs holding its pods, its pods' p95s and their verdict."""
    bins, samples = packed
    mine = set(map(int, m.pods))
    held = tuple(tuple(p for p in b if p in mine) for b in bins)
    pods = samples.of(m.pods)
    verdict_, reason = verdict(pods, slo)
    worst, active = pods.worst(), pods.active()
    step_s = usage.step_s
    return Outcome(
        cls=m.cls,
        option=m.option,
        gpus=sum(1 for h in held if h),
        p95=float(pods.point[worst]) if worst is not None else 1.0,
        feasible=verdict_ == "within",
        reason=reason,
        bins=held,
        work_in_s=float(usage.busy[m.pods].sum(dtype=np.float64) * step_s),
        work_replayed_s=float(sum(usage.busy[list(h)].sum(dtype=np.float64) for h in held if h) * step_s),
        clamped=samples.clamped / max(samples.count, 1),
        verdict=verdict_,
        p95_hi=float(np.max(pods.hi[active])) if active.any() else 1.0,
        p95_lo=float(np.max(pods.lo[active])) if active.any() else 1.0,
        pods=pods,
        worst_pod=usage.pods[int(pods.pods[worst])] if worst is not None else "",
    )


def replay(usage: Usage, cls: str, option: Option, slo: float, pinned: list[list[int]] | None = None) -> Outcome:
    """Pack the class's pods under ``option`` (after ``pinned``) and replay the trace on those GPUs; its
    GPUs are every GPU of the packing (pinned ones emptied by the pods' departure too: a check's replay)."""
    bins, got = replay_members(usage, [Member(cls, usage.pods_of(cls), option)], slo, pinned)
    return replace(got[cls], gpus=len(bins)) if bins else got[cls]
