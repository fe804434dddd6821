"""RunConfig (the kernel's own run), Barrier (where a replica waits before its timed window) and
RunRecord (what a run measured).

A record is stored as the JSON document of kind ``"record"`` (``sharebench.results.store``), whose
``schema_version`` versions it."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from sharebench.devices import check_spec
from sharebench.errors import UserError
from sharebench.kernel.engines import RUN_ENGINES, check_engine


@dataclass(frozen=True)
class Barrier:
    """Where a replica waits between its set-up and its timed window (docs/architecture.md, Kernel): it
    touches ``ready_file``, waits for ``start_file`` (an epoch instant to sleep until, when it holds
    one), then sleeps until ``start_at`` (epoch s; the pods of one cell agree on it). Empty: no wait."""

    ready_file: str | None = None
    start_file: str | None = None
    start_at: float | None = None

    def __post_init__(self) -> None:
        for name in ("ready_file", "start_file"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, (str, os.PathLike)):
                raise UserError(f"bad barrier {name} {v!r}: a path (or nothing) is allowed")
            object.__setattr__(self, name, os.fspath(v) if v else None)
        if self.start_at is not None:
            if isinstance(self.start_at, bool) or not isinstance(self.start_at, (int, float)):
                raise UserError(f"bad start_at {self.start_at!r}: an epoch instant in seconds is allowed")
            object.__setattr__(self, "start_at", float(self.start_at))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Any) -> Barrier:
        known = tuple(f.name for f in fields(cls))
        if not isinstance(d, dict) or set(d) - set(known):
            raise UserError(f"bad barrier {d!r}: a JSON object with keys {', '.join(known)} is allowed")
        return cls(**d)


BARRIER_KEYS = tuple(f.name for f in fields(Barrier))


@dataclass
class RunConfig:
    """The kernel's own run: what one tracker run does (engine, device, lattice, particles, turns, beam,
    engine options, the cores and memory it may use). A replica of a sharing cell runs one inside its
    job (``sharebench.workloads.ReplicaJob``: the workload, the barrier, the pattern)."""

    engine: str = "simpletrack"
    device: str = "auto"
    lattice: str | None = None  # None: the generated LHC-like ring
    particles: int = 10_000  # the exec engine: its work size (SHAREBENCH_WORK)
    turns: int = 10
    seed: int = 1
    nemitt_x: float = 2.5e-6  # normalised emittance [m]
    nemitt_y: float = 2.5e-6
    sigma_z: float = 0.05  # [m]
    sigma_delta: float = 1e-4
    warmup_turns: int = 1
    mem_limit_bytes: int | None = None
    cpus: list[int] | None = None
    replica: int = 0  # the run's index in its cell, which its record carries
    optimize: bool = True  # xtrack engine: line.optimize_for_tracking()
    block_size: int = 128  # GPU work-group / block size (simpletrack)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """UserError naming the first bad field and what is allowed; normalises engine, device, cpus."""
        self.engine = check_engine(self.engine, RUN_ENGINES)
        self.device = check_spec(self.device)
        for name, lo in (("particles", 1), ("turns", 1), ("warmup_turns", 0), ("block_size", 1), ("replica", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise UserError(f"bad {name} {v!r}: an integer >= {lo} is allowed")
        for name in ("nemitt_x", "nemitt_y", "sigma_z", "sigma_delta"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or v < 0:
                raise UserError(f"bad {name} {v!r}: a number >= 0 is allowed")
        if self.mem_limit_bytes is not None and (
            not isinstance(self.mem_limit_bytes, int) or self.mem_limit_bytes <= 0
        ):
            raise UserError(f"bad mem_limit_bytes {self.mem_limit_bytes!r}: a positive integer is allowed")
        if self.cpus is not None:
            if (
                not isinstance(self.cpus, (list, tuple))
                or not self.cpus
                or not all(isinstance(c, int) and c >= 0 for c in self.cpus)
            ):
                raise UserError(f"bad cpus {self.cpus!r}: a non-empty list of core numbers is allowed")
            self.cpus = list(self.cpus)
        if self.lattice is not None:
            self.lattice = str(self.lattice)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise UserError(f"unknown run config field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        return cls(**d)


RUN_KEYS = tuple(f.name for f in fields(RunConfig))


@dataclass
class RunRecord:
    """What one replica measured (units in the names; times in seconds)."""

    engine: str
    context: str  # "cpu", "cuda", "opencl"
    device: str  # resolved spec, e.g. "cuda:0", "opencl:0.0", "cpu"
    device_name: str
    device_uuid: str
    particles: int
    turns: int
    elements: int
    setup_s: float  # lattice + build + particles + warm-up (before the barrier)
    transfer_s: float  # host->device upload of the particles + device->host download
    track_s: float  # the timed window: tracking alone, synchronised
    track_start: float  # epoch seconds
    track_end: float
    particle_turns_per_s: float
    element_passes_per_s: float
    survived: int
    checksum: float  # sum of x, px, y, py, zeta, delta over surviving particles
    host: str
    pid: int
    replica: int
    compile_s: float = 0.0  # kernel build (part of setup_s); small when the cache is hit
    exec_timing: str = ""  # exec engine: protocol (the program's own window) or process (the whole process)
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RunRecord:
        """A record from its dict form (as ``read_json(path, "record")`` returns it); other keys are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})
