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
    records: Output[Dataset],
    device: str = "auto",
    engine: str = "simpletrack",
    command: str = "",
    exec_timing: str = "protocol",
    lattice: str = "",
    seed: int = 1,
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
        device: Device spec: auto, cpu, cuda[:N], opencl[:P.D].
        engine: Workload engine (simpletrack, xtrack, or exec: the command).
        command: engine exec: the program each replica runs (replica protocol; SHAREBENCH_WORK = particles).
        exec_timing: engine exec: protocol (the program reports its window) or process (the whole process).
        lattice: Path of an Xsuite line JSON in the image; empty uses the generated LHC-like ring.
        seed: Random seed of the particle distribution.
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
        device=device,
        engine=engine,
        command=command,
        exec_timing=exec_timing,
        lattice=lattice,
        seed=seed,
        out_path=records.path,
        placed=f"{resource_count} x {resource or 'nothing'} on {node_name or 'this machine'}",
    )
