"""A site's GPU usage: a CSV or dcgm-exporter's per-pod series in Prometheus, as one fixed-step frame.

The frame (:class:`Usage`) is a matrix: one row per pod, one column per step of the window, each cell
the pod's busy fraction of a whole GPU (0..1; 0 where the pod has no sample) and its memory in bytes.
Each pod carries its class and the GPU it ran on today (one pod per GPU or several, as the trace says).

CSV (``--usage FILE``): columns ``time,gpu,pod,class,busy,memory_bytes``; ``time`` epoch seconds or ISO
8601; samples are put on the step grid of the window (the median spacing of the times unless
``step_s`` is given), the last sample of a step winning.

Prometheus (``--prometheus URL``): ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` per pod (falling back to
``DCGM_FI_DEV_GPU_UTIL`` / 100 where a site's exporter has no profiling metrics) and ``DCGM_FI_DEV_FB_USED``
(MiB), through ``query_range`` in chunks of :data:`MAX_POINTS` steps; a pod's class is the value of
``class_label`` on its series; its GPU is ``Hostname``/``UUID`` (or ``gpu``).

Pattern inference (:func:`infer_pattern`), from a class's busy samples: ``batch`` when the pods keep the
device busy (mean busy over the active steps >= :data:`BATCH_LEVEL` and active >= :data:`BATCH_DUTY` of
the time); ``serve`` when they are active most of the time at a lower level (a steady request stream);
``interactive`` otherwise (bursts separated by idle time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

from sharebench.errors import UserError
from sharebench.patterns import PATTERN_KINDS, parse_pattern
from sharebench.telemetry.prometheus import Prometheus

USAGE_COLUMNS = ("time", "gpu", "pod", "class", "busy", "memory_bytes")
ACTIVE = 0.05  # a pod with busy above this in a step has work on the device
BATCH_LEVEL = 0.7
BATCH_DUTY = 0.8
SERVE_DUTY = 0.6
MAX_POINTS = 10_000  # Prometheus answers at most 11,000 points per series per query
BUSY_METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL_METRIC = "DCGM_FI_DEV_GPU_UTIL"
MEMORY_METRIC = "DCGM_FI_DEV_FB_USED"
MIB = 1024 * 1024


@dataclass(frozen=True, eq=False)
class Usage:
    """Busy and memory per pod (rows) and step (columns) of a window starting at ``start`` (epoch s)."""

    start: float
    step_s: float
    pods: tuple[str, ...]
    classes: tuple[str, ...]  # per pod
    gpus: tuple[str, ...]  # per pod: the GPU it ran on today
    busy: np.ndarray  # (pods, steps) float32, 0..1
    memory_bytes: np.ndarray  # (pods, steps) float32

    @property
    def steps(self) -> int:
        return int(self.busy.shape[1])

    def class_names(self) -> list[str]:
        return sorted(set(self.classes))

    def pods_of(self, name: str) -> np.ndarray:
        return np.array([i for i, c in enumerate(self.classes) if c == name], dtype=int)

    def work_s(self) -> dict[str, float]:
        """GPU-seconds of work per class: the busy fractions times the step."""
        return {c: float(self.busy[self.pods_of(c)].sum(dtype=np.float64) * self.step_s) for c in self.class_names()}


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
        raise UserError(f"bad {what} {value!r}; allowed: epoch seconds or ISO 8601 (2026-12-01T00:00:00Z)") from None
    if t.tzinfo is None:
        raise UserError(f"bad {what} {value!r}: ISO 8601 without a time zone; add Z or +HH:MM")
    return t.timestamp()


def csv_times(col: pd.Series, path: Path) -> np.ndarray:
    numeric = pd.to_numeric(col, errors="coerce")
    if numeric.notna().all():
        return numeric.to_numpy(float)
    parsed = pd.to_datetime(col, errors="coerce", utc=True, format="ISO8601")
    bad = col[parsed.isna()]
    if len(bad):
        raise UserError(f"{path}: bad time {bad.iloc[0]!r}; allowed: epoch seconds or ISO 8601 with a time zone")
    return (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(float)


def read_usage_csv(path: Path | str, step_s: float | None = None) -> Usage:
    """The usage CSV as a :class:`Usage`; one-line UserError for what a site can fix in it."""
    p = Path(path)
    try:
        df = pd.read_csv(p, dtype={"gpu": str, "pod": str, "class": str})
    except FileNotFoundError:
        raise UserError(f"--usage {p}: no such file") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UserError(f"--usage {p}: not a CSV ({str(exc).splitlines()[0]})") from None
    missing = [c for c in USAGE_COLUMNS if c not in df.columns]
    if missing:
        raise UserError(f"--usage {p} lacks column(s) {', '.join(missing)}; required: {','.join(USAGE_COLUMNS)}")
    if df.empty:
        raise UserError(f"--usage {p} has no samples; the window is empty")
    busy = pd.to_numeric(df["busy"], errors="coerce")
    bad = df.loc[~busy.between(0, 1), "busy"]
    if len(bad):
        raise UserError(f"--usage {p}: busy {bad.iloc[0]!r} outside 0-1 (a fraction of a whole GPU's time)")
    memory = pd.to_numeric(df["memory_bytes"], errors="coerce")
    if (memory.isna() | (memory < 0)).any():
        value = df.loc[memory.isna() | (memory < 0), "memory_bytes"].iloc[0]
        raise UserError(f"--usage {p}: memory_bytes {value!r}; allowed: a number of bytes >= 0")
    times = csv_times(df["time"], p)
    return usage_frame(times, df["gpu"], df["pod"], df["class"], busy.to_numpy(float), memory.to_numpy(float), step_s)


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
    row = np.array([row_of[p] for p in keys["pod"]], dtype=np.int64)
    b = np.zeros((len(names), steps), np.float32)
    m = np.zeros((len(names), steps), np.float32)
    b[row, col] = busy
    m[row, col] = memory
    return Usage(start, float(step_s), names, tuple(first["class"]), tuple(first["gpu"]), b, m)


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
    rows: list[tuple[float, str, str, str, float]] = []
    for start, end in window.chunks():
        for s in prom.query_range(promql, start, end + 1e-3, window.step_s):
            labels = s["metric"]
            pod = labels.get("pod", "")
            if not pod:
                continue  # a GPU no pod uses: not a workload
            gpu, cls = series_gpu(labels), labels.get(class_label, "")
            rows.extend((t, gpu, pod, cls, v) for t, v in s["values"])
    return pd.DataFrame(rows, columns=["time", "gpu", "pod", "class", "value"])


def read_prometheus(url: str, window: Window, class_label: str) -> Usage:
    """Per-pod busy and memory from dcgm-exporter's series in Prometheus over ``window``."""
    if not window.until > window.since:
        raise UserError(f"empty window --since {window.since:g} --until {window.until:g}; --until must be later")
    if not (math.isfinite(window.step_s) and window.step_s > 0):
        raise UserError(f"bad --step {window.step_s!r}; allowed: seconds > 0")
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
    return usage


