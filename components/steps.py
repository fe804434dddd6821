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

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from sharebench.advise import Window, advise, class_patterns, parse_time, read_costs, read_prometheus, write_advice
from sharebench.analysis import analyse
from sharebench.analysis.latency import DEFAULT_SLO, check_slo, users_at_target
from sharebench.components.image import IMAGE
from sharebench.errors import UserError
from sharebench.history import add_and_check
from sharebench.manifests.names import OPERATOR_NAMESPACE, RUN_NAMESPACE
from sharebench.modes import BASELINE, Mode, parse_mode
from sharebench.node import ReconfigureOptions, renew_lease
from sharebench.node.agent import Request, StepIdentity, file_request, wait_request
from sharebench.node.claims import create_claims, delete_claims
from sharebench.node.client import make_api_client
from sharebench.node.images import IMAGE_ALLOW_ENV, check_image
from sharebench.node.placement import HOSTNAME_LABEL, Placement, place_mode, restore_nodes
from sharebench.parse import parse_duration, seconds, whole_number
from sharebench.placement import PLACEMENTS as PLACEMENTS
from sharebench.placement import check_node_access, check_pattern_placement, pod_request, split_node
from sharebench.report import tables_markdown, write_tables
from sharebench.report.combine import write_combined
from sharebench.results import ResultsWriter, append_notes, read_json, write_json, write_provenance
from sharebench.results.bursts import append_bursts
from sharebench.sweep import Cell, SweepConfig, cell_id, check_cell, measure_cell, new_sweep_id, validate
from sharebench.sweep.budget import budget_notes, budget_summary, plan_budget_grid
from sharebench.sweep.grid import PIPELINE_MODES, PIPELINE_PARTICLES, GridPlan, cell_from_value, cell_value, plan_grid
from sharebench.telemetry import collect_provenance
from sharebench.workloads import Workload

# the pipelines' defaults of their ``modes`` and ``particle_counts`` parameters (defined by the planner)
DEFAULT_MODES = PIPELINE_MODES
DEFAULT_PARTICLE_COUNTS = PIPELINE_PARTICLES


def say(message: str) -> None:
    """One line in the task's log (the KFP UI shows a task's stdout)."""
    print(f"sharebench: {message}", flush=True)


# ------------------------------------------------------------------ planning
def check_sweep(request: dict[str, Any], nodes: list[str]) -> dict[str, Any]:
    """The sweep's parameters (``request``: the pipeline's names, no node) checked before anything runs,
    for each node (``NAME`` or ``NAME=GPU_MODEL``; none: this machine), as the plan step of each node
    will plan them (:func:`sharebench.sweep.grid.plan_grid`); the request, handed on as one value."""
    for node in nodes or [""]:
        plan_grid({**request, "node_name": node})
    say(f"request checked for {', '.join(n for n in nodes if n) or 'this machine'}")
    return dict(request)


def plan_sweep(*, request: dict[str, Any], node_name: str = "") -> dict[str, Any]:
    """One node's sweep planned before anything touches it (:func:`sharebench.sweep.grid.plan_grid`):
    the modes resolved for its GPU model, with a budget what fits it
    (:func:`sharebench.sweep.budget.plan_budget_grid`; ``budget_plan``: its summary for the report),
    and every cell as a value: the plan every later task reads (:class:`~sharebench.sweep.grid.GridPlan`)."""
    started = time.time()  # the budget's clock
    grid = plan_grid({**request, "node_name": node_name})
    summary: dict[str, Any] = {}
    if grid.budget_s is not None:
        s = grid.settings
        grid, plan = plan_budget_grid(grid, turns=s.turns, workload=s.workload, start_delay_s=s.start_delay_s)
        summary = budget_summary(plan, started)
        for line in plan.describe().splitlines():
            say(f"budget {line}")
    say(grid.describe())
    return grid.plan(summary).to_dict()


