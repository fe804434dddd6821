"""One ``sharebench run``, as a value: what the command line and a campaign plan's sweep step both build.

:class:`SweepRequest` holds the options a user gave, each parsed where it was given (the command line,
``sharebench.cli.sweep_cmd.request_of``; a plan file, ``sharebench.campaign``), None where not given:
a resumed run takes those from its folder. :func:`sweep_config` is the one way from a request to the
:class:`~sharebench.sweep.plan.SweepConfig` a sweep runs, so a campaign step runs the same sweep the
command line would, without a round trip through argv. :func:`command_line` writes the request as
the command that would run it, for the record (a campaign's ``commands.txt`` and its dry run).
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharebench.analysis.sequential import DEFAULT_MAX_REPEATS, DEFAULT_PRECISION
from sharebench.modes import Mode
from sharebench.sweep.budget import BudgetOptions
from sharebench.sweep.capacity import CapacityOptions
from sharebench.sweep.plan import SweepConfig
from sharebench.sweep.resume import inherit_options
from sharebench.workloads import Workload


@dataclass(frozen=True)
class SweepRequest:
    """The options of one local sweep (``sharebench run``), parsed; None where not given."""

    out: Path
    modes: tuple[Mode, ...] | None = None
    particles: tuple[int, ...] | str | None = None  # a string until the workload names its sizes (exec: work)
    turns: int | None = None
    repeats: int | None = None
    warmup_repeats: int | None = None
    workload: Mapping[str, Any] = field(default_factory=dict)  # the Workload keys given (None: not given)
    ready_timeout_s: float | None = None
    run_timeout_s: float | None = None
    stop_after_s: float | None = None
    slo: float | None = None
    resume: bool = False
    budget: BudgetOptions | None = None
    telemetry: bool = True
    progress: bool = True
    allow_gpu_settings: bool = False
    fresh_replicas: bool = False
    timeslice_probe: bool = True
    awake_control: bool = False  # under a pattern: each alone cell also beside a keep-awake process
    strict: bool = False
    dry_run: bool = False
    command: tuple[str, ...] | None = None  # what provenance.json records (default: sys.argv)
    capacity: CapacityOptions | None = None  # --capacity: users per GPU by search (sweep.capacity)


def sweep_config(request: SweepRequest) -> SweepConfig:
    """The sweep ``request`` asks for: what it gives, and on ``--resume`` the folder's own values for
    what it does not (``sweep.resume.inherit_options``)."""
    given: dict[str, Any] = {
        "modes": request.modes,
        "particles": request.particles,
        "turns": request.turns,
        "repeats": request.repeats,
        "warmup_repeats": request.warmup_repeats,
        "ready_timeout_s": request.ready_timeout_s,
        "run_timeout_s": request.run_timeout_s,
        "slo": request.slo,
        "workload": dict(request.workload),
    }
    if request.resume:  # the folder's own sweep: what the user did not give comes from its sweep.json
        given = inherit_options(request.out, given)
    workload = Workload.from_dict({k: v for k, v in (given.pop("workload") or {}).items() if v is not None})
    return SweepConfig(
        **{k: v for k, v in given.items() if v is not None},
        workload=workload,
        resume=request.resume,
        telemetry_interval_s=0.1 if request.telemetry else None,
        progress=request.progress,
        command=list(request.command) if request.command is not None else list(sys.argv),
        stop_after_s=request.stop_after_s,
        allow_gpu_settings=request.allow_gpu_settings,
        fresh_replicas=request.fresh_replicas,
        timeslice_probe=request.timeslice_probe,
        awake_control=request.awake_control,
    )


def _number(value: float | int) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def command_line(request: SweepRequest, python: str = sys.executable) -> list[str]:
    """The ``sharebench run`` command that would run ``request``, for the record (never parsed back)."""
    w = request.workload
    words = [python, "-m", "sharebench", "run"]
    pairs: list[tuple[str, Any]] = [
        ("--device", w.get("device")),
        ("--lattice", w.get("lattice")),
        ("--modes", ",".join(m.label for m in request.modes) if request.modes else None),
        ("--particles", request.particles if isinstance(request.particles, str) or request.particles is None
         else ",".join(str(p) for p in request.particles)),
        ("--turns", request.turns),
        ("--repeats", request.repeats),
        ("--warmup-repeats", request.warmup_repeats),
        ("--out", str(request.out)),
    ]  # fmt: skip
    words += [a for opt, v in pairs if v is not None for a in (opt, _number(v) if not isinstance(v, str) else v)]
    words += ["--no-progress"] if not request.progress else []
    b = request.budget
    budget_s = None if b is None or b.budget_s is None else f"{b.budget_s:g}s"  # a duration parse_duration reads
    pairs = [
        ("--pattern", w.get("pattern")), ("--neighbours", w.get("neighbours")), ("--bursts", w.get("bursts")),
        ("--slo", request.slo), ("--budget", budget_s),
        ("--precision", b.precision if b is not None and b.precision != DEFAULT_PRECISION else None),
        ("--max-repeats", b.max_repeats if b is not None and b.max_repeats != DEFAULT_MAX_REPEATS else None),
        ("--engine", w.get("engine")), ("--exec", w.get("command")), ("--exec-name", w.get("name")),
        ("--exec-timing", w.get("timing")), ("--ready-timeout", request.ready_timeout_s),
    ]  # fmt: skip
    words += [a for opt, v in pairs if v is not None for a in (opt, _number(v) if not isinstance(v, str) else v)]
    words += ["--fresh-replicas"] if request.fresh_replicas else []
    words += ["--awake-control"] if request.awake_control else []
    words += ["--resume"] if request.resume else []
    words += ["--stop-after", f"{int(request.stop_after_s)}"] if request.stop_after_s is not None else []
    return words


def shell_line(argv: list[str]) -> str:
    """argv as one line a shell reads back (a word with a space or nothing quoted)."""
    return " ".join(shlex.quote(a) if (" " in a or not a) else a for a in argv)
