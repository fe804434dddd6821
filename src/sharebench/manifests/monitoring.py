"""The monitoring manifests (``manifests/monitoring/``), generated from one source.

* ``0100_configmap_sharebench-dcgm-metrics.yaml`` — dcgm-exporter's metrics CSV with the
  profiling metrics sharebench reads (SM activity, FP64 pipe, DRAM) enabled. The
  gpu-operator mounts it when its Helm values say::

      dcgmExporter:
        config: {name: sharebench-dcgm-metrics}
        env:
          - {name: DCGM_EXPORTER_COLLECTORS, value: /etc/dcgm-exporter/dcgm-metrics.csv}
          - {name: DCGM_EXPORTER_INTERVAL, value: "1000"}   # ms; the default 30 s is too coarse

* ``0200_servicemonitor_sharebench-dcgm-exporter.yaml`` — kube-prometheus-stack scrapes the
  operator's ``nvidia-dcgm-exporter`` Service every second and adds the ``node`` label
  (from the pod's node) that :mod:`sharebench.telemetry.prometheus` selects on.
* ``0300_configmap_sharebench-grafana-dashboard.yaml`` — a Grafana dashboard (picked up by
  the Grafana sidecar through the ``grafana_dashboard: "1"`` label): SM activity per GPU and
  per MIG instance, FP64 and DRAM activity, memory, power, SM clock; annotations of the
  benchmark cells (tag ``sharebench``) that ``sharebench telemetry annotate`` writes; beside them the
  trend of the loss per node and mode with its interval, as ``sharebench history add|check
  --pushgateway`` pushes it (:data:`HISTORY_LOSS_METRIC`).
* ``0400_prometheusrule_sharebench-history.yaml`` — a PrometheusRule that fires
  :data:`HISTORY_ALERT` while the last ``history check`` of a node found a changed loss
  (:data:`HISTORY_CHANGES_METRIC` > 0 on the Pushgateway, which Prometheus scrapes with
  ``honor_labels``).

They are rendered with the rest of ``manifests/`` by ``sharebench manifests render``;
``sharebench manifests dashboard`` prints the raw dashboard JSON (Grafana import), and
``sharebench telemetry annotate`` writes a results folder's cells as Grafana annotations.
"""

from __future__ import annotations

import json
from typing import Any

from sharebench.errors import UserError
from sharebench.manifests.names import DCGM_METRICS_CONFIGMAP, MONITORING_NAMESPACE, OPERATOR_NAMESPACE, metadata
from sharebench.telemetry.grafana import ANNOTATION_TAG
from sharebench.telemetry.prometheus import DEFAULT_NODE_LABEL, METRICS

METRICS_CONFIGMAP = DCGM_METRICS_CONFIGMAP
METRICS_KEY = "dcgm-metrics.csv"
SERVICE_MONITOR = "sharebench-dcgm-exporter"
DASHBOARD_CONFIGMAP = "sharebench-grafana-dashboard"
DASHBOARD_KEY = "sharebench-gpu-sharing.json"
DASHBOARD_UID = "sharebench-gpu-sharing"
EXPORTER_SERVICE_LABELS = {"app": "nvidia-dcgm-exporter"}  # the gpu-operator's Service
EXPORTER_PORT = "gpu-metrics"
PROMETHEUS_RELEASE = "kube-prometheus-stack"  # serviceMonitorSelector: release=<helm release>
SCRAPE_INTERVAL = "1s"

# what `sharebench history --pushgateway` pushes (sharebench.history.push), named here once so that the
# dashboard and the alert read the names the history writes
HISTORY_PUSH_JOB = "sharebench-history"
HISTORY_LOSS_METRIC = "sharebench_loss_percent"
HISTORY_LOSS_LOW_METRIC = "sharebench_loss_ci_low_percent"
HISTORY_LOSS_HIGH_METRIC = "sharebench_loss_ci_high_percent"
HISTORY_CHANGES_METRIC = "sharebench_history_check_changes"
HISTORY_CHECK_TIME_METRIC = "sharebench_history_check_timestamp_seconds"
HISTORY_LABELS = ("node", "gpu_model", "mode", "pattern", "particles", "turns", "engine", "backend")
HISTORY_RULE = "sharebench-history"
HISTORY_ALERT = "SharebenchLossChanged"