def pick_cells(*, plan: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    """The cells ``mode`` runs, as values (``plan_sweep``'s plan); a mode not planned: a one-line error."""
    cells = [cell_value(c) for c in GridPlan.from_dict(plan).cells_of(mode)]
    say(f"{mode}: {len(cells)} cell(s)")
    return cells


# ------------------------------------------------------------------ node
POD_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def pod_namespace() -> str:
    """The namespace this step's pod runs in (its run namespace), where its requests are filed."""
    return POD_NAMESPACE_FILE.read_text().strip() if POD_NAMESPACE_FILE.is_file() else RUN_NAMESPACE


def node_request(action: str, node_name: str, run_id: str, timeout_s: float = 900, **fields: str) -> dict[str, Any]:
    """Agent mode: file a sharing request for ``node_name`` in this pod's namespace with the pod's own
    account (no node right), proving the pod with its projected token for the agent
    (:class:`~sharebench.node.agent.StepIdentity`), and wait for the node agent's answer; its result, or
    its one-line refusal. ``run_id``: the run this step believes it is in (the agent takes the pod's).
    ``fields``: the request's ``image`` (default: this step's image), ``mode`` and ``gpu_model``."""
    if not run_id:
        raise UserError(f"node_access agent: {action} on {node_name} needs the run id (the Lease's holder)")
    identity = StepIdentity.from_environment()
    api = make_api_client()
    namespace = pod_namespace()
    node = split_node(node_name)[0]
    mode = fields.get("mode") or None
    image, gpu_model = fields.get("image") or IMAGE, fields.get("gpu_model") or None
    want = Request(namespace, "", action, node, image, mode=mode, gpu_model=gpu_model, run=run_id)
    filed = file_request(api, want, identity)
    say(f"{action} {mode or ''} on {node}: request filed (attempt {filed.attempt[:8]}); waiting for the node agent")
    result = wait_request(api, filed, timeout_s=float(timeout_s))
    say(f"{action} on {node}: the node agent answered: done")
    return result


def agent_placement(node_name: str, mode: str, gpu_model: str, placement: str, state: dict) -> dict[str, Any]:
    """Agent mode's :func:`sharebench.node.placement.place_mode` once the agent applied ``mode``: how the
    mode's pods request it, from ``state``, what the agent's reconfiguration answered."""
    req = pod_request(mode, state.get("gpu_model") or gpu_model, placement, resource=state.get("resource"))
    say(f"node {node_name} in {mode}: pods request {req.count} x {req.resource} each")
    return Placement(req, {HOSTNAME_LABEL: split_node(node_name)[0]}, state, reconfigured=True).to_dict()


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
    image: str = "",
    node_access: str = "agent",
) -> dict[str, Any]:
    """Put the node in ``mode`` and say how the mode's pods must request it
    (:func:`sharebench.node.placement.place_mode`; no node or placement dra: nothing changes). Agent
    mode (the default): a request the node agent checks against the site's offer and applies; direct
    mode (a single-admin cluster): the library here, with node rights, after the run's ``image`` is
    checked against the site's allow-list (``SHAREBENCH_IMAGE_ALLOW``; default: this image's repository)."""
    if check_node_access(node_access) == "agent" and node_name and placement != "dra":
        if force:
            raise UserError("force is never a request's to ask for (node_access agent); an admin runs node apply")
        fields = {"image": image, "mode": mode, "gpu_model": gpu_model}
        state = node_request("apply", node_name, run_id, float(timeout_s), **fields)
        return agent_placement(node_name, mode, gpu_model, placement, state)
    if node_name:
        check_image(image or IMAGE, os.environ.get(IMAGE_ALLOW_ENV), IMAGE)
    options = ReconfigureOptions(
        gpu_model=gpu_model or None,
        namespace=namespace,
        timeout_s=float(timeout_s),
        force=bool(force),
        holder=run_id or None,
    )
    return place_mode(node_name, mode, gpu_model, placement, options, progress=say).to_dict()


def reconfigure_mode(*, plan: dict[str, Any], mode: str, run_id: str = "", image: str = "") -> dict[str, Any]:
    """:func:`reconfigure` for one mode of a node's plan (its node, GPU model, placement and node
    settings): how the mode's pods request it (``pods``, ``processes``, ``resource``, ``count``,
    ``node_selector``, ``advertised``) and ``replicas``, the cell's replicas (pods x processes)."""
    p = GridPlan.from_dict(plan)
    s = p.settings
    placed = reconfigure(
        node_name=p.node_name,
        mode=mode,
        gpu_model=p.gpu_model,
        placement=p.placement,
        namespace=s.operator_namespace,
        timeout_s=s.reconfigure_timeout_s,
        force=s.force,
        run_id=run_id,
        image=image,
        node_access=s.node_access,
    )
    return {**placed, "replicas": len(placed["pods"]) * int(placed["processes"])}


