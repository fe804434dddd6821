"""One replica run: set up (device, memory check, lattice, engine, particles, warm-up), wait at the
barrier, track (the timed window, synchronised), read back and record."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from sharebench.devices import DeviceInfo, resolve_device
from sharebench.errors import UserError
from sharebench.kernel.config import Barrier, RunConfig, RunRecord
from sharebench.kernel.distribution import (
    linear_optics,
    xtrack_optics,
)
from sharebench.kernel.elements import PackedLine, pack_line
from sharebench.kernel.engines import Engine, make_engine
from sharebench.kernel.lattice import get_line_cached, get_packed
from sharebench.kernel.memory import check_fits
from sharebench.kernel.particles import shared_particles
from sharebench.kernel.state import make_state

WARMUP_PARTICLES = 4096  # particles the warm-up turns track (at most)


def pin_cpus(cpus: Sequence[int] | None) -> None:
    """Pin this process to cpus and size OpenMP / PoCL threads to them.

    Must run before any OpenCL/CPU context is created (the replica process
    calls it first)."""
    if not cpus:
        return
    try:
        os.sched_setaffinity(0, {int(c) for c in cpus})
    except (OSError, ValueError) as exc:
        allowed = sorted(os.sched_getaffinity(0))
        raise UserError(f"cannot pin to cpus {list(cpus)}: {exc}; this process may use {allowed}") from None
    n = str(len(cpus))
    os.environ["OMP_NUM_THREADS"] = n
    os.environ["POCL_MAX_PTHREAD_COUNT"] = n
    os.environ["POCL_CPU_MAX_CU_COUNT"] = n


def wait_at_barrier(barrier: Barrier) -> None:
    """Touch ready_file, wait for start_file (an epoch instant if it holds a
    float), then sleep until start_at."""
    if barrier.ready_file:
        Path(barrier.ready_file).parent.mkdir(parents=True, exist_ok=True)
        Path(barrier.ready_file).write_text(f"{os.getpid()} {time.time():.6f}\n")
    if barrier.start_file:
        instant = read_start_instant(Path(barrier.start_file))
        if instant is not None:
            sleep_until(instant)
    if barrier.start_at is not None:
        sleep_until(barrier.start_at)


def read_start_instant(path: Path) -> float | None:
    """Wait for the start file; the epoch instant it holds, or None when it holds none."""
    while not path.exists():
        time.sleep(0.0005)
    for _ in range(20):  # the writer may still be writing
        try:
            text = path.read_text().strip()
        except OSError:
            text = ""
        if text:
            try:
                return float(text.split()[0])
            except ValueError:
                return None
        time.sleep(0.001)
    return None


def sleep_until(instant: float) -> None:
    """Return at the epoch instant (at once if it has passed)."""
    while True:
        left = instant - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.05) if left > 0.002 else 0.0002)


def available_bytes(device: DeviceInfo) -> int:
    """Memory a run may still allocate on ``device``: free host memory, free CUDA memory, or the
    OpenCL device's size."""
    if device.kind == "cpu":
        return int(psutil.virtual_memory().available)
    if device.backend == "cuda":
        try:
            import cupy  # noqa: PLC0415 - optional: CUDA through CuPy

            with cupy.cuda.Device(int(device.spec.split(":")[1])):
                free, _total = cupy.cuda.runtime.memGetInfo()
            return int(free)
        except Exception:  # noqa: BLE001 - no CUDA runtime answer: the device's size
            return int(device.memory_bytes)
    return int(device.memory_bytes)


def checksum(coords: np.ndarray, counters: np.ndarray) -> float:
    """Sum of x, px, y, py, zeta, delta over the surviving particles."""
    alive = counters[0] > 0
    if alive.all():  # the usual case: the same sum without copying the survivors out (10 M: 0.3 s)
        return float(np.sum(coords[:6]))
    return float(np.sum(coords[:6, alive]))


@dataclass
class Prepared:
    """A run set up and waiting at the barrier: its device, engine (particles loaded) and timings."""

    device: DeviceInfo
    engine: Engine
    n_elements: int
    setup_s: float  # lattice + build + particles + warm-up + upload
    upload_s: float
    compile_s: float | None = None  # the engine's build in this set-up (None: engine.compile_s)


