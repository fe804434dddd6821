"""The ``xtrack`` engine: Xsuite's own tracker, as physics reference and a second workload profile.

Builds on the CPU and on CUDA (CuPy); on OpenCL it is refused: it does not build on PoCL (xtrack's
kernels need the OpenCL 2.0 generic address space, which PoCL's CPU device lacks, and PoCL
#defines ``length``), and on NVIDIA's OpenCL its build did not finish in 7 minutes on an H200 (nor
in 230 s in a second try). Set SHAREBENCH_XTRACK_OPENCL=1 to try an OpenCL GPU anyway.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any

import numpy as np

from sharebench.devices import DeviceInfo
from sharebench.errors import UserError
from sharebench.kernel.state import COORDS, COUNTERS


def optimize_on_host(line: Any, context: Any) -> None:
    """``optimize_for_tracking`` on the host, then the tracker on ``context``.

    xtrack merges and replaces elements in place, one small access at a time;
    with the elements in a CuPy buffer, optimising the LHC line (18,657
    elements) took 110 s on the H200 machine. On the host the element edits
    take seconds and the elements move to the device once, when the tracker is
    built there. (xtrack still compiles its CPU kernel once inside
    optimize_for_tracking where Xsuite's prebuilt kernels are not installed.)
    """
    import xobjects as xo  # noqa: PLC0415 - slow to import: only to build

    line.build_tracker(_context=xo.ContextCpu(), compile=False)
    line.optimize_for_tracking(compile=False, verbose=False)
    line.discard_tracker()
    line.build_tracker(_context=context)


def check_xtrack_device(device: DeviceInfo) -> None:
    """The xtrack engine can run on ``device`` (the CPU, CUDA); a one-line UserError otherwise."""
    if device.backend in ("cpu", "cuda"):
        return
    if device.kind == "cpu" or "portable computing language" in device.platform.lower():
        raise UserError(
            f"the xtrack engine does not build on {device.spec} ({device.platform}): xtrack needs the OpenCL generic "
            "address space, which PoCL lacks; use --engine simpletrack or --device cpu"
        )
    if os.environ.get("SHAREBENCH_XTRACK_OPENCL") != "1":
        raise UserError(
            f"the xtrack engine on OpenCL ({device.spec}, {device.name}) is not supported: its build did not finish "
            "in 7 minutes on an NVIDIA H200; use --device cuda (or set SHAREBENCH_XTRACK_OPENCL=1 to try)"
        )


def xtrack_context(device: DeviceInfo, threads: int | None = None) -> Any:
    """The xobjects context xtrack runs in on ``device``; UserError where it does not build."""
    import xobjects as xo  # noqa: PLC0415 - slow to import: only to build

    if device.backend == "cpu":
        # serial by default: xtrack ships prebuilt serial CPU kernels (build in
        # seconds); an OpenMP build takes minutes and is not cached across
        # processes. SHAREBENCH_XTRACK_OMP=1 asks for OpenMP threads.
        if os.environ.get("SHAREBENCH_XTRACK_OMP") == "1":
            return xo.ContextCpu(omp_num_threads=int(threads or len(os.sched_getaffinity(0))))
        return xo.ContextCpu()
    if device.backend == "cuda":
        return xo.ContextCupy(device=int(device.spec.split(":")[1]))
    check_xtrack_device(device)
    return xo.ContextPyopencl(device=device.spec.split(":")[1])


class XtrackEngine:
    """xtrack's tracker on ``device``: build (and optimise) once, then load particles, track, read back.

    ``context``: the xobjects context, set by :meth:`build` (or beforehand, to track in a context
    whose tracker is already built)."""

    name = "xtrack"

    def __init__(self, device: DeviceInfo, line: Any, threads: int | None = None, optimize: bool = True):
        self.device = device
        self.line = line
        self.threads = threads
        self.optimize = optimize
        self.compile_s = 0.0
        self.cache_hit = False
        self.context: Any = None
        self.particles: Any = None

    def build(self) -> float:
        """Build the tracker (optimised for tracking unless ``optimize`` is off); returns its seconds."""
        t0 = time.perf_counter()
        self.context = xtrack_context(self.device, self.threads)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if self.optimize and self.device.backend != "cpu":
                optimize_on_host(self.line, self.context)
            else:
                self.line.build_tracker(_context=self.context)
                if self.optimize:
                    self.line.optimize_for_tracking()
            # compile now: the first track() is not where build time belongs
            self.line.tracker.get_track_kernel_and_data_for_present_config()
        self.compile_s = time.perf_counter() - t0
        return self.compile_s

    def upload(self, coords: np.ndarray, counters: np.ndarray) -> None:
        """Load particles (the first six coordinates; all alive) into an xtrack Particles object."""
        import xtrack as xt  # noqa: PLC0415 - slow to import: only to build

        ref = self.line.particle_ref
        kw = {k: coords[i] for i, k in enumerate(COORDS[:6])}
        self.particles = xt.Particles(
            _context=self.context, p0c=float(ref.p0c[0]), mass0=float(ref.mass0), q0=float(ref.q0), **kw
        )
        self.context.synchronize()

    def track(self, nturns: int) -> None:
        """Track the loaded particles nturns; returns when the device is done."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.line.track(self.particles, num_turns=int(nturns))
        self.context.synchronize()

    def download(self) -> tuple[np.ndarray, np.ndarray]:
        """The particles as (coords, counters) on the host, in their original order."""
        p = self.particles
        get = self.context.nparray_from_context_array
        n = len(get(p.x))
        # xtrack sorts lost particles to the end on the CPU: restore the order
        pid = np.asarray(get(p.particle_id))
        order = np.argsort(pid, kind="stable")
        coords = np.empty((len(COORDS), n))
        for i, k in enumerate(COORDS):
            coords[i] = np.asarray(get(getattr(p, k)))[order]
        counters = np.empty((len(COUNTERS), n), dtype=np.int64)
        counters[0] = np.asarray(get(p.state))[order]
        counters[1] = np.asarray(get(p.at_turn))[order]
        counters[2] = np.asarray(get(p.at_element))[order]
        return coords, counters

    def release(self) -> None:
        """Drop the particles."""
        self.particles = None
