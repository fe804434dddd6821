"""Size the default CPU sweep from a short calibration run, so that set-up and launch noise are small.

With no ``--particles`` on the CPU, :func:`calibrate` tracks :data:`PROBE_PARTICLES` particles for the
sweep's turns once in this process (which also builds the kernel into the cache the replicas then
reuse), takes its rate, and picks the one particle count at which an exclusive run tracks for about
:data:`TARGET_TRACK_S` seconds (two significant digits, at least the probe's size: on a slow machine the
probe's own size tracks for longer, and the note says how long). A resumed folder keeps the sizes it
already has, so that its cells match. The rate is kept (:class:`Sized`): the dry run predicts the sweep's
seconds from it (``sweep.fixed``).
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sharebench.kernel import run_replica
from sharebench.results import RESULTS_CSV, load_results
from sharebench.sweep.plan import SweepPlan

TARGET_TRACK_S = 2.0
PROBE_PARTICLES = 1000
MAX_PARTICLES = 1_000_000  # a tiny test lattice tracks fast: never more than ~100 MB of particles per replica


def round2(x: float) -> int:
    """Two significant digits: 12,345 -> 12,000."""
    if x <= 0 or not math.isfinite(x):
        return PROBE_PARTICLES
    k = 10 ** max(0, int(math.floor(math.log10(x))) - 1)
    return int(round(x / k) * k)


def auto_sized(plan: SweepPlan) -> bool:
    """Whether the sweep's size comes from a calibration: the CPU with no --particles (a tracker)."""
    c = plan.config
    return c.particles is None and plan.device.kind == "cpu" and not c.workload.is_program


def folder_particles(out: Path | None) -> list[int]:
    """The particle counts a results folder already holds (none: no folder, or no rows)."""
    if out is None or not (out / RESULTS_CSV).exists():
        return []
    return sorted({int(p) for p in load_results(out)["particles"].dropna()})


def kept_note(particles: list[int]) -> str:
    return f"calibration: kept the folder's particle counts {', '.join(f'{p:,}' for p in particles)}"


@dataclass(frozen=True)
class Sized:
    """The plan at its calibrated size, the note to record, and the calibration's rate (particle-turns/s of
    an exclusive run; None when a resumed folder's sizes were kept) and its seconds."""

    plan: SweepPlan
    note: str
    rate_pt_per_s: float | None = None
    spent_s: float = 0.0


def calibrated_size(plan: SweepPlan, out: Path | None) -> Sized:
    """The plan at the calibrated size (CPU, no --particles), the note, the rate. ``out``: a resumed folder,
    whose sizes are kept. The dry run calls it too, so that it shows the size the run will calibrate (the run
    calibrates again at its start: the same method, the machine's noise)."""
    kept = folder_particles(out)
    if kept:
        return Sized(plan.with_particles(kept), kept_note(kept))
    t0 = time.monotonic()
    with contextlib.redirect_stdout(sys.stderr):
        rec = run_replica(plan.run_config(PROBE_PARTICLES))
    spent_s = time.monotonic() - t0
    rate = PROBE_PARTICLES * plan.turns / rec.track_s if rec.track_s > 0 else math.inf
    particles, said = size_for(rate, plan.turns)
    note = (
        f"calibration: {PROBE_PARTICLES:,} particles x {plan.turns} turns tracked in {rec.track_s:.3f} s "
        f"({rate:,.0f} particle-turns/s): {said}"
    )
    return Sized(plan.with_particles([particles]), note, rate, spent_s)


def size_for(rate_pt_per_s: float, turns: int) -> tuple[int, str]:
    """The particle count an exclusive run of ``turns`` tracks in about :data:`TARGET_TRACK_S` at the rate
    measured (two significant digits, within the probe's size and :data:`MAX_PARTICLES`), and what the note
    says of it: the seconds it will track, predicted from the rate (not the target: on a slow machine the
    smallest size tracks for longer)."""
    particles = min(MAX_PARTICLES, max(PROBE_PARTICLES, round2(rate_pt_per_s * TARGET_TRACK_S / turns)))
    track_s = particles * turns / rate_pt_per_s
    bound = f"aimed at {TARGET_TRACK_S:g} s, kept between {PROBE_PARTICLES:,} and {MAX_PARTICLES:,}"
    if particles == PROBE_PARTICLES and track_s > TARGET_TRACK_S:
        bound += ": the smallest size tracks longer here"
    return particles, f"{particles:,} particles, about {track_s:.3g} s of exclusive tracking per replica run ({bound})"


def calibrate(plan: SweepPlan, out: Path | None) -> tuple[SweepPlan, str]:
    """The plan at the calibrated size (CPU, no --particles), and the note to record (:func:`calibrated_size`)."""
    sized = calibrated_size(plan, out)
    return sized.plan, sized.note
