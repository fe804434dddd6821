"""What a sweep will run on one machine, planned in one place: its configuration, checked in full before
anything runs, and its cells (:func:`validate`).

A :class:`SweepConfig` holds parsed values: its modes, particle counts, turns and repeats are parsed
when it is made (from the command line, a campaign plan, a pipeline step or a results folder), once.
``validate(config)`` resolves the device, the modes (adding the baseline, T_1, that every loss needs),
the default particle counts and turns, plans every mode's replicas on the device and checks that
every size fits in memory and that the lattice loads: a one-line UserError before any replica starts.
The validated :class:`SweepPlan` is frozen: a calibration or a budget that picks the sizes makes a new
one (:meth:`SweepPlan.with_particles`). A sweep is the cells of :meth:`SweepPlan.cells` in the order
repeat -> particle count -> mode, so slow drifts of the machine spread over all modes; repeats <= 0 are
discarded warm-ups. Every cell's id is :func:`cell_id`'s.

A pipeline runs each cell as its own task: ``sharebench.sweep.grid`` plans those (the same
:class:`Cell` values, listed per mode).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sharebench.analysis.latency import DEFAULT_SLO, check_slo
from sharebench.analysis.samples import Samples, cell_samples
from sharebench.analysis.tail import TailRule
from sharebench.devices import DeviceInfo, resolve_device
from sharebench.errors import UserError
from sharebench.kernel import RunConfig, check_fits, check_xtrack_device
from sharebench.kernel.lattice import get_line_cached, get_packed
from sharebench.modes import DEFAULT_MODES, MPS_DAEMON, Mode, with_baseline
from sharebench.modes import as_modes as as_modes  # kept light in modes: the CLI parses --modes with it
from sharebench.parse import MAX_REPEATS as MAX_REPEATS  # bounds kept light in parse: the CLI checks them first
from sharebench.parse import MAX_TURNS as MAX_TURNS
from sharebench.parse import counts, lattice_file, whole_number
from sharebench.sharing import CellPlan, check_mps_available, plan_cell
from sharebench.sharing.timeslice import check_allowed
from sharebench.workloads import ReplicaJob, Workload

# `sharebench run` with no options: sizes per device class that finish in a few minutes (CPU: only where no
# calibration sizes the sweep: the run and its --dry-run size one particle count by sharebench.sweep.calibrate; GPU: the
# kernel's H200 figure, 1e6 particles x 10 turns in 1.45 s with CUDA (results/kernel/README.md), makes the
# largest exclusive run here about 3 s)
DEFAULT_PARTICLES = {"cpu": [500, 1000], "gpu": [1_000_000, 2_000_000]}
DEFAULT_TURNS = {"cpu": 10, "gpu": 10}
DEFAULT_REPEATS = 3
# the default modes are modes.DEFAULT_MODES, those the device runs; a CPU runs these in place of a CUDA-only
# mode (a pipeline's cluster modes: sweep.grid.CLUSTER_MODES)
CPU_MODES = ("partition:2",)
WARMUP_REPEATS = 1  # default: repeat 0 of every (mode, particle count) is a discarded warm-up


@dataclass(frozen=True)
class SweepConfig:
    """What a sweep is asked to run: parsed values, each parsed when the config is made (mode strings,
    ``"5e6,1e7"``, ``"3"`` are accepted and parsed here, once; :func:`sweep_config` makes one from the
    options a user gave, the command line's or a campaign plan's)."""

    modes: tuple[Mode, ...] | None = None  # None: the default set for the device
    particles: tuple[int, ...] | None = None  # None: the default sizes for the device class
    turns: int | None = None  # None: the default for the device class
    repeats: int = DEFAULT_REPEATS  # measured repeats per cell
    warmup_repeats: int = 1  # discarded warm-up repeats before them
    workload: Workload = field(default_factory=Workload)  # what every replica runs, on which device spec
    ready_timeout_s: float = 900.0  # barrier: longest setup (build, compile) allowed
    run_timeout_s: float | None = None  # longest tracking allowed per cell (None: no limit)
    telemetry_interval_s: float | None = 0.1  # None: no telemetry sampler
    resume: bool = False  # continue an existing results folder
    stop_after_s: float | None = None  # start no new cell after this many seconds (resume later)
    progress: bool = True
    command: list[str] | None = None  # recorded in provenance.json (default: sys.argv)
    run_options: dict[str, Any] = field(default_factory=dict)  # other RunConfig fields (start_at, nemitt_x, ...)
    allow_gpu_settings: bool = False  # timeslice:N/INTERVAL may set (and restore) the GPU's interval
    fresh_replicas: bool = False  # a new process per replica per cell (default: warm ones, kept)
    timeslice_probe: bool = True  # a timeslice sweep on an NVIDIA GPU probes its time slices (--no-probe: False)
    slo: float = DEFAULT_SLO  # the p95 slowdown target of users per GPU (sharebench.analysis.latency)
    awake_control: bool = False  # under a pattern: each alone cell also beside a keep-awake process (a control)

    def __post_init__(self) -> None:
        if not isinstance(self.workload, Workload):
            raise TypeError(
                f"SweepConfig.workload is a Workload (Workload.from_dict for a dict), not {self.workload!r}"
            )
        put = object.__setattr__  # frozen: the parsed values replace what was given, once
        if self.modes is not None:
            put(self, "modes", as_modes(self.modes))
        if self.particles is not None:
            put(self, "particles", tuple(parse_particles(self.particles, self.workload.size_name)))
        if self.turns is not None:
            put(self, "turns", whole_number("turns", self.turns, 1, MAX_TURNS))
        put(self, "repeats", whole_number("repeats", self.repeats, 1, MAX_REPEATS))
        put(self, "warmup_repeats", whole_number("warm-up repeats", self.warmup_repeats, 0, MAX_REPEATS))
        put(self, "slo", check_slo(self.slo))
        if self.awake_control and not self.workload.patterned:
            raise UserError(
                "--awake-control needs a replica pattern (--pattern): its control is a pattern's alone cell"
            )
        doubled = sorted(set(self.run_options) & set(RUN_CONFIG_OF_WORKLOAD))
        if doubled:
            raise UserError(f"run option(s) {', '.join(doubled)} belong to the workload; give them there")

    def to_dict(self) -> dict[str, Any]:
        """As ``sweep.json`` and provenance.json record it: the workload as its own dict, the modes as labels."""
        return {
            **dataclasses.asdict(self),
            "modes": None if self.modes is None else [m.label for m in self.modes],
            "particles": None if self.particles is None else list(self.particles),
            "workload": self.workload.to_dict(),
        }


# the fields a Workload sets (the replica job's workload; exec_*: its names in run options before it); not run options
RUN_CONFIG_OF_WORKLOAD = ("engine", "device", "lattice", "seed", "exec_command", "exec_timing", "exec_name")


@dataclass(frozen=True)
class Cell:
    """One cell of a sweep: a mode at a particle count, one repeat (<= 0: a warm-up).

    ``id`` names the cell in the results (``timeslice:2_p10000_r1``); a KFP pod that runs one
    replica of a shared cell runs the mode ``exclusive`` under the shared cell's id.
    """

    mode: Mode
    particles: int
    repeat: int
    id: str = ""

    def __post_init__(self) -> None:
        if not self.id:
            object.__setattr__(self, "id", cell_id(self.mode, self.particles, self.repeat))

    @property
    def warmup(self) -> bool:
        return self.repeat <= 0

    @property
    def folder(self) -> str:
        """The cell's folder under ``cells/``: its id made safe for a file name."""
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", self.id.replace("@", "at"))
        return safe + ("_warmup" if self.warmup else "")


