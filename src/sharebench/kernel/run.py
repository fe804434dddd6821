"""One replica run: build, particles, warm-up, barrier, track, synchronise."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import numpy as np

from sharebench.errors import UserError
from sharebench.kernel.config import RunConfig, RunRecord
from sharebench.kernel.memory import check_fits


def pin_cpus(cpus) -> None:
    """Pin this process to cpus and size OpenMP / PoCL threads to them.

    Must run before any OpenCL/CPU context is created (the replica process
    calls it first)."""
    if not cpus:
        return
    try:
        os.sched_setaffinity(0, set(int(c) for c in cpus))
    except (OSError, ValueError) as exc:
        allowed = sorted(os.sched_getaffinity(0))
        raise UserError(f"cannot pin to cpus {list(cpus)}: {exc}; this process may use {allowed}") from None
    n = str(len(cpus))
    os.environ["OMP_NUM_THREADS"] = n
    os.environ["POCL_MAX_PTHREAD_COUNT"] = n
    os.environ["POCL_CPU_MAX_CU_COUNT"] = n


def wait_at_barrier(cfg: RunConfig) -> None:
    """Touch ready_file, wait for start_file (an epoch instant if it holds a
    float), then sleep until start_at."""
    if cfg.ready_file:
        Path(cfg.ready_file).parent.mkdir(parents=True, exist_ok=True)
        Path(cfg.ready_file).write_text(f"{os.getpid()} {time.time():.6f}\n")
    if cfg.start_file:
        path = Path(cfg.start_file)
        while not path.exists():
            time.sleep(0.0005)
        instant = None
        for _ in range(20):  # the writer may still be writing
            try:
                text = path.read_text().strip()
            except OSError:
                text = ""
            if text:
                try:
                    instant = float(text.split()[0])
                except ValueError:
                    instant = None
                break
            time.sleep(0.001)
        if instant is not None:
            _sleep_until(instant)
    if cfg.start_at is not None:
        _sleep_until(float(cfg.start_at))


def _sleep_until(instant: float) -> None:
    while True:
        left = instant - time.time()
        if left <= 0:
            return
        time.sleep(min(left, 0.05) if left > 0.002 else 0.0002)


def available_bytes(device) -> int:
    if device.kind == "cpu":
        import psutil

        return int(psutil.virtual_memory().available)
    if device.backend == "cuda":
        try:
            import cupy

            with cupy.cuda.Device(int(device.spec.split(":")[1])):
                free, _total = cupy.cuda.runtime.memGetInfo()
            return int(free)
        except Exception:
            return int(device.memory_bytes)
    return int(device.memory_bytes)


def make_engine(cfg: RunConfig, device, line, packed=None):
    threads = len(cfg.cpus) if cfg.cpus else None
    if cfg.engine == "simpletrack":
        from sharebench.kernel.simpletrack import SimpletrackEngine, pack_line

        return SimpletrackEngine(device, packed if packed is not None else pack_line(line), threads=threads,
                                 block_size=cfg.block_size)
    from sharebench.kernel.xtrack_engine import XtrackEngine

    return XtrackEngine(device, line, threads=threads, optimize=cfg.optimize)


def checksum(coords: np.ndarray, counters: np.ndarray) -> float:
    alive = counters[0] > 0
    return float(np.sum(coords[:6, alive]))


def run_replica(cfg: RunConfig) -> RunRecord:
    """One run; raises UserError for bad input. See docs/architecture.md."""
    from sharebench.kernel.devices import resolve_device
    from sharebench.kernel.distribution import linear_optics, matched_gaussian, xtrack_optics
    from sharebench.kernel.lattice import get_line_cached, get_packed
    from sharebench.kernel.simpletrack import make_state, pack_line

    if isinstance(cfg, dict):
        cfg = RunConfig.from_dict(cfg)
    cfg.validate()
    pin_cpus(cfg.cpus)
    t_setup = time.perf_counter()
    device = resolve_device(cfg.device)
    # refuse before allocating anything large
    check_fits(cfg.particles, cfg.mem_limit_bytes, cfg.engine, what="memory limit (mem_limit_bytes)")
    check_fits(cfg.particles, available_bytes(device), cfg.engine, what=f"free memory of {device.spec} ({device.name})")

    if cfg.engine == "simpletrack":
        packed = get_packed(cfg.lattice)  # cached; rejects unsupported elements
        line = None
    else:
        line = get_line_cached(cfg.lattice)
        try:
            packed = pack_line(line)
        except UserError:  # elements simpletrack lacks: optics from xtrack's twiss
            packed = None
    if packed is not None:
        optics = linear_optics(packed)
        n_el, beta0, gamma0 = packed.n_elements, packed.beta0, packed.gamma0
    else:
        optics = xtrack_optics(line)
        ref = line.particle_ref
        n_el, beta0, gamma0 = len(line.element_names), float(ref.beta0[0]), float(ref.gamma0[0])
    engine = make_engine(cfg, device, line, packed)
    engine.build()

    x6 = matched_gaussian(optics, beta0, gamma0, cfg.particles, cfg.seed, cfg.nemitt_x, cfg.nemitt_y, cfg.sigma_z,
                          cfg.sigma_delta)
    coords, counters = make_state(*x6, beta0)
    if cfg.warmup_turns > 0:
        engine.upload(coords[:, : min(cfg.particles, 4096)], counters[:, : min(cfg.particles, 4096)])
        engine.track(cfg.warmup_turns)
        engine.release()
    t0 = time.perf_counter()
    engine.upload(coords, counters)
    upload_s = time.perf_counter() - t0
    setup_s = time.perf_counter() - t_setup

    wait_at_barrier(cfg)

    track_start = time.time()
    t0 = time.perf_counter()
    engine.track(cfg.turns)
    track_s = time.perf_counter() - t0
    track_end = track_start + track_s

    t0 = time.perf_counter()
    out_coords, out_counters = engine.download()
    download_s = time.perf_counter() - t0
    engine.release()

    pt = cfg.particles * cfg.turns
    return RunRecord(
        engine=cfg.engine,
        context=device.backend,
        device=device.spec,
        device_name=device.name,
        device_uuid=device.uuid,
        particles=cfg.particles,
        turns=cfg.turns,
        elements=n_el,
        setup_s=setup_s,
        transfer_s=upload_s + download_s,
        track_s=track_s,
        track_start=track_start,
        track_end=track_end,
        particle_turns_per_s=pt / track_s if track_s > 0 else float("inf"),
        element_passes_per_s=pt * n_el / track_s if track_s > 0 else float("inf"),
        survived=int(np.sum(out_counters[0] > 0)),
        checksum=checksum(out_coords, out_counters),
        host=socket.gethostname(),
        pid=os.getpid(),
        replica=cfg.replica,
        compile_s=engine.compile_s,
        extra={"kernel_cache_hit": bool(engine.cache_hit), "lattice": cfg.lattice or "generated"},
    )
