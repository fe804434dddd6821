"""A site's GPU usage: a CSV or dcgm-exporter's per-pod series in Prometheus, as one fixed-step frame.

The frame (:class:`Usage`) is a matrix: one row per pod, one column per step of the window, each cell
the pod's busy fraction of a whole GPU (0..1; 0 where the pod has no sample); per pod its peak memory
in bytes.
Each pod carries its class and the GPU it ran on today (one pod per GPU or several, as the trace says).
A pod is *present* from its first to its last sample (zero busy included): today's pool is its peak of
GPUs holding a present pod, not the distinct GPUs over the window, and a pod's absence is not idle time.

CSV (``--usage FILE``): columns ``time,gpu,pod,class,busy,memory_bytes`` (optional ``gpu_model``);
``time`` epoch seconds or ISO 8601 (milliseconds are recognised, converted and warned about); samples
are put on the step grid of the window (the median spacing of the times unless ``step_s`` is given),
the last sample of a step winning.

Prometheus (``--prometheus URL``): ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` per pod (falling back to
``DCGM_FI_DEV_GPU_UTIL`` / 100 where a site's exporter has no profiling metrics) and ``DCGM_FI_DEV_FB_USED``
(MiB), through ``query_range`` in chunks of :data:`MAX_POINTS` steps; a pod's class is the value of
``class_label`` on its series; its GPU is ``Hostname``/``UUID`` (or ``gpu``); the GPU model its
``modelName`` label.

Pattern inference (:func:`infer_pattern`), from a class's busy samples over the steps its pods are
present, in advise's own vocabulary of usage classes (:data:`USAGE_RULES`, tried in order):
``saturating`` when the pods keep the device busy (mean busy over the active steps >=
:data:`BATCH_LEVEL` and active >= :data:`BATCH_DUTY` of the time); ``steady`` when they are active most
of the time at a lower level (a steady request stream); ``bursty`` otherwise (bursts separated by idle
time). A usage class becomes a pattern kind through the kind's row (``PatternSpec.usage``,
``sharebench.patterns``: batch, serve and interactive today): advise names no pattern itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from sharebench.errors import UserError
from sharebench.gpus import GpuModel, gpu_model
from sharebench.patterns import PATTERNS, PatternSpec, parse_pattern
from sharebench.telemetry.prometheus import Prometheus

USAGE_COLUMNS = ("time", "gpu", "pod", "class", "busy", "memory_bytes")
MODEL_COLUMN = "gpu_model"  # optional: the GPU model the pods ran on
ACTIVE = 0.05  # a pod with busy above this in a step has work on the device
BATCH_LEVEL = 0.7
BATCH_DUTY = 0.8
SERVE_DUTY = 0.6
MAX_POINTS = 10_000  # Prometheus answers at most 11,000 points per series per query
BUSY_METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL_METRIC = "DCGM_FI_DEV_GPU_UTIL"
MEMORY_METRIC = "DCGM_FI_DEV_FB_USED"
MIB = 1024 * 1024
MS_EPOCH = 1e11  # epoch seconds stay below this until the year 5138: larger times are milliseconds
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

    def level(self, pods: np.ndarray | None = None) -> np.ndarray:
        """Each pod's mean busy over the steps it is present (its load while it exists)."""
        r = self.rows(pods)
        return self.busy[r].sum(axis=1, dtype=np.float64) / np.maximum(self.last[r] - self.first[r], 1)

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


