"""check_cell: the rows of one cell's pods, checked together."""

from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def check_cell(
    records: Input[List[Dataset]], cell: Output[Dataset], placement: str = "pods", claims_namespace: str = "sharebench"
):
    """Gathers the results rows of one cell's pods and checks them together.

    A replica that failed, or (time-slicing, MPS) replicas that ran on different devices,
    mark the whole cell failed; the analysis leaves it out with the reason.

    Args:
        records: Results rows (JSON lists) of the cell's pods.
        placement: 'dra' deletes the cell's ResourceClaims once its rows are in.
        claims_namespace: Namespace of the claims (dra).

    Returns:
        cell: The cell's rows, with cell_status and cell_error set (JSON list).
    """
    from sharebench.components import steps

    steps.merge_records([r.path for r in records], cell.path, cell=True)
    steps.release_cell(placement=placement, rows_path=cell.path, namespace=claims_namespace)
