"""Where the replicas of one cell run on a cluster, and what their pods request.

A *placement* says how a cell's N replicas are laid out in pods: ``pods`` (one replica per pod, each
requesting the resource the node advertises for the mode), ``processes`` (N replica processes in
one pod) or ``dra`` (one replica per pod, the GPU from the cell's ResourceClaim, no extended
resource). :func:`place_mode` puts the node in the mode (through :func:`reconfigure`) where the
placement needs it and says how the mode's pods request it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sharebench.errors import UserError
from sharebench.gpus import layout_profiles
from sharebench.modes import parse_mode
from sharebench.node.client import Progress
from sharebench.node.reconfiguration import ReconfigureOptions, reconfigure, restore

PLACEMENTS = ("pods", "processes", "dra")  # dra: one pod per replica, the GPU from the cell's ResourceClaim
HOSTNAME_LABEL = "kubernetes.io/hostname"


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


@dataclass(frozen=True)
class Placement:
    """A mode placed on a node: the pods' request, the node selector pinning them there, what the
    node advertises after the change and whether it was changed at all."""

    request: PodRequest
    node_selector: dict[str, str] = field(default_factory=dict)
    advertised: dict[str, Any] = field(default_factory=dict)
    reconfigured: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.request.to_dict(),
            "node_selector": dict(self.node_selector),
            "advertised": dict(self.advertised),
            "reconfigured": self.reconfigured,
        }


def check_placement(placement: str) -> str:
    """The placement, or a one-line error naming the allowed ones."""
    if placement not in PLACEMENTS:
        raise UserError(f"placement {placement!r} is not allowed; allowed: {', '.join(PLACEMENTS)}")
    return placement


def check_pattern_placement(placement: str, pattern: str, neighbours: str) -> None:
    """Neighbours of another pattern than replica 0's need the replicas in one pod: they stop at the cell's
    stop file when replica 0 is done, and pods of one cell share no folder. A one-line error otherwise."""
    if placement != "processes" and neighbours != pattern:
        raise UserError(
            f"placement {placement!r} runs each replica in its own pod: neighbours {neighbours!r} beside "
            f"pattern {pattern!r} need placement 'processes' (the replicas of a cell in one pod, where the "
            "neighbours stop when replica 0 is done)"
        )


def split_node(node: str, gpu_model: str = "") -> tuple[str, str]:
    """``NAME=GPU_MODEL`` → (NAME, GPU_MODEL); ``NAME`` → (NAME, gpu_model)."""
    name, sep, model = (node or "").strip().partition("=")
    if sep and not (name.strip() and model.strip()):
        raise UserError(f"node {node!r}: write NAME or NAME=GPU_MODEL, e.g. gpu-node-a=A100-40GB")
    return name.strip(), (model.strip() if sep else (gpu_model or "").strip())


def pod_request(mode: str, gpu_model: str, placement: str, resource: str | None = None) -> PodRequest:
    """How a cell of ``mode`` is laid out in pods under ``placement``.

    ``resource`` is what the node advertises for the mode (from :func:`reconfigure`); without it
    the default device-plugin naming is assumed (``nvidia.com/gpu``; ``nvidia.com/mig-<profile>``
    under the mixed MIG strategy).
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


def place_mode(
    node_name: str,
    mode: str,
    gpu_model: str,
    placement: str,
    options: ReconfigureOptions | None = None,
    progress: Progress | None = None,
) -> Placement:
    """Put the node in ``mode`` where the placement needs it, and say how the mode's pods request it.

    Placement ``dra`` leaves the node alone (each cell claims its GPU); without a node (``node_name``
    empty: one machine, no cluster) nothing is changed either. Each case is said through ``progress``.
    """
    say = progress or (lambda _msg: None)
    if placement == "dra":
        say(f"placement dra: the node is not reconfigured; each cell of {mode} claims its GPU (ResourceClaim)")
        selector = {HOSTNAME_LABEL: node_name} if node_name else {}
        return Placement(pod_request(mode, gpu_model, placement), selector)
    if not node_name:
        say(f"no node_name: running on this machine, no cluster; reconfigure to {mode} is a no-op")
        return Placement(pod_request(mode, gpu_model, placement))
    opts = options or ReconfigureOptions(gpu_model=gpu_model or None)
    state = reconfigure(node_name, mode, opts, progress=progress)
    req = pod_request(mode, state.get("gpu_model") or gpu_model, placement, resource=state.get("resource"))
    say(f"node {node_name} in {mode}: pods request {req.count} x {req.resource} each")
    return Placement(req, {HOSTNAME_LABEL: node_name}, state, reconfigured=True)


def restore_nodes(
    nodes: list[str], timeout_s: float, holder: str | None = None, progress: Progress | None = None
) -> list[dict[str, Any]]:
    """Put every node (``NAME`` or ``NAME=GPU_MODEL``; empty ones skipped) back as it was; idempotent."""
    names = [split_node(n)[0] for n in nodes if n]
    if not names:
        (progress or (lambda _msg: None))("no node_name: ran on this machine, no cluster; restore is a no-op")
        return []
    return [restore(n, timeout_s=timeout_s, progress=progress, holder=holder) for n in names]