# dcgm-exporter CSV rows: (DCGM field, Prometheus type, help). sharebench's metrics first.
_EXTRA_FIELDS = (
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "Ratio of cycles the FP32 pipe is active."),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "counter",
        "The number of bytes of active PCIe tx data including both header and payload.",
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "counter",
        "The number of bytes of active PCIe rx data including both header and payload.",
    ),
)


def metrics_csv() -> str:
    """The dcgm-exporter collectors file (``# Format`` header, one field per line)."""
    lines = [
        "# Format",
        "# If line starts with a '#' it is considered a comment",
        "# DCGM FIELD, Prometheus metric type, help message",
        "",
        "# sharebench reads these (sharebench.telemetry.prometheus.METRICS); DCGM_FI_PROF_* are",
        "# the profiling metrics (data-center GPUs; per MIG instance under MIG)",
    ]
    lines += [f"{m.name}, gauge, {m.help}" for m in METRICS]
    lines += ["", "# context for the dashboard and energy accounting"]
    lines += [f"{name}, {kind}, {help_}" for name, kind, help_ in _EXTRA_FIELDS]
    return "\n".join(lines) + "\n"


def csv_metric_names(text: str) -> list[str]:
    """Enabled (uncommented) field names of a dcgm-exporter CSV."""
    names = []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        parts = [p.strip() for p in s.split(",", 2)]
        if len(parts) != 3 or parts[1] not in ("gauge", "counter", "label"):
            raise UserError(f"bad dcgm-exporter CSV line {line!r}; allowed: FIELD, gauge|counter|label, help")
        names.append(parts[0])
    return names


def metrics_configmap(namespace: str = OPERATOR_NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(METRICS_CONFIGMAP, namespace),
        "data": {METRICS_KEY: metrics_csv()},
    }


def service_monitor(namespace: str = OPERATOR_NAMESPACE) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata(SERVICE_MONITOR, namespace, release=PROMETHEUS_RELEASE),
        "spec": {
            "selector": {"matchLabels": dict(EXPORTER_SERVICE_LABELS)},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [
                {
                    "port": EXPORTER_PORT,
                    "path": "/metrics",
                    "interval": SCRAPE_INTERVAL,
                    "scrapeTimeout": SCRAPE_INTERVAL,
                    "relabelings": [
                        {
                            "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                            "action": "replace",
                            "targetLabel": DEFAULT_NODE_LABEL,
                        }
                    ],
                }
            ],
        },
    }


def _target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "expr": expr,
        "legendFormat": legend,
        "refId": ref,
        "range": True,
    }


def _panel(
    pid: int, title: str, targets: list[dict], unit: str, x: int, y: int, *, desc: str = "", max_: float | None = None
) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": unit, "custom": {"lineWidth": 1, "fillOpacity": 10}}
    if max_ is not None:
        defaults.update(min=0, max=max_)
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "description": desc,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "targets": targets,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]},
            "tooltip": {"mode": "multi"},
        },
    }