def cell_id(mode: Mode, particles: int, repeat: int) -> str:
    return f"{mode.label}_p{particles}_r{repeat}"


AWAKE = "awake"  # the keep-awake control's cell id ends in _awake (sharebench.workloads.awake)


def alone_cells(plan: SweepPlan) -> list[Cell]:
    """The alone cells of a patterned sweep (issue 42): per size, one measurement of the victim's pattern
    alone (repeat 1; after a warm-up when the sweep has warm-ups), the baseline every slowdown of the sweep
    divides by, run until its p95 is precise (``analysis.samples``); with ``awake_control`` also the same
    alone beside a keep-awake process (:func:`is_awake`: recorded as a warm-up, never in a statistic).
    Every schedule gets them here: the fixed one, the capacity search. A sweep without a pattern, or
    without the baseline mode: none (its baseline cells are repeated as every mode's are)."""
    base = next((m for m in plan.modes if m.is_baseline), None)
    if base is None or not plan.config.workload.patterned:
        return []
    warm = plan.config.warmup_repeats > 0
    out: list[Cell] = []
    for p in plan.particles:
        out += [Cell(base, p, 0)] if warm else []
        out.append(Cell(base, p, 1))
        if plan.config.awake_control:
            out.append(Cell(base, p, 0, id=f"{cell_id(base, p, 1)}_{AWAKE}"))
    return out


