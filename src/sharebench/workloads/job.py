"""ReplicaJob: one replica's job, the one value a replica process is given.

A job carries the :class:`~sharebench.workloads.workload.Workload` itself (what every replica of the
sweep runs), the kernel's own run (:class:`~sharebench.kernel.RunConfig`: particles or work size,
turns, beam, engine options, this replica's device, cores, memory limit and index), the cell's replica
count, the start barrier (:class:`~sharebench.kernel.Barrier`), the pattern's cell fields (the
cell's pattern seed, the stop file every replica stops at, the victim's cap: its most bursts, or an open
loop's window in seconds, which the sweep sets from its sample rule, ``sharebench.analysis.samples``) and
the cell attempt it belongs to (``attempt``: every record the replica writes carries it, and the executor
reads no record of another attempt, so a replica of a killed sweep never passes for one of the sweep that
resumes it). The run's engine, lattice and seed are the
workload's: :meth:`ReplicaJob.of` sets them, and a job whose run says otherwise is refused.

The replica process reads it as JSON (``python -m sharebench.workloads.replica --config JOB.json``):
:meth:`ReplicaJob.to_dict` and :meth:`ReplicaJob.from_dict` round-trip exactly; the JSON keeps each
value once (the run's workload fields are not repeated).
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharebench.errors import UserError
from sharebench.kernel import Barrier, RunConfig
from sharebench.kernel.config import BARRIER_KEYS, RUN_KEYS
from sharebench.parse import whole_number
from sharebench.workloads.workload import VICTIM, Workload, role

OF_WORKLOAD = ("engine", "lattice", "seed")  # the kernel run's fields its workload sets
# the job's own fields beside its workload and run
CELL_KEYS = ("replicas", "pattern_seed", "stop_file", "count", "window_s", "attempt")
ATTEMPT = re.compile(r"[0-9a-f]{1,64}")  # a cell attempt's id (sharing.executor: new for every start of a cell)
KEYS = ("workload", "run", *CELL_KEYS, "barrier")
PROGRESS_NAME = (
    "progress"  # a patterned cell's users append their bursts to progress.<replica> (ReplicaJob.progress_file)
)
OPTIONS = tuple(sorted({*RUN_KEYS, *BARRIER_KEYS, *CELL_KEYS} - {*OF_WORKLOAD, "device"}))


def attempt_of(path: str | os.PathLike[str]) -> str:
    """The cell attempt the job file at ``path`` names ('' when none, or when the file cannot say): what
    the replica's record carries even when the job itself is refused, and what its executor expects."""
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return ""
    attempt = doc.get("attempt") if isinstance(doc, dict) else None
    return attempt if isinstance(attempt, str) else ""


