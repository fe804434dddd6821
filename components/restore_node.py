"""restore_node: put the swept nodes back as they were; the pipelines' exit task."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List

from kfp import dsl

from sharebench.components._image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def restore_node(
    node_names: List[str],
    status: dsl.PipelineTaskFinalStatus,
    timeout_s: float = 600.0,
) -> List[dict]:
    """Puts each node back in the state it had before the sweep; idempotent.

    Runs as the exit task of the pipelines, whatever failed before it. Without a
    node (kfp.local on one machine) nothing changes and the step says so.

    Args:
        node_names: Nodes to restore; an empty name is skipped.
        status: Final status of the sweep (logged).
        timeout_s: Longest wait for the operator to settle, in seconds.

    Returns:
        Output: What each restored node advertises now (empty without a node).
    """
    from sharebench.components import steps

    steps.say(f"sweep finished with state {status.state}; restoring {node_names or 'nothing'}")
    return steps.restore(node_names=node_names, timeout_s=timeout_s)