def is_awake(cell: Cell) -> bool:
    """Whether ``cell`` is the keep-awake control of an alone cell (:func:`alone_cells`)."""
    return cell.mode.is_baseline and cell.id.endswith(f"_{AWAKE}")


@dataclass(frozen=True)
class SweepPlan:
    """A validated sweep (:func:`validate`), frozen: a calibration or a budget that picks the sizes makes
    a new one (:meth:`with_particles`), and so does a note (:meth:`with_notes`)."""

    config: SweepConfig
    device: DeviceInfo
    modes: tuple[Mode, ...]
    plans: Mapping[str, CellPlan]
    particles: tuple[int, ...]
    turns: int
    notes: tuple[str, ...] = ()

    def with_particles(self, particles: Iterable[int]) -> SweepPlan:
        """This plan at other particle counts (a calibration's, a budget plan's, a resumed folder's)."""
        return dataclasses.replace(self, particles=tuple(particles))

    def with_notes(self, *notes: str) -> SweepPlan:
        """This plan with more notes (what the run records in notes.txt and the dry run prints)."""
        return dataclasses.replace(self, notes=(*self.notes, *notes))

    def cells(self) -> list[Cell]:
        """Every cell in run order: repeat -> particle count -> mode; repeats <= 0 are warm-ups. Under a
        replica pattern the alone cells come first, once per size (:func:`alone_cells`), then the other
        modes' repeats."""
        first = 1 - self.config.warmup_repeats
        patterned = self.config.workload.patterned
        return [*alone_cells(self)] + [
            Cell(m, p, r)
            for r in range(first, self.config.repeats + 1)
            for p in self.particles
            for m in self.modes
            if not (patterned and m.is_baseline)
        ]

    def replica_job(self, particles: int) -> ReplicaJob:
        """The job every replica of a cell of ``particles`` starts from (its workload, kernel run, barrier)."""
        c = self.config
        return ReplicaJob.of(
            c.workload, device=self.device.spec, particles=particles, turns=self.turns, **dict(c.run_options)
        )

    @property
    def rule(self) -> TailRule:
        """The rule the sweep's cells are decided by: the p95 slowdown target ``--slo`` (analysis.tail)."""
        return TailRule(self.config.slo)

    def samples(self, cell: Cell) -> Samples:
        """The sample rule of a patterned ``cell`` (``analysis.samples``): its users' fewest and most
        samples, its window; a warm-up's few (the keep-awake control runs as its alone cell does)."""
        n = self.plans[cell.mode.label].n if cell.mode.label in self.plans else int(cell.mode.replicas or 1)
        return cell_samples(self.config.workload, n, self.rule, warmup=cell.warmup and not is_awake(cell))

    def run_config(self, particles: int) -> RunConfig:
        """The kernel's run of a replica of a cell of ``particles`` (a calibration runs it in this process)."""
        return self.replica_job(particles).run

    @property
    def workload(self) -> str:
        """The workload's name in the tables: the engine, or the exec engine's program name."""
        return self.config.workload.label

    @property
    def exec_timing(self) -> str:
        """The exec engine's timing (protocol or process); '' for the trackers."""
        return self.config.workload.table_timing

    def replicas(self, mode: Mode) -> int:
        return self.plans[mode.label].n


def plan_header(plan: SweepPlan) -> list[str]:
    """The device, the engine and the modes with their replicas, as ``--dry-run`` prints them."""
    d = plan.device
    return [
        f"device:    {d.spec} ({d.name}; {d.kind}, {d.backend})",
        f"engine:    {plan.config.workload.describe()}",
        "modes:     "
        + ", ".join(f"{m.label} ({plan.replicas(m)} replica{'s' if plan.replicas(m) > 1 else ''})" for m in plan.modes),
    ]


