"""check_sweep: the sweep's parameters checked before anything runs, handed on as one value."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List, NamedTuple

from kfp import dsl

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def check_sweep(
    modes: List[str],
    gpu_model: str,
    particle_counts: List[int],
    repeats: int,
    warmup_repeats: int,
    turns: int,
    placement: str,
    workload: dict,
    start_delay_s: float,
    operator_namespace: str,
    reconfigure_timeout_s: float,
    force: bool,
    node_access: str,
    budget: str,
    node_name: str = "",
    nodes: List[str] = [],
) -> NamedTuple("Request", request=dict):
    """Checks the sweep's parameters for every node, before any node is changed, and hands them on as one value.

    The pipelines' parameters stay flat for the Kubeflow UI; the sub-pipelines and the steps after this
    one take them as one value, the request (and each node's plan_sweep its plan): a new sweep
    parameter is a parameter here, in the pipelines, in the planner (sharebench.sweep.grid) and in the
    step that reads it.

    Args:
        modes: Sharing modes in the order they run (exclusive, timeslice:N, mps:N, mig:LAYOUT).
        gpu_model: GPU model of the node (H200, A100-40GB, ...); resolves mig:7g / mig:1g.
        particle_counts: Particles per replica, one cell per count and repeat.
        repeats: Measured repeats per particle count.
        warmup_repeats: Discarded warm-up repeats before the measured ones.
        turns: Turns tracked per replica.
        placement: 'pods' (one replica per pod), 'processes' (N processes in one pod) or 'dra'
            (one replica per pod, the GPU from the cell's ResourceClaim).
        workload: What every replica runs (sharebench.workloads.Workload as a dict).
        start_delay_s: Seconds between a cell's start instant being set and the replicas tracking.
        operator_namespace: Namespace of the NVIDIA gpu-operator.
        reconfigure_timeout_s: Longest wait for a node to advertise a mode.
        force: Reconfigure even when pods outside sharebench use a node's GPUs (direct mode only).
        node_access: 'agent' (a request the site's node agent checks and applies) or 'direct'.
        budget: Node time the sweep may take, a duration such as 90s, 10m, 1h30m ('' off: every cell).
        node_name: The node to sweep, NAME or NAME=GPU_MODEL (the one-node pipeline); empty: this machine.
        nodes: The nodes to sweep (the multi-node pipeline), each checked.

    Returns:
        request: The parameters above but the nodes, one value (the names of the pipelines' parameters).
    """
    from collections import namedtuple

    from sharebench.components import steps

    request = {
        "modes": modes,
        "gpu_model": gpu_model,
        "particle_counts": particle_counts,
        "repeats": repeats,
        "warmup_repeats": warmup_repeats,
        "turns": turns,
        "placement": placement,
        "workload": workload,
        "start_delay_s": start_delay_s,
        "operator_namespace": operator_namespace,
        "reconfigure_timeout_s": reconfigure_timeout_s,
        "force": force,
        "node_access": node_access,
        "budget": budget,
    }
    return namedtuple("Request", ["request"])(steps.check_sweep(request, list(nodes) or [node_name]))
