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
) -> NamedTuple("Cell", particles=int, repeat=int, start_at=float, cell_id=str):
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

    Returns:
        particles: Particles per replica in this cell.
        repeat: Repeat index (<= 0: warm-up).
        start_at: Start instant, Unix epoch seconds.
        cell_id: The cell's id, e.g. timeslice:2_p10000_r1.
    """
    from collections import namedtuple

    from sharebench.components import steps

    c = steps.schedule_start(mode=mode, cell=cell, particle_counts=particle_counts, repeats=repeats,
                             start_delay_s=start_delay_s, warmup_repeats=warmup_repeats)
    return namedtuple("Cell", ["particles", "repeat", "start_at", "cell_id"])(
        c["particles"], c["repeat"], c["start_at"], c["cell_id"])
