"""The Workload: what every replica of a sweep runs, as one value from the command line to the replica.

A sweep measures one workload: a tracker (``simpletrack``, ``xtrack``) on a lattice with a seed, or any
program (``exec``: its command, its timing and its name in the tables), on a device spec. The value
travels whole: the CLI builds it, ``SweepConfig.workload`` carries it, each replica's job
(:class:`sharebench.workloads.job.ReplicaJob`) carries it to the replica, and the KFP pipelines pass it
as one ``workload`` struct parameter.
:meth:`Workload.from_dict` is the one place a dict (a KFP parameter, ``sweep.json``) becomes a Workload:
a one-line UserError names a bad key or value.

Sizes stay a sweep axis: a tracker's size is a particle count, a program's a work size
(``SHAREBENCH_WORK``) run for one "turn" (:attr:`Workload.size_name`, :meth:`Workload.turns`).

Defined here once: a program (:data:`EXEC`, :attr:`Workload.is_program`: its work is one turn; under
process timing its replicas start fresh every cell, :attr:`Workload.starts_fresh`), a patterned workload (:attr:`Workload.patterned`) and the victim of a cell
under a pattern (replica :data:`VICTIM`, :func:`role`; :meth:`Workload.pattern_of` a replica's pattern).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields
from typing import Any

from sharebench.devices import check_spec
from sharebench.errors import UserError
from sharebench.kernel import RUN_ENGINES, check_engine
from sharebench.parse import size_name, whole_number
from sharebench.patterns import BATCH, MAX_BURSTS, parse_pattern, saturated
from sharebench.workloads.protocol import check_exec_timing, workload_name

EXEC = "exec"  # the engine that runs any program through the replica protocol (sharebench.workloads.protocol)
EXEC_KEYS = ("command", "timing", "name")  # the exec engine's own keys
VICTIM = 0  # under a pattern: replica 0, which follows ``pattern``; the others are its neighbours
ROLES = ("victim", "neighbour")


def role(replica: int) -> str:
    """A replica's role in its cell: ``victim`` (replica :data:`VICTIM`, measured against the same
    pattern alone) or ``neighbour``."""
    return ROLES[0] if int(replica) == VICTIM else ROLES[1]


@dataclass(frozen=True)
class Workload:
    """What each replica runs. Normalised on construction (engine and device lowercased, '' -> None);
    UserError naming the first bad field."""

    engine: str = "simpletrack"  # simpletrack, xtrack, or exec (any program: ``command``)
    device: str = "auto"  # device spec inside a replica: auto, cpu, cuda[:N], opencl[:P.D]
    command: str | None = None  # exec: the program each replica runs (replica protocol)
    timing: str = "protocol"  # exec: protocol (the program's own window) or process (the whole process)
    name: str | None = None  # exec: the workload's name in the tables (default: from the command)
    lattice: str | None = None  # trackers: Xsuite line JSON (a path is kept as its text); None: the generated ring
    seed: int = 1  # trackers: seed of the particle distribution
    pattern: str = BATCH.label  # how replica 0 (the victim) uses the device (sharebench.patterns; its label)
    neighbours: str | None = None  # how the other replicas of a sharing cell do (None: as ``pattern``)
    bursts: int | None = (
        None  # under a pattern: the most bursts or requests a user runs in a cell (None: the rule's cap)
    )

    def __post_init__(self) -> None:
        def put(key: str, value: Any) -> None:
            object.__setattr__(self, key, value)

        for key in ("engine", "device", "timing", "pattern"):
            if not isinstance(getattr(self, key), str):
                raise UserError(f"bad workload {key} {getattr(self, key)!r}: a string is allowed")
        if isinstance(self.lattice, os.PathLike):
            put("lattice", os.fspath(self.lattice))
        for key in ("command", "name", "lattice", "neighbours"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, str):
                raise UserError(f"bad workload {key} {value!r}: a string (or nothing) is allowed")
            put(key, (value.strip() or None) if isinstance(value, str) else None)
        put("engine", check_engine(self.engine, RUN_ENGINES))
        put("device", check_spec(self.device))
        put("timing", check_exec_timing(self.timing))
        put("seed", whole_number("workload seed", self.seed, 0))
        if not self.pattern.strip():
            raise UserError("bad workload pattern '': a pattern name is allowed (default: batch)")
        put("pattern", parse_pattern(self.pattern).label)
        if self.neighbours is not None:
            put("neighbours", parse_pattern(self.neighbours).label)
        bursts: Any = self.bursts
        if bursts is None or bursts == "":  # a KFP struct holds no null: '' is none given
            put("bursts", None)
        else:
            put("bursts", whole_number("workload bursts (--bursts)", self.bursts, 1, MAX_BURSTS))
        if self.is_program:
            if self.command is None:
                raise UserError("workload engine 'exec' needs a command: the program each replica runs")
        elif self.command is not None or self.name is not None or self.timing != "protocol":
            raise UserError(
                f"workload command, timing and name need engine 'exec'; the engine is {self.engine!r} "
                f"(command {self.command!r}, timing {self.timing!r}, name {self.name!r})"
            )

    @classmethod
    def from_dict(cls, d: Any) -> Workload:
        """The Workload of a dict; missing keys take their defaults. UserError naming a bad key or value."""
        if not isinstance(d, dict):
            raise UserError(f"bad workload {d!r}: a JSON object with keys {', '.join(KEYS)} is allowed")
        unknown = sorted(str(k) for k in d if k not in KEYS)
        if unknown:
            raise UserError(f"unknown workload key(s) {', '.join(map(repr, unknown))}; allowed: {', '.join(KEYS)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready, '' where a field is not given (a KFP struct holds no null);
        ``from_dict(w.to_dict()) == w``."""
        return {k: "" if v is None else v for k, v in asdict(self).items()}

    @property
    def is_program(self) -> bool:
        """Any program through the replica protocol (the exec engine), not a tracker: its work is
        SHAREBENCH_WORK in one turn, and under MPS the clients are the programs the replicas start."""
        return self.engine == EXEC

    @property
    def starts_fresh(self) -> bool:
        """Whether every replica of every cell is a new process, never a warm one kept from an earlier
        cell (``sharebench.sharing.pool``): a program under process timing (the harness times the whole
        process). A program under protocol timing runs in warm replicas, which keep it between cells
        when it serves cells (``sharebench.workloads.protocol``) and start it afresh when it does not."""
        return self.is_program and self.timing == "process"

    @property
    def label(self) -> str:
        """The workload's name in the tables (the ``engine`` column): the engine, or the program's name."""
        if not self.is_program:
            return self.engine
        return self.name or workload_name(self.command)

    @property
    def table_timing(self) -> str:
        """The ``exec_timing`` column: the program's timing; '' for the trackers."""
        return self.timing if self.is_program else ""

    @property
    def size_name(self) -> str:
        """What a size of the sweep is called in an error: a program's work size, a tracker's particle count."""
        return size_name(self.engine)

    def turns(self, turns: int) -> int:
        """The turns a replica runs: a program's work is SHAREBENCH_WORK alone (one turn)."""
        return 1 if self.is_program else turns

    def run_options(self) -> dict[str, Any]:
        """The exec engine's settings (none for the trackers) as ``sweep.json`` of the releases before this
        value kept them among its run options (``sharebench.sweep.resume`` compares a folder's identity)."""
        if not self.is_program:
            return {}
        opts: dict[str, Any] = {"exec_command": self.command, "exec_timing": self.timing}
        if self.name:
            opts["exec_name"] = self.name
        return opts

    @property
    def neighbour_pattern(self) -> str:
        """The label of the pattern the neighbours (replicas 1..N-1 of a sharing cell) follow."""
        return self.neighbours or self.pattern

    @property
    def patterned(self) -> bool:
        """Whether any replica follows a pattern other than batch (False: the study's saturated replicas)."""
        return not (saturated(self.pattern) and saturated(self.neighbour_pattern))

    def pattern_of(self, replica: int) -> str:
        """The label of the pattern replica ``replica`` of a cell follows: the victim's, or the neighbours'."""
        return self.pattern if role(replica) == ROLES[0] else self.neighbour_pattern

    def describe(self) -> str:
        """One line: the engine and what it runs."""
        if self.is_program:
            text = f"exec: {self.command!r} as {self.label} ({self.timing} timing; work = SHAREBENCH_WORK)"
        else:
            text = f"{self.engine}, lattice {self.lattice or 'generated LHC-like ring'}"
        if not self.patterned:
            return text
        cap = "until decided" if self.bursts is None else f"at most {self.bursts} bursts a user"
        text += f", pattern {self.pattern} ({cap})"
        return text + (f", neighbours {self.neighbour_pattern}" if self.neighbour_pattern != self.pattern else "")


KEYS = tuple(f.name for f in fields(Workload))
DEFAULT_WORKLOAD: dict[str, Any] = Workload().to_dict()
