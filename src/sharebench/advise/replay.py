"""Replay a usage trace on a candidate layout of one class: pack its pods onto GPUs, slow what overlaps.

Options per class (:func:`class_options`): ``exclusive`` (one pod per GPU at a time, never slowed); every
``timeslice:N`` and ``mps:N`` measured (:meth:`sharebench.advise.costs.Costs.surface`) whose measured
loads cover the class's pods; every MIG profile of the GPU model (``mig:all-<profile>``, measured or
predicted). A GPU holds pods of one class only.

Packing by presence (:func:`pack`): time is cut into segments at every pod's start and end; a pod goes,
first-fit decreasing on its mean busy while present, to the first GPU with, over its whole presence, a
free slot (N for timeslice/mps, the profile's instance count for MIG), room for its peak memory (the
GPU's memory shared; one instance's under MIG) and, for timeslice/mps, mean busy summed <= 1. Pods whose
presence does not overlap share a slot: 48 pods never more than 4 at once fit 4 whole GPUs.

Replay (:func:`replay`), at every step and for every GPU: a present pod with work (busy above
:data:`sharebench.advise.usage.ACTIVE`) runs at the measured slowdown for the k pods present (the smallest
measured N >= k), its own load (mean busy while present) and its neighbours' busy in that step (their
mean), never faster than the GPU's capacity allows (slowdown >= the busy fractions summed). A pod on a MIG
instance runs at the instance's slowdown for its load. The class's p95 slowdown is over its active (pod,
step) samples. Each pod is computed over its presence only, so a month of churned pods costs what its
present pod-steps cost (benchmark: ``python -m tools.advise_replay``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sharebench.advise.costs import LEVEL_SLACK, SHARED_FAMILIES, Costs, Surface
from sharebench.advise.usage import ACTIVE, Usage
from sharebench.gpus import MigProfile
from sharebench.modes import BASELINE
from sharebench.patterns import PatternSpec, saturated

GB = 1e9
LIGHT = 0.5  # a class whose pods are busy less than this on average is "lightly used"


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

    def instance_slowdown(self, level: float) -> float:
        """MIG: a pod's slowdown on one instance at its load; 1 for a whole GPU."""
        if self.profile is None or self.costs is None or self.pattern is None:
            return 1.0
        return self.costs.mig(self.profile, self.pattern, level)[0]

    @property
    def predicted(self) -> bool:
        return self.source.startswith("predicted")


@dataclass(frozen=True)
class Outcome:
    """A class replayed under one option."""

    cls: str
    option: Option
    gpus: int
    p95: float
    feasible: bool  # packed and within the SLO
    reason: str
    bins: tuple[tuple[int, ...], ...]  # pod indices per GPU
    work_in_s: float
    work_replayed_s: float
    clamped: float = 0.0  # share of samples whose neighbours were busier than any measured


@dataclass
class ClassOptions:
    options: list[Option]
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def class_options(costs: Costs, pattern: PatternSpec, levels: np.ndarray) -> ClassOptions:
    """The options of a class of ``pattern`` whose pods run at ``levels`` (mean busy while present)."""
    mem = costs.model.mem_gb * GB
    out = ClassOptions([Option(BASELINE, 1, mem, True, "whole GPU: no neighbour")])
    for family in SHARED_FAMILIES:
        shared_options(out, costs.surface(family, pattern), levels, mem)
    seen: set[str] = set()
    for profile in sorted(costs.model.profiles, key=lambda p: -p.max_count):
        if profile.name not in seen:
            seen.add(profile.name)
            out.options.append(mig_option(costs, profile, pattern, levels))
    return out


def shared_options(out: ClassOptions, surf: Surface, levels: np.ndarray, mem: float) -> None:
    """The timeslice:N or mps:N options whose measured loads cover the class's pods, into ``out``."""
    top, low, mean = (float(levels.max()), float(levels.min()), float(levels.mean())) if levels.size else (0, 0, 0)
    if not surf.ns():
        out.left_out.append(f"{surf.family}: not measured for {surf.pattern}")
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
    return f"measured: {surf.family} N={','.join(map(str, ns))}; {'; '.join(labels)}"


