"""reconfigure_node: put a GPU node in one sharing mode and say how pods request it."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List, NamedTuple

from kfp import dsl

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def reconfigure_node(
    node_name: str,
    mode: str,
    gpu_model: str,
    placement: str,
    namespace: str = "gpu-operator",
    timeout_s: float = 600.0,
    force: bool = False,
    run_id: str = "",
    image: str = "",
    node_access: str = "agent",
) -> NamedTuple(
    "NodeMode",
    resource=str,
    count=int,
    pods=List[int],
    processes=int,
    replicas=int,
    node_selector=dict,
    advertised=dict,
):
    """Puts a node in a sharing mode through the NVIDIA gpu-operator and waits until it advertises it.

    With no node_name (kfp.local on one machine) nothing changes and the step says so.

    Args:
        node_name: Kubernetes node to reconfigure; empty for a run without a cluster.
        mode: exclusive, timeslice:N, mps:N or mig:LAYOUT (resolved, e.g. mig:1g.18gb).
        gpu_model: GPU model of the node; empty reads it from the node's labels.
        placement: 'pods', 'processes' or 'dra' (no node change); decides how many pods a cell has.
        namespace: Namespace of the gpu-operator and its device-plugin ConfigMap.
        timeout_s: Longest wait for the node to advertise the mode, in seconds.
        force: Reconfigure even when pods outside this run use the node's GPUs.
        run_id: The run holding the node's Lease (one reconfiguration per node); its pods are not foreign.
        image: The run's replica image, checked against the site's allow-list; empty: this step's own image.
        node_access: 'agent': file a request the site's node agent checks and applies (this pod holds no
            node right); 'direct': reconfigure with this pod's own account (a single-admin cluster).

    Returns:
        resource: Extended resource each replica pod requests (nvidia.com/gpu, nvidia.com/mig-1g.18gb).
        count: How many of that resource one pod requests.
        pods: Replica index of each pod of a cell.
        processes: Replica processes inside each pod.
        replicas: N, the replicas of a cell (pods x processes).
        node_selector: Node selector pinning the pods to the node ({} without a node).
        advertised: What the node advertises after the change, and its previous state.
    """
    from collections import namedtuple

    from sharebench.components import steps

    r = steps.reconfigure(
        node_name=node_name,
        mode=mode,
        gpu_model=gpu_model,
        placement=placement,
        namespace=namespace,
        timeout_s=timeout_s,
        force=force,
        run_id=run_id,
        image=image,
        node_access=node_access,
    )
    return namedtuple(
        "NodeMode", ["resource", "count", "pods", "processes", "replicas", "node_selector", "advertised"]
    )(
        r["resource"],
        r["count"],
        r["pods"],
        r["processes"],
        len(r["pods"]) * r["processes"],
        r["node_selector"],
        r["advertised"],
    )
