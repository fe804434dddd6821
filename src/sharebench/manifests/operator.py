"""The gpu-operator's configuration that sharebench deploys and edits: the device-plugin config
entries (exclusive, time-slicing and MPS ×2/4/8), the mig-parted layouts of every known GPU model,
and the gpu-operator Helm values.

The node reconfiguration builds its device-plugin entries with the same functions, so a ConfigMap
applied from ``manifests/operator/`` and one edited by ``sharebench node apply`` hold identical
entries.
"""

from __future__ import annotations

from sharebench.errors import UserError
from sharebench.gpus import GpuModel
from sharebench.manifests.dump import dump_yaml
from sharebench.manifests.names import (
    DCGM_METRICS_CONFIGMAP,
    DEFAULT_MIG_STRATEGY,
    DEVICE_PLUGIN_CONFIGMAP,
    ENTRY_PREFIX,
    MIG_PARTED_CONFIGMAP,
    MIG_STRATEGIES,
    OPERATOR_NAMESPACE,
    metadata,
)
from sharebench.modes import BASELINE, KINDS

MIG_PARTED_KEY = "config.yaml"  # the key the mig-manager reads
DEFAULT_ENTRY = f"{ENTRY_PREFIX}{BASELINE}"  # sharebench's device-plugin config entry with no sharing
SHARED_REPLICAS = (2, 4, 8)  # entries shipped in the ConfigMap

# PCI device ids (device-filter in mig-parted configs), as in NVIDIA's
# default-mig-parted-config of the gpu-operator. Not part of gpus.py's table:
# only the mig-parted config needs them.
PCI_DEVICE_IDS: dict[str, tuple[str, ...]] = {
    "A100-40GB": ("0x20B010DE", "0x20B110DE", "0x20F110DE"),
    "A100-80GB": ("0x20B210DE", "0x20B510DE"),
    "H100-80GB": ("0x233010DE", "0x233110DE"),
    "H100-NVL": ("0x232110DE",),
    "H200": ("0x233510DE", "0x233B10DE"),
}


# ---------------------------------------------------------------- device-plugin config
# the device plugin's config key for each of its sharing strategies (KindSpec.plugin_sharing)
PLUGIN_SHARING_KEYS = {"time-slicing": "timeSlicing", "mps": "mps"}
# the kinds the device plugin shares a GPU for, in KINDS order (timeslice, mps)
PLUGIN_KINDS = tuple(s.name for s in KINDS.values() if s.plugin_sharing)


def plugin_sharing(kind: str) -> str:
    """The device plugin's sharing strategy of ``kind`` ('' for the baseline: one pod per GPU), or a
    one-line UserError for a kind the device plugin has no entry for."""
    spec = KINDS.get(kind)
    if spec is None or not (spec.plugin_sharing or spec.family == "baseline"):
        allowed = ", ".join((BASELINE, *PLUGIN_KINDS))
        raise UserError(f"no device-plugin config entry for sharing kind {kind!r}; allowed: {allowed}")
    return spec.plugin_sharing


def entry_name(kind: str, replicas: int = 1, *, rename: bool = False) -> str:
    """Name of sharebench's device-plugin config entry: ``sharebench-exclusive``, ``sharebench-timeslice-4``,
    ``sharebench-mps-2-shared``; the prefix keeps them apart from the site's own entries."""
    if not plugin_sharing(kind):
        return DEFAULT_ENTRY
    return f"{ENTRY_PREFIX}{kind}-{replicas}" + ("-shared" if rename else "")


def device_plugin_config(kind: str, replicas: int = 1, *, rename: bool = False) -> dict:
    """One device-plugin config (``version: v1``) as the k8s-device-plugin reads it.

    ``exclusive`` has no ``sharing`` section: one pod per GPU. ``timeslice``/``mps``
    replicate ``nvidia.com/gpu`` ``replicas`` times; with ``rename`` the shared
    resource is advertised as ``nvidia.com/gpu.shared``. The MIG strategy is
    not set here: the operator passes ``mig.strategy`` to the plugin.
    """
    strategy = plugin_sharing(kind)
    if not strategy:
        return {"version": "v1"}
    if not isinstance(replicas, int) or replicas < 2:
        raise UserError(f"{kind} needs at least 2 replicas (got {replicas!r}); use {BASELINE!r} for one")
    return {
        "version": "v1",
        "sharing": {
            PLUGIN_SHARING_KEYS[strategy]: {
                "renameByDefault": bool(rename),
                # a pod asking for 2 replicas would not get twice the GPU: refuse it
                "failRequestsGreaterThanOne": True,
                "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}],
            }
        },
    }


