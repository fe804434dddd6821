"""What a node says about its GPUs: the gpu-operator's labels, allocatable GPU resources, the
physical GPU count (also under MIG), the pods that use its GPUs and the device-plugin pods on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sharebench.errors import UserError
from sharebench.gpus import GpuModel, gpu_model
from sharebench.manifests.names import PART_OF_LABEL
from sharebench.node.client import Session

LABEL_DP = "nvidia.com/device-plugin.config"
LABEL_MIG = "nvidia.com/mig.config"
LABEL_MIG_STATE = "nvidia.com/mig.config.state"
LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_MIG_CAPABLE = "nvidia.com/mig.capable"
LABEL_SHARING = "nvidia.com/gpu.sharing-strategy"
# the operands that read the device-plugin ConfigMap when they start: the plugin (allocatable)
# and GPU feature discovery (nvidia.com/gpu.replicas, ...sharing-strategy labels)
PLUGIN_APP = "nvidia-device-plugin-daemonset"
GFD_APP = "gpu-feature-discovery"
PLUGIN_POD_SELECTOR = f"app in ({PLUGIN_APP},{GFD_APP})"


@dataclass(frozen=True)
class GpuFacts:
    model: GpuModel
    gpus: int  # physical GPUs on the node
    product: str  # nvidia.com/gpu.product as labelled
    mig_strategy: str | None
    mig_capable: bool | None


def node_labels(node: Any) -> dict[str, str]:
    """The node's labels (a copy; empty when it has none)."""
    return dict(node.metadata.labels or {})


def node_annotations(node: Any) -> dict[str, str]:
    """The node's annotations (a copy; empty when it has none)."""
    return dict(node.metadata.annotations or {})


def nvidia_labels(node: Any) -> dict[str, str]:
    """The node's ``nvidia.com/`` labels, sorted by key."""
    return {k: v for k, v in sorted(node_labels(node).items()) if k.startswith("nvidia.com/")}


def format_pairs(d: dict) -> str:
    """``k=v, k=v`` for messages; a None value reads ``(removed)``, an empty dict ``none``."""
    return ", ".join(f"{k}={'(removed)' if v is None else v}" for k, v in d.items()) or "none"


def gpu_resources(node: Any) -> dict[str, int]:
    """Allocatable NVIDIA GPU resources of a node (``nvidia.com/gpu``, ``.shared``, ``mig-*``)."""
    alloc = (node.status.allocatable if node.status else None) or {}
    out = {}
    for k, v in alloc.items():
        if k.startswith(("nvidia.com/gpu", "nvidia.com/mig-")):
            try:
                out[k] = int(v)
            except ValueError:
                continue
    return dict(sorted(out.items()))


def gpu_facts(sess: Session, node: Any, gpu_model_name: str | None, recorded: dict | None) -> GpuFacts:
    """GPU model and physical GPU count of ``node``: named, else recorded in the prior state, else labelled."""
    labels = node_labels(node)
    product = labels.get(LABEL_PRODUCT)
    count = labels.get(LABEL_COUNT)
    if not product and not gpu_model_name:
        raise sess.error(
            f"has no NVIDIA GPUs: labels {LABEL_PRODUCT} and {LABEL_COUNT} are absent "
            "(is the gpu-operator's GPU feature discovery running on it?)"
        )
    try:
        model = gpu_model(gpu_model_name or (recorded or {}).get("gpu_model") or product or "")
    except UserError as exc:
        raise sess.error(f"{exc}; pass gpu_model= / --gpu-model to name it") from None
    gpus = (recorded or {}).get("gpus")
    if not gpus:
        gpus = physical_gpus(model, labels)
    if not gpus:
        raise sess.error(f"has no NVIDIA GPUs: {LABEL_COUNT}={count!r}")
    capable = labels.get(LABEL_MIG_CAPABLE)
    return GpuFacts(
        model,
        int(gpus),
        product or model.key,
        labels.get(LABEL_MIG_STRATEGY),
        None if capable is None else capable == "true",
    )


def physical_gpus(model: GpuModel, labels: dict[str, str]) -> int:
    """Physical GPUs, also when GFD labels a MIG node (single: count of instances)."""
    product = labels.get(LABEL_PRODUCT, "")
    try:
        count = int(labels.get(LABEL_COUNT, "0"))
    except ValueError:
        count = 0
    if "-MIG-" in product.upper():
        prof = product.upper().split("-MIG-")[-1].lower()
        try:
            return max(1, -(-count // model.profile(prof).max_count))
        except UserError:
            return count
    if count:
        return count
    # mixed strategy, all GPUs in MIG: nvidia.com/mig-<profile>.count labels
    total = 0.0
    for k, v in labels.items():
        if k.startswith("nvidia.com/mig-") and k.endswith(".count"):
            try:
                total += int(v) / model.profile(k[len("nvidia.com/mig-") : -len(".count")]).max_count
            except (UserError, ValueError):
                continue
    return int(-(-total // 1))


# ---------------------------------------------------------------- pods
def _uses_gpu(pod: Any) -> bool:
    spec = pod.spec
    for c in list(spec.containers or []) + list(spec.init_containers or []):
        res = c.resources
        for d in (res.limits, res.requests) if res else ():
            for k in d or {}:
                if k.startswith(("nvidia.com/gpu", "nvidia.com/mig-")):
                    return True
    return False


RUN_LABEL = "pipeline/runid"  # the Kubeflow Pipelines run a pod belongs to


def gpu_pods(sess: Session, operator_ns: str, run: str | None = None) -> list[str]:
    """``namespace/name`` of running or pending pods on the node that use its GPUs, except the
    operator's and this run's own (labelled part-of=sharebench and ``pipeline/runid=<run>``):
    another run's sharebench pods count as foreign."""
    pods = sess.call("list", "pods", sess.core.list_pod_for_all_namespaces, field_selector=f"spec.nodeName={sess.node}")
    out = []
    for p in pods.items:
        if (p.status.phase if p.status else None) in ("Succeeded", "Failed"):
            continue
        if p.metadata.namespace == operator_ns:
            continue
        labels = p.metadata.labels or {}
        if run and labels.get(PART_OF_LABEL[0]) == PART_OF_LABEL[1] and labels.get(RUN_LABEL) == run:
            continue
        if _uses_gpu(p):
            out.append(f"{p.metadata.namespace}/{p.metadata.name}")
    return sorted(out)


def plugin_pods(sess: Session, namespace: str) -> list:
    """The device-plugin and GPU-feature-discovery pods on the node."""
    return sess.call(
        "list",
        "pods",
        sess.core.list_namespaced_pod,
        namespace,
        namespace=namespace,
        label_selector=PLUGIN_POD_SELECTOR,
        field_selector=f"spec.nodeName={sess.node}",
    ).items


def pod_ready(p: Any) -> bool:
    """The pod runs, is not being deleted and has condition Ready=True."""
    if not p.status or p.status.phase != "Running" or p.metadata.deletion_timestamp:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
