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

import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from sharebench.analysis import analyse
from sharebench.errors import UserError
from sharebench.gpus import gpu_model as find_gpu_model
from sharebench.gpus import layout_profiles, resolve_layout
from sharebench.manifests.names import OPERATOR_NAMESPACE, RUN_NAMESPACE
from sharebench.modes import parse_mode
from sharebench.node import ReconfigureOptions, renew_lease
from sharebench.node import reconfigure as reconfigure_node
from sharebench.node import restore as restore_node
from sharebench.node.claims import create_claims, delete_claims
from sharebench.parse import whole_number
from sharebench.report import build_report, tables_markdown, write_tables
from sharebench.results import ResultsWriter, read_json, read_provenance, write_json, write_provenance
from sharebench.sweep import Cell, SweepConfig, measure_cell, new_sweep_id, parse_particles, validate
from sharebench.sweep import cell_id as sweep_cell_id
from sharebench.telemetry import collect_provenance

DEFAULT_MODES = ["exclusive", "timeslice:2", "timeslice:4", "timeslice:8", "mps:2", "mps:4", "mig:7g", "mig:1g"]
DEFAULT_PARTICLE_COUNTS = [5_000_000, 10_000_000, 15_000_000]
PLACEMENTS = ("pods", "processes", "dra")  # dra: one pod per replica, the GPU from the cell's ResourceClaim
HOSTNAME_LABEL = "kubernetes.io/hostname"
WARMUP_REPEATS = 1  # default: repeat 0 of every (mode, particle count) is a discarded warm-up


def say(message: str) -> None:
    """One line in the task's log (the KFP UI shows a task's stdout)."""
    print(f"sharebench: {message}", flush=True)


# ------------------------------------------------------------------ planning
def resolve_mode(mode: str, gpu_model: str) -> str:
    """A mode string, lowercase, with a MIG layout resolved for the GPU model (``mig:1g`` →
    ``mig:1g.18gb`` on an H200). Without a GPU model a MIG layout is kept as written."""
    m = parse_mode(mode)
    if m.kind == "mig" and gpu_model:
        layout = resolve_layout(gpu_model, m.layout)
        return "mig:" + (layout[4:] if layout != "all-disabled" else layout)
    return m.label


def plan_sweep(
    *,
    modes: list[str],
    gpu_model: str,
    particle_counts: list,
    repeats: int,
    placement: str,
    node_name: str,
    turns: int,
    warmup_repeats: int = WARMUP_REPEATS,
) -> dict[str, Any]:
    """Validate a sweep before anything runs; return the resolved modes and the cell indices.

    One cell is one (particle count, repeat) of a mode; repeats ``1 - warmup_repeats .. 0`` are
    discarded warm-ups, so a mode has ``len(particle_counts) * (repeats + warmup_repeats)``
    cells, run one after the other.
    """
    node_name, gpu_model = split_node(node_name, gpu_model)
    if placement not in PLACEMENTS:
        raise UserError(f"placement {placement!r} is not allowed; allowed: {', '.join(PLACEMENTS)}")
    if gpu_model:
        gpu_model = find_gpu_model(gpu_model).key  # raises with the known list
    if isinstance(modes, str):
        modes = [m for m in modes.split(",") if m.strip()]
    if not modes:
        raise UserError("modes: empty; give at least one of exclusive, timeslice:N, mps:N, mig:LAYOUT")
    resolved = [resolve_mode(m, gpu_model) for m in modes]
    for label in resolved:
        kind = parse_mode(label).kind
        if kind == "partition" and (node_name or placement != "processes"):
            raise UserError(f"mode {label!r} is a CPU-only local mode: it needs placement 'processes' and no node_name")
        if kind == "mig" and not gpu_model:
            raise UserError(f"mode {label!r} needs gpu_model (e.g. H200, A100-40GB) to know the MIG instances")
        if parse_mode(label).interval is not None and placement != "dra":
            raise UserError(
                f"mode {label!r} sets the GPU's time-slice interval: in the pipeline only placement 'dra' "
                "can (the DRA driver applies it per claim); on one machine use sharebench run "
                "--allow-gpu-settings"
            )
        if kind != "exclusive" and placement == "pods" and not node_name:
            # replica pods would ask the cluster for a shared/MIG resource on a node nobody reconfigured
            raise UserError(
                f"mode {label!r} with placement 'pods' needs node_name (NAME or NAME=GPU_MODEL): "
                "sharebench reconfigures that node; or use placement 'processes' to run on this machine"
            )
    counts = parse_particles(particle_counts)
    repeats = whole_number("repeats", repeats, 1)
    whole_number("turns", turns, 1)
    n_cells = len(counts) * (repeats + whole_number("warmup_repeats", warmup_repeats, 0))
    say(
        f"plan: {len(resolved)} mode(s) {', '.join(resolved)}; {n_cells} cell(s) per mode; placement {placement}; "
        f"node {node_name or '(none: this machine)'}"
    )
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
    if placement == "dra":  # no extended resource: the cell's ResourceClaim gives the GPU
        return {"resource": "", "count": 0, "pods": list(range(n)), "processes": 1}
    if placement == "pods":
        return {"resource": res, "count": 1 if res else 0, "pods": list(range(n)), "processes": 1}
    return {"resource": res, "count": (n if m.kind == "mig" else 1) if res else 0, "pods": [0], "processes": n}


