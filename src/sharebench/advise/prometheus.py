"""A site's usage from dcgm-exporter's per-pod series in Prometheus (``--prometheus URL``).

``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` per pod (falling back to ``DCGM_FI_DEV_GPU_UTIL`` / 100 where a site's
exporter has no profiling metrics) and ``DCGM_FI_DEV_FB_USED`` (MiB), through ``query_range`` in chunks of
:data:`MAX_POINTS` steps; a pod's class is the value of ``class_label`` on its series; its GPU is
``Hostname``/``UUID`` (or ``gpu``); the GPU model its ``modelName`` label. The samples go through the
same reading as a CSV's (:mod:`sharebench.advise.reading`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from sharebench.advise.reading import Body, finish
from sharebench.advise.usage import MIB, MODEL_COLUMN, Usage
from sharebench.errors import UserError
from sharebench.telemetry.prometheus import Prometheus

MAX_POINTS = 10_000  # Prometheus answers at most 11,000 points per series per query
BUSY_METRIC = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
UTIL_METRIC = "DCGM_FI_DEV_GPU_UTIL"
MEMORY_METRIC = "DCGM_FI_DEV_FB_USED"


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
    rows = pd.DataFrame(
        {
            "time": merged["time"].astype(float),
            "gpu": merged["gpu"],
            "pod": merged["pod"],
            "class": merged["class"],
            "busy": merged["value"].clip(0, 1),
            "memory_bytes": merged["mib"].fillna(0) * MIB,
            MODEL_COLUMN: merged[MODEL_COLUMN],
        }
    )
    body = Body(f"--prometheus {url}")
    body.feed(rows)
    usage = finish(body, window.step_s, gpu_model_name)
    return replace(usage, model_from=usage.model_from.replace(f"column {MODEL_COLUMN}", "label modelName"))