def mig_option(costs: Costs, profile: MigProfile, pattern: PatternSpec, levels: np.ndarray) -> Option:
    _, source = costs.mig(profile, pattern, float(np.mean(levels)) if levels.size else 0.0)
    mem = profile.mem_gb * GB
    return Option(f"mig:all-{profile.name}", profile.max_count, mem, False, source, None, profile, costs, pattern)


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
    level = usage.level(pods)
    peak = usage.memory_peak[pods]
    big = np.flatnonzero(peak > option.memory_bytes)
    if big.size:
        pod, m = int(pods[big[0]]), float(peak[big[0]])
        return [], f"pod {usage.pods[pod]} peaks at {m / GB:.1f} GB, more than {option.mode} holds"
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


@dataclass
class Samples:
    values: list[np.ndarray] = field(default_factory=list)
    clamped: int = 0

    def p95(self) -> float:
        allv = np.concatenate(self.values) if self.values else np.array([])
        return float(np.percentile(allv, 95)) if allv.size else 1.0

    def count(self) -> int:
        return int(sum(v.size for v in self.values))


def replay_gpu(usage: Usage, pods: list[int], option: Option, levels: dict[int, float], out: Samples) -> None:
    """The slowdowns of the active samples of the pods of one GPU, into ``out``."""
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
        if option.surface is None:
            s = np.full(active.size, option.instance_slowdown(levels[pod]))
        else:
            steps = StepLoads(busy[i, active], total[active], k[active])
            s = shared_slowdown(option.surface, levels[pod], steps, out)
        out.values.append(s)


@dataclass(frozen=True, eq=False)
class StepLoads:
    """One pod's active steps on a shared GPU: its own busy, the GPU's busy summed, the pods present."""

    own: np.ndarray
    total: np.ndarray
    k: np.ndarray


def shared_slowdown(surf: Surface, level: float, steps: StepLoads, out: Samples) -> np.ndarray:
    own, total, k = steps.own, steps.total, steps.k
    s = np.ones(own.size)
    for kk in np.unique(k[k >= 2]):
        n = surf.n_for(int(kk))
        cols = np.flatnonzero(k == kk)
        if n is None:
            continue
        bn = (total[cols] - own[cols]) / (kk - 1)
        s[cols], clamped = surf.lookup(n, level, bn)
        out.clamped += int(clamped.sum())
    return np.maximum(s, total)


def replay(usage: Usage, cls: str, option: Option, slo: float, pinned: list[list[int]] | None = None) -> Outcome:
    """Pack the class's pods under ``option`` (after ``pinned``) and replay the trace on those GPUs."""
    pods = usage.pods_of(cls)
    work_in = float(usage.busy[pods].sum(dtype=np.float64) * usage.step_s)
    bins, why = pack(usage, pods, option, pinned)
    if why:
        return Outcome(cls, option, 0, math.nan, False, why, (), work_in, 0.0)
    level = usage.level(pods)
    levels = {int(p): float(v) for p, v in zip(pods, level)}
    slots = [b for b in bins if b]
    gpus = len(bins)  # with GPUs pinned but emptied by the pods' departure (a check's replay)
    samples = Samples()
    for b in slots:
        replay_gpu(usage, b, option, levels, samples)
    replayed = float(sum(usage.busy[b].sum(dtype=np.float64) for b in slots) * usage.step_s)
    p95 = samples.p95()
    ok = p95 <= slo
    reason = f"p95 slowdown {p95:.2f}x {'<=' if ok else '>'} {slo:g}x"
    clamped = samples.clamped / max(samples.count(), 1)
    bins_t = tuple(tuple(b) for b in bins)
    return Outcome(cls, option, gpus, p95, ok, reason, bins_t, work_in, replayed, clamped)