def dcgm_panels() -> list[dict[str, Any]]:
    """The DCGM panels. ``max by (…)`` folds the device-level copies dcgm-exporter writes per pod under
    time-slicing; ``GPU_I_ID=""`` selects whole GPUs, ``GPU_I_ID!=""`` MIG instances."""
    n = f'{DEFAULT_NODE_LABEL}=~"$node"'
    gpu_by = f"max by ({DEFAULT_NODE_LABEL}, gpu, UUID, modelName)"
    mig_by = f"max by ({DEFAULT_NODE_LABEL}, gpu, UUID, GPU_I_PROFILE, GPU_I_ID)"
    gpu_leg = "{{" + DEFAULT_NODE_LABEL + "}} GPU {{gpu}} {{modelName}}"
    mig_leg = "{{" + DEFAULT_NODE_LABEL + "}} GPU {{gpu}} GI {{GPU_I_ID}} ({{GPU_I_PROFILE}})"
    panels = [
        _panel(
            1,
            "SM activity per GPU",
            [_target(f'{gpu_by} (DCGM_FI_PROF_SM_ACTIVE{{{n}, GPU_I_ID=""}})', gpu_leg, "A")],
            "percentunit",
            0,
            0,
            max_=1,
            desc="DCGM_FI_PROF_SM_ACTIVE: share of cycles an SM had a warp. Under time-slicing one value per "
            "GPU for all replicas.",
        ),
        _panel(
            2,
            "SM activity per MIG instance",
            [_target(f'{mig_by} (DCGM_FI_PROF_SM_ACTIVE{{{n}, GPU_I_ID!=""}})', mig_leg, "A")],
            "percentunit",
            12,
            0,
            max_=1,
            desc="DCGM_FI_PROF_SM_ACTIVE per GPU instance (GPU_I_ID, GPU_I_PROFILE).",
        ),
        _panel(
            3,
            "FP64 pipe activity",
            [
                _target(f'{gpu_by} (DCGM_FI_PROF_PIPE_FP64_ACTIVE{{{n}, GPU_I_ID=""}})', gpu_leg, "A"),
                _target(f'{mig_by} (DCGM_FI_PROF_PIPE_FP64_ACTIVE{{{n}, GPU_I_ID!=""}})', mig_leg, "B"),
            ],
            "percentunit",
            0,
            8,
            max_=1,
            desc="DCGM_FI_PROF_PIPE_FP64_ACTIVE: tracking is FP64 arithmetic.",
        ),
        _panel(
            4,
            "DRAM activity",
            [
                _target(f'{gpu_by} (DCGM_FI_PROF_DRAM_ACTIVE{{{n}, GPU_I_ID=""}})', gpu_leg, "A"),
                _target(f'{mig_by} (DCGM_FI_PROF_DRAM_ACTIVE{{{n}, GPU_I_ID!=""}})', mig_leg, "B"),
            ],
            "percentunit",
            12,
            8,
            max_=1,
            desc="DCGM_FI_PROF_DRAM_ACTIVE: memory-interface busy share.",
        ),
        *device_panels(n, gpu_by, mig_by, gpu_leg, mig_leg),
    ]
    return panels


def device_panels(n: str, gpu_by: str, mig_by: str, gpu_leg: str, mig_leg: str) -> list[dict[str, Any]]:
    """Memory, power and SM clock (the selectors and legends of :func:`dcgm_panels`)."""
    panels = [
        _panel(
            5,
            "GPU memory used",
            [
                _target(f'{gpu_by} (DCGM_FI_DEV_FB_USED{{{n}, GPU_I_ID=""}})', gpu_leg, "A"),
                _target(f'{mig_by} (DCGM_FI_DEV_FB_USED{{{n}, GPU_I_ID!=""}})', mig_leg, "B"),
            ],
            "decmbytes",
            0,
            16,
            desc="DCGM_FI_DEV_FB_USED (MiB).",
        ),
        _panel(
            6,
            "Power",
            [_target(f"{gpu_by} (DCGM_FI_DEV_POWER_USAGE{{{n}}})", gpu_leg, "A")],
            "watt",
            12,
            16,
            desc="DCGM_FI_DEV_POWER_USAGE: whole GPU (also under MIG).",
        ),
        _panel(
            7,
            "SM clock",
            [_target(f"{gpu_by} (DCGM_FI_DEV_SM_CLOCK{{{n}}})", gpu_leg, "A")],
            "rothz",
            0,
            24,
            desc="DCGM_FI_DEV_SM_CLOCK (MHz).",
        ),
    ]
    panels[2]["fieldConfig"]["defaults"]["unit"] = "none"
    panels[2]["fieldConfig"]["defaults"]["custom"]["axisLabel"] = "MHz"
    return panels


