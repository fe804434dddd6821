"""run_simpletrack: one replica of the Simpletrack workload (or N replica processes in one pod)."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from kfp import dsl
from kfp.dsl import Dataset, Output

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def run_simpletrack(
    plan: dict,
    cell: dict,
    placed: dict,
    replica: int,
    records: Output[Dataset],
    resource: str = "",
    resource_count: int = 0,
):
    """Tracks particles through the LHC lattice (or runs the plan's workload) and records the timed window.

    With one process per pod this pod is one replica of the cell (placement 'pods', 'dra'): it
    builds, warms up, sleeps until the cell's start_at and tracks. With N processes per pod it runs
    the whole cell as N replica processes sharing this pod's device (placement 'processes'),
    through the local sharing executor of the mode.

    Args:
        plan: plan_sweep's plan (turns, the workload every replica runs, the node).
        cell: The scheduled cell (schedule_start's: mode, particles, repeat, id, start_at).
        placed: reconfigure_node's placement of the mode (processes per pod, replicas of the cell).
        replica: Index of this pod's replica in the cell (one process per pod).
        resource: Extended resource the pod requested (the pipeline sets the pod's request from this
            input: the compiler carries a value into a nested loop only for a task that takes it; logged).
        resource_count: How many of it the pod requested (logged).

    Returns:
        records: This pod's results rows of the cell (JSON list in the results CSV schema).
    """
    from sharebench.components import steps

    requested = f"{resource_count} x {resource or 'nothing'}"
    steps.run_part(plan=plan, cell=cell, placed=placed, replica=replica, out_path=records.path, requested=requested)
