"""Where the replicas of one cell run on a cluster, and what their pods request: the words only.

A *placement* says how a cell's N replicas are laid out in pods: ``pods`` (one replica per pod, each
requesting the resource the node advertises for the mode), ``processes`` (N replica processes in
one pod) or ``dra`` (one replica per pod, the GPU from the cell's ResourceClaim, no extended
resource). :func:`pod_request` says how a mode's pods request it; a node is named ``NAME`` or
``NAME=GPU_MODEL`` (:func:`split_node`); a pipeline's node steps reach the node through the site's
agent or directly (:data:`NODE_ACCESS`).

Pure functions of the shared vocabulary (modes, GPU models): no Kubernetes client. Putting a node in
a mode is ``sharebench.node.placement``'s; planning a pipeline's cells is ``sharebench.sweep.grid``'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sharebench.errors import UserError
from sharebench.gpus import layout_profiles
from sharebench.modes import parse_mode

PLACEMENTS = ("pods", "processes", "dra")  # dra: one pod per replica, the GPU from the cell's ResourceClaim
# how a pipeline's node steps reach the node: agent (a request the site's node agent answers; no node right
# in the run) or direct (the library, with the node account's rights, on a single-admin cluster)
NODE_ACCESS = ("agent", "direct")
# Kubernetes' grammars (k8s.io/apimachinery validation): a node's name is a DNS-1123 subdomain, a label
# value (a KFP run id as the label pipeline/runid holds it) at most 63 of [A-Za-z0-9-_.], alphanumeric ends
DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = re.compile(rf"{DNS1123_LABEL}(\.{DNS1123_LABEL})*")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


@dataclass(frozen=True)
class PodRequest:
    """How a cell's pods are laid out: the replica index of each pod, the replica processes per pod,
    and the extended resource each pod requests (``resource`` x ``count``; none: ``""`` x 0)."""

    resource: str
    count: int
    pods: tuple[int, ...]
    processes: int

    def to_dict(self) -> dict[str, Any]:
        return {"resource": self.resource, "count": self.count, "pods": list(self.pods), "processes": self.processes}


def check_placement(placement: str) -> str:
    """The placement, or a one-line error naming the allowed ones."""
    if placement not in PLACEMENTS:
        raise UserError(f"placement {placement!r} is not allowed; allowed: {', '.join(PLACEMENTS)}")
    return placement


def check_node_access(node_access: str) -> str:
    """How the node steps reach the node, or a one-line error naming the allowed ways."""
    if node_access not in NODE_ACCESS:
        raise UserError(f"node_access {node_access!r}: allowed {', '.join(NODE_ACCESS)}")
    return node_access


def check_pattern_placement(placement: str, pattern: str, neighbours: str) -> None:
    """Neighbours of another pattern than replica 0's need the replicas in one pod: they stop at the cell's
    stop file when replica 0 is done, and pods of one cell share no folder. A one-line error otherwise."""
    if placement != "processes" and neighbours != pattern:
        raise UserError(
            f"placement {placement!r} runs each replica in its own pod: neighbours {neighbours!r} beside "
            f"pattern {pattern!r} need placement 'processes' (the replicas of a cell in one pod, where the "
            "neighbours stop when replica 0 is done)"
        )


def check_node_name(name: str) -> str:
    """``name`` when it is a Kubernetes node name (a DNS-1123 subdomain: lowercase letters, digits, '-'
    and '.', at most 253 characters); else a one-line UserError naming it."""
    if not isinstance(name, str) or len(name) > 253 or not DNS1123_SUBDOMAIN.fullmatch(name):
        raise UserError(
            f"node name {name!r} is not a Kubernetes node name; allowed: a DNS-1123 subdomain (lowercase "
            "letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)"
        )
    return name


def check_label_value(what: str, value: str) -> str:
    """``value`` when it is a Kubernetes label value (at most 63 of letters, digits, '-', '_' and '.', a
    letter or digit at each end); else a one-line UserError naming ``what`` and the value."""
    if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.fullmatch(value):
        raise UserError(
            f"{what} {value!r} is not a Kubernetes label value; allowed: at most 63 letters, digits, '-', '_' "
            "and '.', starting and ending with a letter or digit"
        )
    return value


def split_node(node: str, gpu_model: str = "") -> tuple[str, str]:
    """``NAME=GPU_MODEL`` → (NAME, GPU_MODEL); ``NAME`` → (NAME, gpu_model). NAME must be a node name
    (:func:`check_node_name`); "" (no node) is ("", gpu_model)."""
    name, sep, model = (node or "").strip().partition("=")
    if sep and not (name.strip() and model.strip()):
        raise UserError(f"node {node!r}: write NAME or NAME=GPU_MODEL, e.g. gpu-node-a=A100-40GB")
    if name.strip():
        check_node_name(name.strip())
    return name.strip(), (model.strip() if sep else (gpu_model or "").strip())


def pod_request(mode: str, gpu_model: str, placement: str, resource: str | None = None) -> PodRequest:
    """How a cell of ``mode`` is laid out in pods under ``placement``.

    ``resource`` is what the node advertises for the mode (from ``sharebench.node.reconfigure``);
    without it the default device-plugin naming is assumed (``nvidia.com/gpu``;
    ``nvidia.com/mig-<profile>`` under the mixed MIG strategy).
    """
    m = parse_mode(mode)
    check_placement(placement)
    per_instance = m.spec.device_instances  # MIG: one resource per instance the node advertises
    if per_instance:
        if not gpu_model:
            raise UserError(f"mode {mode!r} needs gpu_model to know the MIG instances")
        profiles = layout_profiles(gpu_model, m.layout or "")
        n = max(len(profiles), 1)
        res = resource or (f"nvidia.com/mig-{profiles[0].name}" if profiles else "nvidia.com/gpu")
    elif m.spec.device_class == "cpu":  # disjoint core sets: no GPU resource
        n, res = int(m.replicas or 1), ""
    else:
        n = int(m.replicas or 1)
        res = resource or "nvidia.com/gpu"
    if placement == "dra":  # no extended resource: the cell's ResourceClaim gives the GPU
        return PodRequest("", 0, tuple(range(n)), 1)
    if placement == "pods":
        return PodRequest(res, 1 if res else 0, tuple(range(n)), 1)
    return PodRequest(res, (n if per_instance else 1) if res else 0, (0,), n)