def dashboard() -> dict[str, Any]:
    """Grafana dashboard: SM activity per GPU and per MIG instance during benchmark runs, and the loss
    trend of the runs `sharebench history` pushed."""
    panels = [*dcgm_panels(), history_panel(8, 12, 24)]
    return {
        "uid": DASHBOARD_UID,
        "title": "sharebench: GPU sharing during benchmark runs",
        "tags": ["sharebench", "gpu", "dcgm"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Prometheus",
                    "current": {},
                    "hide": 0,
                },
                {
                    "name": "node",
                    "type": "query",
                    "label": "node",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": {"query": f"label_values(DCGM_FI_PROF_SM_ACTIVE, {DEFAULT_NODE_LABEL})", "refId": "node"},
                    "definition": f"label_values(DCGM_FI_PROF_SM_ACTIVE, {DEFAULT_NODE_LABEL})",
                    "includeAll": True,
                    "multi": True,
                    "refresh": 2,
                    "current": {},
                    "hide": 0,
                },
            ]
        },
        "annotations": {
            "list": [
                {
                    "name": "Annotations & Alerts",
                    "builtIn": 1,
                    "type": "dashboard",
                    "enable": True,
                    "hide": True,
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "iconColor": "rgba(0, 211, 255, 1)",
                },
                {
                    "name": "sharebench cells",
                    "enable": True,
                    "hide": False,
                    "iconColor": "#FF9830",
                    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
                    "target": {"type": "tags", "tags": [ANNOTATION_TAG], "matchAny": True, "limit": 1000},
                },
            ]
        },
        "panels": panels,
    }


def history_panel(pid: int, x: int, y: int) -> dict[str, Any]:
    """The loss per node × mode × size over the runs `sharebench history` pushed, with its 95% interval."""
    n = f'{DEFAULT_NODE_LABEL}=~"$node"'
    by = "max by (node, gpu_model, mode, pattern, particles, turns)"
    legend = "{{node}} {{mode}} {{pattern}} {{particles}} particles x {{turns}}"
    return _panel(
        pid,
        "Loss per node and mode (sharebench history)",
        [
            _target(f"{by} ({HISTORY_LOSS_METRIC}{{{n}}})", legend, "A"),
            _target(f"{by} ({HISTORY_LOSS_LOW_METRIC}{{{n}}})", "low " + legend, "B"),
            _target(f"{by} ({HISTORY_LOSS_HIGH_METRIC}{{{n}}})", "high " + legend, "C"),
        ],
        "percent",
        x,
        y,
        desc=f"{HISTORY_LOSS_METRIC}: the loss of each scheduled run (time-slicing, MPS: (T_N - N*T_1)/(N*T_1); "
        "MIG: (T_mig - T_1)/T_1) with its 95% interval, as `sharebench history add --pushgateway` pushed it. "
        f"A step that `history check` calls a change raises {HISTORY_ALERT}.",
    )


def history_rule(namespace: str = MONITORING_NAMESPACE) -> dict[str, Any]:
    """PrometheusRule: alert while the last `history check` of a node found a change of a loss."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": metadata(HISTORY_RULE, namespace, release=PROMETHEUS_RELEASE),
        "spec": {
            "groups": [
                {
                    "name": "sharebench-history",
                    "interval": "1m",
                    "rules": [
                        {
                            "alert": HISTORY_ALERT,
                            "expr": f"max by (node) ({HISTORY_CHANGES_METRIC}) > 0",
                            "for": "0m",
                            "labels": {"severity": "warning"},
                            "annotations": {
                                "summary": "The cost of GPU sharing changed on node {{ $labels.node }}",
                                "description": "sharebench history check found {{ $value }} cell(s) whose loss "
                                "changed on {{ $labels.node }} (significant and larger than the threshold). "
                                "Run `sharebench history check STORE --node {{ $labels.node }}` to see them; "
                                "`sharebench history accept` starts a new baseline.",
                            },
                        }
                    ],
                }
            ]
        },
    }


def dashboard_configmap() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(DASHBOARD_CONFIGMAP, MONITORING_NAMESPACE, grafana_dashboard="1"),
        "data": {DASHBOARD_KEY: json.dumps(dashboard(), indent=2, sort_keys=True) + "\n"},
    }


def objects(operator_namespace: str = OPERATOR_NAMESPACE) -> list[tuple[str, dict[str, Any]]]:
    """(file name, object) in apply order."""
    return [
        (f"0100_configmap_{METRICS_CONFIGMAP}.yaml", metrics_configmap(operator_namespace)),
        (f"0200_servicemonitor_{SERVICE_MONITOR}.yaml", service_monitor(operator_namespace)),
        (f"0300_configmap_{DASHBOARD_CONFIGMAP}.yaml", dashboard_configmap()),
        (f"0400_prometheusrule_{HISTORY_RULE}.yaml", history_rule()),
    ]
