"""plan_sweep: one node's sweep planned before anything touches the node: the plan every later task reads."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List, NamedTuple

from kfp import dsl

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def plan_sweep(request: dict, node_name: str = "") -> NamedTuple("Plan", plan=dict, modes=List[str]):
    """Plans one node's sweep: resolves MIG layouts for its GPU model and, with a budget, plans what fits.

    Bad input fails this step, before the node is changed. With a budget the modes x sizes x repeats
    that fit it are planned (headline modes first, the largest size first) from one short exclusive
    run per size here (no node) or the recorded rates of the node's GPU model; the repeats are fixed,
    chosen to fit (a static graph cannot repeat a cell while it is unsettled).

    Args:
        request: The sweep's parameters, one value (check_sweep's).
        node_name: The node to sweep, NAME or NAME=GPU_MODEL; empty runs on this machine (kfp.local).

    Returns:
        plan: The plan every later task reads, one value: node_name, gpu_model, placement, modes, cells
            (every cell as a value: mode, particles, repeat, id; with a budget those planned), turns,
            workload, start_delay_s, the node steps' settings and budget_plan ({} without a budget).
        modes: The planned modes in the order they run, MIG layouts resolved (mig:1g -> mig:1g.18gb on
            an H200): the list the modes loop iterates.
    """
    from collections import namedtuple

    from sharebench.components import steps

    plan = steps.plan_sweep(request=request, node_name=node_name)
    return namedtuple("Plan", ["plan", "modes"])(plan, plan["modes"])
