"""A sweep planned as separate tasks: each (mode, cell index) runs on its own (the KFP pipelines).

:func:`plan_sweep` validates the whole sweep before anything runs and numbers the cells of one
mode; :func:`cell_of` turns a cell index back into its particle count and repeat. Repeats
``1 - warmup_repeats .. 0`` are discarded warm-ups, so a mode has
``len(particle_counts) * (repeats + warmup_repeats)`` cells, run one after the other.
:func:`check_cell` judges the rows of a cell whose replicas ran as separate pods together.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sharebench.errors import UserError
from sharebench.gpus import gpu_model as find_gpu_model
from sharebench.gpus import resolve_layout
from sharebench.modes import parse_mode
from sharebench.node.placement import check_placement, split_node
from sharebench.parse import whole_number
from sharebench.sweep.plan import cell_id, parse_particles

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
) -> CellGrid:
    """Validate a sweep before anything runs; numbers may arrive as floats (``2.0``), modes as ``a,b``."""
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
    per_size = whole_number("repeats", repeats, 1) + whole_number("warmup_repeats", warmup_repeats, 0)
    whole_number("turns", turns, 1)
    return CellGrid(tuple(resolved), tuple(range(len(counts) * per_size)), node_name, gpu_model, placement)


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
