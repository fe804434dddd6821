"""A sweep: sharing modes x particle counts x repeats on one machine, written as it goes.

``plan``: the one planner: the configuration, validated in full before anything runs, and its cells
(on one machine, or as a pipeline's separate tasks); ``compose``: ``run_sweep``, which picks the schedule
of the cells (``schedule``: fixed, adaptive, capacity, deadline) and hands it to ``runner``, the loop;
``cell``: ``measure_cell`` for one cell (the step the KFP components run).
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
    CellGrid,
    SweepConfig,
    SweepPlan,
    as_modes,
    cell_id,
    cell_of,
    default_modes,
    describe_plan,
    parse_particles,
    plan_grid,
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
    "CellGrid",
    "CellResult",
    "Stopped",
    "SweepConfig",
    "SweepPlan",
    "as_modes",
    "cell_id",
    "cell_of",
    "check_cell",
    "default_modes",
    "describe_plan",
    "inherit_options",
    "measure_cell",
    "new_sweep_id",
    "parse_particles",
    "plan_grid",
    "run_sweep",
    "stop_on_signals",
    "validate",
]
