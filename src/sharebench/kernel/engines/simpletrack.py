"""The ``simpletrack`` engine: a Simpletrack-style kernel of our own.

A line is packed into one flat float64 buffer (``kernel.elements``; layout in simpletrack.c beside
this file). The one C source is specialised by xobjects for each backend, and each backend is a
small class with the same methods, as xobjects' contexts are, chosen once from the device:

* :class:`CpuBackend`: C + OpenMP through xobjects' ContextCpu, compiled once per machine and kept
  in the kernel cache by source hash;
* :class:`OpenclBackend`: built through pyopencl directly (xobjects' ``-cl-std=CL2.0`` is not
  needed, OpenCL C 1.2 suffices; pyopencl caches the binary);
* :class:`CudaBackend`: a CuPy RawModule (CuPy caches the binary).

The particle state lives on the device as a (9, n) float64 array and a (3, n) int64 array
(``kernel.state``): 96 bytes per particle.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from sharebench.devices import DeviceInfo
from sharebench.errors import UserError
from sharebench.kernel.cache import cache_dir
from sharebench.kernel.elements import PackedLine
from sharebench.kernel.state import COORDS, COUNTERS

SOURCE_PATH = Path(__file__).with_name("simpletrack.c")
KERNEL_NAME = "simpletrack_track"


def source_text() -> str:
    """The kernel's C source, unspecialised."""
    return SOURCE_PATH.read_text()


def specialized_source(target: str) -> str:
    """The kernel source specialised for 'cpu_openmp', 'cpu_serial', 'opencl' or 'cuda'."""
    from xobjects.specialize_source import specialize_source  # noqa: PLC0415 - slow to import: only to build

    return specialize_source(source_text(), specialize_for=target)


def kernel_description() -> Any:
    """The kernel's signature as xobjects describes it (CPU build)."""
    import xobjects as xo  # noqa: PLC0415 - slow to import: only to build

    return xo.Kernel(
        c_name=KERNEL_NAME,
        args=[
            xo.Arg(xo.Float64, pointer=True, const=True, name="elems"),
            xo.Arg(xo.Int64, name="n_elements"),
            xo.Arg(xo.Float64, pointer=True, name="coords"),
            xo.Arg(xo.Int64, pointer=True, name="counters"),
            xo.Arg(xo.Int64, name="npart"),
            xo.Arg(xo.Int64, name="nturns"),
            xo.Arg(xo.Float64, name="beta0"),
            xo.Arg(xo.Float64, name="p0c"),
            xo.Arg(xo.Float64, name="q0"),
            xo.Arg(xo.Float64, name="xy_limit"),
        ],
        n_threads="npart",
    )


def scalar_args(packed: PackedLine, npart: int, nturns: int) -> tuple:
    """The kernel's arguments after the buffers, typed as a GPU launch passes them."""
    return (
        np.int64(npart),
        np.int64(nturns),
        np.float64(packed.beta0),
        np.float64(packed.p0c),
        np.float64(packed.q0),
        np.float64(packed.xy_limit),
    )


