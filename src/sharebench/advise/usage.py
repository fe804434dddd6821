"""A site's GPU usage as one fixed-step frame, each pod's presence, and each class's pattern kind.

The frame (:class:`Usage`) is a matrix: one row per pod, one column per step of the window, each cell
the pod's busy fraction of a whole GPU (0..1; 0 where the pod has no sample); per pod its peak memory
in bytes. Each pod carries its class and the GPU it ran on today (one pod per GPU or several, as the
trace says). A pod is *present* from its first to its last sample (zero busy included): today's pool is
its peak of GPUs holding a present pod, not the distinct GPUs over the window, and a pod's absence is not
idle time. Read from a CSV by :mod:`sharebench.advise.reading` (streamed), from Prometheus by
:mod:`sharebench.advise.prometheus`.

Memory that cannot be bytes (:func:`memory_problems`): a pod above the memory of the GPU it ran on, or a
median pod under 1 MiB (MiB given as bytes); ``advise`` refuses it unless ``--force``.

Pattern inference (:func:`infer_pattern`), from a class's busy samples over the steps its pods are
present, in advise's own vocabulary of usage classes (:data:`USAGE_RULES`, tried in order):
``saturating`` when the pods keep the device busy (mean busy over the active steps >=
:data:`BATCH_LEVEL` and active >= :data:`BATCH_DUTY` of the time); ``steady`` when they are active most
of the time at a lower level (a steady request stream); ``bursty`` otherwise (bursts separated by idle
time). A usage class becomes a pattern kind through the kind's row (``PatternSpec.usage``,
``sharebench.patterns``): advise names no pattern itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from sharebench.errors import UserError
from sharebench.gpus import GPU_MODELS, gpu_model
from sharebench.patterns import PATTERNS, PatternSpec

USAGE_COLUMNS = ("time", "gpu", "pod", "class", "busy", "memory_bytes")
MODEL_COLUMN = "gpu_model"  # optional: the GPU model the pods ran on
ACTIVE = 0.05  # a pod with busy above this in a step has work on the device
BATCH_LEVEL = 0.7
BATCH_DUTY = 0.8
SERVE_DUTY = 0.6
MIB = 1024 * 1024
GB = 1e9
# how a class uses its GPUs (advise's vocabulary): each rule, tried in order, of (duty, level) -- the share
# of present steps with work and the mean busy over them; a PatternSpec row's ``usage`` names one
SATURATING, STEADY, BURSTY = "saturating", "steady", "bursty"
USAGE_RULES: dict[str, Callable[[float, float], bool]] = {
    SATURATING: lambda duty, level: level >= BATCH_LEVEL and duty >= BATCH_DUTY,
    STEADY: lambda duty, level: duty >= SERVE_DUTY,
    BURSTY: lambda duty, level: True,
}


@dataclass(frozen=True, eq=False)
class Usage:
    """Busy per pod (rows) and step (columns) of a window starting at ``start`` (epoch s).

    Pod ``p`` is present over steps ``first[p]:last[p]`` (from its first to its last sample);
    ``memory_peak`` its peak memory in bytes. ``gpu_model``: the model the pods ran on where the trace
    says (``model_from`` names how it was learned); ``warnings``: what reading it found implausible.
    """

    start: float
    step_s: float
    pods: tuple[str, ...]
    classes: tuple[str, ...]  # per pod
    gpus: tuple[str, ...]  # per pod: the GPU it ran on today
    busy: np.ndarray  # (pods, steps) float32, 0..1
    memory_peak: np.ndarray  # (pods,) bytes
    first: np.ndarray  # (pods,) int: first step present
    last: np.ndarray  # (pods,) int: one past the last step present
    gpu_model: str | None = None
    model_from: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def steps(self) -> int:
        return int(self.busy.shape[1])

    def class_names(self) -> list[str]:
        return sorted(set(self.classes))

    def pods_of(self, name: str) -> np.ndarray:
        return np.array([i for i, c in enumerate(self.classes) if c == name], dtype=int)

    def rows(self, pods: np.ndarray | None) -> np.ndarray:
        return np.arange(len(self.pods)) if pods is None else np.asarray(pods, int)

    def present(self, pods: np.ndarray | None = None) -> np.ndarray:
        """(pods, steps) bool: where each pod exists."""
        r = self.rows(pods)
        grid = np.arange(self.steps)
        return (grid >= self.first[r, None]) & (grid < self.last[r, None])

    def work_s(self) -> dict[str, float]:
        """GPU-seconds of work per class: the busy fractions times the step."""
        return {c: float(self.busy[self.pods_of(c)].sum(dtype=np.float64) * self.step_s) for c in self.class_names()}

    @functools.cached_property
    def levels(self) -> np.ndarray:
        """Every pod's mean busy over the steps it is present (computed once)."""
        return self.busy.sum(axis=1, dtype=np.float64) / np.maximum(self.last - self.first, 1)

    def level(self, pods: np.ndarray | None = None) -> np.ndarray:
        """Each pod's mean busy over the steps it is present (its load while it exists)."""
        return self.levels[self.rows(pods)]

    def counts(self, pods: np.ndarray | None = None, by_gpu: bool = False) -> np.ndarray:
        """Per step: pods present (``by_gpu``: distinct GPUs holding a present pod)."""
        r = self.rows(pods)
        if by_gpu:
            seen: dict[str, list[int]] = {}
            for i in r:
                seen.setdefault(self.gpus[i], []).append(int(i))
            held = [self.present(np.array(v)).any(axis=0) for v in seen.values()]
            return np.sum(held, axis=0) if held else np.zeros(self.steps, int)
        delta = np.zeros(self.steps + 1, np.int64)
        np.add.at(delta, self.first[r], 1)
        np.add.at(delta, self.last[r], -1)
        return np.cumsum(delta)[:-1]

    def gpus_present(self, pods: np.ndarray | None = None) -> int:
        """Today's GPUs: the peak over the steps of distinct GPUs holding a present pod of ``pods``."""
        c = self.counts(pods, by_gpu=True)
        return int(np.max(c)) if np.size(c) else 0

    def peak_pods(self, pods: np.ndarray | None = None) -> int:
        c = self.counts(pods)
        return int(c.max()) if c.size else 0

    def time_at(self, step: int) -> str:
        return datetime.fromtimestamp(self.start + step * self.step_s, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def describe(self) -> str:
        """What was read: pods, classes, steps, window and the GPU model (for every output)."""
        model = f"{self.gpu_model} ({self.model_from})" if self.gpu_model else "not given"
        return (
            f"{len(self.pods)} pods (at most {self.peak_pods()} at once on {self.gpus_present()} GPUs), "
            f"{len(self.class_names())} classes, {self.steps} steps of {self.step_s:g} s, "
            f"window {self.time_at(0)} to {self.time_at(self.steps)}; usage GPU model {model}"
        )

    def slice(self, lo: int, hi: int) -> Usage:
        """Steps ``lo:hi`` as a usage of their own; pods absent from them are dropped."""
        keep = np.flatnonzero((self.first < hi) & (self.last > lo))
        return Usage(
            self.start + lo * self.step_s,
            self.step_s,
            tuple(self.pods[i] for i in keep),
            tuple(self.classes[i] for i in keep),
            tuple(self.gpus[i] for i in keep),
            self.busy[keep, lo:hi],
            self.memory_peak[keep],
            np.clip(self.first[keep], lo, hi) - lo,
            np.clip(self.last[keep], lo, hi) - lo,
            self.gpu_model,
            self.model_from,
            self.warnings,
        )


def parse_time(value: str, what: str) -> float:
    """Epoch seconds from ``value`` (a number or ISO 8601); one-line UserError naming ``what``."""
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"bad {what} {text!r}; allowed: epoch seconds or ISO 8601 (2026-12-01T00:00:00Z)") from None
    if t.tzinfo is None:
        raise UserError(f"bad {what} {text!r}: ISO 8601 without a time zone; add Z or +HH:MM")
    return t.timestamp()


