"""RunConfig (what one replica does) and RunRecord (what it measured).

A record is stored as the JSON document of kind ``"record"`` (``sharebench.results.store``), whose
``schema_version`` versions it."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

from sharebench.devices import check_spec
from sharebench.errors import UserError
from sharebench.kernel.engines import RUN_ENGINES, check_engine
from sharebench.patterns import parse_pattern


def check_exec(command: str | None, timing: str) -> None:
    """The exec engine's options: a command given, a known timing; UserError naming the bad one."""
    if command is None or not str(command).strip():
        raise UserError("--engine exec needs a command: --exec 'CMD ARGS'")
    if timing not in ("protocol", "process"):
        raise UserError(f"bad exec timing {timing!r}; allowed: protocol, process")


class WorkloadFields(Protocol):
    """What :meth:`RunConfig.from_workload` reads of a workload (``sharebench.workloads.Workload``, a
    layer above this one, which the kernel does not import)."""

    @property
    def engine(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def lattice(self) -> str | None: ...
    @property
    def seed(self) -> int: ...
    @property
    def command(self) -> str | None: ...
    @property
    def timing(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def pattern(self) -> str: ...
    @property
    def neighbour_pattern(self) -> str: ...
    @property
    def bursts(self) -> int: ...
    @property
    def patterned(self) -> bool: ...


@dataclass
class RunConfig:
    """One replica run. See docs/architecture.md (Kernel) for the barrier."""

    engine: str = "simpletrack"
    device: str = "auto"
    lattice: str | None = None  # None: the generated LHC-like ring
    particles: int = 10_000
    turns: int = 10
    seed: int = 1
    nemitt_x: float = 2.5e-6  # normalised emittance [m]
    nemitt_y: float = 2.5e-6
    sigma_z: float = 0.05  # [m]
    sigma_delta: float = 1e-4
    warmup_turns: int = 1
    start_at: float | None = None  # epoch seconds
    start_file: str | None = None
    ready_file: str | None = None
    mem_limit_bytes: int | None = None
    cpus: list[int] | None = None
    replica: int = 0
    optimize: bool = True  # xtrack engine: line.optimize_for_tracking()
    block_size: int = 128  # GPU work-group / block size (simpletrack)
    replicas: int = 1  # replicas in the cell (SHAREBENCH_REPLICAS of the exec engine)
    exec_command: str | None = None  # exec engine: the program (sharebench.workloads.protocol)
    exec_timing: str = "protocol"  # exec engine: protocol (its own result) or process (the whole process)
    exec_name: str | None = None  # exec engine: the workload's name in the tables (default: from the command)
    # replica patterns (sharebench.patterns, issue 23): replica 0 follows ``pattern`` for ``bursts`` bursts, the
    # others ``neighbours`` until ``stop_file`` exists; think times and arrivals seeded by (seed, pattern_seed,
    # replica). All batch (the default): the study's saturated replica, one timed window of ``turns``
    pattern: str = "batch"
    neighbours: str = "batch"
    bursts: int = 30
    pattern_seed: int = 0
    stop_file: str | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """UserError naming the first bad field and what is allowed; normalises engine, device, cpus."""
        self.engine = check_engine(self.engine, RUN_ENGINES)
        self.device = check_spec(self.device)
        for name, lo in (("particles", 1), ("turns", 1), ("warmup_turns", 0), ("block_size", 1)):
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
        if self.engine == "exec":
            check_exec(self.exec_command, self.exec_timing)
        self.pattern = parse_pattern(self.pattern).label
        self.neighbours = parse_pattern(self.neighbours).label
        for name, lo in (("bursts", 1), ("pattern_seed", 0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise UserError(f"bad {name} {v!r}: an integer >= {lo} is allowed")

    @property
    def patterned(self) -> bool:
        """Whether any replica of the cell follows a pattern other than batch."""
        return self.pattern != "batch" or self.neighbours != "batch"

    @property
    def role(self) -> str:
        """``victim`` (replica 0, measured against the same pattern alone) or ``neighbour``."""
        return "victim" if self.replica == 0 else "neighbour"

    @property
    def own_pattern(self) -> str:
        """The label of the pattern this replica follows: ``pattern`` for the victim, else ``neighbours``."""
        return self.pattern if self.replica == 0 else self.neighbours

    @property
    def replica_seed(self) -> list[int]:
        """The seed of this replica's think times or arrivals (numpy SeedSequence entropy)."""
        return [self.seed, self.pattern_seed, self.replica]

    @classmethod
    def from_workload(cls, workload: WorkloadFields, *, device: str | None = None, **options: Any) -> RunConfig:
        """The config of one replica of ``workload`` (on ``device`` when given, e.g. the sweep's resolved
        device; else the workload's); ``options``: the other fields (particles, turns, start_at ...)."""
        exec_fields: dict[str, Any] = (
            {"exec_command": workload.command, "exec_timing": workload.timing, "exec_name": workload.name}
            if workload.engine == "exec"
            else {}
        )
        pattern_fields: dict[str, Any] = (
            {"pattern": workload.pattern, "neighbours": workload.neighbour_pattern, "bursts": workload.bursts}
            if workload.patterned
            else {}
        )
        return cls(
            engine=workload.engine,
            device=device or workload.device,
            lattice=workload.lattice,
            seed=workload.seed,
            **exec_fields,
            **pattern_fields,
            **options,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RunConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise UserError(f"unknown run config field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        return cls(**d)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> RunConfig:
        try:
            with open(path) as fh:
                d = json.load(fh)
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"run config {str(path)!r} unreadable: {exc}") from None
        if not isinstance(d, dict):
            raise UserError(f"run config {str(path)!r} is not a JSON object")
        return cls.from_dict(d)


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