def cell_of(cell: int, particle_counts: list, repeats: int, warmup_repeats: int = WARMUP_REPEATS) -> tuple[int, int]:
    """Cell index → (particle count, repeat); repeats <= 0 are warm-ups."""
    warm = whole_number("warmup_repeats", warmup_repeats, 0)
    per = whole_number("repeats", repeats, 1) + warm
    counts = parse_particles(particle_counts)
    c = whole_number("cell", cell, 0)
    if not 0 <= c < len(counts) * per:
        raise UserError(f"cell {c} is outside 0..{len(counts) * per - 1}")
    return counts[c // per], c % per + 1 - warm


def cell_id(mode: str, particles: int, repeat: int) -> str:
    """The local sweep's cell id, e.g. ``timeslice:2_p10000_r1``."""
    return sweep_cell_id(parse_mode(mode), int(particles), int(repeat))


# ------------------------------------------------------------------ node
def reconfigure(
    *,
    node_name: str,
    mode: str,
    gpu_model: str,
    placement: str,
    namespace: str = OPERATOR_NAMESPACE,
    timeout_s: float = 600,
    force: bool = False,
    run_id: str = "",
) -> dict[str, Any]:
    """Put the node in ``mode`` and say how the mode's pods must request it.

    Without a node (``node_name`` empty: kfp.local on this machine) nothing is changed and
    the step says so.
    """
    if placement == "dra":
        say(f"placement dra: the node is not reconfigured; each cell of {mode} claims its GPU (ResourceClaim)")
        req = pod_request(mode, gpu_model, placement)
        return {
            **req,
            "node_selector": {HOSTNAME_LABEL: node_name} if node_name else {},
            "advertised": {},
            "reconfigured": False,
        }
    if not node_name:
        say(f"no node_name: running on this machine, no cluster; reconfigure to {mode} is a no-op")
        req = pod_request(mode, gpu_model, placement)
        return {**req, "node_selector": {}, "advertised": {}, "reconfigured": False}
    options = ReconfigureOptions(
        gpu_model=gpu_model or None,
        namespace=namespace,
        timeout_s=float(timeout_s),
        force=bool(force),
        holder=run_id or None,
    )
    state = reconfigure_node(node_name, mode, options, progress=say)
    req = pod_request(mode, state.get("gpu_model") or gpu_model, placement, resource=state.get("resource"))
    say(f"node {node_name} in {mode}: pods request {req['count']} x {req['resource']} each")
    return {**req, "node_selector": {HOSTNAME_LABEL: node_name}, "advertised": state, "reconfigured": True}


def restore(*, node_names: list[str], timeout_s: float = 600, run_id: str = "") -> list[dict[str, Any]]:
    """Put every node back as it was (idempotent); no node: a no-op that says so."""
    names = [split_node(n)[0] for n in (node_names or []) if n]
    if not names:
        say("no node_name: ran on this machine, no cluster; restore is a no-op")
        return []
    return [restore_node(n, timeout_s=float(timeout_s), progress=say, holder=run_id or None) for n in names]


# ------------------------------------------------------------------ claims (placement dra)
def claim_cell(
    *, placement: str, mode: str, cell_id: str, pods: int, gpu_model: str = "", namespace: str = RUN_NAMESPACE
) -> list[str]:
    """Placement dra: create the cell's ResourceClaim(s) (sharebench.node.claims); other placements: none."""
    if placement != "dra":
        return []
    return create_claims(
        mode, cell_id, pods=whole_number("pods", pods, 1), namespace=namespace, gpu_model=gpu_model, progress=say
    )


def release_cell(*, placement: str, rows_path: str, namespace: str = RUN_NAMESPACE) -> list[str]:
    """Placement dra: delete the claims of the cell whose rows are at ``rows_path``."""
    if placement != "dra":
        return []
    ids = sorted({str(r.get("cell_id")) for r in read_rows([rows_path]) if r.get("cell_id")})
    return [n for cell in ids for n in delete_claims(cell, namespace=namespace, progress=say)]


def release_all(*, placement: str, namespace: str = RUN_NAMESPACE) -> list[str]:
    """Placement dra, the sweep's exit step: delete every sharebench claim left (a failed cell's)."""
    if placement != "dra":
        return []
    gone = delete_claims(None, namespace=namespace, progress=say)
    say(f"placement dra: {len(gone)} leftover ResourceClaim(s) deleted in {namespace}")
    return gone


# ------------------------------------------------------------------ replicas
def schedule_start(
    *,
    mode: str,
    cell: int,
    particle_counts: list,
    repeats: int,
    start_delay_s: float,
    warmup_repeats: int = WARMUP_REPEATS,
    node_name: str = "",
    run_id: str = "",
) -> dict[str, Any]:
    """The cell's particle count, repeat and the instant its replicas start tracking together; with a
    node and a run id, the run's Lease on the node is renewed first (held for the whole run)."""
    if node_name and run_id:
        renew_lease(split_node(node_name)[0], run_id, progress=say)
    particles, repeat = cell_of(cell, particle_counts, repeats, warmup_repeats)
    start_at = time.time() + float(start_delay_s)
    say(f"cell {cell_id(mode, particles, repeat)}: replicas start tracking at {start_at:.3f} (epoch s)")
    return {"particles": particles, "repeat": repeat, "start_at": start_at, "cell_id": cell_id(mode, particles, repeat)}


def run_simpletrack(
    *,
    mode: str,
    particles: int,
    turns: int,
    repeat: int,
    replica: int,
    replicas: int,
    processes: int,
    start_at: float,
    device: str,
    engine: str,
    lattice: str,
    seed: int,
    out_path: str,
    workdir: str | None = None,
    placed: str = "",
    command: str = "",
    exec_timing: str = "protocol",
) -> list[dict[str, Any]]:
    """Run this pod's part of a cell; write its results rows to ``out_path``.

    ``processes`` > 1 or an unshared mode: the whole cell runs here, as the local sweep runs
    it (the mode's sharing executor, N processes behind one start barrier). Otherwise this
    pod is replica ``replica`` of ``replicas`` pods sharing the node's device: one process
    that sleeps until ``start_at`` and tracks; its row is labelled with the cell's mode.
    ``placed``: what the pod requested, where (logged).
    """
    m = parse_mode(mode)
    particles, turns, repeat = (
        whole_number(n, v, lo)
        for n, v, lo in (("particles", particles, 1), ("turns", turns, 1), ("repeat", repeat, -(10**6)))
    )
    replica, replicas, processes = (
        whole_number(n, v, lo)
        for n, v, lo in (("replica", replica, 0), ("replicas", replicas, 1), ("processes", processes, 1))
    )
    one_of_pods = processes == 1 and replicas > 1
    here = parse_mode("exclusive") if one_of_pods else m
    options: dict[str, Any] = {"start_at": float(start_at)} if one_of_pods else {}
    if engine == "exec" or command:  # any program, through the replica protocol
        options.update(exec_command=command, exec_timing=exec_timing)
    config = SweepConfig(
        modes=[here.label],
        particles=[particles],
        turns=turns,
        repeats=1,
        warmup_repeats=0,
        device=device,
        engine=engine,
        lattice=lattice or None,
        seed=whole_number("seed", seed, 0),
        progress=False,
        run_options=options,
    )
    cell = Cell(here, particles, repeat, id=cell_id(m.label, particles, repeat))
    if placed:
        say(f"{cell.id}: {processes} process(es) here, {placed}")
    result = measure_cell(validate(config), cell, Path(workdir or tempfile.mkdtemp(prefix="sharebench-cell-")))
    rows = result.rows
    if one_of_pods:
        for row in rows:
            row.update(mode=m.label, mode_kind=m.kind, replicas=replicas, replica=replica)
    for note in result.notes:
        say(note)
    for row in rows:
        say(
            f"{cell.id} replica {row.get('replica')}: {row.get('status')} track_s={row.get('track_s')} "
            f"{row.get('error') or ''}".rstrip()
        )
    write_rows(out_path, rows)
    return rows


def write_rows(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Results rows handed from one task to the next (a ``rows`` document)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json(path, "rows", {"rows": rows})


def read_rows(paths: list[str]) -> list[dict[str, Any]]:
    """The rows of several tasks, in the order given."""
    return [row for p in paths for row in read_json(p, "rows")["rows"]]


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
    failed = [r.get("cell_error") for r in rows if r.get("cell_status") == "failed" and r.get("cell_error")]
    cell_error = "; ".join(dict.fromkeys(failed + errors))
    for r in rows:
        r["cell_status"] = "failed" if cell_error or r.get("cell_status") == "failed" else "ok"
        r["cell_error"] = cell_error
    return rows


def merge_records(paths: list[str], out_path: str, *, cell: bool = False) -> int:
    """Concatenate the rows at ``paths`` into one ``rows`` document at ``out_path``;
    ``cell``: the rows are the pods of one cell, checked together (:func:`check_cell`)."""
    rows = read_rows(paths)
    if cell:
        rows = check_cell(rows)
    write_rows(out_path, rows)
    say(f"merged {len(rows)} row(s) from {len(paths)} task(s)")
    return len(rows)


# ------------------------------------------------------------------ results and report
def loss_metrics(tables: dict[str, Any]) -> dict[str, float]:
    """``loss_pct/<mode>/p<particles>`` -> loss % (two decimals) of every loss computed."""
    metrics: dict[str, float] = {}
    for name in ("timeslice", "mps", "mig", "partition"):
        t = tables.get(name)
        if t is None or t.empty or "loss_pct" not in t.columns:
            continue
        for _, r in t.iterrows():
            v = float(r["loss_pct"])
            if v == v:  # NaN: not computed (flagged in the report)
                metrics[f"loss_pct/{r['mode']}/p{int(r['particles'])}"] = round(v, 2)
    return metrics


def collect_results(
    paths: list[str],
    results_dir: str,
    tables_md_path: str,
    *,
    node_name: str = "",
    gpu_model: str = "",
    sweep_id: str | None = None,
) -> dict[str, Any]:
    """Write a results folder (results.csv, provenance.json, tables/) from the modes' rows; return
    the loss metrics (``loss_pct/<mode>/p<particles>``) and the tables as Markdown."""
    rows = read_rows(paths)
    if not rows:
        raise UserError("no results rows reached collect_results: every cell was empty")
    sid = sweep_id or new_sweep_id()
    for r in rows:
        r["sweep_id"] = sid
    out = Path(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    ResultsWriter(out).append(rows)
    first = rows[0]
    device = {
        "name": first.get("device_name"),
        "kind": first.get("device_class"),
        "backend": first.get("backend"),
        "spec": first.get("device_spec"),
        "uuid": first.get("parent_uuid") or first.get("device_uuid"),
        "node": node_name or None,
        "gpu_model": gpu_model or None,
    }
    prov = collect_provenance(
        {k: v for k, v in device.items() if v},
        command=["kfp", "sharebench-sweep", f"node={node_name}"],
        config={"node_name": node_name, "gpu_model": gpu_model, "sweep_id": sid},
        node=node_name or None,
    )
    write_provenance(out, prov)
    tables = analyse(out)
    write_tables(tables, out)
    title = f"# sharebench results{f' on {node_name}' if node_name else ''}{f' ({gpu_model})' if gpu_model else ''}\n"
    Path(tables_md_path).write_text("\n".join([title, tables_markdown(tables)]))
    metrics = loss_metrics(tables)
    say(f"results: {len(rows)} row(s) in {out}; {len(metrics)} loss metric(s)")
    return {"metrics": metrics, "rows": len(rows), "results_dir": str(out)}


def write_report(results_dirs: list[str], html_path: str, md_path: str, plots_dir: str) -> dict[str, str]:
    """Report (HTML + Markdown) and plots of the first results folder; a second one is put
    beside it for comparison; further ones each get a comparison with the first, appended."""
    if not results_dirs:
        raise UserError("no results folder to report on")
    work = Path(tempfile.mkdtemp(prefix="sharebench-report-"))
    copies: list[Path] = []
    for i, d in enumerate(results_dirs):
        # the copy's folder name is the report's label for it: the node's name where there is one
        device = (read_provenance(d) or {}).get("device") or {}
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(device.get("node") or Path(d).name or f"results-{i}"))
        dst = work / name
        while dst.exists() or dst in copies:
            dst = work / f"{name}-{i}"
        shutil.copytree(d, dst)
        copies.append(dst)
    others = copies[1:] or [None]
    html_parts, md_parts = [], []
    for j, other in enumerate(others):
        target = copies[0] if j == 0 else work / f"{copies[0].name}-vs-{other.name}"
        if j > 0:
            shutil.copytree(copies[0], target)
        paths = build_report(target, compare=other)
        html_parts.append(Path(paths["html"]).read_text())
        md_parts.append(Path(paths["markdown"]).read_text())
        if j == 0:
            shutil.copytree(target / "plots", plots_dir, dirs_exist_ok=True)
    html = html_parts[0] if len(html_parts) == 1 else join_html(html_parts)
    Path(html_path).write_text(html)
    Path(md_path).write_text("\n\n---\n\n".join(md_parts))
    say(f"report: {html_path} ({len(results_dirs)} results folder(s))")
    return {"html": html_path, "md": md_path, "plots": plots_dir}


def join_html(docs: list[str]) -> str:
    """Several self-contained HTML reports in one page (their bodies, one after the other)."""
    head = re.search(r"(?is)^(.*?<body[^>]*>)", docs[0])
    bodies = [re.search(r"(?is)<body[^>]*>(.*)</body>", d) for d in docs]
    if not head or not all(bodies):
        return "\n<hr>\n".join(docs)
    return head.group(1) + "\n<hr>\n".join(b.group(1) for b in bodies) + "\n</body></html>\n"
