"""Device memory a run needs, checked before anything is allocated."""

from __future__ import annotations

from sharebench.errors import UserError
from sharebench.kernel.engines import check_engine
from sharebench.kernel.state import BYTES_PER_PARTICLE

# simpletrack: 9 float64 coordinates + 3 int64 counters per particle (kernel.state).
# xtrack: its Particles object (240 B per particle in xtrack 0.118.4, checked in
# tests/test_kernel.py against a real Particles buffer) plus the per-particle
# scratch the tracker keeps; we count 256 B to stay on the safe side.
ENGINE_BYTES_PER_PARTICLE = {"simpletrack": BYTES_PER_PARTICLE, "xtrack": 256}
# room for the line, kernel binaries and the runtime: fixed overhead per run
OVERHEAD_BYTES = 64 * 1024**2


def bytes_per_particle(engine: str = "simpletrack") -> int:
    """Device bytes one particle takes with this engine."""
    return ENGINE_BYTES_PER_PARTICLE[check_engine(engine)]


def bytes_needed(particles: int, engine: str = "simpletrack") -> int:
    """Device bytes a run of ``particles`` needs with this engine, overhead included."""
    return int(particles) * bytes_per_particle(engine) + OVERHEAD_BYTES


def check_fits(particles: int, mem_bytes: int | None, engine: str = "simpletrack", what: str = "memory") -> None:
    """UserError (with the numbers) when particles do not fit in mem_bytes."""
    if mem_bytes is None:
        return
    need = bytes_needed(particles, engine)
    if need > int(mem_bytes):
        bpp = bytes_per_particle(engine)
        most = max(0, (int(mem_bytes) - OVERHEAD_BYTES) // bpp)
        raise UserError(
            f"{particles:,} particles need {need:,} bytes with the {engine} engine "
            f"({bpp} B/particle + {OVERHEAD_BYTES:,} B overhead) but the {what} is {int(mem_bytes):,} bytes; "
            f"at most {most:,} particles fit"
        )