def describe_plan(plan: SweepPlan) -> str:
    """What a sweep would run, and its cost in exclusive-run equivalents (a cell of N replicas lasts
    about N exclusive runs when sharing is fair and lossless)."""
    c = plan.config
    per = sum(plan.replicas(m) for m in plan.modes)
    reps = c.repeats + c.warmup_repeats
    cells = plan.cells()
    alone = alone_cells(plan)
    lines = [
        *plan_header(plan),
        f"particles: {', '.join(f'{p:,}' for p in plan.particles)} per replica, {plan.turns} turns",
        f"repeats:   {c.repeats} measured + {c.warmup_repeats} warm-up"
        + (f"; the alone cell once per size ({', '.join(x.id for x in alone)})" if alone else ""),
        f"cells:     {len(cells)} ({sum(plan.replicas(cell.mode) for cell in cells)} replica runs)",
        f"cost:      about {per} exclusive runs per particle count and repeat; {per * reps} per particle count "
        f"in all ({', '.join(f'{per * reps} x {p:,}' for p in plan.particles)})",
    ]
    for m in plan.modes:
        for rp in plan.plans[m.label].replicas:
            if rp.mig_uuid:
                lines.append(f"  {m.label} replica {rp.replica}: {rp.mig_uuid} ({rp.mig_profile}, {rp.sms} SMs)")
            elif rp.cpus:
                lines.append(f"  {m.label} replica {rp.replica}: cores {rp.cpus}")
            elif rp.mig_profile:
                lines.append(
                    f"  {m.label} replica {rp.replica}: {rp.mig_profile} emulated with MPS "
                    f"({rp.env.get('CUDA_MPS_ACTIVE_THREAD_PERCENTAGE')}% of the threads, {rp.sms} SMs, "
                    f"memory limit {rp.env.get('CUDA_MPS_PINNED_DEVICE_MEM_LIMIT')})"
                )
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)


def runs_on(mode: Mode, device: DeviceInfo) -> bool:
    """Whether ``device`` can run ``mode`` by its kind's device class and helper (an MPS daemon needs one)."""
    spec = mode.spec
    if spec.device_class == "cpu":
        return device.kind == "cpu"
    if spec.device_class == "cuda" and device.kind != "gpu":
        return False
    if spec.helper == MPS_DAEMON:
        try:
            check_mps_available(device, mode.label)
        except UserError:
            return False
    return True


def default_modes(device: DeviceInfo) -> tuple[Mode, ...]:
    """The modes of :data:`sharebench.modes.DEFAULT_MODES` the device runs (exclusive, timeslice:2,
    timeslice:4, mps:2 where MPS can run), and on the CPU :data:`CPU_MODES` (partition:2)."""
    extra = CPU_MODES if device.kind == "cpu" else ()
    return tuple(m for m in as_modes([*DEFAULT_MODES, *extra]) if runs_on(m, device))


def parse_particles(text: str | Iterable[Any], name: str = "particle count") -> list[int]:
    """ "5e6,1e7,1.5e7" -> [5000000, 10000000, 15000000]; each must be a whole number > 0. ``name``: what the
    error calls a value (the exec engine's --work sizes are "work size")."""
    return counts(name, text if isinstance(text, str) else list(text))


def _resolve_modes(config: SweepConfig, device: DeviceInfo) -> tuple[tuple[Mode, ...], tuple[str, ...]]:
    """The sweep's modes, with the baseline first unless given (a sweep of a device's own instances alone,
    MIG, has none: the whole device is not there); the note that says so."""
    modes = config.modes if config.modes is not None else default_modes(device)
    if all(m.is_baseline or m.spec.device_instances for m in modes):
        return tuple(modes), ()
    full = with_baseline(list(modes))
    if len(full) == len(modes):
        return tuple(modes), ()
    return tuple(full), (f"added '{full[0].label}': every loss needs the T_1 baseline",)