def line_for(cfg: RunConfig) -> tuple[Any, PackedLine | None]:
    """The run's line (None for simpletrack, which reads the cached packed line) and packed line
    (None when the line has elements simpletrack lacks)."""
    if cfg.engine == "simpletrack":
        return None, get_packed(cfg.lattice)  # cached; rejects unsupported elements
    line = get_line_cached(cfg.lattice)
    try:
        return line, pack_line(line)
    except UserError:  # elements simpletrack lacks: optics from xtrack's twiss
        return line, None


def reference_optics(line: Any, packed: PackedLine | None) -> tuple[dict, int, float, float]:
    """The linear optics particles are matched to, the number of elements, beta0 and gamma0: from the
    packed line, else from xtrack's twiss of the line (before any engine builds on it)."""
    if packed is not None:
        return linear_optics(packed), packed.n_elements, packed.beta0, packed.gamma0
    ref = line.particle_ref
    return xtrack_optics(line), len(line.element_names), float(ref.beta0[0]), float(ref.gamma0[0])


def warm_up_and_upload(engine: Engine, cfg: RunConfig, coords: np.ndarray, counters: np.ndarray) -> float:
    """The warm-up turns on the first particles (at most WARMUP_PARTICLES), then the upload of all of
    them; returns the upload's seconds."""
    if cfg.warmup_turns > 0:
        n_warm = min(cfg.particles, WARMUP_PARTICLES)
        engine.upload(coords[:, :n_warm], counters[:, :n_warm])
        engine.track(cfg.warmup_turns)
        engine.release()
    t0 = time.perf_counter()
    engine.upload(coords, counters)
    return time.perf_counter() - t0


Track = Callable[[Prepared], RunRecord]  # from the barrier to the record, of the run just prepared
NO_BARRIER = Barrier()


class WarmRunner:
    """Runs cell after cell in one process (``python -m sharebench.workloads.replica --serve``), keeping
    what the last cell's set-up made: the resolved device, the built engine (kernel compiled, context
    open) and the particle state of the last size, in page-locked host memory where the engine has it
    (``keep``). A cell's set-up is then the memory checks, the warm-up turns and the upload. A fresh
    replica (:func:`run_replica`) is a runner that prepares, runs one cell and exits: the same set-up
    and timed window. ``cells``: cells this process ran before the current one.

    Per cell: :meth:`prepare` (everything before the barrier), then :func:`track_and_record` (barrier,
    timed window, record); :meth:`run` is the two.
    """

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep  # page-locked copies of the particles, for the next cells' uploads
        self.cells = 0
        self._devices: dict[str, DeviceInfo] = {}
        self._engine: Engine | None = None
        self._engine_key: tuple | None = None
        self._ref: tuple[dict, int, float, float] | None = None
        self._state: tuple[np.ndarray, np.ndarray] | None = None
        self._state_key: tuple | None = None

    def prepare(self, cfg: RunConfig) -> Prepared:
        """Everything before the barrier: device, memory checks, lattice, engine build, particles,
        warm-up turns, upload; reusing the engine and particles of earlier cells where they match."""
        t_setup = time.perf_counter()
        device = self._devices.get(cfg.device)
        if device is None:
            device = self._devices[cfg.device] = resolve_device(cfg.device)
        check_fits(cfg.particles, cfg.mem_limit_bytes, cfg.engine, what="memory limit (mem_limit_bytes)")
        if self._engine is not None:
            self._engine.release()  # the last cell's particles: not counted against this one's memory
        check_fits(
            cfg.particles, available_bytes(device), cfg.engine, what=f"free memory of {device.spec} ({device.name})"
        )
        engine_key = (cfg.engine, device.spec, cfg.lattice, cfg.block_size, cfg.optimize, tuple(cfg.cpus or ()))
        if engine_key != self._engine_key or self._engine is None:
            self._engine = self._state = self._engine_key = self._state_key = None
            line, packed = line_for(cfg)
            self._ref = reference_optics(line, packed)  # before the engine builds on the line
            engine = make_engine(cfg, device, line, packed)
            engine.build()
            self._engine, self._engine_key = engine, engine_key
        engine = self._engine
        assert self._ref is not None  # set with the engine
        optics, n_el, beta0, gamma0 = self._ref
        state_key = (cfg.particles, cfg.seed, cfg.nemitt_x, cfg.nemitt_y, cfg.sigma_z, cfg.sigma_delta)
        if state_key != self._state_key or self._state is None:
            self._state = self._state_key = None  # the old size's buffers go before the new ones are made
            x6 = shared_particles(
                optics, beta0, gamma0, cfg.particles, cfg.seed, cfg.nemitt_x, cfg.nemitt_y, cfg.sigma_z, cfg.sigma_delta
            )
            x, px, y, py, zeta, delta = x6
            coords, counters = make_state(x, px, y, py, zeta, delta, beta0)
            keep = getattr(engine, "keep_on_host", None) if self.keep else None  # page-locked: fast uploads
            self._state = keep(coords, counters) if keep is not None else (coords, counters)
            self._state_key = state_key
        upload_s = warm_up_and_upload(engine, cfg, *self._state)
        compile_s, engine.compile_s = engine.compile_s, 0.0  # the build is counted in the cell that made it
        run = Prepared(device, engine, n_el, time.perf_counter() - t_setup, upload_s)
        run.compile_s = compile_s
        return run

    def prime(self, cfg: RunConfig) -> None:
        """Set up as for ``cfg`` (context, engine, particles, warm-up) and free the device's copy: the
        first cell then finds everything but the upload done. Its build counts in that cell."""
        cfg.validate()
        pin_cpus(cfg.cpus)
        try:
            run = self.prepare(cfg)
        except BaseException:
            self._engine = self._state = self._engine_key = self._state_key = None
            raise
        run.engine.release()
        run.engine.compile_s = run.compile_s or 0.0

    def run(self, cfg: RunConfig, track: Track | None = None) -> RunRecord:
        """One cell in this process: set-up (warm where it can), barrier, track, record. ``track``: what
        runs from the barrier on (default :func:`track_and_record` without a barrier, the study's one
        timed window; a replica's barrier and pattern come from ``sharebench.workloads``, a layer above)."""
        cfg.validate()
        pin_cpus(cfg.cpus)
        try:
            rec = (track or partial(track_and_record, cfg))(self.prepare(cfg))
        except BaseException:
            self._engine = self._state = self._engine_key = self._state_key = None  # rebuild after a failure
            raise
        rec.extra["warm_cells"] = self.cells
        self.cells += 1
        return rec


