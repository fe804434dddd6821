"""run_simpletrack: one replica of the Simpletrack workload (or N replica processes in one pod)."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from kfp import dsl
from kfp.dsl import Dataset, Output

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def run_simpletrack(
    mode: str,
    particles: int,
    turns: int,
    repeat: int,
    replica: int,
    replicas: int,
    processes: int,
    start_at: float,
    workload: dict,
    records: Output[Dataset],
    resource: str = "",
    resource_count: int = 0,
    node_name: str = "",
):
    """Tracks particles through the LHC lattice and records the timed window.

    With processes == 1 this pod is one replica of the cell (placement 'pods'): it builds,
    warms up, sleeps until start_at and tracks. With processes == N it runs the whole cell
    as N replica processes sharing this pod's device (placement 'processes'), through the
    local sharing executor of the mode.

    Args:
        mode: Sharing mode of the cell (exclusive, timeslice:N, mps:N, mig:LAYOUT, partition:N).
        particles: Particles per replica.
        turns: Turns to track.
        repeat: Repeat index of the cell (0: warm-up).
        replica: Index of this pod's replica in the cell (placement 'pods').
        replicas: N, the replicas of the cell (all pods' processes together).
        processes: Replica processes to run in this pod (1: this pod is one replica).
        start_at: Instant the replicas start tracking together, Unix epoch seconds.
        workload: What each replica runs (sharebench.workloads.Workload as a dict): engine (simpletrack,
            xtrack, or exec: the command), device spec, command and timing (engine exec), lattice, seed.
        resource: Extended resource the pod requested (the pipeline sets the request from it; logged).
        resource_count: How many of it the pod requested (logged).
        node_name: Node the pod was pinned to (logged; empty without a cluster).

    Returns:
        records: This pod's results rows of the cell (JSON list in the results CSV schema).
    """
    from sharebench.components import steps

    steps.run_simpletrack(
        mode=mode,
        particles=particles,
        turns=turns,
        repeat=repeat,
        replica=replica,
        replicas=replicas,
        processes=processes,
        start_at=start_at,
        workload=workload,
        out_path=records.path,
        placed=f"{resource_count} x {resource or 'nothing'} on {node_name or 'this machine'}",
    )
