"""The GPU's time slices as processes see them: a CUDA probe that reads ``%globaltimer`` in a loop.

    result = run_probe(processes=2, seconds=3.0)   # TimesliceProbe, or ProbeUnavailable with its reason

Each probe process (``python -m sharebench.telemetry.timeslice_probe --worker ...``) compiles one small
kernel through CuPy, launches it on one block (``grid="one"``) or one block per SM (``grid="full"``) and
lets thread 0 of block 0 read ``%globaltimer`` (the GPU's nanosecond clock, one for every context on the
GPU) until its time is up. Consecutive reads further apart than ``threshold_us`` mean the process was
switched out: the pair (last read before, first read after) is one *gap*; everything between gaps is the
process's own *slice* on the GPU. Because the clock is the GPU's, the N processes' records share one
time line: ``switch_ms`` is the idle time between one process's slice end and the next process's slice
start, ``slice_ms`` each process's slice length, ``shares`` each process's on-GPU share of the common
window. Distributions, not only medians (:class:`Distribution`).

Beside a workload (``sharebench.sweep.beside.run_beside_probe``): one replica of a workload (Simpletrack
or a program), started by the sharing launcher like every replica, runs its timed window while one probe
process spins (:meth:`ProbeProcesses.spin_first` is the probe's half of the replica's barrier); the
probe's gaps inside that window are the workload's slices plus two switches each (:class:`BesideRun`).
``sharebench.analysis.timeslice_split`` turns that into the workload's GPU share and its progress rate
inside its own slices.

Where the probe cannot run (no CUDA device, no CuPy, an MPS daemon serving this machine, a device that is
not a CUDA GPU) every entry point returns :class:`ProbeUnavailable` with one line saying why, never an
exception, so a sweep goes on without it. CuPy is imported only inside the worker process.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sharebench.devices.discovery import cuda_uuid, driver_uuid_bytes
from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.probe_settings import (  # the arguments' checks: light, for the command line's options
    DEFAULT_THRESHOLD_US,
    GRIDS,
    NEIGHBOUR_HELP,
    Neighbour,
    check_args,
    parse_neighbour,
)

PROBE_MODULE = "sharebench.telemetry.timeslice_probe"
GAP_CAPACITY = 1 << 17  # gaps one process can record (2 ms slices: minutes of them)
MPS_DEFAULT_PIPE = "/tmp/nvidia-mps"

KERNEL_SOURCE = r"""
extern "C" __global__ void timeslice_probe(const unsigned long long duration_ns,
                                           const unsigned long long threshold_ns,
                                           unsigned long long* gaps, const unsigned int capacity,
                                           unsigned long long* info) {
    unsigned long long first, prev, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(first));
    prev = first;
    const bool rec = (blockIdx.x == 0 && threadIdx.x == 0);
    unsigned int n = 0;
    while (true) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (rec && now - prev > threshold_ns) {
            if (n < capacity) { gaps[2 * n] = prev; gaps[2 * n + 1] = now; }
            n++;
        }
        prev = now;
        if (now - first >= duration_ns) break;
    }
    if (rec) { info[0] = first; info[1] = now; info[2] = n; }
}

extern "C" __global__ void globaltimer_stamp(unsigned long long* out) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    out[0] = now;
}
"""

# The heavy neighbours (issue 34): every thread streams over a buffer larger than the L2 (read + write, so
# evicted lines are dirty), reads the clock each iteration, and thread 0 of block 0 records the gaps as the
# light probe does; ``info[3]`` sums the bytes moved. ``timeslice_heavy`` also keeps 48 doubles live per
# thread (512 threads, 1 block per SM: the register file) and writes shared memory each iteration.
NEIGHBOUR_SOURCE = r"""
extern "C" __device__ __forceinline__ unsigned long long sb_clock() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void timeslice_stream(const unsigned long long duration_ns,
                                            const unsigned long long threshold_ns,
                                            unsigned long long* gaps, const unsigned int capacity,
                                            unsigned long long* info, double* buf,
                                            const unsigned long long n) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool rec = (blockIdx.x == 0 && threadIdx.x == 0);
    unsigned long long first = sb_clock(), prev = first, now = first, it = 0;
    unsigned int g = 0;
    while (true) {
        double v = buf[i];
        buf[i] = fma(v, 0.999999, 1e-9);
        i += stride;
        if (i >= n) i -= n;
        it++;
        now = sb_clock();
        if (rec && now - prev > threshold_ns) {
            if (g < capacity) { gaps[2 * g] = prev; gaps[2 * g + 1] = now; }
            g++;
        }
        prev = now;
        if (now - first >= duration_ns) break;
    }
    atomicAdd(&info[3], 16ULL * it);
    if (rec) { info[0] = first; info[1] = now; info[2] = g; }
}

