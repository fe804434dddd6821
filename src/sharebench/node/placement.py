"""A cell's placement on a node: the node put in the mode where the placement needs it, and put back.

The placement words (``pods``, ``processes``, ``dra``), the pods' request of a mode and a node's
``NAME=GPU_MODEL`` are ``sharebench.placement``'s (no Kubernetes client there): :func:`place_mode`
puts the node in the mode (through :func:`reconfigure`) where the placement needs it and says how
the mode's pods request it; :func:`restore_nodes` puts the nodes back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sharebench.node.client import Progress
from sharebench.node.reconfiguration import ReconfigureOptions, reconfigure, restore
from sharebench.placement import PodRequest, pod_request, split_node

HOSTNAME_LABEL = "kubernetes.io/hostname"


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