def csv_times(col: pd.Series, path: Path) -> np.ndarray:
    numeric = pd.to_numeric(col, errors="coerce")
    if numeric.notna().all():
        return numeric.to_numpy(float)
    parsed = pd.to_datetime(col, errors="coerce", utc=True, format="ISO8601")
    bad = col[parsed.isna()]
    if len(bad):
        raise UserError(f"{path}: bad time {str(bad.iloc[0])!r}; allowed: epoch seconds or ISO 8601 with a time zone")
    return (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(float)


def read_usage_csv(path: Path | str, step_s: float | None = None, gpu_model_name: str | None = None) -> Usage:
    """The usage CSV as a :class:`Usage`; one-line UserError for what a site can fix in it."""
    p = Path(path)
    try:
        df = pd.read_csv(p, dtype={"gpu": str, "pod": str, "class": str, MODEL_COLUMN: str})
    except FileNotFoundError:
        raise UserError(f"--usage {p}: no such file") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UserError(f"--usage {p}: not a CSV ({str(exc).splitlines()[0]})") from None
    return usage_from_rows(df, f"--usage {p}", step_s, gpu_model_name)


def usage_from_rows(
    df: pd.DataFrame, what: str, step_s: float | None = None, gpu_model_name: str | None = None
) -> Usage:
    """Rows of the usage CSV (a frame) as a :class:`Usage`; ``what`` names the source in errors."""
    missing = [c for c in USAGE_COLUMNS if c not in df.columns]
    if missing:
        raise UserError(f"{what} lacks column(s) {', '.join(missing)}; required: {','.join(USAGE_COLUMNS)}")
    if df.empty:
        raise UserError(f"{what} has no samples; the window is empty")
    busy = checked_busy(df["busy"], what)
    memory = pd.to_numeric(df["memory_bytes"], errors="coerce")
    if (memory.isna() | (memory < 0)).any():
        value = df.loc[memory.isna() | (memory < 0), "memory_bytes"].iloc[0]
        raise UserError(f"{what}: memory_bytes {str(value)!r}; allowed: a number of bytes >= 0")
    times = csv_times(df["time"], Path(what))
    warnings: list[str] = []
    if float(np.nanmax(times)) > MS_EPOCH:
        times = times / 1000.0
        warnings.append(f"{what}: times above {MS_EPOCH:.0e} read as epoch milliseconds and converted to seconds")
    model, model_from = usage_model(df, what, gpu_model_name)
    usage = usage_frame(times, df["gpu"], df["pod"], df["class"], busy, memory.to_numpy(float), step_s)
    return replace(usage, gpu_model=model, model_from=model_from, warnings=tuple(warnings))


def checked_busy(col: pd.Series, what: str) -> np.ndarray:
    """The busy column as fractions; a percent column (values up to 100) is a one-line error with the hint."""
    busy = pd.to_numeric(col, errors="coerce")
    bad = col[~busy.between(0, 1)]
    if len(bad):
        top = float(busy.max()) if busy.notna().all() else math.nan
        hint = " (it looks like percent: divide the column by 100)" if 1 < top <= 100 and busy.min() >= 0 else ""
        raise UserError(f"{what}: busy {str(bad.iloc[0])!r} outside 0-1 (a fraction of a whole GPU's time){hint}")
    return busy.to_numpy(float)


def usage_model(df: pd.DataFrame, what: str, given: str | None) -> tuple[str | None, str]:
    """The usage's GPU model key: ``given`` (``--usage-gpu-model``) or the CSV's gpu_model column."""
    if given:
        return gpu_model(given).key, "--usage-gpu-model"
    if MODEL_COLUMN not in df.columns:
        return None, ""
    names = sorted({str(v) for v in df[MODEL_COLUMN].dropna().unique()})
    keys = sorted({gpu_model(n).key for n in names})
    if len(keys) > 1:
        raise UserError(f"{what}: GPUs of several models ({', '.join(keys)}); advise one pool (one model) at a time")
    return (keys[0], f"column {MODEL_COLUMN}") if keys else (None, "")


def usage_frame(
    times: np.ndarray,
    gpus: pd.Series,
    pods: pd.Series,
    classes: pd.Series,
    busy: np.ndarray,
    memory: np.ndarray,
    step_s: float | None,
) -> Usage:
    """Samples on a fixed grid: ``step_s`` or the median spacing of the distinct times."""
    uniq = np.unique(times)
    if step_s is None:
        step_s = float(np.median(np.diff(uniq))) if len(uniq) > 1 else 60.0
    start = float(uniq[0])
    col = np.rint((times - start) / step_s).astype(np.int64)
    steps = int(col.max()) + 1
    keys = pd.DataFrame({"pod": pods.astype(str).to_numpy(), "class": classes.astype(str), "gpu": gpus.astype(str)})
    first = keys.drop_duplicates("pod")
    names = tuple(first["pod"])
    row_of = {p: i for i, p in enumerate(names)}
    row = keys["pod"].map(row_of).to_numpy(np.int64)
    b = np.zeros((len(names), steps), np.float32)
    b[row, col] = busy
    peak = np.zeros(len(names))
    lo = np.full(len(names), steps, np.int64)
    hi = np.zeros(len(names), np.int64)
    np.maximum.at(peak, row, memory)
    np.minimum.at(lo, row, col)
    np.maximum.at(hi, row, col + 1)
    return Usage(start, float(step_s), names, tuple(first["class"]), tuple(first["gpu"]), b, peak, lo, hi)


def sanity(usage: Usage, model: GpuModel) -> list[str]:
    """Warnings on implausible units against the GPU model: memory above the GPU's, or so small it
    looks like MiB read as bytes (with the warnings reading found, e.g. milliseconds)."""
    out = list(usage.warnings)
    peak = usage.memory_peak
    if not peak.size:
        return out
    top = int(np.argmax(peak))
    if float(peak[top]) > model.mem_gb * GB:
        out.append(
            f"memory: pod {usage.pods[top]} peaks at {float(peak[top]) / GB:.3g} GB, above the {model.key}'s "
            f"{model.mem_gb:g} GB (memory_bytes in another unit, or the GPU model wrong?)"
        )
    used = peak[peak > 0]
    if used.size and float(np.median(used)) < MIB:
        out.append(
            f"memory: the median pod peaks at {float(np.median(used)):.0f} bytes, under 1 MiB "
            "(MiB given as bytes? memory_bytes must be bytes)"
        )
    return out


# ---------------------------------------------------------------------------------- Prometheus


@dataclass(frozen=True)
class Window:
    since: float
    until: float
    step_s: float

    def chunks(self) -> list[tuple[float, float]]:
        """(start, end) of each query_range call, MAX_POINTS steps at most each, end inclusive."""
        out, t = [], self.since
        while t <= self.until:
            end = min(self.until, t + (MAX_POINTS - 1) * self.step_s)
            out.append((t, end))
            t = end + self.step_s
        return out


def series_gpu(labels: dict[str, str]) -> str:
    host = labels.get("Hostname") or labels.get("node") or ""
    dev = labels.get("UUID") or labels.get("gpu") or ""
    return f"{host}/{dev}" if host else dev


def query_samples(prom: Prometheus, promql: str, window: Window, class_label: str) -> pd.DataFrame:
    rows: list[tuple[float, str, str, str, float, str]] = []
    for start, end in window.chunks():
        for s in prom.query_range(promql, start, end + 1e-3, window.step_s):
            labels = s["metric"]
            pod = labels.get("pod", "")
            if not pod:
                continue  # a GPU no pod uses: not a workload
            gpu, cls, model = series_gpu(labels), labels.get(class_label, ""), labels.get("modelName", "")
            rows.extend((t, gpu, pod, cls, v, model) for t, v in s["values"])
    return pd.DataFrame(rows, columns=["time", "gpu", "pod", "class", "value", MODEL_COLUMN])


def read_prometheus(url: str, window: Window, class_label: str, gpu_model_name: str | None = None) -> Usage:
    """Per-pod busy and memory from dcgm-exporter's series in Prometheus over ``window``; the GPU model
    from ``gpu_model_name`` or the series' ``modelName`` label."""
    if not window.until > window.since:
        raise UserError(f"empty window --since {window.since:g} --until {window.until:g}; --until must be later")
    if not (math.isfinite(window.step_s) and window.step_s > 0):
        raise UserError(f"bad --step {float(window.step_s)!r}; allowed: seconds > 0")
    prom = Prometheus(url, timeout_s=30)
    busy = query_samples(prom, BUSY_METRIC, window, class_label)
    if busy.empty:
        busy = query_samples(prom, UTIL_METRIC, window, class_label)
        busy["value"] = busy["value"] / 100.0
    if busy.empty:
        raise UserError(
            f"no {BUSY_METRIC} or {UTIL_METRIC} samples with a pod label at {url} in the window; "
            "widen --since/--until or enable dcgm-exporter's pod labels"
        )
    unlabelled = sorted(set(busy.loc[busy["class"] == "", "pod"]))
    if unlabelled:
        raise UserError(f"pod {unlabelled[0]!r} has no label {class_label!r}; choose --class-label among its labels")
    mem = query_samples(prom, MEMORY_METRIC, window, class_label)
    merged = busy.merge(mem[["time", "pod", "value"]].rename(columns={"value": "mib"}), on=["time", "pod"], how="left")
    memory = merged["mib"].fillna(0).to_numpy(float) * MIB
    values = merged["value"].clip(0, 1).to_numpy(float)
    times = merged["time"].to_numpy(float)
    usage = usage_frame(times, merged["gpu"], merged["pod"], merged["class"], values, memory, window.step_s)
    labelled = merged[merged[MODEL_COLUMN] != ""]
    model, model_from = usage_model(labelled, f"--prometheus {url}", gpu_model_name)
    return replace(usage, gpu_model=model, model_from=model_from.replace(f"column {MODEL_COLUMN}", "label modelName"))


# ---------------------------------------------------------------------------------- patterns


def infer_usage(busy: np.ndarray, present: np.ndarray | None = None) -> str:
    """The usage class (:data:`USAGE_RULES`) of a class's busy samples (pods x steps), over the steps where a
    pod is present (``present``; all steps where not given): absence is not idle time."""
    b = np.asarray(busy, float)
    if present is not None:
        b = b[np.asarray(present, bool)]
    if b.size == 0:
        return SATURATING
    active = b > ACTIVE
    duty = float(active.mean())
    level = float(b[active].mean()) if active.any() else 0.0
    return next(name for name, rule in USAGE_RULES.items() if rule(duty, level))


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
    return {
        c: overrides.get(c) or infer_pattern(usage.busy[usage.pods_of(c)], usage.present(usage.pods_of(c)))
        for c in names
    }


def parse_class_overrides(items: list[str] | None) -> dict[str, PatternSpec]:
    """``NAME=PATTERN`` options as a dict of pattern kinds; one-line UserError for a malformed one."""
    out: dict[str, PatternSpec] = {}
    for item in items or []:
        name, eq, kind = item.partition("=")
        if not eq or not name.strip() or not kind.strip():
            raise UserError(f"bad --class {item!r}; allowed: NAME=PATTERN with PATTERN one of {', '.join(PATTERNS)}")
        out[name.strip()] = parse_pattern(kind).spec
    return out
