"""A keep-awake process (issue 42, item 4): the control that tells whether an idle device or host that wakes
slowly between a user's bursts makes the alone baseline slow (and so slowdowns below 1).

    python -m sharebench.workloads.awake --device SPEC --stop-file F [--ready-file R] [--period-ms 2]

On a GPU it launches a one-element kernel every period and waits for it (``cuda:N`` through CuPy,
``opencl:P.D`` through pyopencl): the device never idles longer than a period. On the CPU it spins one
core (a busy loop, the stop file looked at every :data:`CPU_LOOK_S`): the host never idles. It writes the
ready file once its first kernel ran (at once on the CPU), ends when the stop file exists, on SIGTERM, or
after ``--max-s`` seconds (a lost parent never leaves it running), and prints one line of what it did.

:class:`KeepAwake` runs it beside a cell (``sharebench.sweep.within``: the alone cell's control, cell id
``..._awake``): started and ready before the cell, ended after; ``error`` says why it could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sharebench import processes
from sharebench.errors import UserError, one_line
from sharebench.files import write_atomic

DEFAULT_PERIOD_MS = 2.0
CPU_LOOK_S = 0.01  # the CPU spinner looks for its stop file this often (and spins in between)
MAX_S = 6 * 3600.0  # the longest it runs without a stop file
READY_TIMEOUT_S = 120.0  # KeepAwake: its set-up (CuPy's or pyopencl's import, the kernel's build) at most
AWAKE_MODULE = "sharebench.workloads.awake"
KEPT: list[Any] = []  # a device's objects, kept to the process's end (PoCL aborts on a queue freed mid-process)


def device_kernel(spec: str) -> Callable[[], None]:
    """One launch of a one-element kernel on ``spec``, waited for (CUDA: CuPy; OpenCL: pyopencl);
    UserError naming what is missing."""
    kind, _, where = spec.partition(":")
    if kind == "cuda":
        try:
            import cupy  # noqa: PLC0415 - optional: CUDA through CuPy
        except ImportError as exc:
            raise UserError(f"keep-awake on {spec} needs CuPy: {exc}") from None
        cupy.cuda.Device(int(where or 0)).use()
        x = cupy.zeros(1, dtype=cupy.float32)
        stream = cupy.cuda.get_current_stream()
        KEPT.extend((x, stream))

        def launch_cuda() -> None:
            x.__iadd__(1)  # one elementwise kernel on one element
            stream.synchronize()

        return launch_cuda
    if kind == "opencl":
        return opencl_kernel(spec, where)
    raise UserError(f"keep-awake: bad device {spec!r}; allowed: cpu, cuda[:N], opencl[:P.D]")


def opencl_kernel(spec: str, where: str) -> Callable[[], None]:
    try:
        import pyopencl as cl  # noqa: PLC0415 - optional: OpenCL through pyopencl
    except ImportError as exc:
        raise UserError(f"keep-awake on {spec} needs pyopencl: {exc}") from None
    ip, _, idev = (where or "0.0").partition(".")
    device = cl.get_platforms()[int(ip or 0)].get_devices()[int(idev or 0)]
    ctx = cl.Context([device])
    queue = cl.CommandQueue(ctx)
    program = cl.Program(ctx, "__kernel void awake(__global float* x) { x[0] += 1.0f; }").build()
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, size=4)
    kernel = program.awake
    kernel.set_arg(0, buf)
    KEPT.extend((ctx, queue, program, buf, kernel))

    def launch_opencl() -> None:
        cl.enqueue_nd_range_kernel(queue, kernel, (1,), None)
        queue.finish()

    return launch_opencl


def keep_gpu_awake(launch: Callable[[], None], period_s: float, stop: Path, until: float) -> tuple[int, float]:
    """A launch every ``period_s`` until ``stop`` exists or ``until`` (monotonic); (launches, seconds)."""
    t0 = time.monotonic()
    n = 0
    while not stop.exists() and time.monotonic() < until:
        launch()
        n += 1
        left = t0 + n * period_s - time.monotonic()
        if left > 0:
            time.sleep(left)
    return n, time.monotonic() - t0


def spin_cpu(stop: Path, until: float) -> tuple[int, float]:
    """Spin one core until ``stop`` exists or ``until`` (monotonic); (looks, seconds)."""
    t0 = time.monotonic()
    n = 0
    while not stop.exists() and time.monotonic() < until:
        n += 1
        end = time.monotonic() + CPU_LOOK_S
        while time.monotonic() < end:
            pass
    return n, time.monotonic() - t0


def run(spec: str, stop: Path, ready: Path | None, period_s: float, max_s: float) -> str:
    """Keep ``spec`` awake until ``stop``; the line of what it did."""
    until = time.monotonic() + max_s
    if spec == "cpu":
        if ready is not None:
            write_atomic(ready, f"{os.getpid()}\n")
        n, seconds = spin_cpu(stop, until)
        return f"keep-awake: spun a core for {seconds:.1f} s"
    launch = device_kernel(spec)
    launch()  # built and run once before the cell is told it is ready
    if ready is not None:
        write_atomic(ready, f"{os.getpid()}\n")
    n, seconds = keep_gpu_awake(launch, period_s, stop, until)
    mean = 1e3 * seconds / n if n else float("nan")
    return f"keep-awake: {n} one-element kernels on {spec} in {seconds:.1f} s (one every {mean:.2f} ms)"


def _end(signum: int, frame: object) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=f"python -m {AWAKE_MODULE}", description=__doc__.splitlines()[0])
    ap.add_argument("--device", required=True, help="cpu, cuda[:N] or opencl[:P.D]")
    ap.add_argument("--stop-file", required=True, help="it ends once this file exists")
    ap.add_argument("--ready-file", help="written once it keeps the device awake")
    ap.add_argument("--period-ms", type=float, default=DEFAULT_PERIOD_MS, help="a kernel every this many ms")
    ap.add_argument("--max-s", type=float, default=MAX_S, help="the longest it runs")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, _end)
    try:
        line = run(args.device, Path(args.stop_file), Path(args.ready_file) if args.ready_file else None,
                   args.period_ms / 1e3, args.max_s)  # fmt: skip
    except UserError as exc:
        print(f"keep-awake: error: {exc}", file=sys.stderr)
        return 2
    print(line, flush=True)
    return 0


class KeepAwake:
    """The keep-awake process beside a cell, as a context manager: started and ready on entry (``error``
    says why not: the cell is then measured without it), stopped on exit; ``line`` its own account."""

    def __init__(self, spec: str, folder: Path, period_ms: float = DEFAULT_PERIOD_MS, python: str = sys.executable):
        self.spec, self.folder, self.period_ms, self.python = spec, Path(folder), period_ms, python
        self.proc: Any = None
        self.error = ""
        self.line = ""

    @property
    def log(self) -> Path:
        return self.folder / "awake.log"

    def __enter__(self) -> KeepAwake:
        self.folder.mkdir(parents=True, exist_ok=True)
        stop, ready = self.folder / "awake.stop", self.folder / "awake.ready"
        stop.unlink(missing_ok=True)
        ready.unlink(missing_ok=True)
        argv = [self.python, "-m", AWAKE_MODULE, "--device", self.spec, "--stop-file", str(stop)]
        argv += ["--ready-file", str(ready), "--period-ms", repr(self.period_ms)]
        self.proc = processes.spawn(argv, log=self.log)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.error = one_line(self.tail() or f"not ready in {READY_TIMEOUT_S:g} s", 300)
                self.stop()
                break
            time.sleep(0.02)
        return self

    def tail(self) -> str:
        try:
            lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def stop(self) -> None:
        if self.proc is None:
            return
        write_atomic(self.folder / "awake.stop", "cell done\n")
        with contextlib.suppress(subprocess.TimeoutExpired):  # it did not end by itself: stopped with its group
            self.proc.wait(timeout=5.0)
        processes.stop([self.proc])
        self.line = self.tail()
        self.proc = None

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    sys.exit(main())