def restore(
    *, node_names: list[str], timeout_s: float = 600, run_id: str = "", node_access: str = "agent"
) -> list[dict[str, Any]]:
    """Put every node back as it was (idempotent); no node: a no-op that says so. Agent mode: one
    restore request per node, answered by the node agent."""
    nodes = [n for n in node_names or [] if n]
    if check_node_access(node_access) == "direct" or not nodes:
        return restore_nodes(nodes, float(timeout_s), holder=run_id or None, progress=say)
    return [node_request("restore", n, run_id, float(timeout_s)) for n in nodes]


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
    plan: dict[str, Any],
    cell: dict[str, Any],
    placed: dict[str, Any],
    run_id: str = "",
    claims_namespace: str = RUN_NAMESPACE,
) -> dict[str, Any]:
    """``cell`` (a value of the plan) scheduled: with its ``start_at``, the instant its replicas start
    tracking together, and its ``claims`` (placement dra: the cell's ResourceClaims, one shared by its
    ``placed`` pods; else none). With a node and a run id, the run's Lease on the node is renewed first
    (held for the whole run): directly, or in agent mode by a request to apply the same mode (which the
    agent renews the Lease for)."""
    p = GridPlan.from_dict(plan)
    c = cell_from_value(cell)
    node, access = p.node_name, p.settings.node_access
    if node and run_id and access == "direct":
        renew_lease(node, run_id, progress=say)
    elif node and run_id and p.placement != "dra":  # dra: the node is never applied, so nothing to renew there
        node_request("apply", node, run_id, mode=c.mode.label)
    start_at = time.time() + p.settings.start_delay_s
    say(f"cell {c.id}: replicas start tracking at {start_at:.3f} (epoch s)")
    pods = max(len(placed.get("pods") or []), 1)
    claims = claim_cell(
        placement=p.placement,
        mode=c.mode.label,
        cell_id=c.id,
        pods=pods,
        gpu_model=p.gpu_model,
        namespace=claims_namespace,
    )
    return {**cell_value(c), "start_at": start_at, "claims": claims}


def run_part(
    *,
    plan: dict[str, Any],
    cell: dict[str, Any],
    placed: dict[str, Any],
    replica: int,
    out_path: str,
    workdir: str | None = None,
    requested: str = "",
) -> list[dict[str, Any]]:
    """This pod's part of a scheduled cell (``schedule_start``'s) under the mode's placement
    (``reconfigure_mode``'s ``placed``): :func:`run_simpletrack` with the plan's turns and workload.
    ``requested``: what the pod requested (logged; default: the placement's request)."""
    p = GridPlan.from_dict(plan)
    c = cell_from_value(cell)
    requested = requested or f"{placed.get('count', 0)} x {placed.get('resource') or 'nothing'}"
    where = f"{requested} on {p.node_name or 'this machine'}"
    return run_simpletrack(
        mode=c.mode.label,
        particles=c.particles,
        turns=p.settings.turns,
        repeat=c.repeat,
        replica=replica,
        replicas=placed["replicas"],
        processes=placed["processes"],
        start_at=float(cell["start_at"]),
        workload=p.settings.workload.to_dict(),
        out_path=out_path,
        workdir=workdir,
        placed=where,
    )


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
    workload: dict[str, Any],
    out_path: str,
    workdir: str | None = None,
    placed: str = "",
) -> list[dict[str, Any]]:
    """Run this pod's part of a cell; write its results rows to ``out_path``.

    ``processes`` > 1 or an unshared mode: the whole cell runs here, as the local sweep runs
    it (the mode's sharing executor, N processes behind one start barrier). Otherwise this
    pod is replica ``replica`` of ``replicas`` pods sharing the node's device: one process
    that sleeps until ``start_at`` and tracks; its row is labelled with the cell's mode.
    ``workload``: the pipeline's ``workload`` parameter (``Workload.from_dict``). ``placed``: what the
    pod requested, where (logged).
    """
    m = parse_mode(mode)
    what = Workload.from_dict(workload)
    particles, turns, repeat = (
        whole_number(n, v, lo)
        for n, v, lo in (("particles", particles, 1), ("turns", turns, 1), ("repeat", repeat, -(10**6)))
    )
    replica, replicas, processes = (
        whole_number(n, v, lo)
        for n, v, lo in (("replica", replica, 0), ("replicas", replicas, 1), ("processes", processes, 1))
    )
    one_of_pods = processes == 1 and replicas > 1
    if one_of_pods:
        check_pattern_placement("pods", what.pattern, what.neighbour_pattern)
    here = Mode(BASELINE, 1) if one_of_pods else m  # one replica of the cell: alone in this pod
    options: dict[str, Any] = {"start_at": float(start_at)} if one_of_pods else {}
    config = SweepConfig(
        modes=(here,),
        particles=(particles,),
        turns=turns,
        repeats=1,
        warmup_repeats=0,
        workload=what,
        progress=False,
        run_options=options,
    )
    cell = Cell(here, particles, repeat, id=cell_id(m, particles, repeat))
    if placed:
        say(f"{cell.id}: {processes} process(es) here, {placed}")
    result = measure_cell(validate(config), cell, Path(workdir or tempfile.mkdtemp(prefix="sharebench-cell-")))
    rows, bursts = result.rows, result.bursts
    if one_of_pods:
        for row in rows:
            row.update(mode=m.label, mode_kind=m.kind, replicas=replicas, replica=replica)
        for b in bursts:  # each pod is its pattern's own user (replica 0 of its process)
            b.update(mode=m.label, replica=replica)
    for note in result.notes:
        say(note)
    for row in rows:
        say(
            f"{cell.id} replica {row.get('replica')}: {row.get('status')} track_s={row.get('track_s')} "
            f"{row.get('error') or ''}".rstrip()
        )
    write_rows(out_path, rows, bursts)
    return rows


