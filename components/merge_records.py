"""merge_records: fan-in of results rows, one level of ParallelFor at a time."""

from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Output

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def merge_records(records: Input[List[Dataset]], merged: Output[Dataset]):
    """Concatenates results rows from the tasks of a ParallelFor into one dataset.

    Args:
        records: Results rows (JSON lists) of the loop's tasks.

    Returns:
        merged: All their rows, in loop order (JSON list).
    """
    from sharebench.components import steps

    steps.merge_records([r.path for r in records], merged.path)
