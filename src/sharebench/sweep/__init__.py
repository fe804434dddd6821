"""A sweep: sharing modes x particle counts x repeats on one machine, written as it goes.

``plan``: the one planner: the configuration, validated in full before anything runs, and its cells;
``grid``: a pipeline's cells as separate tasks (imported by the pipeline's steps, not here); ``compose``:
``run_sweep``, which picks the schedule of the cells (``schedule``: fixed, adaptive, capacity, deadline) and
hands it to ``runner``, the loop; ``cell``: ``measure_cell`` for one cell (the step the KFP components run).
"""

from sharebench.sweep.cell import CellResult, check_cell, measure_cell
from sharebench.sweep.compose import run_sweep
from sharebench.sweep.plan import (
    DEFAULT_PARTICLES,
    DEFAULT_REPEATS,
    DEFAULT_TURNS,
    MAX_REPEATS,
    MAX_TURNS,
    Cell,
    SweepConfig,
    SweepPlan,
    as_modes,
    cell_id,
    default_modes,
    describe_plan,
    parse_particles,
    validate,
)
from sharebench.sweep.resume import inherit_options
from sharebench.sweep.runner import new_sweep_id
from sharebench.sweep.signals import Stopped, stop_on_signals

__all__ = [
    "DEFAULT_PARTICLES",
    "DEFAULT_REPEATS",
    "DEFAULT_TURNS",
    "MAX_REPEATS",
    "MAX_TURNS",
    "Cell",
    "CellResult",
    "Stopped",
    "SweepConfig",
    "SweepPlan",
    "as_modes",
    "cell_id",
    "check_cell",
    "default_modes",
    "describe_plan",
    "inherit_options",
    "measure_cell",
    "new_sweep_id",
    "parse_particles",
    "run_sweep",
    "stop_on_signals",
    "validate",
]
