"""The Simpletrack workload: LHC particle tracking on one device, as one replica of a sharing cell.

A Simpletrack replica (run by ``python -m sharebench.workloads.replica``, see
``sharebench.workloads``) resolves its device, checks the particles fit, loads the lattice, builds an
engine, prepares matched particles, waits at the barrier, tracks (the timed window) and writes its
:class:`RunRecord`. :func:`run_bench` runs engines x devices x particle counts for speed.
See docs/architecture.md (Kernel) for the contract.

Modules:

* ``config``: RunConfig (the kernel's own run), Barrier (where a replica waits), RunRecord (what it measured);
* ``run``: run_replica (set-up, barrier, track, record), pin_cpus;
* ``bench``: BenchConfig, run_bench, summarize, to_markdown;
* ``engines``: the Engine protocol, make_engine; ``engines.simpletrack`` (our kernel, its C source
  ``engines/simpletrack.c`` and a backend class per context: CPU, OpenCL, CUDA), ``engines.xtrack``;
* ``elements``: one class per element type (packer, decoder, numpy step); pack_line, track_numpy;
* ``lattice``: the generated LHC-like ring, line files, the lattice caches;
* ``distribution``: linear optics and the matched Gaussian distribution;
* ``state``: the particle state arrays; ``memory``: bytes a run needs; ``cache``: the cache folder.

Devices come from ``sharebench.devices``. Heavy imports (xtrack, xobjects, pyopencl, cupy) happen
only when a run or a lattice needs them.
"""

from sharebench.kernel.bench import BenchConfig, run_bench
from sharebench.kernel.config import Barrier, RunConfig, RunRecord
from sharebench.kernel.engines import ENGINES, RUN_ENGINES, Engine, check_engine, make_engine
from sharebench.kernel.engines.xtrack import check_xtrack_device
from sharebench.kernel.memory import bytes_per_particle, check_fits
from sharebench.kernel.run import pin_cpus, run_replica

__all__ = [
    "ENGINES",
    "RUN_ENGINES",
    "Barrier",
    "BenchConfig",
    "Engine",
    "RunConfig",
    "RunRecord",
    "bytes_per_particle",
    "check_engine",
    "check_fits",
    "check_xtrack_device",
    "make_engine",
    "pin_cpus",
    "run_bench",
    "run_replica",
]