def check_neighbours(workload: Workload, plans: dict[str, CellPlan]) -> None:
    """A neighbour pattern needs a cell with neighbours: a mode of more than one replica."""
    if workload.neighbours is not None and all(p.n == 1 for p in plans.values()):
        raise UserError(
            f"--neighbours {workload.neighbours} needs a sharing mode (timeslice:N, mps:N, mig:..., "
            f"mig-emulated:..., partition:N); the modes are {', '.join(plans)}"
        )


def _check_memory(config: SweepConfig, device: DeviceInfo, plans: dict[str, CellPlan], particles: list[int]) -> None:
    """Every size of every mode fits: a MIG instance's memory, or the device's share of each replica."""
    mem = device.memory_bytes
    for plan in plans.values():
        for p in particles:
            try:
                if plan.mode.spec.family == "instances":
                    for rp in plan.replicas:
                        check_fits(
                            p,
                            rp.memory_bytes,
                            config.workload.engine,
                            what=f"memory of MIG instance {rp.mig_uuid or rp.mig_profile + ' (emulated)'}",
                        )
                elif mem:
                    n = plan.n
                    check_fits(
                        p,
                        int(mem) // n,
                        config.workload.engine,
                        what="device memory" if n == 1 else f"1/{n} share of the device memory ({int(mem):,} bytes)",
                    )
            except UserError as exc:
                raise UserError(f"{plan.mode.label} at {p:,} particles: {exc}") from None


def _check_lattice(config: SweepConfig) -> None:
    """Load (and cache, once for all replicas) the lattice: a bad file or element fails here, not per cell."""
    with contextlib.redirect_stdout(sys.stderr):  # xtrack's loader chatter stays off our stdout
        if config.workload.engine == "simpletrack":
            get_packed(config.workload.lattice)
        else:
            get_line_cached(config.workload.lattice)


def validate(config: SweepConfig) -> SweepPlan:
    """Everything checked before anything runs; a one-line UserError otherwise. The config's own values
    are parsed already (:class:`SweepConfig`); what depends on the device is resolved here."""
    workload = config.workload  # checked when it was made (Workload.from_dict)
    if workload.lattice is not None:
        lattice_file(workload.lattice)
    device = resolve_device(workload.device)
    if workload.engine == "xtrack":  # a doomed sweep fails here, not in every cell (engine checked above)
        check_xtrack_device(device)
    dclass = device.kind or "cpu"
    particles = config.particles if config.particles is not None else tuple(DEFAULT_PARTICLES[dclass])
    turns = config.turns if config.turns is not None else DEFAULT_TURNS[dclass]
    modes, notes = _resolve_modes(config, device)
    check_allowed(list(modes), config.allow_gpu_settings)
    plans = {m.label: plan_cell(m, device) for m in modes}
    check_neighbours(workload, plans)
    if workload.is_program:
        if config.particles is None:
            raise UserError("--engine exec needs --work N[,N...]: the sizes SHAREBENCH_WORK gives the program")
        turns = workload.turns(turns)  # a program's work is SHAREBENCH_WORK alone; memory and lattice are its own
    else:
        _check_memory(config, device, plans, list(particles))
    plan = SweepPlan(config, device, modes, plans, particles, turns, notes)
    plan.replica_job(particles[0])  # the replica's job itself (engine, device grammar, emittances ...)
    if not workload.is_program:
        _check_lattice(config)
    return plan


def plan_mode(plan: SweepPlan, mode: Mode) -> SweepPlan:
    """``plan`` with ``mode`` planned too (a capacity search's next N, ``sweep.capacity``): its replicas on
    the device and the memory check of every size, the one-line UserError of :func:`validate` otherwise;
    ``plan`` itself when the mode is planned already."""
    if mode.label in plan.plans:
        return plan
    cell_plan = plan_cell(mode, plan.device)
    if not plan.config.workload.is_program:
        _check_memory(plan.config, plan.device, {mode.label: cell_plan}, list(plan.particles))
    return dataclasses.replace(plan, modes=(*plan.modes, mode), plans={**plan.plans, mode.label: cell_plan})


def mode_fits(plan: SweepPlan, mode: Mode) -> str | None:
    """None when :func:`plan_mode` plans ``mode``; else its one-line reason (what stops a capacity search)."""
    try:
        plan_mode(plan, mode)
    except UserError as exc:
        return str(exc)
    return None