# ---------------------------------------------------------------------------------- patterns


def infer_pattern(busy: np.ndarray) -> str:
    """``batch``, ``interactive`` or ``serve`` from a class's busy samples (pods x steps)."""
    b = np.asarray(busy, float)
    if b.size == 0:
        return "batch"
    active = b > ACTIVE
    duty = float(active.mean())
    level = float(b[active].mean()) if active.any() else 0.0
    if level >= BATCH_LEVEL and duty >= BATCH_DUTY:
        return "batch"
    if duty >= SERVE_DUTY:
        return "serve"
    return "interactive"


def class_patterns(usage: Usage, overrides: dict[str, str]) -> dict[str, str]:
    """Each class's pattern kind: ``overrides`` first (a class that matches no pod is an error)."""
    names = usage.class_names()
    for name, kind in overrides.items():
        if name not in names:
            raise UserError(f"--class {name}={kind}: no pod of class {name!r}; classes: {', '.join(names)}")
        if kind not in PATTERN_KINDS:
            raise UserError(f"--class {name}={kind}: unknown pattern; allowed: {', '.join(PATTERN_KINDS)}")
    return {c: overrides.get(c) or infer_pattern(usage.busy[usage.pods_of(c)]) for c in names}


def parse_class_overrides(items: list[str] | None) -> dict[str, str]:
    """``NAME=PATTERN`` options as a dict; one-line UserError for a malformed one."""
    out: dict[str, str] = {}
    for item in items or []:
        name, eq, kind = item.partition("=")
        if not eq or not name.strip() or not kind.strip():
            raise UserError(
                f"bad --class {item!r}; allowed: NAME=PATTERN with PATTERN one of {', '.join(PATTERN_KINDS)}"
            )
        out[name.strip()] = parse_pattern(kind).kind
    return out
