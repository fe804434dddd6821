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
    budget: str = "",
    workload: dict = {},
    start_delay_s: float = 60.0,
) -> NamedTuple(
    "Plan",
    modes=List[str],
    cells=List[int],
    node_name=str,
    gpu_model=str,
    particle_counts=List[int],
    repeats=int,
    warmup_repeats=int,
    cells_by_mode=dict,
    budget_plan=dict,
):
    """Validates the sweep, resolves MIG layouts for the GPU model and, with a budget, plans what fits.

    Bad input fails this first step, before any node is changed. With a budget the modes x sizes x
    repeats that fit it are planned (headline modes first, the largest size first) from one short
    exclusive run per size here (no node) or the recorded rates of the node's GPU model; the repeats
    are fixed, chosen to fit (a static graph cannot repeat a cell while it is unsettled).

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
        budget: Node time the sweep may take, a duration such as 90s, 10m, 1h30m ('' off: every cell).
        workload: What every replica runs (calibrated here with a budget and no node).
        start_delay_s: Seconds between a cell's start instant being set and the replicas tracking
            (part of what a cell costs in the budget).

    Returns:
        modes: The modes with MIG layouts resolved (mig:1g -> mig:1g.18gb on an H200); with a budget,
            those planned.
        cells: Cell indices 0..len(particle_counts)*(repeats+warmup_repeats)-1.
        node_name: The node's name.
        gpu_model: The GPU model (from NAME=GPU_MODEL, else the gpu_model argument).
        particle_counts: The particle counts the cell indices refer to (with a budget, those planned).
        repeats: Measured repeats per particle count (with a budget, those that fit).
        warmup_repeats: Warm-up repeats per particle count (with a budget, those that fit).
        cells_by_mode: Each mode's cell indices (with a budget, those of its planned sizes).
        budget_plan: The budget, the plan and its prediction, for the report ({} without a budget).
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
        budget=budget,
        workload=workload,
        start_delay_s=start_delay_s,
    )
    return namedtuple("Plan", list(plan))(**plan)