#define HEAVY_ACC 48
extern "C" __global__ void __launch_bounds__(512, 1)
timeslice_heavy(const unsigned long long duration_ns, const unsigned long long threshold_ns,
                unsigned long long* gaps, const unsigned int capacity, unsigned long long* info,
                double* buf, const unsigned long long n, const unsigned int smem_doubles) {
    extern __shared__ double smem[];
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool rec = (blockIdx.x == 0 && threadIdx.x == 0);
    double acc[HEAVY_ACC];
#pragma unroll
    for (int k = 0; k < HEAVY_ACC; k++) acc[k] = 1.0 + 1e-3 * k + 1e-7 * threadIdx.x;
    unsigned long long first = sb_clock(), prev = first, now = first, it = 0;
    unsigned int g = 0, s = threadIdx.x;
    while (true) {
        double v = buf[i];
#pragma unroll
        for (int k = 0; k < HEAVY_ACC; k++) acc[k] = fma(acc[k], 0.999999, v * 1e-12);
        double w = acc[0];
        if (smem_doubles > 0) {
            smem[s] = w;
            s += blockDim.x;
            if (s >= smem_doubles) s = threadIdx.x % smem_doubles;
            w += smem[(s + 1) % smem_doubles] * 1e-12;
        }
        buf[i] = fma(v, 0.999999, w * 1e-12);
        i += stride;
        if (i >= n) i -= n;
        it++;
        now = sb_clock();
        if (rec && now - prev > threshold_ns) {
            if (g < capacity) { gaps[2 * g] = prev; gaps[2 * g + 1] = now; }
            g++;
        }
        prev = now;
        if (now - first >= duration_ns) break;
    }
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < HEAVY_ACC; k++) sum += acc[k];
    if (sum == 1234.5) buf[0] = sum;
    atomicAdd(&info[3], 16ULL * it);
    if (rec) { info[0] = first; info[1] = now; info[2] = g; }
}
"""


@dataclass(frozen=True)
class ProbeUnavailable:
    """The probe could not run here; ``reason`` is one line saying why."""

    reason: str
    status: str = "unavailable"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Distribution:
    """A sample of durations in milliseconds: count, mean and percentiles (NaN where empty)."""

    n: int
    mean: float
    p5: float
    p25: float
    p50: float
    p75: float
    p95: float
    min: float
    max: float

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> Distribution:
        v = np.asarray([x for x in values_ms if math.isfinite(x)], dtype=float)
        if v.size == 0:
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan, nan, nan)
        p = np.percentile(v, [5, 25, 50, 75, 95])
        p5, p25, p50, p75, p95 = (float(x) for x in p)
        return cls(int(v.size), float(v.mean()), p5, p25, p50, p75, p95, float(v.min()), float(v.max()))


@dataclass(frozen=True)
class ProbeTrace:
    """One probe process's record: its first and last clock reads and its gaps, in GPU-clock ns.

    ``offset_ns`` is the GPU clock minus the host's epoch clock (ns), measured by the worker, with its
    uncertainty ``offset_err_ns``: host instants (a workload's timed window) map onto the GPU clock by it.
    """

    process: int
    pid: int
    first_ns: int
    last_ns: int
    gaps: tuple[tuple[int, int], ...]
    n_gaps: int = 0
    offset_ns: int = 0
    offset_err_ns: int = 0
    blocks: int = 1
    uuid: str = ""
    device_name: str = ""
    neighbour: str = "light"  # Neighbour.label
    threads: int = 32  # per block
    regs: int = 0  # registers per thread of the kernel
    smem_bytes: int = 0  # dynamic shared memory per block
    footprint_mb: int = 0  # the streamed buffer (MiB)
    bytes: int = 0  # bytes the kernel read and wrote

    @property
    def overflowed(self) -> bool:
        """More gaps happened than the kernel's buffer held (the record is cut)."""
        return self.n_gaps > len(self.gaps)

    def slices(self, lo: int | None = None, hi: int | None = None) -> list[tuple[int, int]]:
        """This process's own on-GPU intervals inside [lo, hi] (default: its whole run), in ns."""
        lo = self.first_ns if lo is None else max(lo, self.first_ns)
        hi = self.last_ns if hi is None else min(hi, self.last_ns)
        out: list[tuple[int, int]] = []
        t = lo
        for a, b in self.gaps:
            if b <= lo or a >= hi:
                continue
            if a > t:
                out.append((t, a))
            t = max(t, b)
        if hi > t:
            out.append((t, hi))
        return out

    def gaps_within(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The gaps inside [lo, hi], each clipped to it."""
        return [(max(a, lo), min(b, hi)) for a, b in self.gaps if b > lo and a < hi]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeTrace:
        keys = set(cls.__dataclass_fields__)
        kw = {k: v for k, v in d.items() if k in keys}
        kw["gaps"] = tuple((int(a), int(b)) for a, b in d.get("gaps", ()))
        return cls(**kw)


@dataclass(frozen=True)
class TimesliceProbe:
    """N probe processes on one GPU: slices, switches and shares over their common window."""

    uuid: str
    device_name: str
    processes: int
    grid: str
    seconds: float
    threshold_us: float
    window_ms: float
    slice_ms: Distribution
    switch_ms: Distribution
    shares: tuple[float, ...]
    share_sum: float
    alternation: float  # fraction of consecutive slices that belong to different processes
    overlap_ms: float  # time two processes' slices overlap (0 under time-slicing)
    traces: tuple[ProbeTrace, ...] = field(repr=False, default=())
    status: str = "ok"
    neighbour: str = "light"
    bytes_per_s: float = math.nan  # bytes moved per second on the GPU, per process (stream, heavy)

    def to_dict(self, traces: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not traces:
            d.pop("traces")
        return d

    def summary(self) -> str:
        """One line: slice, switch and share sum."""
        return (
            f"{self.processes} {self.neighbour} probe processes ({self.grid} grid) on {self.device_name} {self.uuid}: "
            f"slice {self.slice_ms.p50:.3f} ms [p5 {self.slice_ms.p5:.3f}, p95 {self.slice_ms.p95:.3f}], "
            f"switch {self.switch_ms.p50:.3f} ms [p5 {self.switch_ms.p5:.3f}, p95 {self.switch_ms.p95:.3f}], "
            f"shares sum {self.share_sum:.3f}"
            + (f", {self.bytes_per_s / 1e12:.2f} TB/s on the GPU" if self.bytes_per_s > 0 else "")
        )


def common_window(traces: Sequence[ProbeTrace]) -> tuple[int, int]:
    """The interval every process was running its probe kernel (GPU-clock ns); empty when hi <= lo."""
    return max(t.first_ns for t in traces), min(t.last_ns for t in traces)


def on_gpu_bytes_per_s(traces: Sequence[ProbeTrace]) -> float:
    """Bytes each process moved per second of its own slices (NaN for the light probe)."""
    moved = sum(t.bytes for t in traces)
    on_gpu_ns = sum(b - a for t in traces for a, b in t.slices())
    return moved / (on_gpu_ns / 1e9) if moved > 0 and on_gpu_ns > 0 else math.nan


def analyse(
    traces: Sequence[ProbeTrace], grid: str = "one", seconds: float = math.nan, threshold_us: float = math.nan
) -> TimesliceProbe:
    """Slices, switches, shares and alternation of N processes' traces over their common window.

    A slice touching the window's edge is cut, so only whole slices enter ``slice_ms``; ``switch_ms``
    is, for each slice end, the time until the next slice (of any process) starts, where one starts
    after it ends.
    """
    lo, hi = common_window(traces)
    window = max(hi - lo, 0)
    per = [(i, s) for i, t in enumerate(traces) for s in t.slices(lo, hi)] if window else []
    per.sort(key=lambda x: x[1][0])
    whole = [(b - a) / 1e6 for _, (a, b) in per if a > lo and b < hi]
    switches: list[float] = []
    changes, overlap = 0, 0
    for (pa, (_, ea)), (pb, (sb, eb)) in zip(per, per[1:]):
        changes += pa != pb
        if sb >= ea:
            switches.append((sb - ea) / 1e6)
        else:
            overlap += min(ea, eb) - sb
    shares = tuple((sum(b - a for a, b in t.slices(lo, hi)) / window) if window else math.nan for t in traces)
    first = traces[0]
    return TimesliceProbe(
        uuid=next((t.uuid for t in traces if t.uuid), ""),
        device_name=first.device_name,
        processes=len(traces),
        grid=grid,
        seconds=seconds,
        threshold_us=threshold_us,
        window_ms=window / 1e6,
        slice_ms=Distribution.of(whole),
        switch_ms=Distribution.of(switches),
        shares=shares,
        share_sum=float(sum(shares)),
        alternation=changes / (len(per) - 1) if len(per) > 1 else math.nan,
        overlap_ms=overlap / 1e6,
        traces=tuple(traces),
        neighbour=first.neighbour,
        bytes_per_s=on_gpu_bytes_per_s(traces),
    )


# --- where it can run --------------------------------------------------------------------------------


def cuda_ordinal(device: str) -> int | None:
    """The CUDA device number of a spec (``auto``, ``cuda``, ``cuda:N``), None for any other spec."""
    s = (device or "auto").strip().lower()
    if s in ("auto", "cuda"):
        return 0
    if s.startswith("cuda:") and s[5:].isdigit():
        return int(s[5:])
    return None


def mps_active(env: dict[str, str] | None = None) -> str | None:
    """The MPS control pipe this machine's CUDA clients would join, or None when no daemon serves it."""
    env = dict(os.environ if env is None else env)
    pipe = Path(env.get("CUDA_MPS_PIPE_DIRECTORY") or MPS_DEFAULT_PIPE)
    return str(pipe) if (pipe / "control").exists() else None


def unavailable_reason(device: str = "cuda:0", env: dict[str, str] | None = None) -> str | None:
    """One line saying why the probe cannot run on ``device`` here, or None when it can try."""
    if cuda_ordinal(device) is None:
        return (
            f"the time-slice probe needs an NVIDIA GPU through CUDA; device {device!r} is not one "
            "(time slices of the CPU, PoCL or other OpenCL devices are not probed)"
        )
    pipe = mps_active(env)
    if pipe:
        return f"an MPS daemon serves this machine (control pipe in {pipe}): its clients share the GPU side by side, not in time slices"
    if importlib.util.find_spec("cupy") is None:
        return "the time-slice probe needs CuPy (pip install cupy-cuda12x or cupy-cuda13x); it is not installed"
    return None


# --- the worker (one probe process) ---------------------------------------------------------------------


def clock_offset(cp: Any, stamp: Any, tries: int = 7) -> tuple[int, int]:
    """GPU clock minus host epoch clock (ns) and its uncertainty: the tightest of ``tries`` stamps."""
    out = cp.zeros(1, dtype=cp.uint64)
    best = (0, 1 << 62)
    for _ in range(tries):
        t0 = time.time_ns()
        stamp((1,), (1,), (out,))
        cp.cuda.runtime.deviceSynchronize()
        t1 = time.time_ns()
        half = (t1 - t0) // 2
        if half < best[1]:
            best = (int(out.get()[0]) - (t0 + half), half)
    return best


def wait_for_file(path: str | None, timeout_s: float = 900.0) -> float | None:
    """Wait until ``path`` exists; the epoch instant it holds, if any (None without a path)."""
    if not path:
        return None
    end = time.monotonic() + timeout_s
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise TimeoutError(f"no start file {path} after {timeout_s:.0f} s")
        time.sleep(0.002)
    try:
        return float(Path(path).read_text().strip() or "nan")
    except ValueError:
        return None


@dataclass
class Launch:
    """One probe kernel ready to launch: its grid, its arguments after ``info`` and what the trace keeps."""

    fn: Any
    blocks: int
    threads: int
    extra: tuple[Any, ...]
    smem: int
    meta: dict[str, Any]

    def __call__(self, duration: Any, threshold: Any, gaps: Any, capacity: Any, info: Any) -> None:
        args = (duration, threshold, gaps, capacity, info, *self.extra)
        self.fn((self.blocks,), (self.threads,), args, shared_mem=self.smem)


OPTIN_SMEM_ATTR = 97  # cudaDevAttrMaxSharedMemoryPerBlockOptin
DEFAULT_SMEM = 48 * 1024  # dynamic shared memory any kernel may take without opting in


def prepare(cp: Any, ordinal: int, props: dict[str, Any], neighbour: Neighbour, light: Launch) -> Launch:
    """The kernel of ``neighbour``: the light probe (``light``) or a streaming kernel and its buffer."""
    if neighbour.kind == "light":
        return light
    sms = int(props["multiProcessorCount"])
    fn = cp.RawModule(code=NEIGHBOUR_SOURCE).get_function(f"timeslice_{neighbour.kind}")
    n = neighbour.mb * (1 << 20) // 8
    buf = cp.ones(n, dtype=cp.float64)
    if neighbour.kind == "stream":
        threads, smem = 1024, 0
        blocks = sms * max(1, int(props.get("maxThreadsPerMultiProcessor", 2048)) // threads)
        extra: tuple[Any, ...] = (buf, cp.uint64(n))
    else:
        threads, blocks = 512, sms
        try:
            smem = int(
                props.get("sharedMemPerBlockOptin") or cp.cuda.runtime.deviceGetAttribute(OPTIN_SMEM_ATTR, ordinal)
            )
            fn.max_dynamic_shared_size_bytes = smem
        except Exception:  # noqa: BLE001 - without the opt-in the kernel still runs with the default limit
            smem = DEFAULT_SMEM
        extra = (buf, cp.uint64(n), cp.uint32(smem // 8))
    meta = dict(
        neighbour=neighbour.label, threads=threads, regs=int(fn.num_regs), smem_bytes=smem, footprint_mb=neighbour.mb
    )
    return Launch(fn, blocks, threads, extra, smem, meta)


def worker(args: argparse.Namespace) -> dict[str, Any]:
    """Compile, calibrate the clock, wait at the barrier, spin; the trace as a dict."""
    import cupy as cp  # noqa: PLC0415 - optional and slow to import: only in the probe process itself

    ordinal = cuda_ordinal(args.device) or 0
    cp.cuda.Device(ordinal).use()
    props = cp.cuda.runtime.getDeviceProperties(ordinal)
    module = cp.RawModule(code=KERNEL_SOURCE)
    probe, stamp = module.get_function("timeslice_probe"), module.get_function("globaltimer_stamp")
    blocks = int(props["multiProcessorCount"]) if args.grid == "full" else 1
    light = Launch(probe, blocks, 32, (), 0, dict(neighbour="light", threads=32, regs=int(probe.num_regs)))
    launch = prepare(cp, ordinal, props, parse_neighbour(args.neighbour), light)
    gaps = cp.zeros(2 * GAP_CAPACITY, dtype=cp.uint64)
    info = cp.zeros(4, dtype=cp.uint64)
    launch(cp.uint64(1_000_000), cp.uint64(10**12), gaps, cp.uint32(0), info)  # warm-up: 1 ms
    cp.cuda.runtime.deviceSynchronize()
    info.fill(0)
    offset, err = clock_offset(cp, stamp)
    if args.ready:
        Path(args.ready).touch()
    start_at = wait_for_file(args.start)
    if start_at is not None and math.isfinite(start_at):
        time.sleep(max(0.0, start_at - time.time()))
    duration = cp.uint64(int(args.seconds * 1e9))
    launch(duration, cp.uint64(int(args.threshold_us * 1e3)), gaps, cp.uint32(GAP_CAPACITY), info)
    if args.running:
        Path(args.running).touch()
    cp.cuda.runtime.deviceSynchronize()
    first, last, n, moved = (int(x) for x in info.get())
    g = gaps[: 2 * min(n, GAP_CAPACITY)].get().reshape(-1, 2).tolist()
    return dict(
        process=args.process,
        pid=os.getpid(),
        first_ns=first,
        last_ns=last,
        gaps=g,
        n_gaps=n,
        offset_ns=offset,
        offset_err_ns=err,
        blocks=launch.blocks,
        uuid=cuda_uuid(ordinal, props, driver_uuid_bytes(ordinal)),
        device_name=(props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])),
        bytes=moved,
        **launch.meta,
    )


def worker_main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {PROBE_MODULE}")
    p.add_argument("--worker", action="store_true", required=True)
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--grid", choices=GRIDS, default="one")
    p.add_argument("--threshold-us", type=float, default=DEFAULT_THRESHOLD_US)
    p.add_argument("--neighbour", default="light", help=NEIGHBOUR_HELP)
    p.add_argument("--process", type=int, default=0)
    p.add_argument("--ready", help="touched once compiled and calibrated")
    p.add_argument("--start", help="wait for this file (an epoch instant to sleep until) before spinning")
    p.add_argument("--running", help="touched once the probe kernel is launched")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        doc = worker(args)
    except BaseException as exc:  # noqa: BLE001 - any failure becomes the one-line error the parent reports
        doc = {"error": " ".join(f"{type(exc).__name__}: {exc}".split())[:400]}
        write_atomic(args.out, json.dumps(doc))
        return 1
    write_atomic(args.out, json.dumps(doc))
    return 0


# --- running N processes ---------------------------------------------------------------------------------


@dataclass
class ProbeProcesses:
    """N started probe workers and their files (start with :func:`start_probes`)."""

    folder: Path
    procs: list[subprocess.Popen]
    outs: list[Path]
    readies: list[Path]
    runnings: list[Path]
    start: Path

    def wait_ready(self, timeout_s: float) -> str | None:
        """Wait until every worker is compiled and calibrated; an error line if one died or timed out."""
        return wait_all(self.procs, self.readies, self.outs, timeout_s)

    def go(self, delay_s: float = 0.05) -> None:
        """Release the barrier: every worker starts spinning at now + delay."""
        write_atomic(self.start, f"{time.time() + delay_s:.6f}")

    def wait_running(self, timeout_s: float) -> str | None:
        return wait_all(self.procs, self.runnings, self.outs, timeout_s)

    def spin_first(self, setup_timeout_s: float, running_timeout_s: float = 30.0) -> str:
        """The probe's half of a workload's barrier (its ``check_ready``, called once the workload is
        set up): wait until the probe is set up, start it spinning now, and return once its kernel is on
        the GPU (and 0.1 s more), so that the workload's timed window opens inside the probe's. '' or why not."""
        err = self.wait_ready(setup_timeout_s)
        if err:
            return err
        self.go(0.0)
        err = self.wait_running(running_timeout_s)
        if err:
            return err
        time.sleep(0.1)  # the probe kernel is on the GPU before the workload's window opens
        return ""

    def finish(self, timeout_s: float) -> list[ProbeTrace] | ProbeUnavailable:
        """Wait for the workers; their traces, or the first one's error as the reason."""
        end = time.monotonic() + timeout_s
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.stop()
                return ProbeUnavailable(f"a probe process did not finish within {timeout_s:.0f} s")
        traces = []
        for out in self.outs:
            doc = json.loads(out.read_text()) if out.exists() else {"error": "the probe process wrote no record"}
            if "error" in doc:
                return ProbeUnavailable(f"the probe process failed: {doc['error']}")
            traces.append(ProbeTrace.from_dict(doc))
        return traces

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def wait_all(procs: list[subprocess.Popen], files: list[Path], outs: list[Path], timeout_s: float) -> str | None:
    end = time.monotonic() + timeout_s
    while not all(f.exists() for f in files):
        for proc, out in zip(procs, outs):
            if proc.poll() is not None:
                doc = json.loads(out.read_text()) if out.exists() else {}
                return f"the probe process failed: {doc.get('error', f'exit status {proc.returncode}')}"
        if time.monotonic() > end:
            return f"the probe processes were not ready within {timeout_s:.0f} s"
        time.sleep(0.01)
    return None


def start_probes(
    folder: Path,
    processes: int,
    seconds: float,
    *,
    device: str = "cuda:0",
    grid: str = "one",
    threshold_us: float = DEFAULT_THRESHOLD_US,
    neighbour: str = "light",
    python: str = sys.executable,
) -> ProbeProcesses:
    """Start ``processes`` probe workers that wait at one barrier (:meth:`ProbeProcesses.go`)."""
    folder.mkdir(parents=True, exist_ok=True)
    start = folder / "start"
    outs, readies, runnings, procs = [], [], [], []
    for i in range(processes):
        out, ready, running = folder / f"probe{i}.json", folder / f"ready{i}", folder / f"running{i}"
        cmd = [python, "-m", PROBE_MODULE, "--worker", "--device", device, "--seconds", f"{seconds}"]
        cmd += ["--grid", grid, "--threshold-us", f"{threshold_us}", "--process", str(i), "--neighbour", neighbour]
        cmd += ["--ready", str(ready), "--start", str(start), "--running", str(running), "--out", str(out)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        outs.append(out)
        readies.append(ready)
        runnings.append(running)
    return ProbeProcesses(folder, procs, outs, readies, runnings, start)


def run_probe(
    processes: int = 2,
    seconds: float = 3.0,
    *,
    device: str = "cuda:0",
    grid: str = "one",
    threshold_us: float = DEFAULT_THRESHOLD_US,
    folder: Path | None = None,
    setup_timeout_s: float = 120.0,
    neighbour: str = "light",
    python: str = sys.executable,
) -> TimesliceProbe | ProbeUnavailable:
    """Run ``processes`` probe processes for ``seconds`` side by side on ``device``; never raises for an
    absent GPU or a failed probe (a :class:`ProbeUnavailable` says why). Bad arguments are UserErrors
    at the command line (:func:`check_args`) and an unavailable result here."""
    bad = check_args(processes, seconds, grid, threshold_us) or unavailable_reason(device)
    if not bad:
        try:
            neighbour = parse_neighbour(neighbour).label
        except UserError as exc:
            bad = str(exc)
    if bad:
        return ProbeUnavailable(bad)
    with tempfile.TemporaryDirectory(prefix="sb-probe-") as tmp:
        probes = start_probes(
            Path(folder or tmp),
            processes,
            seconds,
            device=device,
            grid=grid,
            threshold_us=threshold_us,
            neighbour=neighbour,
            python=python,
        )
        try:
            err = probes.wait_ready(setup_timeout_s)
            if err:
                return ProbeUnavailable(err)
            probes.go()
            traces = probes.finish(seconds + setup_timeout_s)
        finally:
            probes.stop()
    if isinstance(traces, ProbeUnavailable):
        return traces
    return analyse(traces, grid=grid, seconds=seconds, threshold_us=threshold_us)


def probe_for_sweep(device: str, processes: Sequence[int] = (2, 4), seconds: float = 2.0) -> dict[str, Any]:
    """What a sweep with a time-slicing mode stores in its provenance: ``{"timeslice_probe": [...]}``,
    one summary dict per process count (``status`` "ok" or "unavailable" with ``reason``)."""
    out = []
    for n in processes:
        r = run_probe(n, seconds, device=device)
        out.append({"processes": n, **r.to_dict()})
        if isinstance(r, ProbeUnavailable):
            break
    return {"timeslice_probe": out}


# --- one workload replica beside one probe ------------------------------------------------------------------


@dataclass(frozen=True)
class BesideRun:
    """One workload replica's record (``track_start``, ``track_end``, ``track_s``: host epoch s) and the
    trace of the one probe process that spun beside it."""

    record: dict[str, Any]
    trace: ProbeTrace

    def window_ns(self) -> tuple[int, int]:
        """The workload's timed window on the GPU clock."""
        off = self.trace.offset_ns
        return int(self.record["track_start"] * 1e9) + off, int(self.record["track_end"] * 1e9) + off

    def covered(self) -> bool:
        """The probe spun through the whole window."""
        lo, hi = self.window_ns()
        return self.trace.first_ns <= lo and self.trace.last_ns >= hi


if __name__ == "__main__":
    sys.exit(worker_main())