class CpuBackend:
    """The kernel as C + OpenMP (xobjects ContextCpu) on the host's cores (``threads``: all usable)."""

    def __init__(self, device: DeviceInfo, threads: int | None = None, block_size: int = 128):
        self.device = device
        self.threads = threads
        self._ctx: Any = None
        self._kernel: Any = None
        self._elems: np.ndarray | None = None
        self._coords: np.ndarray | None = None
        self._counters: np.ndarray | None = None

    def build(self) -> bool:
        """Load the compiled kernel from the cache, or compile it into the cache; True on a cache hit."""
        import xobjects as xo  # noqa: PLC0415 - slow to import: only to build

        nthreads = int(self.threads or len(os.sched_getaffinity(0)))
        self._ctx = ctx = xo.ContextCpu(omp_num_threads=nthreads)
        src = source_text()
        key = hashlib.sha256((src + "|omp=1|xobjects=" + xo.__version__).encode()).hexdigest()[:20]
        module = f"sharebench_simpletrack_{key}"
        where = cache_dir("cpu_kernels")
        desc = {KERNEL_NAME: kernel_description()}
        hit = bool(list(where.glob(module + "*.so")))
        if hit:
            kernels = ctx.kernels_from_file(module, desc, containing_dir=str(where))
        else:
            kernels = self.compile_into(where, ctx, desc, src, module)
        self._kernel = kernels[KERNEL_NAME]
        return hit

    @staticmethod
    def compile_into(where: Path, ctx: Any, desc: dict, src: str, module: str) -> Any:
        """Compile in a private folder, then move the module into ``where`` atomically."""
        tmp = where / f".build-{os.getpid()}"
        tmp.mkdir(exist_ok=True)
        # cffi compiles through setuptools, which reads setup.cfg/pyproject.toml in the current
        # folder: build from the private folder so a user's project files cannot break it
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            kernels = ctx.build_kernels(
                kernel_descriptions=desc,
                sources=[src],
                module_name=module,
                containing_dir=str(tmp),
                extra_compile_args=("-fno-fast-math", "-ffp-contract=off"),
            )
        finally:
            os.chdir(cwd)
        for f in tmp.iterdir():
            if f.suffix == ".so":
                os.replace(f, where / f.name)
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
        return kernels

    def upload(self, elems: np.ndarray, coords: np.ndarray, counters: np.ndarray) -> None:
        self._elems = np.ascontiguousarray(elems)
        self._coords = coords.copy()
        self._counters = counters.copy()

    def track(self, packed: PackedLine, npart: int, nturns: int) -> None:
        self._kernel(
            elems=self._elems,
            n_elements=packed.n_elements,
            coords=self._coords,
            counters=self._counters,
            npart=npart,
            nturns=int(nturns),
            beta0=packed.beta0,
            p0c=packed.p0c,
            q0=packed.q0,
            xy_limit=packed.xy_limit,
        )

    def download(self, npart: int) -> tuple[np.ndarray, np.ndarray]:
        if self._coords is None or self._counters is None:
            raise RuntimeError("download before upload (or after release)")
        return self._coords.copy(), self._counters.copy()

    def release(self) -> None:
        self._coords = self._counters = None


