"""A sweep planned as separate tasks: each (mode, cell index) runs on its own (the KFP pipelines).

:func:`plan_sweep` validates the whole sweep before anything runs and numbers the cells of one
mode; :func:`cell_of` turns a cell index back into its particle count and repeat. Repeats
``1 - warmup_repeats .. 0`` are discarded warm-ups, so a mode has
``len(particle_counts) * (repeats + warmup_repeats)`` cells, run one after the other.
:func:`check_cell` judges the rows of a cell whose replicas ran as separate pods together.

With a budget (``plan_sweep(budget="10m")``), :func:`plan_budget_grid` keeps the modes x sizes x
repeats that fit it (``sweep.budget.plan_within``: headline modes first, the largest size first),
from a calibration on this machine (no node: the pipeline runs here) or from the recorded rates of the
node's GPU model (``sweep.budget.recorded_calibration``), with the pipeline's own overheads
(``sweep.budget.pipeline_overheads``). A static task graph cannot decide a further repeat after a cell,
so the repeats are fixed, chosen to fit: a mode then has cells at its planned sizes only
(``CellGrid.cells_by_mode``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharebench.errors import UserError
from sharebench.gpus import gpu_model as find_gpu_model
from sharebench.gpus import resolve_layout
from sharebench.modes import parse_mode
from sharebench.node.placement import check_placement, split_node
from sharebench.parse import whole_number
from sharebench.sweep.budget import (
    PROBE_TURNS,
    RECORDED_ROOT,
    BudgetPlan,
    Calibration,
    calibrate_sizes,
    fmt_duration,
    model_replicas,
    parse_duration,
    pipeline_overheads,
    plan_within,
    recorded_calibration,
)
from sharebench.sweep.plan import SweepConfig, cell_id, parse_particles, validate
from sharebench.workloads import Workload

DEFAULT_MODES = ["exclusive", "timeslice:2", "timeslice:4", "timeslice:8", "mps:2", "mps:4", "mig:7g", "mig:1g"]
DEFAULT_PARTICLE_COUNTS = [5_000_000, 10_000_000, 15_000_000]
WARMUP_REPEATS = 1  # default: repeat 0 of every (mode, particle count) is a discarded warm-up


@dataclass(frozen=True)
class CellGrid:
    """A validated sweep of separate tasks: the resolved modes, the cell indices of one mode, the
    node (``""``: this machine) and its GPU model (``""``: unknown)."""

    modes: tuple[str, ...]
    cells: tuple[int, ...]
    node_name: str
    gpu_model: str
    placement: str
    particle_counts: tuple[int, ...] = ()
    repeats: int = 1
    warmup_repeats: int = WARMUP_REPEATS
    budget_s: float | None = None  # None: no budget (every mode runs every cell)
    cells_by_mode: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # with a budget: its planned cells

    def cells_of(self, mode: str) -> tuple[int, ...]:
        """The cell indices ``mode`` runs: all of them, or with a budget those of its planned sizes."""
        return tuple(self.cells_by_mode.get(mode, self.cells)) if self.cells_by_mode else self.cells

    def describe(self) -> str:
        return (
            f"plan: {len(self.modes)} mode(s) {', '.join(self.modes)}; {len(self.cells)} cell(s) per mode; "
            f"placement {self.placement}; node {self.node_name or '(none: this machine)'}"
        )


def resolve_mode(mode: str, gpu_model: str) -> str:
    """A mode string, lowercase, with a MIG layout resolved for the GPU model (``mig:1g`` →
    ``mig:1g.18gb`` on an H200). Without a GPU model a MIG layout is kept as written."""
    m = parse_mode(mode)
    if m.kind == "mig" and gpu_model:
        layout = resolve_layout(gpu_model, m.layout or "")
        return "mig:" + (layout[4:] if layout != "all-disabled" else layout)
    return m.label


def check_mode_placement(label: str, placement: str, node_name: str, gpu_model: str) -> None:
    """A resolved mode that cannot run under this placement, node and GPU model: a one-line error."""
    m = parse_mode(label)
    if m.kind == "partition" and (node_name or placement != "processes"):
        raise UserError(f"mode {label!r} is a CPU-only local mode: it needs placement 'processes' and no node_name")
    if m.kind == "mig" and not gpu_model:
        raise UserError(f"mode {label!r} needs gpu_model (e.g. H200, A100-40GB) to know the MIG instances")
    if m.interval is not None and placement != "dra":
        raise UserError(
            f"mode {label!r} sets the GPU's time-slice interval: in the pipeline only placement 'dra' "
            "can (the DRA driver applies it per claim); on one machine use sharebench run "
            "--allow-gpu-settings"
        )
    if m.kind != "exclusive" and placement == "pods" and not node_name:
        # replica pods would ask the cluster for a shared/MIG resource on a node nobody reconfigured
        raise UserError(
            f"mode {label!r} with placement 'pods' needs node_name (NAME or NAME=GPU_MODEL): "
            "sharebench reconfigures that node; or use placement 'processes' to run on this machine"
        )


def plan_sweep(
    *,
    modes: Sequence[str] | str,
    gpu_model: str,
    particle_counts: Sequence[Any] | str,
    repeats: Any,
    placement: str,
    node_name: str,
    turns: Any,
    warmup_repeats: Any = WARMUP_REPEATS,
    budget: str = "",
) -> CellGrid:
    """Validate a sweep before anything runs; numbers may arrive as floats (``2.0``), modes as ``a,b``;
    ``budget``: '' (none) or a duration (``sweep.budget.parse_duration``), planned by :func:`plan_budget_grid`."""
    node_name, gpu_model = split_node(node_name, gpu_model)
    check_placement(placement)
    if gpu_model:
        gpu_model = find_gpu_model(gpu_model).key  # raises with the known list
    if isinstance(modes, str):
        modes = [m for m in modes.split(",") if m.strip()]
    if not modes:
        raise UserError("modes: empty; give at least one of exclusive, timeslice:N, mps:N, mig:LAYOUT")
    resolved = [resolve_mode(m, gpu_model) for m in modes]
    for label in resolved:
        check_mode_placement(label, placement, node_name, gpu_model)
    counts = parse_particles(list(particle_counts) if not isinstance(particle_counts, str) else particle_counts)
    reps, warm = whole_number("repeats", repeats, 1), whole_number("warmup_repeats", warmup_repeats, 0)
    whole_number("turns", turns, 1)
    budget_s = parse_duration(budget, "budget") if str(budget or "").strip() else None
    cells = tuple(range(len(counts) * (reps + warm)))
    return CellGrid(tuple(resolved), cells, node_name, gpu_model, placement, tuple(counts), reps, warm, budget_s)


def calibrate_here(grid: CellGrid, turns: int, workload: Workload) -> tuple[Calibration, dict[str, int]]:
    """The rates of one short exclusive run per size on this machine (the device of ``workload``), as
    ``sharebench run --budget`` calibrates, and each mode's replicas there."""
    config = SweepConfig(
        modes=list(grid.modes),
        particles=list(grid.particle_counts),
        turns=turns,
        repeats=grid.repeats,
        warmup_repeats=grid.warmup_repeats,
        workload=workload,
        progress=False,
    )
    sweep = validate(config)
    calibration = calibrate_sizes(sweep.run_config, grid.particle_counts, probe_turns=PROBE_TURNS)
    return calibration, {m.label: sweep.replicas(m) for m in sweep.modes}