def write_rows(path: str | Path, rows: list[dict[str, Any]], bursts: list[dict[str, Any]] | None = None) -> None:
    """Results rows handed from one task to the next (a ``rows`` document), with the cells' burst rows
    (``bursts``, bursts.csv's, under a replica pattern) beside them."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json(path, "rows", {"rows": rows, "bursts": list(bursts or [])})


def read_rows(paths: list[str]) -> list[dict[str, Any]]:
    """The rows of several tasks, in the order given."""
    return [row for p in paths for row in read_json(p, "rows")["rows"]]


def read_bursts_rows(paths: list[str]) -> list[dict[str, Any]]:
    """The burst rows of several tasks (none from a task that wrote none), in the order given."""
    return [b for p in paths for b in read_json(p, "rows").get("bursts") or []]


def merge_records(paths: list[str], out_path: str, *, cell: bool = False) -> int:
    """Concatenate the rows at ``paths`` into one ``rows`` document at ``out_path``;
    ``cell``: the rows are the pods of one cell, checked together (:func:`check_cell`)."""
    rows = read_rows(paths)
    if cell:
        rows = check_cell(rows)
    write_rows(out_path, rows, read_bursts_rows(paths))
    say(f"merged {len(rows)} row(s) from {len(paths)} task(s)")
    return len(rows)


def finish_cell(paths: list[str], out_path: str, *, plan: dict[str, Any], claims_namespace: str = RUN_NAMESPACE) -> int:
    """The rows of one cell's pods checked together (:func:`merge_records` with ``cell``); placement dra:
    the cell's claims deleted once its rows are in."""
    n = merge_records(paths, out_path, cell=True)
    release_cell(placement=GridPlan.from_dict(plan).placement, rows_path=out_path, namespace=claims_namespace)
    return n


# ------------------------------------------------------------------ results and report
def loss_metrics(tables: Any, slo: float = DEFAULT_SLO) -> dict[str, float]:
    """``loss_pct/<mode>/p<particles>`` -> loss % (two decimals) of every loss computed, and, where a replica
    pattern was measured, ``users_per_gpu/<pattern>/<modes>`` -> the users per GPU within the p95 slowdown
    target ``slo`` (0: not even the fewest measured; ``analysis.latency.users_at_target``). ``tables``:
    analysis Tables."""
    metrics: dict[str, float] = {}
    for t in (tables.timeslice, tables.mps, tables.mig):  # partition: an excess over the ideal, not a loss
        for _, r in t.iterrows():
            v = float(r["loss_pct"])
            if v == v:  # NaN: not computed (flagged in the report)
                metrics[f"loss_pct/{r['mode']}/p{int(r['particles'])}"] = round(v, 2)
    for u in users_at_target(tables.latency, slo) if not tables.latency.empty else []:
        if u.family:  # a pattern with no sharing cell of its own has no figure
            metrics[f"users_per_gpu/{u.pattern}/{u.family}"] = float(u.users or 0)
    return metrics