class OpenclBackend:
    """The kernel as OpenCL C 1.2 through pyopencl, on the device ``opencl:P.D``."""

    def __init__(self, device: DeviceInfo, threads: int | None = None, block_size: int = 128):
        self.device = device
        self.block_size = int(block_size)
        self._cl: Any = None
        self._clctx: Any = None
        self._queue: Any = None
        self._kernel: Any = None
        self._elems: Any = None
        self._coords: Any = None
        self._counters: Any = None

    def build(self) -> bool:
        """Build through pyopencl (which caches the binary); True when our marker says it was built before."""
        import pyopencl as cl  # noqa: PLC0415 - optional: OpenCL through pyopencl, slow to import

        spec = self.device.spec  # opencl:P.D
        ip, idev = (int(v) for v in spec.split(":")[1].split("."))
        dev = cl.get_platforms()[ip].get_devices()[idev]
        if "cl_khr_fp64" not in dev.extensions:
            raise UserError(f"device {spec} ({dev.name}) has no double precision (cl_khr_fp64)")
        self._cl = cl
        self._clctx = cl.Context([dev])
        self._queue = cl.CommandQueue(self._clctx)
        src = specialized_source("opencl").replace("const double* elems", "const double* restrict elems")
        cache = cache_dir("pyopencl")
        options = ["-cl-std=CL1.2"]
        # pyopencl keeps the binary per (source, options, device); a marker of
        # ours makes a cache hit observable in the run record
        key_text = "|".join([src, *options, dev.name, dev.platform.name, dev.driver_version])
        key = hashlib.sha256(key_text.encode()).hexdigest()[:20]
        marker = cache / f"sharebench-{key}.built"
        hit = marker.exists()
        try:
            prg = cl.Program(self._clctx, src).build(options=options, cache_dir=str(cache))
        except cl.RuntimeError as exc:
            if "unknown target CPU" not in str(exc):
                raise
            version = " ".join(dev.platform.version.split()[:4])
            raise UserError(
                f"device {spec} ({version}): its compiler does not know this CPU "
                "(a PoCL older than the processor); use another OpenCL device (sharebench devices), "
                "a newer PoCL (Debian: apt install pocl-opencl-icd) or --device cpu"
            ) from None
        marker.touch()
        self._kernel = getattr(prg, KERNEL_NAME)
        return hit

    def upload(self, elems: np.ndarray, coords: np.ndarray, counters: np.ndarray) -> None:
        cl = self._cl
        mf = cl.mem_flags
        if self._elems is None:
            self._elems = cl.Buffer(self._clctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=elems)
        self._coords = cl.Buffer(self._clctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=coords)
        self._counters = cl.Buffer(self._clctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=counters)
        self._queue.finish()

    def track(self, packed: PackedLine, npart: int, nturns: int) -> None:
        bs = self.block_size
        gsize = ((npart + bs - 1) // bs) * bs
        self._kernel(
            self._queue,
            (gsize,),
            (bs,),
            self._elems,
            np.int64(packed.n_elements),
            self._coords,
            self._counters,
            *scalar_args(packed, npart, nturns),
        )
        self._queue.finish()

    def download(self, npart: int) -> tuple[np.ndarray, np.ndarray]:
        coords = np.empty((len(COORDS), npart), dtype=np.float64)
        counters = np.empty((len(COUNTERS), npart), dtype=np.int64)
        self._cl.enqueue_copy(self._queue, coords, self._coords)
        self._cl.enqueue_copy(self._queue, counters, self._counters)
        self._queue.finish()
        return coords, counters

    def release(self) -> None:
        self._coords = self._counters = None


class CudaBackend:
    """The kernel as CUDA C++ through a CuPy RawModule, on the device ``cuda:N``."""

    def __init__(self, device: DeviceInfo, threads: int | None = None, block_size: int = 128):
        self.device = device
        self.block_size = int(block_size)
        self._cupy: Any = None
        self._kernel: Any = None
        self._elems: Any = None
        self._coords: Any = None
        self._counters: Any = None
        self._host: tuple | None = None  # (shapes, coords, counters): page-locked download buffers

    def build(self) -> bool:
        """Build through CuPy (which caches the binary); True when our marker says it was built before."""
        import cupy  # noqa: PLC0415 - optional: CUDA through CuPy

        idx = int(self.device.spec.split(":")[1])
        self._cupy = cupy
        cupy.cuda.Device(idx).use()
        src = specialized_source("cuda").replace("const double* elems", "const double* __restrict__ elems")
        src = 'extern "C" {\n' + src + "\n}\n"
        options = ("--std=c++11",)
        # CuPy keeps the binary on disk (CUPY_CACHE_DIR, ~/.cupy/kernel_cache); a
        # marker of ours makes a cache hit observable in the run record
        props = cupy.cuda.runtime.getDeviceProperties(idx)
        arch = f"{props['major']}{props['minor']}"
        key = hashlib.sha256("|".join([src, *options, arch, cupy.__version__]).encode()).hexdigest()[:20]
        marker = cache_dir("cupy") / f"sharebench-{key}.built"
        hit = marker.exists()
        module = cupy.RawModule(code=src, options=options)
        self._kernel = module.get_function(KERNEL_NAME)
        marker.touch()
        return hit

    def upload(self, elems: np.ndarray, coords: np.ndarray, counters: np.ndarray) -> None:
        cp = self._cupy
        if self._elems is None:
            self._elems = cp.asarray(elems)
        self._coords = cp.asarray(coords)
        self._counters = cp.asarray(counters)
        cp.cuda.get_current_stream().synchronize()

    def track(self, packed: PackedLine, npart: int, nturns: int) -> None:
        bs = self.block_size
        grid = (npart + bs - 1) // bs
        self._kernel(
            (grid,),
            (bs,),
            (
                self._elems,
                np.int64(packed.n_elements),
                self._coords,
                self._counters,
                *scalar_args(packed, npart, nturns),
            ),
        )
        self._cupy.cuda.get_current_stream().synchronize()

    def download(self, npart: int) -> tuple[np.ndarray, np.ndarray]:
        if self._host is None:
            return self._cupy.asnumpy(self._coords), self._cupy.asnumpy(self._counters)
        # page-locked buffers kept from one download to the next (keep_on_host): valid until the next one
        shapes = (self._coords.shape, self._counters.shape)
        if self._host[0] != shapes:
            import cupyx  # noqa: PLC0415 - optional: CUDA through CuPy

            self._host = (shapes, cupyx.empty_pinned(shapes[0], np.float64), cupyx.empty_pinned(shapes[1], np.int64))
        _, coords, counters = self._host
        self._coords.get(out=coords)
        self._counters.get(out=counters)
        return coords, counters

    def keep_on_host(self, coords: np.ndarray, counters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Page-locked copies of the state (uploads at the bus's speed, cell after cell); downloads reuse
        page-locked buffers from now on."""
        import cupyx  # noqa: PLC0415 - optional: CUDA through CuPy

        pinned = []
        for a in (coords, counters):
            p = cupyx.empty_pinned(a.shape, a.dtype)
            p[...] = a
            pinned.append(p)
        if self._host is None:
            self._host = ((), None, None)
        return pinned[0], pinned[1]

    def release(self) -> None:
        self._coords = self._counters = None
        if self._cupy is not None:  # give the memory back to the device, not to CuPy's pool: other
            self._cupy.get_default_memory_pool().free_all_blocks()  # processes' memory checks see it free


BACKENDS: dict[str, type[CpuBackend | OpenclBackend | CudaBackend]] = {
    "cpu": CpuBackend,
    "opencl": OpenclBackend,
    "cuda": CudaBackend,
}


class SimpletrackEngine:
    """Build once, then load particles, track, read back; the backend is chosen once from the device."""

    name = "simpletrack"

    def __init__(self, device: DeviceInfo, packed: PackedLine, threads: int | None = None, block_size: int = 128):
        if device.backend not in BACKENDS:
            raise UserError(f"bad backend {device.backend!r} of device {device.spec}; allowed: {', '.join(BACKENDS)}")
        self.device = device
        self.packed = packed
        self.backend = BACKENDS[device.backend](device, threads=threads, block_size=block_size)
        self.compile_s = 0.0
        self.cache_hit = False
        self.npart = 0

    def build(self) -> float:
        """Build (or load) the kernel; returns the seconds it took."""
        t0 = time.perf_counter()
        self.cache_hit = self.backend.build()
        self.compile_s = time.perf_counter() - t0
        return self.compile_s

    def upload(self, coords: np.ndarray, counters: np.ndarray) -> None:
        """Load particles (coords (9, n) float64, counters (3, n) int64) onto the device."""
        coords = np.ascontiguousarray(coords, dtype=np.float64)
        counters = np.ascontiguousarray(counters, dtype=np.int64)
        self.npart = coords.shape[1]
        self.backend.upload(self.packed.data, coords, counters)

    def track(self, nturns: int) -> None:
        """Track the loaded particles nturns; returns when the device is done."""
        self.backend.track(self.packed, self.npart, nturns)

    def download(self) -> tuple[np.ndarray, np.ndarray]:
        """The particles as (coords, counters) on the host."""
        return self.backend.download(self.npart)

    def release(self) -> None:
        """Free the particles on the device (the line stays)."""
        self.backend.release()

    def keep_on_host(self, coords: np.ndarray, counters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The state to keep on the host across runs: page-locked copies where the backend has them
        (CUDA; downloads then reuse page-locked buffers, valid until the next download), else the arrays."""
        keep = getattr(self.backend, "keep_on_host", None)
        return keep(coords, counters) if keep is not None else (coords, counters)