def plan_budget_grid(
    grid: CellGrid,
    *,
    turns: Any,
    workload: Mapping[str, Any] | Workload,
    start_delay_s: float,
    root: Path | str = RECORDED_ROOT,
) -> tuple[CellGrid, BudgetPlan]:
    """The grid cut to what fits ``grid.budget_s`` (module docstring): the planned modes (a mode with no
    block left out), sizes, repeats and each mode's cells, and the budget plan behind them. No node: the
    rates are calibrated on this machine; a node: they are the recorded ones of its GPU model under
    ``root`` (a one-line UserError without a GPU model, or with none recorded)."""
    if grid.budget_s is None:
        raise ValueError("plan_budget_grid needs a grid with a budget")
    what = workload if isinstance(workload, Workload) else Workload.from_dict(dict(workload or {}))
    n_turns = whole_number("turns", turns, 1)
    modes = [parse_mode(m) for m in grid.modes]
    if grid.node_name:
        if not grid.gpu_model:
            raise UserError(
                f"budget {fmt_duration(grid.budget_s)} on node {grid.node_name!r} is planned from the recorded rates "
                "of its GPU model; allowed: gpu_model (e.g. H200) or node_name NAME=GPU_MODEL"
            )
        calibration, _ = recorded_calibration(grid.gpu_model, root, n_turns)
        replicas = {m.label: model_replicas(grid.gpu_model, m) for m in modes}
    else:
        calibration, replicas = calibrate_here(grid, n_turns, what)
    plan = plan_within(
        grid.budget_s,
        calibration,
        pipeline_overheads(float(start_delay_s), len(modes)),
        modes,
        grid.particle_counts,
        grid.repeats,
        grid.repeats,  # no repeat beyond the planned ones: a static graph
        replicas=replicas,
        warmup_repeats=grid.warmup_repeats,
    )
    sizes = tuple(p for p in plan.sizes if any(b.particles == p for b in plan.blocks))
    per = plan.repeats + plan.warmup_repeats
    by_mode = {
        label: tuple(i * per + k for i, p in enumerate(sizes) if plan.block(label, p) for k in range(per))
        for label in grid.modes
    }
    by_mode = {label: cells for label, cells in by_mode.items() if cells}
    planned = dataclasses.replace(
        grid,
        modes=tuple(by_mode),
        cells=tuple(range(len(sizes) * per)),
        particle_counts=sizes,
        repeats=plan.repeats,
        warmup_repeats=plan.warmup_repeats,
        cells_by_mode=by_mode,
    )
    return planned, plan


