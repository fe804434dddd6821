"""restore_node: put the swept nodes back as they were; the pipelines' exit task."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List

from kfp import dsl

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def restore_node(
    status: dsl.PipelineTaskFinalStatus,
    node_name: str = "",
    node_names: List[str] = [],
    timeout_s: float = 600.0,
    placement: str = "pods",
    claims_namespace: str = "sharebench",
    run_id: str = "",
    node_access: str = "agent",
) -> List[dict]:
    """Puts each node back in the state it had before the sweep; idempotent.

    Runs as the exit task of the pipelines, whatever failed before it. Without a
    node (kfp.local on one machine) nothing changes and the step says so.

    Args:
        node_name: A node to restore (the one-node pipeline); empty: none.
        node_names: Nodes to restore (NAME or NAME=GPU_MODEL; the multi-node pipeline).
        status: Final status of the sweep (logged).
        timeout_s: Longest wait for the operator to settle, in seconds.
        placement: 'dra': also delete every ResourceClaim a failed cell left (the node was never changed).
        claims_namespace: Namespace of the claims (dra).
        run_id: The run that holds the nodes' Leases; another run's node is refused, not reset.
        node_access: 'agent': one restore request per node, answered by the node agent; 'direct': this pod's
            own account restores them (a single-admin cluster).

    Returns:
        Output: What each restored node advertises now (empty without a node).
    """
    from sharebench.components import steps

    nodes = [node_name, *node_names]
    steps.say(f"sweep finished with state {status.state}; restoring {[n for n in nodes if n] or 'nothing'}")
    steps.release_all(placement=placement, namespace=claims_namespace)
    if placement == "dra":
        return []
    return steps.restore(node_names=nodes, timeout_s=timeout_s, run_id=run_id, node_access=node_access)
