"""Size the default CPU sweep from a short calibration run, so that set-up and launch noise are small.

With no ``--particles`` on the CPU, :func:`calibrate` tracks :data:`PROBE_PARTICLES` particles for the
sweep's turns once in this process (which also builds the kernel into the cache the replicas then
reuse), takes its rate, and picks the one particle count at which an exclusive run tracks for about
:data:`TARGET_TRACK_S` seconds (two significant digits, at least the probe's size). A resumed folder
keeps the sizes it already has, so that its cells match.
"""

from __future__ import annotations

import contextlib
import math
import sys
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


def calibrate(plan: SweepPlan, out: Path | None) -> tuple[SweepPlan, str]:
    """The plan at the calibrated size (CPU, no --particles), and the note to record. ``out``: a resumed
    folder, whose sizes are kept. The dry run calls it too, so that it shows the size the run will
    calibrate (the run calibrates again at its start: the same method, the machine's noise)."""
    kept = folder_particles(out)
    if kept:
        return plan.with_particles(kept), kept_note(kept)
    with contextlib.redirect_stdout(sys.stderr):
        rec = run_replica(plan.run_config(PROBE_PARTICLES))
    rate = PROBE_PARTICLES * plan.turns / rec.track_s if rec.track_s > 0 else math.inf
    particles = min(MAX_PARTICLES, max(PROBE_PARTICLES, round2(rate * TARGET_TRACK_S / plan.turns)))
    return plan.with_particles([particles]), (
        f"calibration: {PROBE_PARTICLES:,} particles x {plan.turns} turns tracked in {rec.track_s:.3f} s "
        f"({rate:,.0f} particle-turns/s): {particles:,} particles for about {TARGET_TRACK_S:g} s of exclusive "
        f"tracking per cell (kept between {PROBE_PARTICLES:,} and {MAX_PARTICLES:,})"
    )
