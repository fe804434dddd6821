"""A sweep of separate tasks (the pipelines), planned in one place: the request checked, the cells listed.

A pipeline's sweep parameters arrive as one *request* (a mapping of the pipelines' parameter names:
modes, gpu_model, particle_counts, repeats, warmup_repeats, placement, node_name, budget and the
:class:`GridSettings` every task reads: turns, workload, start_delay_s and the node steps' settings).
:func:`plan_grid` checks it before anything runs, as the plan step and ``sharebench submit`` receive
it (numbers may arrive as floats, ``2.0``; modes as ``a,b``), and resolves the modes for the GPU
model (:class:`CellGrid`; a budget cuts it, ``sweep.budget.plan_budget_grid``). The grid's
:meth:`CellGrid.plan` is what the pipeline's tasks share, one value (:class:`GridPlan`,
``to_dict``/``from_dict``): the node, the placement, the settings and every cell as a value
(:func:`cell_value`: mode, particle count, repeat, id), in the order the cells of a mode run
(particle count -> repeat; repeats <= 0 are warm-ups).

A new sweep parameter the tasks read is a field of :class:`GridSettings`, checked in its
``__post_init__`` (``docs/architecture.md``, "Add a pipeline parameter").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sharebench.errors import UserError
from sharebench.gpus import gpu_model as find_gpu_model
from sharebench.gpus import resolve_layout
from sharebench.modes import DEFAULT_MODES, KINDS, Mode, kind_of, parse_mode
from sharebench.parse import parse_duration, seconds, whole_number
from sharebench.placement import check_node_access, check_pattern_placement, check_placement, split_node
from sharebench.sweep.plan import DEFAULT_REPEATS, MAX_REPEATS, WARMUP_REPEATS, Cell, parse_particles
from sharebench.workloads import Workload

# a pipeline's cluster sweep (the ``modes`` parameter's default) adds these to the default modes, each in
# its kind's order
CLUSTER_MODES = ("timeslice:8", "mps:4", "mig:7g", "mig:1g")
PIPELINE_MODES = sorted((*DEFAULT_MODES, *CLUSTER_MODES), key=lambda m: KINDS[kind_of(m)].order)
PIPELINE_PARTICLES = [5_000_000, 10_000_000, 15_000_000]  # the pipeline's default particle counts
# the request's keys that shape the grid, and their values when a request leaves one out
GRID_DEFAULTS: dict[str, Any] = {
    "modes": PIPELINE_MODES,
    "gpu_model": "",
    "particle_counts": PIPELINE_PARTICLES,
    "repeats": DEFAULT_REPEATS,
    "warmup_repeats": WARMUP_REPEATS,
    "placement": "pods",
    "node_name": "",
    "budget": "",
}
CELL_KEYS = ("mode", "particles", "repeat", "id")  # a cell as a value (cell_value)


@dataclass(frozen=True)
class GridSettings:
    """The sweep parameters the pipeline's tasks read besides the grid, each checked when made (KFP
    hands numbers over JSON: ``10.0`` is 10): turns per replica, the workload every replica runs, the
    delay of a cell's start instant, and how the node steps reconfigure the node."""

    turns: int = 10
    workload: Workload = field(default_factory=Workload)
    start_delay_s: float = 60.0  # a cell's start instant this far after schedule_start
    operator_namespace: str = "gpu-operator"
    reconfigure_timeout_s: float = 900.0
    force: bool = False  # reconfigure even when pods outside sharebench use the GPUs (direct access only)
    node_access: str = "agent"

    def __post_init__(self) -> None:
        put = object.__setattr__  # frozen: the parsed values replace what was given, once
        put(self, "turns", whole_number("turns", self.turns, 1))
        if not isinstance(self.workload, Workload):
            put(self, "workload", Workload.from_dict(dict(self.workload or {})))
        put(self, "start_delay_s", seconds("start_delay_s", self.start_delay_s, 0.0))
        put(self, "reconfigure_timeout_s", seconds("reconfigure_timeout_s", self.reconfigure_timeout_s, 0.0))
        put(self, "operator_namespace", str(self.operator_namespace or ""))
        if not isinstance(self.force, bool):
            raise UserError(f"bad force {self.force!r}; allowed: true or false")
        put(self, "node_access", check_node_access(str(self.node_access)))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> GridSettings:
        """The settings of a request or a plan value; a key of neither: a one-line UserError."""
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(names))
        if unknown:
            allowed = ", ".join([*GRID_DEFAULTS, *names])
            raise UserError(f"unknown sweep parameter(s) {', '.join(unknown)}; allowed: {allowed}")
        return cls(**dict(values))

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "workload": self.workload.to_dict()}


