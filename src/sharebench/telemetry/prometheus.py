"""Cluster telemetry: DCGM exporter metrics from Prometheus over each cell's time window.

On a cluster the sweep's pods cannot read NVML of the whole GPU, but dcgm-exporter
(deployed by the gpu-operator, scraped by kube-prometheus-stack through the
ServiceMonitor in ``manifests/monitoring/``) publishes per-GPU and per-MIG-instance
series. For one cell (a node, a time window) :func:`cell_summary` asks Prometheus'
HTTP API (``/api/v1/query_range``) for each metric and summarises it.

Series identity: one physical series is (``UUID`` or ``gpu``, ``GPU_I_ID``). With
pod mapping on, dcgm-exporter labels a series with the pod using the device; under
time-slicing (and MPS) several pods share one GPU, and the exporter repeats the
same device-level series once per pod (labels ``pod``/``namespace``/``container``
differ, values identical). Those are **device-level copies**: counted once in the
summary, and the summary says how many copies there were. Profiling metrics are
per device (or per MIG instance) in every case, never per replica.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sharebench.errors import UserError, one_line
from sharebench.modes import KINDS, kind_of
from sharebench.parse import (  # added by the ServiceMonitor from __meta_kubernetes_pod_node_name
    DEFAULT_NODE_LABEL,
    check_http_url,
)
from sharebench.results import DCGM_CSV, load_results


@dataclass(frozen=True)
class DcgmMetric:
    name: str
    short: str  # column stem: dcgm_<short>_mean
    unit: str  # unit of the exported value
    help: str
    per_mig: bool  # exported per MIG instance (GPU_I_ID) under MIG, else per GPU only


# The metrics sharebench reads (and the dcgm-exporter CSV in manifests/monitoring enables).
METRICS: tuple[DcgmMetric, ...] = (
    DcgmMetric(
        "DCGM_FI_PROF_SM_ACTIVE",
        "sm_active",
        "ratio",
        "Ratio of cycles an SM has at least 1 warp assigned (0..1).",
        True,
    ),
    DcgmMetric(
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "sm_occupancy",
        "ratio",
        "Ratio of warps resident on an SM to the maximum (0..1).",
        True,
    ),
    DcgmMetric(
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "fp64_active", "ratio", "Ratio of cycles the FP64 pipe is active (0..1).", True
    ),
    DcgmMetric(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "dram_active",
        "ratio",
        "Ratio of cycles the device memory interface is active (0..1).",
        True,
    ),
    DcgmMetric(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "gr_engine_active",
        "ratio",
        "Ratio of time the graphics engine is active (0..1).",
        True,
    ),
    DcgmMetric("DCGM_FI_DEV_FB_USED", "fb_used_mib", "MiB", "Framebuffer memory used (MiB).", True),
    DcgmMetric("DCGM_FI_DEV_POWER_USAGE", "power_w", "W", "Power draw (W).", False),
    DcgmMetric("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", "MHz", "SM clock frequency (MHz).", False),
    DcgmMetric("DCGM_FI_DEV_GPU_UTIL", "gpu_util_pct", "%", "GPU utilization (%).", False),
)
REQUIRED = (
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE",
)


class Prometheus:
    """A small client for Prometheus' HTTP API (urllib, no extra dependency)."""

    def __init__(self, url: str, timeout_s: float = 10.0):
        check_http_url("Prometheus URL", url)
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def _get(self, path: str, params: dict[str, Any]) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as resp:
                body = json.loads(resp.read().decode())
        except urllib.error.HTTPError as exc:
            try:
                err = json.loads(exc.read().decode()).get("error", exc.reason)
            except (ValueError, AttributeError):
                err = exc.reason
            raise UserError(f"Prometheus at {self.url} refused the query ({exc.code}): {one_line(err)}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UserError(f"Prometheus at {self.url} not reachable: {one_line(reason)}") from exc
        if body.get("status") != "success":
            raise UserError(f"Prometheus at {self.url}: {one_line(body.get('error', body))}")
        return body["data"]

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self._get("/api/v1/query", params)["result"]

    def query_range(self, promql: str, start: float, end: float, step_s: float) -> list[dict[str, Any]]:
        """Series as ``{"metric": labels, "values": [(t, value), ...]}`` (floats)."""
        if not end > start:
            raise UserError(f"empty time window {start}..{end}; the end must be after the start")
        data = self._get(
            "/api/v1/query_range",
            {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"},
        )
        return [
            {"metric": s["metric"], "values": [(float(t), float(v)) for t, v in s["values"]]} for s in data["result"]
        ]


def selector(
    metric: str, node: str | None = None, node_label: str = DEFAULT_NODE_LABEL, gpu_uuid: str | None = None
) -> str:
    """``METRIC{node="n1",UUID="GPU-…"}`` with label values escaped for PromQL."""

    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"')

    matchers = []
    if node:
        matchers.append(f'{node_label}="{esc(node)}"')
    if gpu_uuid:
        matchers.append(f'UUID="{esc(gpu_uuid)}"')
    return metric + ("{" + ",".join(matchers) + "}" if matchers else "")


def physical_key(labels: dict[str, str]) -> tuple[str, str]:
    """(GPU, MIG instance) a series measures; pod labels are not part of it."""
    return (labels.get("UUID") or labels.get("gpu") or "", labels.get("GPU_I_ID") or "")


def dedupe(series: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """One series per physical key, and how many extra copies (time-sliced pods) there were."""
    seen: dict[tuple[str, str], dict[str, Any]] = {}
    copies = 0
    for s in series:
        key = physical_key(s["metric"])
        if key in seen:
            copies += 1
            continue
        seen[key] = s
    return list(seen.values()), copies


def _stats(values: list[float]) -> dict[str, float]:
    v = [x for x in values if math.isfinite(x)]
    if not v:
        return {"mean": math.nan, "max": math.nan, "min": math.nan, "n": 0}
    return {"mean": sum(v) / len(v), "max": max(v), "min": min(v), "n": len(v)}


def cell_summary(
    prom: Prometheus,
    start: float,
    end: float,
    *,
    node: str | None = None,
    node_label: str = DEFAULT_NODE_LABEL,
    gpu_uuid: str | None = None,
    step_s: float = 1.0,
    mode: str | None = None,
    metrics: tuple[DcgmMetric, ...] = METRICS,
) -> dict[str, Any]:
    """DCGM metrics of one cell's window, flat (``dcgm_*`` columns) plus ``instances`` detail.

    ``dcgm_<short>_mean`` is the mean over the window and over the physical series
    (GPUs, or MIG instances for per-instance metrics); ``dcgm_<short>_max`` the maximum.
    ``dcgm_energy_j`` integrates power (W) over the window (trapezoids over the steps,
    summed over GPUs). ``dcgm_copies`` counts device-level copies (see the module doc).
    """
    out: dict[str, Any] = {"dcgm_source": "prometheus", "dcgm_window_s": end - start, "dcgm_note": ""}
    notes: list[str] = []
    instances: dict[tuple[str, str], dict[str, Any]] = {}
    copies_total = 0
    for m in metrics:
        series = prom.query_range(selector(m.name, node, node_label, gpu_uuid), start, end, step_s)
        if not series:
            out[f"dcgm_{m.short}_mean"] = out[f"dcgm_{m.short}_max"] = None
            if m.name in REQUIRED:
                notes.append(f"{m.name}: no series")
            continue
        series, copies = dedupe(series)
        copies_total = max(copies_total, copies)
        all_vals = []
        for s in series:
            vals = [v for _t, v in s["values"]]
            all_vals += vals
            key = physical_key(s["metric"])
            inst = instances.setdefault(
                key,
                {
                    "uuid": key[0],
                    "gpu_instance_id": key[1] or None,
                    "gpu": s["metric"].get("gpu"),
                    "profile": s["metric"].get("GPU_I_PROFILE"),
                    "model": s["metric"].get("modelName"),
                },
            )
            inst[f"{m.short}_mean"] = _stats(vals)["mean"]
        st = _stats(all_vals)
        out[f"dcgm_{m.short}_mean"], out[f"dcgm_{m.short}_max"] = st["mean"], st["max"]
        if m.short == "power_w":
            energy = 0.0
            for s in series:
                pts = s["values"]
                energy += sum((t1 - t0) * (p0 + p1) / 2 for (t0, p0), (t1, p1) in zip(pts, pts[1:]))
            out["dcgm_energy_j"] = energy
    out.setdefault("dcgm_energy_j", None)
    out["dcgm_copies"] = copies_total
    mig = any(k[1] for k in instances)
    out["dcgm_mig_instances"] = len({k for k in instances if k[1]})
    if copies_total:
        notes.append(f"{copies_total} device-level copies (one per pod sharing a GPU) counted once")
    spec = KINDS.get(kind_of(mode or ""))
    if spec is not None and spec.shared:
        notes.append(f"{mode}: DCGM values are per GPU, shared by all replicas (device-level, not per replica)")
    if mig:
        notes.append("MIG: activity and memory per instance (GPU_I_ID); power and clocks per whole GPU")
    out["dcgm_note"] = "; ".join(notes)
    out["instances"] = sorted(instances.values(), key=lambda d: (d["uuid"], str(d["gpu_instance_id"])))
    return out


def summarize_cells(prom: Prometheus, cells: list[dict[str, Any]], **kw: Any) -> list[dict[str, Any]]:
    """:func:`cell_summary` for each ``{"cell_id", "start", "end", "mode"?}`` (epoch seconds);
    a cell Prometheus cannot answer for gets ``dcgm_source="none"`` and the reason."""
    rows = []
    for c in cells:
        try:
            s = cell_summary(prom, float(c["start"]), float(c["end"]), mode=c.get("mode"), **kw)
        except UserError as exc:
            s = {"dcgm_source": "none", "dcgm_note": str(exc)}
        s.pop("instances", None)
        rows.append({"cell_id": c.get("cell_id"), **s})
    return rows


def cell_windows(results_dir: Path | str) -> list[dict[str, Any]]:
    """One ``{"cell_id", "mode", "start", "end"}`` per measured cell of a results folder:
    the tracking window (first track_start to last track_end)."""
    df = load_results(results_dir)
    out = []
    for (_sweep, cell_id), g in df.groupby(["sweep_id", "cell_id"], sort=False, dropna=False):
        start, end = g["track_start"].astype(float).min(), g["track_end"].astype(float).max()
        if math.isfinite(start) and math.isfinite(end) and end > start:
            out.append({"cell_id": cell_id, "mode": g["mode"].iloc[0], "start": float(start), "end": float(end)})
    return out


def attach_to_results(
    results_dir: Path | str,
    url: str,
    *,
    node: str | None = None,
    node_label: str = DEFAULT_NODE_LABEL,
    gpu_uuid: str | None = None,
    step_s: float = 1.0,
) -> Any:
    """Query DCGM for every cell of a results folder; write ``dcgm.csv`` (one row per cell,
    ``dcgm_*`` columns) beside results.csv and return it as a DataFrame. The telemetry and
    prediction report sections use it when present."""
    prom = Prometheus(url)
    rows = summarize_cells(
        prom, cell_windows(results_dir), node=node, node_label=node_label, gpu_uuid=gpu_uuid, step_s=step_s
    )
    df = pd.DataFrame(rows)
    df.to_csv(Path(results_dir) / DCGM_CSV, index=False)
    return df