def device_plugin_entries() -> dict[str, str]:
    """The entries of the device-plugin ConfigMap: the default plus time-slicing and MPS 2/4/8."""
    entries = {DEFAULT_ENTRY: dump_yaml(device_plugin_config(BASELINE))}
    for kind in PLUGIN_KINDS:
        for n in SHARED_REPLICAS:
            entries[entry_name(kind, n)] = dump_yaml(device_plugin_config(kind, n))
    return entries


# ---------------------------------------------------------------- mig-parted config
def mig_layouts(model: GpuModel) -> list[str]:
    """The layouts the sweep can ask for on a model: ``all-<profile>`` for every profile."""
    return [f"all-{p.name}" for p in model.profiles]


# Layouts with mixed profiles per GPU: name -> {compute slices: instances}, each slice size taken as the
# model's smallest-memory profile of that size (NVIDIA's all-balanced: 2 x 1g + 1 x 2g + 1 x 3g, 7 slices)
MIXED_LAYOUTS: dict[str, dict[int, int]] = {"all-balanced": {1: 2, 2: 1, 3: 1}}


def mixed_layout(model: GpuModel, shape: dict[int, int]) -> dict[str, int]:
    """``mig-devices`` of a mixed layout on ``model``: ``{"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}``."""
    out = {}
    for slices, count in shape.items():
        prof = min((p for p in model.profiles if p.slices == slices), key=lambda p: p.mem_gb)
        out[prof.name] = count
    return out


def mig_parted_config(models: list[GpuModel]) -> dict:
    """A mig-parted config (``version: v1``, ``mig-configs``) for these models.

    Each ``all-<profile>`` layout (and each mixed layout, :data:`MIXED_LAYOUTS`) holds one item per model,
    restricted by ``device-filter`` to the model's PCI ids, so a name shared by two
    models (``all-1g.10gb``: 4 instances on an A100-40GB, 7 on an H100-80GB) is right
    on both.
    """
    configs: dict[str, list] = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for model in models:
        for p in model.profiles:
            item = {
                "device-filter": list(PCI_DEVICE_IDS[model.key]),
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {p.name: p.max_count},
            }
            configs.setdefault(f"all-{p.name}", []).append(item)
        for name, shape in MIXED_LAYOUTS.items():
            configs.setdefault(name, []).append(
                {
                    "device-filter": list(PCI_DEVICE_IDS[model.key]),
                    "devices": "all",
                    "mig-enabled": True,
                    "mig-devices": mixed_layout(model, shape),
                }
            )
    return {"version": "v1", "mig-configs": configs}


# ---------------------------------------------------------------- Helm values
# The gpu-operator chart these values were written for (nvidia/gpu-operator from NVIDIA's Helm
# repository https://helm.ngc.nvidia.com/nvidia; the version NVIDIA's install guide pinned when this
# was written). Install or upgrade with `--version` equal to it.
GPU_OPERATOR_CHART = "nvidia/gpu-operator"
GPU_OPERATOR_CHART_VERSION = "v25.3.0"


def helm_values(mig_strategy: str = DEFAULT_MIG_STRATEGY) -> dict:
    """The gpu-operator Helm values sharebench needs (everything else: chart defaults).

    They change none of the site's defaults: no ``devicePlugin.config`` / ``migManager.config``
    (a ``helm upgrade --reuse-values`` with them keeps the site's ConfigMaps and default entries);
    sharebench adds its own ``sharebench-...`` entries to those ConfigMaps at run time. A site
    without a device-plugin ConfigMap applies ``manifests/operator/`` and points the chart at it.
    """
    if mig_strategy not in MIG_STRATEGIES:
        raise UserError(f"unknown MIG strategy {mig_strategy!r}; allowed: {', '.join(MIG_STRATEGIES)}")
    return {
        "mig": {"strategy": mig_strategy},
        "migManager": {
            "enabled": True,
            "env": [{"name": "WITH_REBOOT", "value": "false"}],
        },
        "gfd": {"enabled": True},
        # dcgm-exporter reads sharebench's metrics list (profiling metrics: SM activity, FP64, DRAM;
        # manifests/monitoring/) and samples every second: the 30 s default is coarser than a cell
        "dcgmExporter": {
            "config": {"name": DCGM_METRICS_CONFIGMAP},
            "env": [
                {"name": "DCGM_EXPORTER_COLLECTORS", "value": "/etc/dcgm-exporter/dcgm-metrics.csv"},
                {"name": "DCGM_EXPORTER_INTERVAL", "value": "1000"},
            ],
        },
    }


def device_plugin_configmap(namespace: str = OPERATOR_NAMESPACE) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(DEVICE_PLUGIN_CONFIGMAP, namespace),
        "data": device_plugin_entries(),
    }


def mig_parted_configmap(models: list[GpuModel], namespace: str = OPERATOR_NAMESPACE) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(MIG_PARTED_CONFIGMAP, namespace),
        "data": {MIG_PARTED_KEY: dump_yaml(mig_parted_config(models))},
    }
