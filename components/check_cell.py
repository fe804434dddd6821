"""check_cell: the rows of one cell's pods, checked together."""

from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def check_cell(records: Input[List[Dataset]], cell: Output[Dataset], plan: dict, claims_namespace: str = "sharebench"):
    """Gathers the results rows of one cell's pods and checks them together.

    A replica that failed, or (time-slicing, MPS) replicas that ran on different devices,
    mark the whole cell failed; the analysis leaves it out with the reason. Under the plan's
    placement 'dra' the cell's ResourceClaims are deleted once its rows are in.

    Args:
        records: Results rows (JSON lists) of the cell's pods.
        plan: plan_sweep's plan (its placement).
        claims_namespace: Namespace of the claims (dra).

    Returns:
        cell: The cell's rows, with cell_status and cell_error set (JSON list).
    """
    from sharebench.components import steps

    steps.finish_cell([r.path for r in records], cell.path, plan=plan, claims_namespace=claims_namespace)