def collect_results(
    paths: list[str],
    results_dir: str,
    tables_md_path: str,
    *,
    plan: dict[str, Any],
    sweep_id: str | None = None,
) -> dict[str, Any]:
    """Write a results folder (results.csv, provenance.json with the plan's node and GPU model, tables/,
    and with a budget its lines in notes.txt: :func:`sharebench.sweep.budget.budget_notes` of the plan's
    ``budget_plan``) from the modes' rows; return the loss metrics (``loss_pct/<mode>/p<particles>``) and
    the tables as Markdown."""
    p = GridPlan.from_dict(plan)
    node_name, gpu_model, budget_plan = p.node_name, p.gpu_model, p.budget_plan
    rows = read_rows(paths)
    if not rows:
        raise UserError("no results rows reached collect_results: every cell was empty")
    sid = sweep_id or new_sweep_id()
    bursts = read_bursts_rows(paths)
    for r in rows + bursts:
        r["sweep_id"] = sid
    out = Path(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    ResultsWriter(out).append(rows)
    append_bursts(out, bursts)
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
    notes = budget_notes(budget_plan, len({str(r.get("cell_id")) for r in rows}))
    append_notes(out, sid, notes)
    for line in notes:
        say(line)
    tables = analyse(out)
    write_tables(tables, out)
    title = f"# sharebench results{f' on {node_name}' if node_name else ''}{f' ({gpu_model})' if gpu_model else ''}\n"
    Path(tables_md_path).write_text("\n".join([title, tables_markdown(tables)]))
    metrics = loss_metrics(tables)
    say(f"results: {len(rows)} row(s) in {out}; {len(metrics)} loss metric(s)")
    return {"metrics": metrics, "rows": len(rows), "results_dir": str(out)}


def write_report(results_dirs: list[str], html_path: str, md_path: str, plots_dir: str) -> dict[str, str]:
    """Report (HTML + Markdown) and plots of the first results folder, every other one compared with
    it (:func:`sharebench.report.combine.combine_reports`)."""
    work = tempfile.mkdtemp(prefix="sharebench-report-")
    combined = write_combined(results_dirs, html_path, md_path, work)
    shutil.copytree(combined.plots, plots_dir, dirs_exist_ok=True)
    say(f"report: {html_path} ({len(results_dirs)} results folder(s))")
    return {"html": html_path, "md": md_path, "plots": plots_dir}


# ------------------------------------------------------------------ history (issue 25)
def record_history(*, results_dir: str, store: str, pushgateway: str = "", s3_endpoint: str = "") -> int:
    """Add the run's results folder to the history store and check its node (every verdict logged; push
    when a Pushgateway is given); a changed cell exits non-zero, so a scheduled run fails visibly."""
    result = add_and_check(results_dir, store, pushgateway=pushgateway or None, s3_endpoint=s3_endpoint or None)
    say(f"history: run {result.run_id} {'added to' if result.added else 'already in'} {store} ({result.file_name})")
    for verdict in result.verdicts:
        say(f"{verdict.status}: {verdict.line()}")
    if result.changed:
        raise SystemExit(f"sharebench: {len(result.changes)} cell(s) of {len(result.verdicts)} changed; see above")
    say(f"history: 0 change(s) in {len(result.verdicts)} cell(s)")
    return len(result.verdicts)


# ------------------------------------------------------------------ advice (issue 33)
# what the advise step reads and its target, where its query leaves a key out
DEFAULT_ADVISE_QUERY: dict[str, Any] = {
    "prometheus_url": "",
    "window": "24h",
    "until": "",
    "step_s": 60.0,
    "class_label": "namespace",
    "slo": DEFAULT_SLO,
}


def advise_pool(results_dir: str, query: dict[str, Any], out_dir: str, copies: dict[str, str]) -> dict[str, str]:
    """The pool advice from the run's own costs (``results_dir``) and the site's usage in Prometheus.

    ``query``: prometheus_url (dcgm-exporter's per-pod series), window (a duration ending at until),
    until ('' now; epoch seconds or ISO 8601), step_s, class_label (the label naming a pod's class),
    slo (the p95 slowdown target); a missing key takes
    :data:`DEFAULT_ADVISE_QUERY`'s value. advice.md/html/json/png and assignment.csv go to ``out_dir``;
    ``copies`` maps a kind (md, html, json, png, csv) to another path its file is copied to (the
    Markdown and HTML artifacts the Kubeflow UI shows). Returns kind -> path in ``out_dir``."""
    q = {**DEFAULT_ADVISE_QUERY, **query}
    unknown = sorted(set(q) - set(DEFAULT_ADVISE_QUERY))
    if unknown:
        raise UserError(f"unknown advise query key(s) {', '.join(unknown)}; allowed: {', '.join(DEFAULT_ADVISE_QUERY)}")
    until = parse_time(q["until"], "advise until") if str(q["until"]).strip() else time.time()
    window = Window(until - parse_duration(q["window"], "advise window"), until, seconds("advise step_s", q["step_s"]))
    costs = read_costs([results_dir], None)
    usage = read_prometheus(str(q["prometheus_url"]), window, str(q["class_label"]))
    result = advise(usage, costs, class_patterns(usage, {}), check_slo(q["slo"]))
    paths = write_advice(result, Path(out_dir), force=True)
    for kind, dest in copies.items():
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(paths[kind], dest)
    for line in [f"read: {result.read['usage']}", f"costs: {result.read['costs']}", *result.warnings]:
        say(line)
    say(f"advice: {paths['md']}")
    return {kind: str(path) for kind, path in paths.items()}
