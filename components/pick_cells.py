"""pick_cells: the cells one mode runs (with a budget, those of its planned sizes)."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List, NamedTuple

from kfp import dsl

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def pick_cells(mode: str, cells_by_mode: dict) -> NamedTuple("Cells", cells=List[int]):
    """Picks the cell indices of one mode from the plan.

    Args:
        mode: Sharing mode (resolved, as plan_sweep returns it).
        cells_by_mode: plan_sweep's cells of each mode.

    Returns:
        cells: The mode's cell indices, run one after the other.
    """
    from collections import namedtuple

    from sharebench.components import steps

    return namedtuple("Cells", ["cells"])(steps.pick_cells(mode=mode, cells_by_mode=cells_by_mode))
