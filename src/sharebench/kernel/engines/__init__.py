"""Tracking engines: what builds the tracking code for a device, loads particles, tracks, reads back.

Every engine follows :class:`Engine`; :func:`make_engine` builds the one a run asks for. Modules:
``simpletrack`` (our Simpletrack-style kernel, one C source, a backend class per context: CPU,
OpenCL, CUDA) and ``xtrack`` (Xsuite's tracker).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from sharebench.devices import DeviceInfo
from sharebench.kernel.elements import PackedLine, pack_line
from sharebench.kernel.engines.simpletrack import SimpletrackEngine
from sharebench.kernel.engines.xtrack import XtrackEngine

# the engines' names, kept light in parse (the CLI checks --engine before the trackers load): a tracker, or
# with "exec" any program (sharebench.workloads.protocol)
from sharebench.parse import ENGINES as ENGINES
from sharebench.parse import RUN_ENGINES as RUN_ENGINES
from sharebench.parse import check_engine as check_engine


class Engine(Protocol):
    """What a run asks of an engine: build once, then load, track and read back particles."""

    name: str
    compile_s: float  # seconds build() took (small when the kernel cache is hit)
    cache_hit: bool  # build() found the compiled kernel in a cache

    def build(self) -> float:
        """Build or load the tracking code for the device; returns compile_s."""
        ...

    def upload(self, coords: np.ndarray, counters: np.ndarray) -> None:
        """Load particles: coords (9, n) float64, counters (3, n) int64 (kernel.state)."""
        ...

    def track(self, nturns: int) -> None:
        """Track the loaded particles nturns; returns when the device is done."""
        ...

    def download(self) -> tuple[np.ndarray, np.ndarray]:
        """The particles (coords, counters) on the host, in the order they were loaded."""
        ...

    def release(self) -> None:
        """Free the particles on the device."""
        ...


class EngineOptions(Protocol):
    """The options of a run that choose and size an engine (a RunConfig has them)."""

    engine: str
    cpus: list[int] | None
    block_size: int
    optimize: bool


def make_engine(cfg: EngineOptions, device: DeviceInfo, line: Any, packed: PackedLine | None = None) -> Engine:
    """The engine ``cfg.engine`` on ``device`` for the xtrack ``line`` (simpletrack: or its packed
    form, when given), with as many threads as ``cfg.cpus`` on the CPU."""
    threads = len(cfg.cpus) if cfg.cpus else None
    if check_engine(cfg.engine) == "simpletrack":
        return SimpletrackEngine(
            device, packed if packed is not None else pack_line(line), threads=threads, block_size=cfg.block_size
        )
    return XtrackEngine(device, line, threads=threads, optimize=cfg.optimize)
