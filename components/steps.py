"""What each KFP component body calls: one function per step, no KFP inside.

A component body imports this module and calls one function; the function calls
the library (kernel, sharing executors, node reconfiguration, results, analysis,
report) and translates between KFP's plain types (str, int, float, list, dict,
file paths) and the library's objects. Keeping this KFP-free lets the tests call
every step directly, and keeps the compiled YAML small.

KFP passes numbers through JSON (``google.protobuf.Struct``), so an ``int``
parameter may arrive as ``2.0``: every function here casts what it receives.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from sharebench.errors import UserError
from sharebench.gpus import gpu_model as _gpu_model
from sharebench.gpus import layout_profiles, resolve_layout
from sharebench.modes import parse_mode

DEFAULT_MODES = ["exclusive", "timeslice:2", "timeslice:4", "timeslice:8",
                 "mps:2", "mps:4", "mig:7g", "mig:1g"]
DEFAULT_PARTICLE_COUNTS = [5_000_000, 10_000_000, 15_000_000]
PLACEMENTS = ("pods", "processes")
PART_OF_LABEL = ("app.kubernetes.io/part-of", "sharebench")   # the node library spares pods with it
HOSTNAME_LABEL = "kubernetes.io/hostname"
WARMUP_REPEATS = 1   # repeat 0 of every (mode, particle count) is the discarded warm-up


def say(message: str) -> None:
    """One line in the task's log (the KFP UI shows a task's stdout)."""
    print(f"sharebench: {message}", flush=True)


# ------------------------------------------------------------------ planning
def _ints(values: Any, what: str) -> list[int]:
    if isinstance(values, str):
        values = [v for v in values.replace(" ", "").split(",") if v]
    out = []
    for v in values or []:
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise UserError(f"{what}: {v!r} is not a number; allowed: positive integers such as 1e6") from None
        if f <= 0 or f != int(f):
            raise UserError(f"{what}: {v!r} must be a positive integer")
        out.append(int(f))
    if not out:
        raise UserError(f"{what}: empty; give at least one positive integer")
    return out


def resolve_mode(mode: str, gpu_model: str) -> str:
    """A mode string, lowercase, with a MIG layout resolved for the GPU model (``mig:1g`` →
    ``mig:1g.18gb`` on an H200). Without a GPU model a MIG layout is kept as written."""
    m = parse_mode(mode)
    if m.kind == "mig" and gpu_model:
        layout = resolve_layout(gpu_model, m.layout)
        return "mig:" + (layout[4:] if layout != "all-disabled" else layout)
    return m.label


def plan_sweep(*, modes: list[str], gpu_model: str, particle_counts: list, repeats: int,
               placement: str, node_name: str, turns: int) -> dict[str, Any]:
    """Validate a sweep before anything runs; return the resolved modes and the cell indices.

    One cell is one (particle count, repeat) of a mode; repeat 0 is the warm-up, so a mode
    has ``len(particle_counts) * (repeats + 1)`` cells, run one after the other.
    """
    node_name, gpu_model = split_node(node_name, gpu_model)
    if placement not in PLACEMENTS:
        raise UserError(f"placement {placement!r} is not allowed; allowed: {', '.join(PLACEMENTS)}")
    if gpu_model:
        gpu_model = _gpu_model(gpu_model).key  # raises with the known list
    if isinstance(modes, str):
        modes = [m for m in modes.split(",") if m.strip()]
    if not modes:
        raise UserError("modes: empty; give at least one of exclusive, timeslice:N, mps:N, mig:LAYOUT")
    resolved = [resolve_mode(m, gpu_model) for m in modes]
    for label in resolved:
        kind = parse_mode(label).kind
        if kind == "partition" and (node_name or placement == "pods"):
            raise UserError(f"mode {label!r} is a CPU-only local mode: it needs placement 'processes' and no node_name")
        if kind == "mig" and not gpu_model:
            raise UserError(f"mode {label!r} needs gpu_model (e.g. H200, A100-40GB) to know the MIG instances")
    counts = _ints(particle_counts, "particle_counts")
    if int(float(repeats)) < 1:
        raise UserError(f"repeats must be >= 1 (got {repeats!r})")
    if int(float(turns)) < 1:
        raise UserError(f"turns must be >= 1 (got {turns!r})")
    n_cells = len(counts) * (int(float(repeats)) + WARMUP_REPEATS)
    say(f"plan: {len(resolved)} mode(s) {', '.join(resolved)}; {n_cells} cell(s) per mode; placement {placement}; "
        f"node {node_name or '(none: this machine)'}")
    return {"modes": resolved, "cells": list(range(n_cells)), "node_name": node_name, "gpu_model": gpu_model}


def split_node(node: str, gpu_model: str = "") -> tuple[str, str]:
    """``NAME=GPU_MODEL`` → (NAME, GPU_MODEL); ``NAME`` → (NAME, gpu_model)."""
    name, sep, model = (node or "").strip().partition("=")
    if sep and not (name.strip() and model.strip()):
        raise UserError(f"node {node!r}: write NAME or NAME=GPU_MODEL, e.g. gpu-node-a=A100-40GB")
    return name.strip(), (model.strip() if sep else (gpu_model or "").strip())


def pod_request(mode: str, gpu_model: str, placement: str, resource: str | None = None) -> dict[str, Any]:
    """How a cell of ``mode`` is laid out in pods: ``pods`` (replica index per pod),
    ``processes`` per pod, and the extended resource each pod requests (``resource`` x ``count``).

    ``resource`` is what the node advertises for the mode (from the node library); without it
    the default device-plugin naming is assumed (``nvidia.com/gpu``; ``nvidia.com/mig-<profile>``
    under the mixed MIG strategy).
    """
    m = parse_mode(mode)
    if placement not in PLACEMENTS:
        raise UserError(f"placement {placement!r} is not allowed; allowed: {', '.join(PLACEMENTS)}")
    if m.kind == "mig":
        if not gpu_model:
            raise UserError(f"mode {mode!r} needs gpu_model to know the MIG instances")
        profiles = layout_profiles(gpu_model, m.layout)
        n = max(len(profiles), 1)
        res = resource or (f"nvidia.com/mig-{profiles[0].name}" if profiles else "nvidia.com/gpu")
    elif m.kind == "partition":
        n, res = int(m.replicas or 1), ""
    else:
        n = int(m.replicas or 1)
        res = resource or "nvidia.com/gpu"
    if placement == "pods":
        return {"resource": res, "count": 1 if res else 0, "pods": list(range(n)), "processes": 1}
    return {"resource": res, "count": (n if m.kind == "mig" else 1) if res else 0, "pods": [0], "processes": n}


def cell_of(cell: int, particle_counts: list, repeats: int) -> tuple[int, int]:
    """Cell index → (particle count, repeat); repeat 0 is the warm-up."""
    per = int(float(repeats)) + WARMUP_REPEATS
    counts = _ints(particle_counts, "particle_counts")
    c = int(float(cell))
    if not 0 <= c < len(counts) * per:
        raise UserError(f"cell {c} is outside 0..{len(counts) * per - 1}")
    return counts[c // per], c % per


def cell_id(mode: str, particles: int, repeat: int) -> str:
    return f"{mode}_p{int(particles)}_r{int(repeat)}"


# ------------------------------------------------------------------ node
def reconfigure(*, node_name: str, mode: str, gpu_model: str, placement: str,
                namespace: str = "gpu-operator", timeout_s: float = 600, force: bool = False) -> dict[str, Any]:
    """Put the node in ``mode`` and say how the mode's pods must request it.

    Without a node (``node_name`` empty: kfp.local on this machine) nothing is changed and
    the step says so.
    """
    if not node_name:
        say(f"no node_name: running on this machine, no cluster; reconfigure to {mode} is a no-op")
        req = pod_request(mode, gpu_model, placement)
        return {**req, "node_selector": {}, "advertised": {}, "reconfigured": False}
    from sharebench.node import reconfigure as node_reconfigure

    state = node_reconfigure(node_name, mode, gpu_model=gpu_model or None, namespace=namespace,
                             timeout_s=float(timeout_s), force=bool(force), progress=say)
    req = pod_request(mode, state.get("gpu_model") or gpu_model, placement, resource=state.get("resource"))
    say(f"node {node_name} in {mode}: pods request {req['count']} x {req['resource']} each")
    return {**req, "node_selector": {HOSTNAME_LABEL: node_name}, "advertised": state, "reconfigured": True}


def restore(*, node_names: list[str], timeout_s: float = 600) -> list[dict[str, Any]]:
    """Put every node back as it was (idempotent); no node: a no-op that says so."""
    names = [split_node(n)[0] for n in (node_names or []) if n]
    if not names:
        say("no node_name: ran on this machine, no cluster; restore is a no-op")
        return []
    from sharebench.node import restore as node_restore

    return [node_restore(n, timeout_s=float(timeout_s), progress=say) for n in names]


# ------------------------------------------------------------------ replicas
def schedule_start(*, mode: str, cell: int, particle_counts: list, repeats: int, start_delay_s: float) -> dict[str, Any]:
    """The cell's particle count, repeat and the instant its replicas start tracking together."""
    particles, repeat = cell_of(cell, particle_counts, repeats)
    start_at = time.time() + float(start_delay_s)
    say(f"cell {cell_id(mode, particles, repeat)}: replicas start tracking at {start_at:.3f} (epoch s)")
    return {"particles": particles, "repeat": repeat, "start_at": start_at,
            "cell_id": cell_id(mode, particles, repeat)}


def run_simpletrack(*, mode: str, particles: int, turns: int, repeat: int, replica: int, processes: int,
                    start_at: float, device: str, engine: str, lattice: str, seed: int,
                    out_path: str) -> list[dict[str, Any]]:
    """Run one replica (processes == 1) or the whole cell as N processes; write its rows."""
    raise NotImplementedError("wired to the kernel and sharing library once they land")


def merge_records(paths: list[str], out_path: str) -> int:
    """Concatenate the JSON row lists at ``paths`` into one JSON list at ``out_path``."""
    rows: list[dict[str, Any]] = []
    for p in paths:
        rows.extend(json.loads(Path(p).read_text()))
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(rows))
    say(f"merged {len(rows)} row(s) from {len(paths)} task(s)")
    return len(rows)
