"""A layout of the whole pool: one option per class, classes whose modes agree sharing GPUs.

Each class's options are replayed alone first (:mod:`sharebench.advise.replay`); the feasible ones (every
pod within the target by its upper end) are its candidates. A layout takes one candidate per class;
classes with the same mode form one **group** whose pods are packed together by presence (a GPU in one
mode holds any class's pods: a day class and a night class take turns on the same GPUs), so a layout's
GPUs are its groups' (:class:`Layout`). The search (:class:`Search`) starts from each class's fewest GPUs
alone and from every mode all classes can take, and moves one class at a time to another candidate while
the pool shrinks (ties: the lower worst pod). A group of several classes is replayed together, each pod
costed by its own class; where a pod would leave the target there, the group is packed apart.

Whole GPUs for every class together never need more GPUs than the peak of pods present, so the advice
needs more than today's peak of GPUs only where a constraint forces it, and says which
(:func:`more_than_today`): the pool's memory, isolation, pods that shared GPUs today and cannot share
within the target now, or classes in modes that disagree.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from sharebench.advise.isolation import shares_without_isolation
from sharebench.advise.pool import GB, Pool
from sharebench.advise.replay import Member, Outcome, pack, replay, replay_members, upper_text
from sharebench.advise.usage import Usage
from sharebench.gpus import gpu_model
from sharebench.modes import BASELINE

MAX_CANDIDATES = 5  # options per class the search moves between (its Pareto front first, whole GPUs kept)
MAX_PASSES = 4
NEXT_BEST = 3
NEAR = 0.9  # an option whose worst pod reaches 90 % of the target is "within 10 % of it"


@dataclass(frozen=True)
class Group:
    """GPUs of one mode and the classes packed onto them; ``bins``: pod indices per GPU."""

    mode: str
    classes: tuple[str, ...]
    bins: tuple[tuple[int, ...], ...]

    @property
    def gpus(self) -> int:
        return len(self.bins)


@dataclass(frozen=True)
class Layout:
    """One option per class (``choice``: its outcome, from its group's replay) and the groups of GPUs."""

    choice: dict[str, Outcome]
    groups: tuple[Group, ...] = ()
    unmeasured: frozenset[str] = frozenset()  # classes kept whole because no workload measured their pattern

    @property
    def gpus(self) -> int:
        return sum(g.gpus for g in self.groups) if self.groups else sum(o.gpus for o in self.choice.values())

    @property
    def worst(self) -> float:
        return max((o.p95_hi for o in self.choice.values()), default=1.0)

    def group_of(self, cls: str) -> Group | None:
        return next((g for g in self.groups if cls in g.classes), None)

    def key(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted((c, o.option.mode) for c, o in self.choice.items()))

    def summary(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "groups": [{"mode": g.mode, "classes": list(g.classes), "gpus": g.gpus} for g in self.groups],
            "classes": {c: class_summary(o, c in self.unmeasured) for c, o in self.choice.items()},
        }


def class_summary(o: Outcome, unmeasured: bool) -> dict[str, Any]:
    pods = o.pods
    worst = pods.worst()
    return {
        "mode": "not measured" if unmeasured else o.option.mode,
        "gpus": o.gpus,
        "verdict": o.verdict,
        "worst_pod": o.worst_pod,
        "worst_p95_slowdown": round(o.p95, 4),
        "worst_p95_slowdown_hi": None if not math.isfinite(o.p95_hi) else round(o.p95_hi, 4),
        "worst_p95_slowdown_lo": None
        if worst is None or not math.isfinite(pods.lo[worst])
        else round(float(pods.lo[worst]), 4),
        "pods_p95": {k: round(v, 4) for k, v in pods.quantiles().items()},
        "pods": int(pods.active().sum()),
        "source": o.option.source,
        "predicted": o.option.predicted,
        "measured": not unmeasured,
        "isolation": "shared without isolation" if shares_without_isolation(o.option.mode) else "isolated",
    }


def rank(o: Outcome) -> tuple[int, float, int]:
    return (o.gpus, o.p95_hi, int(o.option.predicted))


def pareto(outs: list[Outcome]) -> list[Outcome]:
    """The feasible outcomes no other beats on both GPUs and the worst pod (ties: the first in rank order)."""
    kept: list[Outcome] = []
    for o in sorted((o for o in outs if o.feasible), key=rank):
        if not any(k.gpus <= o.gpus and k.p95_hi <= o.p95_hi for k in kept):
            kept.append(o)
    return kept


def candidates(outs: list[Outcome], whole_only: bool) -> list[Outcome]:
    """A class's candidates: its Pareto front (at most :data:`MAX_CANDIDATES`), whole GPUs always among them
    where feasible; only whole GPUs for a class kept whole."""
    whole = [o for o in outs if o.option.mode == BASELINE and o.feasible][:1]
    if whole_only:
        return whole
    front = pareto(outs)[:MAX_CANDIDATES]
    return front + [o for o in whole if o not in front]


@dataclass
class Search:
    """The layouts of one usage: its classes' candidates, each group's packing cached."""

    usage: Usage
    slo: float
    options: dict[str, list[Outcome]]  # class -> its candidates
    packed: dict[tuple[str, frozenset[str]], tuple[tuple[int, ...], ...] | None] = field(default_factory=dict)
    apart: set[tuple[str, frozenset[str]]] = field(default_factory=set)  # groups that leave the target together

    def members(self, choice: dict[str, Outcome], classes: tuple[str, ...]) -> list[Member]:
        return [Member(c, self.usage.pods_of(c), choice[c].option) for c in classes]

    def bins(
        self, choice: dict[str, Outcome], mode: str, classes: tuple[str, ...]
    ) -> tuple[tuple[int, ...], ...] | None:
        """The GPUs of ``classes`` packed together in ``mode`` (None: they do not pack together)."""
        key = (mode, frozenset(classes))
        if key in self.apart:
            return None
        if key not in self.packed:
            members = self.members(choice, classes)
            pods = np.concatenate([m.pods for m in members])
            got, why = pack(self.usage, pods, members[0].option)
            self.packed[key] = None if why else tuple(tuple(b) for b in got)
        return self.packed[key]

    def groups(self, choice: dict[str, Outcome]) -> tuple[Group, ...]:
        by_mode: dict[str, list[str]] = {}
        for c, o in choice.items():
            by_mode.setdefault(o.option.mode, []).append(c)
        out: list[Group] = []
        for mode, classes in by_mode.items():
            together = self.bins(choice, mode, tuple(classes)) if len(classes) > 1 else None
            if together is not None:
                out.append(Group(mode, tuple(classes), together))
            else:
                out += [Group(mode, (c,), self.alone(c, choice[c]).bins) for c in classes]
        return tuple(out)

    def alone(self, cls: str, o: Outcome) -> Outcome:
        """The class's outcome under ``o``'s option replayed alone (its own GPUs)."""
        return next((x for x in self.options.get(cls, []) if x.option is o.option), o)

    def layout(self, choice: dict[str, Outcome], unmeasured: frozenset[str]) -> Layout:
        return Layout(dict(choice), self.groups(choice), unmeasured)

    def score(self, lay: Layout) -> tuple[int, float, int]:
        return (lay.gpus, lay.worst, sum(o.option.predicted for o in lay.choice.values()))

    def starts(self) -> Iterator[dict[str, Outcome]]:
        """Each class at its fewest GPUs alone, and each mode every class can take."""
        yield {c: outs[0] for c, outs in self.options.items()}
        common = set.intersection(*({o.option.mode for o in outs} for outs in self.options.values()))
        for mode in sorted(common):
            yield {c: next(o for o in outs if o.option.mode == mode) for c, outs in self.options.items()}

    def descend(self, choice: dict[str, Outcome], unmeasured: frozenset[str], seen: dict[Any, Layout]) -> Layout:
        """Move one class at a time to another candidate while the layout improves."""
        best = self.layout(choice, unmeasured)
        seen[best.key()] = best
        for _ in range(MAX_PASSES):
            improved = False
            for c, outs in self.options.items():
                for o in outs:
                    trial = self.layout({**best.choice, c: o}, unmeasured)
                    seen.setdefault(trial.key(), trial)
                    if self.score(trial) < self.score(best):
                        best, improved = trial, True
            if not improved:
                break
        return best

    def best(self, unmeasured: frozenset[str]) -> tuple[Layout, list[Layout]]:
        """The layout with the fewest GPUs (then the lower worst pod) and the next best."""
        seen: dict[Any, Layout] = {}
        found = [self.descend(start, unmeasured, seen) for start in self.starts()]
        top = min(found, key=self.score)
        rest = sorted((lay for k, lay in seen.items() if k != top.key()), key=self.score)
        return top, rest[:NEXT_BEST]

    def verify(self, lay: Layout) -> Layout | None:
        """The layout with its groups of several classes replayed together (each pod by its own class's
        option); None, with the group marked apart, where a pod leaves the target there."""
        choice = dict(lay.choice)
        for g in lay.groups:
            if len(g.classes) < 2:
                continue
            bins, got = replay_members(self.usage, self.members(choice, g.classes), self.slo, [list(b) for b in g.bins])
            if not all(o.feasible for o in got.values()) or len(bins) != g.gpus:
                self.apart.add((g.mode, frozenset(g.classes)))
                return None
            choice.update(got)
        return Layout(choice, lay.groups, lay.unmeasured)


def choose(
    usage: Usage, outcomes: dict[str, list[Outcome]], unmeasured: frozenset[str], slo: float
) -> tuple[Layout | None, list[Layout], Search | None]:
    """The recommended layout, the next best, and the search (for the what-ifs); None where a class has no
    feasible option."""
    options = {c: candidates(outs, c in unmeasured) for c, outs in outcomes.items()}
    if not all(options.values()):
        return None, [], None
    search = Search(usage, slo, options)
    for _ in range(len(options) + 1):  # each failed group is packed apart, then the search runs again
        top, rest = search.best(unmeasured)
        checked = search.verify(top)
        if checked is not None:
            return checked, rest, search
    return top, rest, search


# ------------------------------------------------------------------------------------------ what it says


def today_sharing(usage: Usage, cls: str) -> int:
    """The most pods of ``cls``'s GPUs present on one GPU at once today."""
    top = 0
    pods = usage.pods_of(cls)
    by_gpu: dict[str, list[int]] = {}
    for p in pods:
        by_gpu.setdefault(usage.gpus[p], []).append(int(p))
    for gpu_pods in by_gpu.values():
        if len(gpu_pods) > 1:
            top = max(top, int(usage.present(np.array(gpu_pods)).sum(axis=0).max()))
    return max(top, 1) if len(pods) else 0


def more_than_today(usage: Usage, lay: Layout, pool: Pool, isolation: dict[str, bool]) -> str:
    """Which constraint makes ``lay`` need more GPUs than today's peak ('' where it does not)."""
    today = usage.gpus_present()
    if lay.gpus <= today:
        return ""
    why: list[str] = []
    ran_on = gpu_model(usage.gpu_model) if usage.gpu_model else pool.model
    if pool.model.mem_gb < ran_on.mem_gb:
        why.append(
            f"memory: the pool's {pool.model.key} holds {pool.model.mem_gb:g} GB a GPU, the {ran_on.key} today {ran_on.mem_gb:g} GB"
        )
    for c, o in lay.choice.items():
        shared_today = today_sharing(usage, c)
        if shared_today > 1 and o.option.slots < shared_today:
            cause = "it needs isolation" if isolation.get(c) else "no mode shares its GPUs within the target"
            why.append(f"{c}: up to {shared_today} of its pods shared a GPU today; now {o.option.mode} ({cause})")
    if len({g.mode for g in lay.groups}) > 1:
        modes = ", ".join(f"{'+'.join(g.classes)} {g.mode}" for g in lay.groups)
        why.append(f"GPUs keep one mode, and the classes' modes differ ({modes}): their peaks do not share GPUs")
    return "; ".join(why) or "the packing by presence needs more GPUs than today's arrangement"


@dataclass(frozen=True)
class MemoryBound:
    """A layout whose GPU count memory sets: the memory floor, the GPUs it would need without the memory
    limit, and with the next memory size (the options memory limited replayed again at that size)."""

    floor: int  # ceil(peak of the present pods' memory summed / a shared GPU's usable memory)
    unlimited: int
    next_model: str
    next_gpus: int

    def line(self, gpus: int, pool: Pool) -> str:
        text = (
            f"memory-bound: {gpus} GPUs, set by memory ({pool.shared_bytes / GB:.3g} GB usable where pods share a "
            f"GPU; the memory floor is {self.floor}); without the memory limit it would be {self.unlimited}"
        )
        if self.next_model:
            text += f"; on {self.next_model} GPUs, {self.next_gpus}"
        return text


def memory_floor(usage: Usage, usable: float) -> int:
    """The fewest GPUs that hold the present pods' memory at its summed peak."""
    delta = np.zeros(usage.steps + 1)
    np.add.at(delta, usage.first, usage.memory_peak)
    np.add.at(delta, usage.last, -usage.memory_peak)
    peak = float(np.cumsum(delta)[:-1].max()) if usage.steps else 0.0
    return int(math.ceil(peak / usable)) if usable > 0 else 0


def limited(usage: Usage, o: Outcome) -> bool:
    """An option of pods sharing a GPU's memory whose packing memory limits (fewer GPUs, or a packing at all,
    without the limit)."""
    if o.option.mode == BASELINE or not o.option.shared_memory:
        return False
    bins, why = pack(usage, usage.pods_of(o.cls), replace(o.option, memory_bytes=math.inf))
    return not why and (not o.bins or len(bins) < o.gpus)


@dataclass(frozen=True)
class WhatIf:
    """What the memory what-ifs need: the usage, every class's outcomes, the classes kept whole, the target."""

    usage: Usage
    outcomes: dict[str, list[Outcome]]
    unmeasured: frozenset[str]
    slo: float


def gpus_with_memory(w: WhatIf, memory: float) -> int | None:
    """The recommended layout's GPUs were a shared GPU's memory ``memory`` bytes (the memory-limited options
    replayed again at that size); None: no layout."""
    outcomes = {
        c: [
            replay(w.usage, c, replace(o.option, memory_bytes=memory), w.slo) if limited(w.usage, o) else o
            for o in outs
        ]
        for c, outs in w.outcomes.items()
    }
    lay, _, _ = choose(w.usage, outcomes, w.unmeasured, w.slo)
    return lay.gpus if lay else None


def memory_bound(w: WhatIf, lay: Layout, pool: Pool) -> MemoryBound | None:
    """Whether memory sets the layout's GPU count, and what the next memory size would give."""
    if not any(limited(w.usage, o) for outs in w.outcomes.values() for o in outs):
        return None
    unlimited = gpus_with_memory(w, math.inf)
    if unlimited is None or unlimited >= lay.gpus:
        return None
    nxt = pool.next_memory()
    at_next = gpus_with_memory(w, Pool(nxt, pool.headroom).shared_bytes) if nxt else None
    return MemoryBound(
        memory_floor(w.usage, pool.shared_bytes),
        unlimited,
        f"{nxt.key} ({nxt.mem_gb:g} GB)" if nxt else "",
        at_next if at_next is not None else lay.gpus,
    )


def next_options(search: Search, lay: Layout) -> list[str]:
    """For each class whose worst pod is within 10 % of the target: the option with more margin that costs
    the pool the fewest GPUs (its worst pod below 90 % of the target where one is)."""
    out = []
    for c, o in lay.choice.items():
        if o.p95_hi < NEAR * search.slo:
            continue
        better = [x for x in search.options.get(c, []) if x.p95_hi < o.p95_hi]
        if not better:
            out.append(
                f"{c}: its worst pod reaches {upper_text(o.p95_hi)} of {search.slo:g}x; no option with more margin"
            )
            continue
        trials = [(search.layout({**lay.choice, c: x}, lay.unmeasured), x) for x in better]
        trial, x = min(trials, key=lambda t: (t[1].p95_hi >= NEAR * search.slo, t[0].gpus, t[1].p95_hi))
        out.append(
            f"{c}: its worst pod ({o.worst_pod}) reaches {upper_text(o.p95_hi)}, within 10% of {search.slo:g}x; "
            f"next option: {x.option.mode}, worst pod {upper_text(x.p95_hi)}, {trial.gpus} GPUs in all "
            f"({trial.gpus - lay.gpus:+d})"
        )
    return out
