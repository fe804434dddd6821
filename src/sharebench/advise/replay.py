"""Replay a usage trace on a candidate layout of one class: pack its pods onto GPUs, slow what overlaps.

Options per class (:func:`class_options`): ``exclusive`` (one pod per GPU, never slowed); every
``timeslice:N`` and ``mps:N`` measured for the class's pattern beside its own; every MIG profile of the
GPU model (``mig:all-<profile>``, measured or predicted). A GPU holds pods of one class only, so the
neighbour pattern of a pod is its own class's.

Packing: first-fit decreasing on each pod's mean busy (:func:`pack`): a pod goes to the first GPU with a
free slot (N for timeslice/mps, the profile's instance count for MIG), room for its peak memory (the
GPU's memory shared; one instance's under MIG) and, for timeslice/mps, mean busy summed <= 1.

Replay (:func:`replay`), at every step of the trace and for every GPU: the k pods active there (busy
above :data:`sharebench.advise.usage.ACTIVE`) each run at the measured p95 slowdown of k sharers (the
measured N, or the smallest measured N above k: never extrapolated), and never faster than the GPU's
capacity allows (slowdown >= the busy fractions summed). A pod on a MIG instance runs at the instance's
slowdown times its own busy where that exceeds one (its work needs more than the whole GPU's time).
The class's p95 slowdown is over its active (pod, step) samples. The replay is vectorised over steps:
a fixed-step trace is a recurrence numpy evaluates per GPU in one pass (a 30-day, 100-GPU, 1-minute trace
is 4.3 million pod-steps; benchmarks/advise_replay.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sharebench.advise.costs import SHARED_FAMILIES, Costs
from sharebench.advise.usage import ACTIVE, Usage
from sharebench.gpus import MigProfile
from sharebench.modes import BASELINE

GB = 1e9


@dataclass(frozen=True)
class Option:
    """One way to run a class: ``slots`` pods per GPU; ``slowdown[k]`` with k pods active (timeslice/mps)."""

    mode: str
    slots: int
    slowdown: tuple[float, ...]  # index k = pods active on the GPU (0..slots)
    memory_bytes: float  # per GPU (shared modes) or per instance (MIG)
    shared_memory: bool
    source: str

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


def class_options(costs: Costs, pattern: str) -> tuple[list[Option], list[str]]:
    """The options of a pattern, and why the others are left out."""
    mem = costs.model.mem_gb * GB
    out = [Option(BASELINE, 1, (1.0, 1.0), mem, True, "whole GPU: no neighbour")]
    left_out: list[str] = []
    for family in SHARED_FAMILIES:
        measured = costs.sharing(family, pattern)
        if not measured:
            left_out.append(f"{family}: not measured for {pattern} beside {pattern} (run `sharebench run --pattern`)")
        for n in (n for n in measured if n >= 2):
            table = [1.0, 1.0]
            for k in range(2, n + 1):
                table.append(measured[min(m for m in measured if m >= k)].slowdown_p95)
            out.append(Option(f"{family}:{n}", n, tuple(table), mem, True, measured[n].source))
    seen: set[str] = set()
    for profile in sorted(costs.model.profiles, key=lambda p: -p.max_count):
        if profile.name in seen:
            continue
        seen.add(profile.name)
        out.append(mig_option(costs, profile, pattern))
    return out, left_out


def mig_option(costs: Costs, profile: MigProfile, pattern: str) -> Option:
    slowdown, source = costs.mig(profile, pattern)
    return Option(f"mig:all-{profile.name}", profile.max_count, (slowdown,), profile.mem_gb * GB, False, source)


def pack(usage: Usage, pods: np.ndarray, option: Option) -> tuple[list[list[int]], str]:
    """First-fit decreasing of ``pods`` into GPUs of ``option``; ("" or the reason it cannot hold them)."""
    mean = usage.busy[pods].mean(axis=1) if usage.steps else np.zeros(len(pods))
    peak = usage.memory_bytes[pods].max(axis=1) if usage.steps else np.zeros(len(pods))
    order = np.argsort(-mean, kind="stable")
    bins: list[list[int]] = []
    load: list[float] = []
    memory: list[float] = []
    for j in order:
        pod, b, m = int(pods[j]), float(mean[j]), float(peak[j])
        if m > option.memory_bytes:
            return [], f"pod {usage.pods[pod]} peaks at {m / GB:.1f} GB, more than {option.mode} holds"
        for i in range(len(bins)):
            fits_mem = memory[i] + m <= option.memory_bytes if option.shared_memory else True
            fits_busy = load[i] + b <= 1.0 or not option.shared_memory
            if len(bins[i]) < option.slots and fits_mem and fits_busy:
                bins[i].append(pod)
                load[i] += b
                memory[i] += m
                break
        else:
            bins.append([pod])
            load.append(b)
            memory.append(m)
    return bins, ""


def slowdowns(busy: np.ndarray, option: Option) -> np.ndarray:
    """Per (pod, step) slowdown of the pods of one GPU (``busy``: pods x steps); NaN where idle."""
    active = busy > ACTIVE
    if not option.shared_memory:  # MIG: each pod alone on its instance
        s = option.slowdown[0] * np.maximum(busy, 1.0)
    else:
        k = active.sum(axis=0)
        table = np.asarray(option.slowdown, float)
        s = np.broadcast_to(np.maximum(table[k], busy.sum(axis=0, dtype=np.float64)), busy.shape)
    return np.where(active, s, np.nan)


def replay(usage: Usage, cls: str, option: Option, slo: float) -> Outcome:
    """Pack the class's pods under ``option`` and replay the trace on those GPUs."""
    pods = usage.pods_of(cls)
    work_in = float(usage.busy[pods].sum(dtype=np.float64) * usage.step_s)
    bins, why = pack(usage, pods, option)
    if why:
        return Outcome(cls, option, 0, math.nan, False, why, (), work_in, 0.0)
    gpus = len(bins) if option.shared_memory else math.ceil(len(pods) / option.slots)
    samples, replayed = [], 0.0
    for b in bins:
        busy = usage.busy[b]
        replayed += float(busy.sum(dtype=np.float64) * usage.step_s)
        s = slowdowns(busy, option)
        samples.append(s[np.isfinite(s)])
    allv = np.concatenate(samples) if samples else np.array([])
    p95 = float(np.percentile(allv, 95)) if allv.size else 1.0
    ok = p95 <= slo
    reason = f"p95 slowdown {p95:.2f}x {'<=' if ok else '>'} {slo:g}x"
    return Outcome(cls, option, gpus, p95, ok, reason, tuple(tuple(b) for b in bins), work_in, replayed)
