"""CPU context vs PoCL on this machine, per CPU-second of the tracking process
(robust to other load on a shared machine) and per wall second.

    python -m tools.cpu_ab LATTICE PARTICLES TURNS ROUNDS
"""

import resource
import sys
import time

from sharebench.devices import resolve_device
from sharebench.kernel.distribution import linear_optics, matched_gaussian
from sharebench.kernel.engines.simpletrack import SimpletrackEngine
from sharebench.kernel.lattice import get_packed
from sharebench.kernel.state import make_state


def cpu_s():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main(lattice, n, turns, rounds):
    lattice = None if lattice in ("generated", "-") else lattice
    packed = get_packed(lattice)
    x6 = matched_gaussian(linear_optics(packed), packed.beta0, packed.gamma0, n)
    coords, counters = make_state(*x6, packed.beta0)
    engines = {}
    for spec in ("cpu", "opencl"):
        eng = SimpletrackEngine(resolve_device(spec), packed)
        eng.build()
        eng.upload(coords[:, :256], counters[:, :256])
        eng.track(1)
        engines[eng.device.spec] = eng
    passes = n * turns * packed.n_elements
    for r in range(rounds):
        for spec, eng in engines.items():
            eng.upload(coords, counters)
            c0, t0 = cpu_s(), time.perf_counter()
            eng.track(turns)
            c1, t1 = cpu_s(), time.perf_counter()
            print(
                f"round {r} {spec:<11} wall {t1 - t0:7.3f} s  cpu {c1 - c0:7.3f} s  "
                f"{passes / (t1 - t0):.3e} passes/wall-s  {passes / (c1 - c0):.3e} passes/cpu-s",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