def budget_summary(plan: BudgetPlan, started_unix: float) -> dict[str, Any]:
    """What the report needs of a pipeline's budget plan, as plain values: the budget, the clock's start
    (epoch s, the plan step's), the prediction and the plan as ``--dry-run`` prints it."""
    return {
        "budget_s": plan.budget_s,
        "started_unix": float(started_unix),
        "predicted_s": round(plan.predicted_s, 1),
        "cells": len(plan.cells()),
        "plan": plan.describe().splitlines(),
    }


def budget_notes(summary: Mapping[str, Any], measured_cells: int, now_unix: float | None = None) -> list[str]:
    """The report's budget lines (its notes) of a pipeline run from :func:`budget_summary`: budget, time
    used from the plan step to now (before the report), the plan and what ran of it; none without a budget."""
    if not summary or summary.get("budget_s") is None:
        return []
    budget_s = float(summary["budget_s"])
    used = (time.time() if now_unix is None else now_unix) - float(summary["started_unix"])
    return [
        f"budget: {fmt_duration(budget_s)} ({budget_s:g} s); used {used:.1f} s ({100 * used / budget_s:.0f}%) from "
        f"the plan step to the results, before the report; predicted {float(summary['predicted_s']):.0f} s",
        f"budget: ran {measured_cells} of {int(summary['cells'])} planned cell(s); the pipeline's repeats are fixed, "
        "chosen to fit (a static task graph cannot repeat an unsettled cell)",
        *(f"budget plan: {line.strip()}" for line in summary.get("plan") or []),
    ]


def cell_of(
    cell: Any, particle_counts: Sequence[Any], repeats: Any, warmup_repeats: Any = WARMUP_REPEATS
) -> tuple[int, int]:
    """Cell index → (particle count, repeat); repeats <= 0 are warm-ups."""
    warm = whole_number("warmup_repeats", warmup_repeats, 0)
    per = whole_number("repeats", repeats, 1) + warm
    counts = parse_particles(list(particle_counts))
    c = whole_number("cell", cell, 0)
    if not 0 <= c < len(counts) * per:
        raise UserError(f"cell {c} is outside 0..{len(counts) * per - 1}")
    return counts[c // per], c % per + 1 - warm


def cell_name(mode: str, particles: int, repeat: int) -> str:
    """The sweep's cell id of a mode string, e.g. ``timeslice:2_p10000_r1``."""
    return cell_id(parse_mode(mode), int(particles), int(repeat))


def check_cell(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mark a cell made of several pods failed when a pod's replica failed or, under
    time-slicing/MPS, the pods ran on different devices (the node's device plugin may hand
    a multi-GPU node's replicas out on several GPUs). A cell already failed stays failed."""
    if not rows:
        return rows
    errors = [f"replica {r.get('replica')}: {r.get('error')}" for r in rows if r.get("status") != "ok"]
    kind = parse_mode(str(rows[0].get("mode", "exclusive"))).kind
    devices = sorted({str(r.get("device_uuid") or "?") for r in rows})
    if not errors and kind in ("timeslice", "mps") and len(devices) > 1:
        errors.append("replicas ran on different devices: " + ", ".join(devices))
    failed = [str(r["cell_error"]) for r in rows if r.get("cell_status") == "failed" and r.get("cell_error")]
    cell_error = "; ".join(dict.fromkeys(failed + errors))
    for r in rows:
        r["cell_status"] = "failed" if cell_error or r.get("cell_status") == "failed" else "ok"
        r["cell_error"] = cell_error
    return rows
