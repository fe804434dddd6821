"""schedule_start: the instant the replicas of one cell start tracking together."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List, NamedTuple

from kfp import dsl

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def schedule_start(
    mode: str,
    cell: int,
    particle_counts: List[int],
    repeats: int,
    start_delay_s: float,
    warmup_repeats: int = 1,
    placement: str = "pods",
    pods: List[int] = [],
    gpu_model: str = "",
    claims_namespace: str = "sharebench",
    node_name: str = "",
    run_id: str = "",
    node_access: str = "agent",
) -> NamedTuple("Cell", particles=int, repeat=int, start_at=float, cell_id=str, claims=List[str]):
    """Picks one cell's particle count and repeat and the instant its replicas start tracking.

    Every replica of the cell builds, generates particles and warms up, then sleeps until
    start_at, so their measured windows overlap.

    Args:
        mode: Sharing mode of the cell.
        cell: Cell index (from plan_sweep).
        particle_counts: Particles per replica of each size.
        repeats: Measured repeats per size.
        start_delay_s: Seconds from now to the start; long enough for pods to schedule and build.
        warmup_repeats: Discarded warm-up repeats per size (repeats <= 0).
        placement: 'dra' creates the cell's ResourceClaim(s) here; other placements: none.
        pods: Replica index of each pod of the cell (dra: how many pods share the claim).
        gpu_model: GPU model (dra: MPS pinned-memory limit, MIG profile of the claim).
        claims_namespace: Namespace of the claims and the replica pods (dra).
        node_name: The swept node; with run_id, the run's Lease on it is renewed (one run per node).
        run_id: The run holding the node's Lease.
        node_access: 'agent' (the Lease renewed by a request the node agent answers) or 'direct'.

    Returns:
        particles: Particles per replica in this cell.
        repeat: Repeat index (<= 0: warm-up).
        start_at: Start instant, Unix epoch seconds.
        cell_id: The cell's id, e.g. timeslice:2_p10000_r1.
        claims: Names of the cell's ResourceClaims (dra; empty otherwise).
    """
    from collections import namedtuple

    from sharebench.components import steps

    c = steps.schedule_start(
        mode=mode,
        cell=cell,
        particle_counts=particle_counts,
        repeats=repeats,
        start_delay_s=start_delay_s,
        warmup_repeats=warmup_repeats,
        node_name=node_name,
        run_id=run_id,
        placement=placement,
        node_access=node_access,
    )
    claims = steps.claim_cell(
        placement=placement,
        mode=mode,
        cell_id=c["cell_id"],
        pods=max(len(pods), 1),
        gpu_model=gpu_model,
        namespace=claims_namespace,
    )
    return namedtuple("Cell", ["particles", "repeat", "start_at", "cell_id", "claims"])(
        c["particles"], c["repeat"], c["start_at"], c["cell_id"], claims
    )