def usage_model(names: list[str], what: str, given: str | None) -> tuple[str | None, str]:
    """The usage's GPU model key: ``given`` (``--usage-gpu-model``) or the model ``names`` the trace holds."""
    if given:
        return gpu_model(given).key, "--usage-gpu-model"
    keys = sorted({gpu_model(n).key for n in names})
    if len(keys) > 1:
        raise UserError(f"{what}: GPUs of several models ({', '.join(keys)}); advise one pool (one model) at a time")
    return (keys[0], f"column {MODEL_COLUMN}") if keys else (None, "")


def memory_problems(usage: Usage) -> list[str]:
    """Memory that cannot be bytes: a pod above the memory of the GPU it ran on (the usage's model; the
    largest known where the trace names none), or a median pod peak under 1 MiB (MiB given as bytes)."""
    out: list[str] = []
    peak = usage.memory_peak
    if not peak.size:
        return out
    top = int(np.argmax(peak))
    ran_on = gpu_model(usage.gpu_model) if usage.gpu_model else max(GPU_MODELS.values(), key=lambda m: m.mem_gb)
    if float(peak[top]) > ran_on.mem_gb * GB:
        out.append(
            f"memory: pod {usage.pods[top]} peaks at {float(peak[top]) / GB:.3g} GB, above the {ran_on.key}'s "
            f"{ran_on.mem_gb:g} GB it {'ran on' if usage.gpu_model else 'could have run on'} (memory_bytes in "
            "another unit, or the GPU model wrong?)"
        )
    used = peak[peak > 0]
    if used.size and float(np.median(used)) < MIB:
        out.append(
            f"memory: the median pod peaks at {float(np.median(used)):.0f} bytes, under 1 MiB "
            "(MiB given as bytes? memory_bytes must be bytes)"
        )
    return out