# every key of a request (plan_grid): the pipelines' sweep parameters but the image and the history's
REQUEST_KEYS = (*GRID_DEFAULTS, *(f.name for f in dataclasses.fields(GridSettings)))


def cell_value(cell: Cell) -> dict[str, Any]:
    """A cell as the pipeline hands it from task to task: plain values, the mode as its label."""
    return {"mode": cell.mode.label, "particles": cell.particles, "repeat": cell.repeat, "id": cell.id}


def cell_from_value(value: Mapping[str, Any]) -> Cell:
    """The cell of :func:`cell_value`'s mapping (numbers may arrive as floats); other keys (a scheduled
    cell's ``start_at``) are the caller's. A missing key: a one-line UserError."""
    missing = [k for k in CELL_KEYS if k not in value]
    if missing:
        raise UserError(f"a cell needs {', '.join(CELL_KEYS)}; {', '.join(missing)} missing in {dict(value)!r}")
    return Cell(
        parse_mode(str(value["mode"])),
        whole_number("particles", value["particles"], 1),
        whole_number("repeat", value["repeat"], -MAX_REPEATS),
        id=str(value["id"]),
    )


@dataclass(frozen=True)
class GridPlan:
    """The checked plan every task of a node's sweep reads, one value (``to_dict`` round-trips through
    ``from_dict``): the node (``""``: this machine) and its GPU model, the placement, the settings,
    every cell as a value in run order, and with a budget its summary for the report."""

    node_name: str
    gpu_model: str
    placement: str
    cells: tuple[Cell, ...]
    settings: GridSettings = field(default_factory=GridSettings)
    budget_plan: Mapping[str, Any] = field(default_factory=dict)

    @property
    def modes(self) -> tuple[str, ...]:
        """The planned modes (labels), in the order they run."""
        return tuple(dict.fromkeys(c.mode.label for c in self.cells))

    def cells_of(self, mode: str) -> tuple[Cell, ...]:
        """The cells ``mode`` runs, in order; a mode not planned: a one-line UserError."""
        if mode not in self.modes:
            raise UserError(f"mode {mode!r} is not in the plan; planned: {', '.join(self.modes) or 'none'}")
        return tuple(c for c in self.cells if c.mode.label == mode)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_name": self.node_name,
            "gpu_model": self.gpu_model,
            "placement": self.placement,
            "modes": list(self.modes),
            "cells": [cell_value(c) for c in self.cells],
            **self.settings.to_dict(),
            "budget_plan": dict(self.budget_plan),
        }

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> GridPlan:
        """The plan of a :meth:`to_dict` mapping (``modes`` is derived: read, not trusted)."""
        own = ("node_name", "gpu_model", "placement", "modes", "cells", "budget_plan")
        return cls(
            node_name=str(value.get("node_name") or ""),
            gpu_model=str(value.get("gpu_model") or ""),
            placement=check_placement(str(value.get("placement") or "")),
            cells=tuple(cell_from_value(c) for c in value.get("cells") or []),
            settings=GridSettings.from_dict({k: v for k, v in value.items() if k not in own}),
            budget_plan=dict(value.get("budget_plan") or {}),
        )


