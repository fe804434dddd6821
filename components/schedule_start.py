"""schedule_start: the instant the replicas of one cell start tracking together."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List, NamedTuple

from kfp import dsl

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def schedule_start(
    plan: dict,
    cell: dict,
    placed: dict,
    run_id: str = "",
    claims_namespace: str = "sharebench",
) -> NamedTuple("Scheduled", cell=dict, claims=List[str]):
    """Sets the instant one cell's replicas start tracking: the plan's start_delay_s from now.

    Every replica of the cell builds, generates particles and warms up, then sleeps until
    start_at, so their measured windows overlap. With the plan's node and a run id, the run's
    Lease on the node is renewed first (agent access: by a request the node agent answers).
    Placement 'dra': the cell's ResourceClaim(s) are created here.

    Args:
        plan: plan_sweep's plan.
        cell: The cell, as pick_cells gives it (mode, particles, repeat, id).
        placed: reconfigure_node's placement of the mode (dra: how many pods share the claim).
        run_id: The run holding the node's Lease.
        claims_namespace: Namespace of the claims and the replica pods (dra).

    Returns:
        cell: The cell with start_at (Unix epoch seconds) and claims added.
        claims: Names of the cell's ResourceClaims (dra; empty otherwise).
    """
    from collections import namedtuple

    from sharebench.components import steps

    c = steps.schedule_start(plan=plan, cell=cell, placed=placed, run_id=run_id, claims_namespace=claims_namespace)
    return namedtuple("Scheduled", ["cell", "claims"])(c, c["claims"])
