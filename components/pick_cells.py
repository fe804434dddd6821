"""pick_cells: the cells one mode runs (with a budget, those of its planned sizes)."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List, NamedTuple

from kfp import dsl

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def pick_cells(plan: dict, mode: str) -> NamedTuple("Cells", cells=List[dict]):
    """Picks the cells of one mode from the plan, as values.

    Args:
        plan: plan_sweep's plan.
        mode: Sharing mode (resolved, as plan_sweep returns it).

    Returns:
        cells: The mode's cells (mode, particles, repeat, id), run one after the other.
    """
    from collections import namedtuple

    from sharebench.components import steps

    return namedtuple("Cells", ["cells"])(steps.pick_cells(plan=plan, mode=mode))