@dataclass(frozen=True)
class CellGrid:
    """A validated sweep of separate tasks: the resolved modes, the cell indices of one mode (particle
    count -> repeat), the node (``""``: this machine) and its GPU model (``""``: unknown), the
    placement, sizes and repeats, a budget, and the settings the tasks read. :meth:`plan` lists its
    cells as values."""

    modes: tuple[Mode, ...]
    cells: tuple[int, ...]
    node_name: str
    gpu_model: str
    placement: str
    particles: tuple[int, ...] = ()
    repeats: int = 1
    warmup_repeats: int = WARMUP_REPEATS
    budget_s: float | None = None  # None: no budget (every mode runs every cell)
    cells_by_mode: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # with a budget: its planned cells
    settings: GridSettings = field(default_factory=GridSettings)

    @property
    def labels(self) -> tuple[str, ...]:
        """The modes as the pipeline's tasks receive them."""
        return tuple(m.label for m in self.modes)

    def cells_of(self, mode: str) -> tuple[int, ...]:
        """The cell indices ``mode`` runs: all of them, or with a budget those of its planned sizes."""
        return tuple(self.cells_by_mode.get(mode, self.cells)) if self.cells_by_mode else self.cells

    def describe(self) -> str:
        return (
            f"plan: {len(self.modes)} mode(s) {', '.join(self.labels)}; {len(self.cells)} cell(s) per mode; "
            f"placement {self.placement}; node {self.node_name or '(none: this machine)'}"
        )

    def plan(self, budget_plan: Mapping[str, Any] | None = None) -> GridPlan:
        """The grid as the tasks share it: every mode's cells as values (cell index ``i`` is particle
        count ``i // per``, repeat ``i % per + 1 - warmup_repeats`` of ``per`` repeats a size)."""
        per = self.repeats + self.warmup_repeats
        cells = tuple(
            Cell(m, self.particles[i // per], i % per + 1 - self.warmup_repeats)
            for m in self.modes
            for i in self.cells_of(m.label)
        )
        return GridPlan(self.node_name, self.gpu_model, self.placement, cells, self.settings, dict(budget_plan or {}))


def resolve_mode(mode: str | Mode, gpu_model: str) -> Mode:
    """A mode with a layout of the device's own instances resolved for the GPU model (``mig:1g`` →
    ``mig:1g.18gb`` on an H200). Without a GPU model a layout is kept as written."""
    m = mode if isinstance(mode, Mode) else parse_mode(mode)
    if m.spec.device_instances and gpu_model:
        layout = resolve_layout(gpu_model, m.layout or "")
        return Mode(m.kind, None, layout=layout[4:] if layout != "all-disabled" else layout)
    return m


def check_mode_placement(m: Mode, placement: str, node_name: str, gpu_model: str) -> None:
    """A resolved mode that cannot run under this placement, node and GPU model: a one-line error."""
    label = m.label
    if m.spec.device_class == "cpu" and (node_name or placement != "processes"):
        raise UserError(f"mode {label!r} is a CPU-only local mode: it needs placement 'processes' and no node_name")
    if m.spec.device_instances and not gpu_model:
        raise UserError(f"mode {label!r} needs gpu_model (e.g. H200, A100-40GB) to know the MIG instances")
    if m.interval is not None and placement != "dra":
        raise UserError(
            f"mode {label!r} sets the GPU's time-slice interval: in the pipeline only placement 'dra' "
            "can (the DRA driver applies it per claim); on one machine use sharebench run "
            "--allow-gpu-settings"
        )
    if not m.is_baseline and placement == "pods" and not node_name:
        # replica pods would ask the cluster for a shared/MIG resource on a node nobody reconfigured
        raise UserError(
            f"mode {label!r} with placement 'pods' needs node_name (NAME or NAME=GPU_MODEL): "
            "sharebench reconfigures that node; or use placement 'processes' to run on this machine"
        )


def plan_grid(request: Mapping[str, Any]) -> CellGrid:
    """A pipeline's request (module docstring; a key left out takes :data:`GRID_DEFAULTS`' or the
    :class:`GridSettings` default), parsed and checked before anything runs; ``budget``: '' (none) or a
    duration (``sharebench.parse.parse_duration``), planned by ``sweep.budget.plan_budget_grid``."""
    given = {**GRID_DEFAULTS, **request}
    settings = GridSettings.from_dict({k: v for k, v in given.items() if k not in GRID_DEFAULTS})
    node_name, gpu_model = split_node(str(given["node_name"] or ""), str(given["gpu_model"] or ""))
    placement = check_placement(str(given["placement"]))
    if gpu_model:
        gpu_model = find_gpu_model(gpu_model).key  # raises with the known list
    modes = given["modes"]
    items = [m for m in modes.split(",") if m.strip()] if isinstance(modes, str) else list(modes or [])
    if not items:
        raise UserError("modes: empty; give at least one of exclusive, timeslice:N, mps:N, mig:LAYOUT")
    resolved = tuple(resolve_mode(m, gpu_model) for m in items)
    for m in resolved:
        check_mode_placement(m, placement, node_name, gpu_model)
    what = settings.workload  # neighbours of another pattern need the replicas of a cell in one pod
    check_pattern_placement(placement, what.pattern, what.neighbour_pattern)
    particles = parse_particles(given["particle_counts"] or [])
    reps = whole_number("repeats", given["repeats"], 1)
    warm = whole_number("warmup_repeats", given["warmup_repeats"], 0)
    budget = str(given["budget"] or "").strip()
    budget_s = parse_duration(budget, "budget") if budget else None
    cells = tuple(range(len(particles) * (reps + warm)))
    return CellGrid(
        resolved, cells, node_name, gpu_model, placement, tuple(particles), reps, warm, budget_s, settings=settings
    )
