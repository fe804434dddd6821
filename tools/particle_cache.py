"""What the shared particle file saves a replica: drawing the matched distribution against loading it.

    SHAREBENCH_CACHE=/tmp/x python3 -m tools.particle_cache [--particles 1e6,5e6]

Prints, per size, the draw (``matched_gaussian``), the first replica (draw + save) and a later
replica (load) in seconds (``sharebench.kernel.particles``).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from sharebench.kernel.distribution import matched_gaussian
from sharebench.kernel.particles import shared_particles

OPTICS = {"closed_orbit": np.zeros(4), "betax": 150.0, "alfx": -1.2, "betay": 80.0, "alfy": 0.7}


def timed(fn, *args) -> float:
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--particles", default="1e6,5e6", help="comma-separated sizes")
    args = ap.parse_args(argv)
    try:
        sizes = [int(float(x)) for x in args.particles.split(",")]
    except ValueError:
        print(f"particle_cache: bad --particles {args.particles!r}; allowed: comma-separated numbers", file=sys.stderr)
        return 2
    for n in sizes:
        a = timed(matched_gaussian, OPTICS, 0.99, 7000.0, n, 1)
        b = timed(shared_particles, OPTICS, 0.99, 7000.0, n, 1)
        c = timed(shared_particles, OPTICS, 0.99, 7000.0, n, 1)
        print(f"{n:,} particles: draw {a:.3f} s, first replica (draw + save) {b:.3f} s, later replica (load) {c:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