def record(
    cfg: RunConfig,
    run: Prepared,
    track_start: float,
    track_s: float,
    download_s: float,
    coords: np.ndarray,
    counters: np.ndarray,
) -> RunRecord:
    """The run's record from its timings and the particles read back."""
    pt = cfg.particles * cfg.turns
    n_el = run.n_elements
    device = run.device
    return RunRecord(
        engine=cfg.engine,
        context=device.backend,
        device=device.spec,
        device_name=device.name,
        device_uuid=device.uuid,
        particles=cfg.particles,
        turns=cfg.turns,
        elements=n_el,
        setup_s=run.setup_s,
        transfer_s=run.upload_s + download_s,
        track_s=track_s,
        track_start=track_start,
        track_end=track_start + track_s,
        particle_turns_per_s=pt / track_s if track_s > 0 else float("inf"),
        element_passes_per_s=pt * n_el / track_s if track_s > 0 else float("inf"),
        survived=int(np.sum(counters[0] > 0)),
        checksum=checksum(coords, counters),
        host=socket.gethostname(),
        pid=os.getpid(),
        replica=cfg.replica,
        compile_s=run.engine.compile_s if run.compile_s is None else run.compile_s,
        extra={"kernel_cache_hit": bool(run.engine.cache_hit), "lattice": cfg.lattice or "generated"},
    )


def run_replica(cfg: RunConfig | dict, track: Track | None = None, *, barrier: Barrier = NO_BARRIER) -> RunRecord:
    """One run (a fresh replica: a runner that prepares and runs one cell), its timed window after
    ``barrier`` (unless ``track`` says what runs from the barrier on); raises UserError for bad input.
    See docs/architecture.md."""
    if isinstance(cfg, dict):
        cfg = RunConfig.from_dict(cfg)
    return WarmRunner(keep=False).run(cfg, track or partial(track_and_record, cfg, barrier=barrier))


def track_and_record(cfg: RunConfig, run: Prepared, barrier: Barrier = NO_BARRIER) -> RunRecord:
    """Wait at the barrier, track (the timed window), read back, release; the run's record."""
    wait_at_barrier(barrier)

    track_start = time.time()
    t0 = time.perf_counter()
    run.engine.track(cfg.turns)
    track_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    coords, counters = run.engine.download()
    download_s = time.perf_counter() - t0
    run.engine.release()
    return record(cfg, run, track_start, track_s, download_s, coords, counters)
