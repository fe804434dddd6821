"""The advice: the layout with the fewest GPUs that keeps every pod within the target, and what it says.

Per class: the workload whose costs cost it (:mod:`sharebench.advise.classes`), its options replayed
(:mod:`sharebench.advise.replay`: every pod's p95 with its interval), then the layout of the whole pool
(:mod:`sharebench.advise.layout`: classes whose modes agree share GPUs). The advice says, beside the
GPUs: the worst pod and the distribution of the pods' p95 per class; the next option where the chosen
one's worst pod is within 10 % of the target; what each chosen mode does not isolate
(:mod:`sharebench.advise.isolation`), a class that needs isolation getting only whole GPUs or MIG; the
pool's GPU model and its memory headroom, and whether memory sets the count (with what the next memory
size would give); which constraint makes it need more GPUs than today, where it does; how each class was
costed, and the command that measures a borrowed class's own program.

The pool's GPU model is the costs' (``read_costs`` is told it); the usage's model (the trace's, or
``--usage-gpu-model``) must be the same unless the pool's was chosen on purpose (``--gpu-model``) or
``--allow-other-model`` is given (then a warning in every output). Memory that cannot be bytes is an
error unless ``force``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sharebench.advise.classes import ClassCost, Site, class_cost
from sharebench.advise.costs import Costs
from sharebench.advise.isolation import isolation_of, shares_without_isolation
from sharebench.advise.layout import (
    Layout,
    MemoryBound,
    WhatIf,
    choose,
    memory_bound,
    more_than_today,
    next_options,
)
from sharebench.advise.options import DEFAULT_HEADROOM, ClassChoice
from sharebench.advise.pool import Pool
from sharebench.advise.replay import Costing, Outcome, class_options, replay, upper_text
from sharebench.advise.usage import Usage, memory_problems
from sharebench.errors import UserError
from sharebench.patterns import PatternSpec


@dataclass(frozen=True)
class AdviseOptions:
    """How to advise beyond the target: costs of another GPU model allowed, the pool's model chosen on
    purpose (``--gpu-model``: a usage of another model is then the what-if, not a mistake), the memory
    headroom, what ``--class`` says per class, and ``force`` (memory that cannot be bytes advised anyway)."""

    allow_other_model: bool = False
    pool_chosen: bool = False
    headroom: float = DEFAULT_HEADROOM
    classes: dict[str, ClassChoice] = field(default_factory=dict)
    force: bool = False


@dataclass
class Advice:
    slo: float
    model: str
    pool: Pool
    patterns: dict[str, PatternSpec]  # class -> its pattern kind
    today_gpus: dict[str, int]  # class -> peak GPUs holding its present pods today
    today_total: int
    outcomes: dict[str, list[Outcome]]
    left_out: dict[str, list[str]]
    recommended: Layout | None
    next_best: list[Layout]
    notes: list[str]
    read: dict[str, Any] = field(default_factory=dict)  # what advise read: usage, costs, models
    warnings: list[str] = field(default_factory=list)
    costing: dict[str, ClassCost] = field(default_factory=dict)
    assignment: list[dict[str, Any]] = field(default_factory=list)
    memory: MemoryBound | None = None
    beyond_today: str = ""  # the constraint that makes the layout need more GPUs than today ('' none)
    next_options: list[str] = field(default_factory=list)
    cells_left: list[str] = field(default_factory=list)  # measured cells that gave no cost, and why

    @property
    def unmeasured(self) -> dict[str, str]:
        """Class -> the command that measures it, for the classes no workload measured."""
        return {c: k.command for c, k in self.costing.items() if k.workload is None}

    @property
    def work(self) -> dict[str, tuple[float, float]]:
        """Class -> (work in, work replayed) under the recommendation."""
        rec = self.recommended
        return {c: (o.work_in_s, o.work_replayed_s) for c, o in (rec.choice.items() if rec else [])}


def model_warnings(usage: Usage, costs: Costs, options: AdviseOptions) -> list[str]:
    """The usage's GPU model against the pool's (the costs'): a UserError unless allowed, else warnings."""
    pool = costs.model.key
    out = [f"warning: {n}" for n in costs.notes if "allow-other-model" in n]
    if usage.gpu_model is None:
        how = "--gpu-model" if options.pool_chosen else "the costs'"
        return [*out, f"the usage names no GPU model: its busy fractions read as {pool}'s ({how})"]
    if usage.gpu_model == pool:
        return out
    text = f"the usage ran on {usage.gpu_model} ({usage.model_from}), the pool is {pool}"
    if options.pool_chosen:
        return [
            *out,
            f"{text} (--gpu-model): the usage's busy fractions are the {usage.gpu_model}'s, packed for a {pool} pool",
        ]
    if not options.allow_other_model:
        raise UserError(
            f"the usage ran on {usage.gpu_model} ({usage.model_from}), the costs were measured on {pool}; give "
            f"results of {usage.gpu_model}, --gpu-model {pool} to advise a {pool} pool, or --allow-other-model"
        )
    return [
        *out,
        f"warning: {text}; the costs were measured on {pool} (--allow-other-model): the slowdowns are another GPU's",
    ]


def memory_warnings(usage: Usage, force: bool) -> list[str]:
    problems = memory_problems(usage)
    if problems and not force:
        raise UserError(f"{problems[0]}; fix memory_bytes, or --force to advise with it")
    return [f"warning: {p} (--force)" for p in problems]


def read_summary(usage: Usage, costs: Costs, patterns: dict[str, PatternSpec], pool: Pool) -> dict[str, Any]:
    return {
        "usage": usage.describe(),
        "pods": len(usage.pods),
        "peak_pods_present": usage.peak_pods(),
        "classes": {c: patterns[c].name for c in usage.class_names()},
        "steps": usage.steps,
        "step_s": usage.step_s,
        "window": [usage.time_at(0), usage.time_at(usage.steps)],
        "usage_gpu_model": usage.gpu_model,
        "costs_gpu_model": costs.model.key,
        "pool": pool.describe(),
        "memory_headroom": pool.headroom,
        "costs": (
            f"{len(costs.points)} measured points from {len(costs.folders)} results folder(s) measured on "
            f"{', '.join(sorted(set(costs.models_read.values())))}"
        ),
        "cells_left": len(costs.left),
        "results_folders": list(costs.folders),
    }


def advise(
    usage: Usage, costs: Costs, patterns: dict[str, PatternSpec], slo: float, options: AdviseOptions | None = None
) -> Advice:
    """The advice for ``usage`` with ``costs`` (read for the pool's GPU model) at the p95 target ``slo``."""
    options = options or AdviseOptions()
    pool = Pool(costs.model, options.headroom)
    warnings = model_warnings(usage, costs, options) + list(usage.warnings) + memory_warnings(usage, options.force)
    costs = costs.at(slo)
    site = Site(costs, pool.model, slo)
    notes = [n for n in costs.notes if "allow-other-model" not in n]
    outcomes: dict[str, list[Outcome]] = {}
    left_out: dict[str, list[str]] = {}
    costing: dict[str, ClassCost] = {}
    for cls in usage.class_names():
        level = usage.level(usage.pods_of(cls))
        choice = options.classes.get(cls) or ClassChoice(cls)
        costing[cls] = class_cost(site, patterns[cls], float(level.mean()) if level.size else 0.0, choice)
        co = class_options(costs, patterns[cls], level, Costing(costing[cls].workload, choice.isolation), pool)
        left_out[cls] = co.left_out
        notes += [f"{cls}: {n}" for n in co.notes if not n.startswith("warning")]
        warnings += [f"warning: {cls}: {n.removeprefix('warning: ')}" for n in co.notes if n.startswith("warning")]
        outcomes[cls] = [replay(usage, cls, opt, slo) for opt in co.options]
    unmeasured = frozenset(c for c, k in costing.items() if k.workload is None)
    recommended, nxt, search = choose(usage, outcomes, unmeasured, slo)
    result = Advice(
        slo,
        pool.model.key,
        pool,
        patterns,
        {c: usage.gpus_present(usage.pods_of(c)) for c in usage.class_names()},
        usage.gpus_present(),
        outcomes,
        left_out,
        recommended,
        nxt,
        notes,
        read_summary(usage, costs, patterns, pool),
        warnings,
        costing,
        cells_left=list(costs.left),
    )
    if recommended is not None and search is not None:
        result.memory = memory_bound(WhatIf(usage, outcomes, unmeasured, slo), recommended, pool)
        isolation = {c: bool(k.isolation) for c, k in costing.items()}
        result.beyond_today = more_than_today(usage, recommended, pool, isolation)
        result.next_options = next_options(search, recommended)
        result.assignment.extend(assignment(usage, recommended))
    return result


def assignment(usage: Usage, layout: Layout) -> list[dict[str, Any]]:
    """Pod to GPU (``pool-gpu-NNN``) and instance (or slot): pods of a GPU take, in order of arrival,
    the lowest instance free over their presence."""
    rows: list[dict[str, Any]] = []
    class_of = {p: c for c in layout.choice for p in map(int, usage.pods_of(c))}
    gpu = 0
    for g in layout.groups:
        for pods in g.bins:
            if not pods:
                continue
            free_at: list[int] = []  # per instance: the step it is free again
            for p in sorted(pods, key=lambda q: (int(usage.first[q]), usage.pods[q])):
                inst = next((i for i, t in enumerate(free_at) if t <= usage.first[p]), len(free_at))
                if inst == len(free_at):
                    free_at.append(0)
                free_at[inst] = int(usage.last[p])
                rows.append(
                    {
                        "pod": usage.pods[p],
                        "class": class_of[p],
                        "gpu": f"pool-gpu-{gpu + 1:03d}",
                        "mode": g.mode,
                        "instance": inst,
                        "present_from": usage.time_at(int(usage.first[p])),
                        "present_to": usage.time_at(int(usage.last[p])),
                    }
                )
            gpu += 1
    return rows


def class_line(a: Advice, cls: str, o: Outcome) -> str:
    """One class of the recommendation: its mode and GPUs, the worst pod, the pods' distribution, isolation."""
    pattern = a.patterns[cls].name
    if cls in a.unmeasured:
        return f"{cls} ({pattern}): not measured, kept whole on {o.gpus} GPU(s); measure it: {a.unmeasured[cls]}"
    rec = a.recommended
    group = rec.group_of(cls) if rec else None
    shared = f" (with {', '.join(c for c in group.classes if c != cls)})" if group and len(group.classes) > 1 else ""
    q = o.pods.quantiles()
    spread = f"; pods' p95: median {q['median']:.2f}x, p90 {q['p90']:.2f}x" if q else ""
    lo = o.pods.lo[o.pods.worst()] if o.pods.worst() is not None else math.nan
    interval = f" [{lo:.2f}x, {upper_text(o.p95_hi)}]" if math.isfinite(lo) else ""
    iso = "shares without isolation" if shares_without_isolation(o.option.mode) else "isolated"
    worst = f"worst pod {o.worst_pod} {o.p95:.2f}x{interval}" if o.worst_pod else "no pod had work"
    return f"{cls} ({pattern}): {o.option.mode} on {o.gpus} GPU(s){shared}, {worst}{spread}; {iso}"


def headline(a: Advice) -> list[str]:
    """What the advice says, in the order a reader needs it (the command's screen and advice.md's top)."""
    if a.recommended is None:
        stuck = [c for c, outs in a.outcomes.items() if not any(o.feasible for o in outs)]
        return [
            f"no layout keeps every pod within {a.slo:g}x: class(es) {', '.join(stuck)} exceed it under every option"
        ]
    r = a.recommended
    out = [
        f"recommended: {r.gpus} GPUs (today {a.today_total} at the peak of pods present; frees "
        f"{a.today_total - r.gpus}); every pod's p95 slowdown within {a.slo:g}x by its upper end"
    ]
    if a.beyond_today:
        out.append(f"  more GPUs than today: {a.beyond_today}")
    out += [f"  {class_line(a, c, o)}" for c, o in r.choice.items()]
    risky = [c for c, o in r.choice.items() if shares_without_isolation(o.option.mode) and c not in a.unmeasured]
    if risky:
        modes = sorted({r.choice[c].option.mode for c in risky})
        said = "; ".join(f"{m}: {isolation_of(m).memory}; {isolation_of(m).faults}" for m in modes)
        out.append(
            f"  shares without isolation: {', '.join(f'{c} ({r.choice[c].option.mode})' for c in risky)}: {said}"
        )
    out += [f"  next option: {n}" for n in a.next_options]
    if a.memory:
        out.append(f"  {a.memory.line(r.gpus, a.pool)}")
    for c, k in a.costing.items():
        if k.workload is not None and not k.own:
            out.append(f"  {c}: costs {k.why}; measure its own: {k.command}")
    return out
