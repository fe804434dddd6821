"""plan_sweep: validate a sweep and resolve its modes before anything touches a node."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List, NamedTuple

from kfp import dsl

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def plan_sweep(
    modes: List[str],
    gpu_model: str,
    particle_counts: List[int],
    repeats: int,
    turns: int,
    placement: str,
    node_name: str,
    warmup_repeats: int = 1,
) -> NamedTuple("Plan", modes=List[str], cells=List[int], node_name=str, gpu_model=str):
    """Validates the sweep and resolves MIG layouts for the GPU model.

    Bad input fails this first step, before any node is changed.

    Args:
        modes: Sharing modes in the order they run (exclusive, timeslice:N, mps:N, mig:LAYOUT).
        gpu_model: GPU model of the node (H200, A100-40GB, ...); resolves mig:7g / mig:1g.
        particle_counts: Particles per replica, one cell per count and repeat.
        repeats: Measured repeats per particle count.
        turns: Turns tracked per replica.
        placement: 'pods' (one replica per pod), 'processes' (N processes in one pod) or 'dra'
            (one replica per pod, the GPU from the cell's ResourceClaim).
        node_name: Kubernetes node to sweep, as NAME or NAME=GPU_MODEL; empty runs on this
            machine (kfp.local).
        warmup_repeats: Discarded warm-up repeats before the measured ones.

    Returns:
        modes: The modes with MIG layouts resolved (mig:1g -> mig:1g.18gb on an H200).
        cells: Cell indices 0..len(particle_counts)*(repeats+warmup_repeats)-1 of one mode.
        node_name: The node's name.
        gpu_model: The GPU model (from NAME=GPU_MODEL, else the gpu_model argument).
    """
    from collections import namedtuple

    from sharebench.components import steps

    plan = steps.plan_sweep(
        modes=modes,
        gpu_model=gpu_model,
        particle_counts=particle_counts,
        repeats=repeats,
        turns=turns,
        placement=placement,
        node_name=node_name,
        warmup_repeats=warmup_repeats,
    )
    return namedtuple("Plan", ["modes", "cells", "node_name", "gpu_model"])(
        plan["modes"], plan["cells"], plan["node_name"], plan["gpu_model"]
    )