# ---------------------------------------------------------------------------------- Prometheus


# ---------------------------------------------------------------------------------- patterns


def infer_usage(busy: np.ndarray, present: np.ndarray | None = None) -> str:
    """The usage class (:data:`USAGE_RULES`) of a class's busy samples (pods x steps), over the steps where a
    pod is present (``present``; all steps where not given): absence is not idle time."""
    counts = usage_counts(np.asarray(busy), None if present is None else np.asarray(present, bool))
    return usage_of_counts(*counts)


def usage_counts(busy: np.ndarray, present: np.ndarray | None) -> tuple[int, int, float]:
    """(samples present, samples with work, busy summed over those with work), without copying the frame."""
    active = busy > ACTIVE
    if present is not None:
        active &= present
    n = int(present.sum()) if present is not None else int(busy.size)
    return n, int(active.sum()), float(busy[active].sum(dtype=np.float64))


def usage_of_counts(n: int, working: int, busy_sum: float) -> str:
    if n == 0:
        return SATURATING
    duty = working / n
    level = busy_sum / working if working else 0.0
    return next(name for name, rule in USAGE_RULES.items() if rule(duty, level))


def class_usage(usage: Usage, cls: str, chunk: int = 64) -> str:
    """The usage class of ``cls``'s pods over their presence, ``chunk`` pods at a time (bounded memory)."""
    pods = usage.pods_of(cls)
    n = working = 0
    busy_sum = 0.0
    for i in range(0, len(pods), chunk):
        rows = pods[i : i + chunk]
        got = usage_counts(usage.busy[rows], usage.present(rows))
        n, working, busy_sum = n + got[0], working + got[1], busy_sum + got[2]
    return usage_of_counts(n, working, busy_sum)


def pattern_of_usage(usage: str) -> PatternSpec:
    """The pattern kind a usage class maps to (the row whose ``usage`` names it)."""
    found = [s for s in PATTERNS.values() if s.usage == usage]
    if not found:
        raise UserError(f"usage class {usage!r}: no pattern kind maps to it; kinds: {', '.join(PATTERNS)}")
    return found[0]


def infer_pattern(busy: np.ndarray, present: np.ndarray | None = None) -> PatternSpec:
    """The pattern kind of a class's busy samples: its usage class (:func:`infer_usage`) through the rows."""
    return pattern_of_usage(infer_usage(busy, present))


def class_patterns(usage: Usage, overrides: dict[str, PatternSpec]) -> dict[str, PatternSpec]:
    """Each class's pattern kind: ``overrides`` first (a class that matches no pod is an error)."""
    names = usage.class_names()
    for name, spec in overrides.items():
        if name not in names:
            raise UserError(f"--class {name}={spec.name}: no pod of class {name!r}; classes: {', '.join(names)}")
    return {c: overrides.get(c) or pattern_of_usage(class_usage(usage, c)) for c in names}
