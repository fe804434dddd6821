"""reconfigure_node: put a GPU node in one sharing mode and say how pods request it."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List, NamedTuple

from kfp import dsl

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def reconfigure_node(
    plan: dict,
    mode: str,
    run_id: str = "",
    image: str = "",
) -> NamedTuple("NodeMode", placed=dict, resource=str, count=int, pods=List[int], node_selector=dict):
    """Puts the plan's node in a sharing mode through the NVIDIA gpu-operator and waits until it advertises it.

    With no node (kfp.local on one machine) or placement 'dra' nothing changes and the step says so.
    The node, its GPU model, the placement, the gpu-operator's namespace, the timeout, force and the
    node access (agent: a request the site's node agent checks and applies, this pod holding no node
    right; direct: this pod's own account, on a single-admin cluster) are the plan's.

    Args:
        plan: plan_sweep's plan.
        mode: exclusive, timeslice:N, mps:N or mig:LAYOUT (resolved, e.g. mig:1g.18gb).
        run_id: The run holding the node's Lease (one reconfiguration per node); its pods are not foreign.
        image: The run's replica image, checked against the site's allow-list; empty: this step's own image.

    Returns:
        placed: The mode's placement, one value: resource, count, pods, processes (replica processes in
            each pod), replicas (N, pods x processes), node_selector, advertised (what the node
            advertises after the change, and its previous state), reconfigured.
        resource: Extended resource each replica pod requests (nvidia.com/gpu, nvidia.com/mig-1g.18gb).
        count: How many of that resource one pod requests.
        pods: Replica index of each pod of a cell.
        node_selector: Node selector pinning the pods to the node ({} without a node).
    """
    from collections import namedtuple

    from sharebench.components import steps

    p = steps.reconfigure_mode(plan=plan, mode=mode, run_id=run_id, image=image)
    return namedtuple("NodeMode", ["placed", "resource", "count", "pods", "node_selector"])(
        p, p["resource"], p["count"], p["pods"], p["node_selector"]
    )