@dataclass(frozen=True)
class ReplicaJob:
    """One replica's job: its workload, its kernel run, the cell's replica count, the barrier and the
    pattern's cell fields. UserError naming a bad value."""

    workload: Workload
    run: RunConfig
    replicas: int = 1  # replicas in the cell (SHAREBENCH_REPLICAS of a program)
    pattern_seed: int = 0  # the cell's: think times and arrivals seeded by (seed, pattern_seed, replica)
    stop_file: str | None = None  # under a pattern: every replica stops once it exists (the cell decided or done)
    barrier: Barrier = field(default_factory=Barrier)
    count: int | None = None  # the victim's most bursts: the sweep's cap (sweep.samples), a calibration's few
    window_s: float | None = None  # an open loop's victim: the seconds of arrivals (a serving cell's duration)
    attempt: str = ""  # the cell attempt this job is of ('' outside a cell): in every record the replica writes

    def __post_init__(self) -> None:
        if not isinstance(self.workload, Workload) or not isinstance(self.run, RunConfig):
            raise TypeError(f"a ReplicaJob holds a Workload and a RunConfig, not {self.workload!r}, {self.run!r}")
        differ = [k for k in OF_WORKLOAD if getattr(self.run, k) != getattr(self.workload, k)]
        if differ:
            raise UserError(
                f"the run's {', '.join(differ)} differ from the workload's: a replica's engine, lattice and "
                "seed are its workload's (ReplicaJob.of sets them)"
            )
        object.__setattr__(self, "replicas", whole_number("replicas", self.replicas, 1))
        object.__setattr__(self, "pattern_seed", whole_number("pattern_seed", self.pattern_seed, 0))
        if self.stop_file is not None:
            object.__setattr__(self, "stop_file", os.fspath(self.stop_file) or None)
        if self.count is not None:
            object.__setattr__(self, "count", whole_number("count", self.count, 1))
        if self.window_s is not None:
            window = float(self.window_s)
            if not (math.isfinite(window) and window > 0):
                raise UserError(f"bad replica job window_s {self.window_s!r}; allowed: seconds > 0")
            object.__setattr__(self, "window_s", window)
        if not isinstance(self.barrier, Barrier):
            raise TypeError(f"ReplicaJob.barrier is a Barrier, not {self.barrier!r}")
        if self.attempt and not (isinstance(self.attempt, str) and ATTEMPT.fullmatch(self.attempt)):
            raise UserError(f"bad attempt {self.attempt!r}; allowed: 1..64 lowercase hex digits, or '' (none)")

    @classmethod
    def of(
        cls, workload: Workload, *, particles: int, turns: int, device: str | None = None, **options: Any
    ) -> ReplicaJob:
        """The job of one replica of ``workload`` (on ``device`` when given, e.g. the sweep's resolved
        device; else the workload's); ``options``: the kernel run's other fields (beam, warm-up turns,
        engine options, cores, memory limit, replica), the barrier's (``start_at`` ...) and the job's own
        (``replicas``, ``pattern_seed``, ``stop_file``, ``count``, ``window_s``). UserError naming an unknown
        option."""
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise UserError(f"unknown run option(s) {', '.join(unknown)}; allowed: {', '.join(OPTIONS)}")
        barrier = Barrier(**{k: options.pop(k) for k in BARRIER_KEYS if k in options})
        own = {k: options.pop(k) for k in CELL_KEYS if k in options}
        run = RunConfig(
            engine=workload.engine,
            device=device or workload.device,
            lattice=workload.lattice,
            seed=workload.seed,
            particles=particles,
            turns=turns,
            **options,
        )
        return cls(workload, run, barrier=barrier, **own)

    # --- defined once: the replica's place in a patterned cell

    @property
    def replica(self) -> int:
        return self.run.replica

    @property
    def patterned(self) -> bool:
        """Whether any replica of the cell follows a pattern other than batch (:attr:`Workload.patterned`)."""
        return self.workload.patterned

    @property
    def role(self) -> str:
        """``victim`` (replica :data:`VICTIM`) or ``neighbour`` (:func:`sharebench.workloads.workload.role`)."""
        return role(self.replica)

    @property
    def victim(self) -> bool:
        return self.replica == VICTIM

    @property
    def user(self) -> bool:
        """Whether this replica is a user of its cell: one of the victim's pattern, whose bursts the cell's
        verdict counts (a neighbour of another pattern is the aggressor)."""
        return self.own_pattern == self.workload.pattern

    @property
    def victim_count(self) -> int | None:
        """The most bursts this replica runs: None for a neighbour (it runs until the cell's stop file); the
        victim's ``count`` (the sweep's cap, ``sharebench.sweep.samples``), else the workload's ``bursts``
        (None: none given, the victim too runs until the stop file)."""
        if not self.victim:
            return None
        return self.count if self.count is not None else self.workload.bursts

    @property
    def victim_window_s(self) -> float | None:
        """The victim's window in seconds under an open loop (``window_s``); None for the others."""
        return self.window_s if self.victim else None

    @property
    def progress_file(self) -> Path | None:
        """The live record of a user of a patterned cell (``progress.<replica>`` beside its ready file, a line
        per burst as it ends; :data:`sharebench.workloads.bursts.PROGRESS`): None for a neighbour of another
        pattern and outside a cell."""
        if not (self.patterned and self.user and self.barrier.ready_file):
            return None
        return Path(self.barrier.ready_file).parent / f"{PROGRESS_NAME}.{self.replica}"

    @property
    def own_pattern(self) -> str:
        """The label of the pattern this replica follows (:meth:`Workload.pattern_of`)."""
        return self.workload.pattern_of(self.replica)

    @property
    def replica_seed(self) -> list[int]:
        """The seed of this replica's think times or arrivals (numpy SeedSequence entropy)."""
        return [self.workload.seed, self.pattern_seed, self.replica]

    # --- the replica process's JSON

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; ``from_dict(job.to_dict()) == job``."""
        return {
            "workload": self.workload.to_dict(),
            "run": {k: v for k, v in self.run.to_dict().items() if k not in OF_WORKLOAD},
            "replicas": self.replicas,
            "pattern_seed": self.pattern_seed,
            "stop_file": self.stop_file,
            **({"count": self.count} if self.count is not None else {}),
            **({"window_s": self.window_s} if self.window_s is not None else {}),
            **({"attempt": self.attempt} if self.attempt else {}),
            "barrier": self.barrier.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Any) -> ReplicaJob:
        """The job of its dict form; UserError naming a bad key or value."""
        if not isinstance(d, dict) or not isinstance(d.get("run"), dict):
            raise UserError(f"bad replica job: a JSON object with keys {', '.join(KEYS)} is allowed, not {d!r:.80}")
        unknown = sorted(set(d) - set(KEYS)) + sorted(f"run.{k}" for k in set(d["run"]) & set(OF_WORKLOAD))
        if unknown:
            raise UserError(f"unknown replica job key(s) {', '.join(unknown)}; allowed: {', '.join(KEYS)}")
        workload = Workload.from_dict(d.get("workload", {}))
        run = RunConfig.from_dict({**d["run"], **{k: getattr(workload, k) for k in OF_WORKLOAD}})
        own = {k: d[k] for k in CELL_KEYS if k in d}
        return cls(workload, run, barrier=Barrier.from_dict(d.get("barrier", {})), **own)

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> ReplicaJob:
        try:
            with open(path) as fh:
                d = json.load(fh)
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"replica job {str(path)!r} unreadable: {exc}") from None
        return cls.from_dict(d)
