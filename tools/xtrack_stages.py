"""Where xtrack's set-up time goes on a context (diagnostic for the xtrack engine).

    python -m tools.xtrack_stages cuda|cpu PARTICLES OPTIMIZE(0|1) LINE.json[.gz]

Prints the elapsed time after each stage: load, build_tracker, optimize_for_tracking
(on the target context, as xtrack does it), particles, first turn, two 3-turn runs.
Output of the H200 run: results/kernel/h200-2026-12-02/session2/xtrack_cuda_stages_before.log
"""

import sys
import time
import warnings

import numpy as np

warnings.simplefilter("ignore")
t0 = time.perf_counter()


def log(msg):
    print(f"[{time.perf_counter() - t0:8.2f}s] {msg}", flush=True)


import xobjects as xo  # noqa: E402 - after t0: the import time is on the timeline
import xtrack as xt  # noqa: E402 - after t0: the import time is on the timeline

from sharebench.kernel.lattice import load_line  # noqa: E402 - after t0: the import time is on the timeline

ctxname, n, opt, path = sys.argv[1], int(float(sys.argv[2])), sys.argv[3] == "1", sys.argv[4]
ctx = xo.ContextCupy() if ctxname == "cuda" else xo.ContextCpu()
line = load_line(path)
log(f"loaded {len(line.element_names)} elements")
line.build_tracker(_context=ctx)
log("build_tracker")
if opt:
    line.optimize_for_tracking()
    log(f"optimize_for_tracking -> {len(line.element_names)} elements")
p = xt.Particles(_context=ctx, p0c=line.particle_ref.p0c[0], x=np.full(n, 1e-4), y=np.full(n, 1e-4))
ctx.synchronize()
log("particles")
line.track(p, num_turns=1)
ctx.synchronize()
log("track 1 turn (first, includes any lazy compile)")
for _ in range(2):
    t = time.perf_counter()
    line.track(p, num_turns=3)
    ctx.synchronize()
    dt = time.perf_counter() - t
    log(f"track 3 turns: {dt:.3f}s  {n * 3 / dt:.3e} particle-turns/s")
