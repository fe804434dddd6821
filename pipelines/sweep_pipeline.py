"""The sweep pipelines: every sharing mode on a node, and several nodes side by side.

Shape of ``sharebench-sweep`` (one node)::

    exit handler: restore_node  (runs whatever fails)
      check_sweep                       the flat parameters checked, handed on as one value (the request)
      sweep_node
        plan_sweep                      the node's plan, one value: modes resolved, every cell (a budget: what fits)
        sweep_modes   ParallelFor(modes, parallelism=1)       one mode at a time on the node
          reconfigure_node                                    -> placed (resource, count, pods, processes)
          pick_cells                                          -> the mode's cells, as values
          run_cells   ParallelFor(cells, parallelism=1)       one cell at a time
            schedule_start                                    -> the cell with its start_at
            run_cell  ParallelFor(pods)                       the cell's replicas, concurrently
              run_simpletrack   (N pods, or N processes in one pod)
            check_cell    (pods -> cell: a failed replica or split devices fail the cell)
          merge_records (cells -> mode)
        collect_results (modes -> results folder, loss tables, Metrics)
        write_report    (HTML + Markdown report, plots)
        record_history  (history != '': add to the store, check the node; fails on a change)
      advise_pool       (prometheus_url != '': the pool advice from the run's costs and the site's usage)

``sharebench-multi-node`` checks the request for every node, runs ``sweep_node`` for each node in
a ParallelFor (``sweep_nodes``, side by side) and ``compare_nodes`` puts them in one report (a node
whose history check finds a change fails its sweep, so the comparison is then not made; each
node's own report is).

One plan value: the top-level signatures are flat (the Kubeflow UI's form, ``sharebench submit
--param``); ``check_sweep`` turns them into one ``request`` value and each node's ``plan_sweep`` into
one ``plan`` value (``sharebench.sweep.grid.GridPlan``: node, placement, settings, every cell as a
value), so the sub-pipelines take a few values each, and a new sweep parameter reaches a step
through the plan without a sub-pipeline changing (docs/architecture.md, "Add a pipeline parameter").
What stays separate is what KFP needs as its own channel: ``image`` (each task's container),
a loop's items (``modes``, ``cells``, ``pods``), and the pods' ``resource``, ``resource_count`` and
``node_selector``.

Why this shape (what KFP 2.17 really compiles and runs, on a cluster and in kfp.local):

* Dynamic N per mode: ``reconfigure_node`` emits the list of pods of a cell (``pods``) for
  the mode and placement; the innermost ParallelFor iterates it.
* Modes and cells strictly one after the other: ``ParallelFor(..., parallelism=1)``.
* Every loop sits at the top of its own sub-pipeline and only reads that sub-pipeline's
  inputs: kfp.local replaces a loop body's task-output inputs by the loop item, and
  sub-variables of loop items are not resolved there; a sub-pipeline boundary avoids both.
* A value built in a pipeline from its parameters (a dict or list literal of channels) reaches a
  component, but kfp.local hands a sub-pipeline ``null`` for each channel in it: the request is
  therefore a task's output (``check_sweep``), never a literal.
* Fan-in one ParallelFor level at a time (``dsl.Collected`` of artifacts, then
  ``check_cell`` / ``merge_records``): nested artifact lists do not run in kfp.local.
* The accelerator type/limit and the node selector come from ``reconfigure_node`` at run
  time. The compiler only carries such a value into a nested loop when a task also takes
  it as an input, so ``run_simpletrack`` takes ``resource``/``resource_count`` (it logs
  them) and the node selector goes in through ``add_node_selector_json``.
"""

# no `from __future__ import annotations`: KFP reads the annotations as types

from kfp import dsl, kubernetes
from kfp.dsl import Dataset

from sharebench.analysis.latency import DEFAULT_SLO
from sharebench.components import steps
from sharebench.components.advise_pool import advise_pool
from sharebench.components.check_cell import check_cell
from sharebench.components.check_sweep import check_sweep
from sharebench.components.collect_results import collect_results
from sharebench.components.compare_nodes import compare_nodes
from sharebench.components.image import IMAGE
from sharebench.components.merge_records import merge_records
from sharebench.components.pick_cells import pick_cells
from sharebench.components.plan_sweep import plan_sweep
from sharebench.components.reconfigure_node import reconfigure_node
from sharebench.components.record_history import record_history
from sharebench.components.restore_node import restore_node
from sharebench.components.run_simpletrack import run_simpletrack
from sharebench.components.schedule_start import schedule_start
from sharebench.components.write_report import write_report
from sharebench.manifests.names import NODE_STEP_LABEL, PART_OF_LABEL, POD_NAME_ENV, POD_UID_ENV
from sharebench.node.images import IMAGE_ALLOW_ENV, SITE_CONFIGMAP, SITE_IMAGE_ALLOW_KEY
from sharebench.workloads import DEFAULT_WORKLOAD

SWEEP_NAME = "sharebench-sweep"
MULTI_NODE_NAME = "sharebench-multi-node"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# KFP's object store as the pipelines' own artifacts use it: the in-cluster MinIO and its credentials
# (the Secret KFP puts in every profile namespace), for a history store at s3://...
KFP_S3_ENDPOINT = "http://minio-service.kubeflow:9000"
KFP_S3_SECRET = "mlpipeline-minio-artifact"
KFP_S3_SECRET_ENV = {"accesskey": "AWS_ACCESS_KEY_ID", "secretkey": "AWS_SECRET_ACCESS_KEY"}


class Loop(dsl.ParallelFor):
    """A ParallelFor whose group (and compiled component) has a fixed name, ``for-loop-<name>``.

    Every sub-pipeline numbers its groups from 1, so their loops all compile to
    ``comp-for-loop-1``; the compiler renames the clashes in an order that changes from
    one process to the next, and the committed YAML could never be checked for staleness.
    """

    def __init__(self, items, *, name: str, parallelism: int | None = None):
        self._fixed_name = f"for-loop-{name}"
        super().__init__(items, name=name, parallelism=parallelism)

    def _make_name_unique(self) -> None:
        self.name = self._fixed_name


def in_image(task: dsl.PipelineTask, image) -> dsl.PipelineTask:
    """Every task: the run's image, the label the node step spares, never cached
    (a cached measurement or start instant would be a wrong one)."""
    task.set_container_image(image)
    task.set_caching_options(False)
    kubernetes.add_pod_label(task, *PART_OF_LABEL)
    return task


def node_step(task: dsl.PipelineTask, *, image_allow: bool = False, action: str = "") -> dsl.PipelineTask:
    """A step that acts on the node (reconfigure, renew the Lease, claims, restore): always the image the
    pipeline was compiled with, never the run's ``image`` parameter. No task mounts a node credential:
    in agent mode (the default) the step files a request the node agent answers, with its pod's own
    account; in direct mode that account is the node account (a single-admin cluster);
    ``image_allow``: the site's image allow-list in its environment (ConfigMap sharebench-site, key
    image-allow, when the site made it). ``action`` (apply or restore): the step files requests, so its
    pod carries the label sharebench.io/node-step=ACTION (the one action the agent takes from it; the
    site's PodDefault mounts the projected token that proves the pod to the agent) and its own name and
    uid (the downward API: the request's owner)."""
    in_image(task, IMAGE)
    if action:
        kubernetes.add_pod_label(task, NODE_STEP_LABEL, action)
        kubernetes.use_field_path_as_env(task, POD_NAME_ENV, "metadata.name")
        kubernetes.use_field_path_as_env(task, POD_UID_ENV, "metadata.uid")
    if image_allow:
        kubernetes.use_config_map_as_env(task, SITE_CONFIGMAP, {SITE_IMAGE_ALLOW_KEY: IMAGE_ALLOW_ENV}, optional=True)
    return task


def history_step(task: dsl.PipelineTask) -> dsl.PipelineTask:
    """The history step: the image the pipeline was compiled with (never the run's ``image``: the object
    store's credentials go to no code a submitter picks) and those credentials in its environment, as
    ``sharebench runs fetch`` reads them (optional: a folder store or a pod with its own S3 identity)."""
    in_image(task, IMAGE)
    kubernetes.use_secret_as_env(task, KFP_S3_SECRET, KFP_S3_SECRET_ENV, optional=True)
    return task


def request_gpu(task: dsl.PipelineTask, resource, count, node_selector) -> dsl.PipelineTask:
    """A replica pod: the mode's extended resource, pinned to the node, tolerating the GPU taint."""
    task.set_accelerator_type(resource).set_accelerator_limit(count)
    kubernetes.add_node_selector_json(task, node_selector)
    kubernetes.add_toleration(task, **GPU_TOLERATION)
    return task


@dsl.pipeline(name="sharebench-cell", description="The replicas of one cell, started together.")
def run_cell(
    image: str,
    plan: dict,
    cell: dict,
    placed: dict,
    pods: list[int],
    resource: str,
    resource_count: int,
    node_selector: dict,
) -> Dataset:
    with Loop(pods, name="replicas") as replica:
        run = run_simpletrack(
            plan=plan, cell=cell, placed=placed, replica=replica, resource=resource, resource_count=resource_count
        )
        request_gpu(in_image(run, image), resource, resource_count, node_selector)
    checked = node_step(check_cell(records=dsl.Collected(run.outputs["records"]), plan=plan))
    return checked.outputs["cell"]


@dsl.pipeline(name="sharebench-cells", description="The cells of one mode, one after the other.")
def run_cells(
    image: str,
    plan: dict,
    cells: list[dict],
    placed: dict,
    pods: list[int],
    resource: str,
    resource_count: int,
    node_selector: dict,
) -> Dataset:
    with Loop(cells, name="cells", parallelism=1) as cell:
        start = node_step(
            schedule_start(plan=plan, cell=cell, placed=placed, run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER), action="apply"
        )
        one = run_cell(
            image=image,
            plan=plan,
            cell=start.outputs["cell"],
            placed=placed,
            pods=pods,
            resource=resource,
            resource_count=resource_count,
            node_selector=node_selector,
        )
    merged = in_image(merge_records(records=dsl.Collected(one.output)), image)
    return merged.outputs["merged"]


@dsl.pipeline(name="sharebench-modes", description="Each mode in order: reconfigure the node, run its cells.")
def sweep_modes(image: str, plan: dict, modes: list[str]) -> list[Dataset]:
    with Loop(modes, name="modes", parallelism=1) as mode:
        node = node_step(
            reconfigure_node(plan=plan, mode=mode, run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER, image=image),
            image_allow=True,
            action="apply",
        )
        picked = in_image(pick_cells(plan=plan, mode=mode), image)
        cells_of_mode = run_cells(
            image=image,
            plan=plan,
            cells=picked.outputs["cells"],
            placed=node.outputs["placed"],
            pods=node.outputs["pods"],
            resource=node.outputs["resource"],
            resource_count=node.outputs["count"],
            node_selector=node.outputs["node_selector"],
        )
    return dsl.Collected(cells_of_mode.output)


@dsl.pipeline(name="sharebench-node", description="The whole sweep of one node, and its report.")
def sweep_node(
    image: str,
    request: dict,
    node_name: str,
    history: str,
    pushgateway: str,
    history_s3_endpoint: str,
) -> Dataset:
    plan = in_image(plan_sweep(request=request, node_name=node_name), image)
    swept = sweep_modes(image=image, plan=plan.outputs["plan"], modes=plan.outputs["modes"])
    collected = in_image(
        collect_results(records=swept.output, plan=plan.outputs["plan"], sweep_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER),
        image,
    )
    report = in_image(write_report(results=collected.outputs["results"]), image)
    with dsl.If(history != "", name="history"):
        recorded = record_history(
            results=collected.outputs["results"],
            store=history,
            pushgateway=pushgateway,
            s3_endpoint=history_s3_endpoint,
        )
        history_step(recorded).after(report)
    return collected.outputs["results"]


@dsl.pipeline(name="sharebench-nodes", description="Each node's sweep, side by side.")
def sweep_nodes(
    image: str,
    request: dict,
    nodes: list[str],
    history: str,
    pushgateway: str,
    history_s3_endpoint: str,
) -> list[Dataset]:
    with Loop(nodes, name="nodes") as node:
        swept = sweep_node(
            image=image,
            request=request,
            node_name=node,
            history=history,
            pushgateway=pushgateway,
            history_s3_endpoint=history_s3_endpoint,
        )
    return dsl.Collected(swept.output)


@dsl.pipeline(
    name=SWEEP_NAME,
    description="What GPU sharing (time-slicing, MPS, MIG) costs the Simpletrack LHC tracking workload on one node.",
)
def sweep_pipeline(
    node_name: str = "",
    gpu_model: str = "H200",
    modes: list[str] = steps.DEFAULT_MODES,
    particle_counts: list[int] = steps.DEFAULT_PARTICLE_COUNTS,
    repeats: int = 3,
    warmup_repeats: int = 1,
    turns: int = 10,
    placement: str = "pods",
    image: str = IMAGE,
    workload: dict = DEFAULT_WORKLOAD,
    start_delay_s: float = 60.0,
    operator_namespace: str = "gpu-operator",
    reconfigure_timeout_s: float = 900.0,
    force: bool = False,
    node_access: str = "agent",
    history: str = "",
    pushgateway: str = "",
    history_s3_endpoint: str = KFP_S3_ENDPOINT,
    budget: str = "",
    prometheus_url: str = "",
    advise_window: str = "24h",
    advise_step_s: float = 60.0,
    advise_class_label: str = "namespace",
    advise_slo: float = DEFAULT_SLO,
):
    """Sweep every sharing mode on one node; the node is restored whatever fails.

    Args:
        node_name: Kubernetes node to sweep ('' runs on this machine through kfp.local).
        gpu_model: GPU model of the node (H200, A100-40GB, H100-80GB, ...): resolves mig:7g/mig:1g.
        modes: Sharing modes in the order they run.
        particle_counts: Particles per replica, one cell per count and repeat.
        repeats: Measured repeats per particle count.
        warmup_repeats: Discarded warm-up repeats before them (each its own cell).
        turns: Turns tracked per replica.
        placement: 'pods' (each replica a pod), 'processes' (N processes in one pod) or 'dra' (each
            replica a pod; each cell's GPU from one ResourceClaim, the node never reconfigured).
        image: Image of the replica and analysis tasks, within the site's SHAREBENCH_IMAGE_ALLOW prefixes.
        workload: What every replica runs, one value: engine (simpletrack, xtrack, or exec: any program
            in the image following the replica protocol, SHAREBENCH_WORK = the particle count), device
            (spec inside a replica: auto, cuda[:N], opencl[:P.D], cpu), command and timing (engine
            exec: e.g. 'python -m sharebench.workloads.train'; protocol or process), name (exec: its
            name in the tables), lattice (Xsuite line JSON in the image; null: the generated LHC-like
            ring), seed (of the particle distribution), pattern (batch).
        start_delay_s: Seconds between a cell's start instant being set and the replicas tracking.
        operator_namespace: Namespace of the NVIDIA gpu-operator.
        reconfigure_timeout_s: Longest wait for the node to advertise a mode.
        force: Reconfigure even when pods outside sharebench use the node's GPUs (direct mode only).
        node_access: 'agent' (a request the site's node agent checks and applies; no node right in the run) or
            'direct' (a single-admin cluster: the node steps act on the node with their pod's own account,
            which must then be the node account).
        history: History store the run is added to and checked against ('' off): s3://bucket/prefix (e.g.
            s3://mlpipeline/sharebench/history in KFP's MinIO) or a folder the task sees; a changed loss
            fails the run (sharebench history accept starts a new baseline).
        pushgateway: Prometheus Pushgateway URL (http(s)://HOST:9091) the history step pushes the losses
            and the check to ('' none).
        history_s3_endpoint: S3 API endpoint of an s3:// history store ('' AWS S3).
        budget: Node time the sweep may take: 90s, 10m, 1h30m ('' off). The plan step keeps the modes x particle
            counts that fit (headline modes, the largest count first) at the repeats (fewer only if none fit), from
            the node's GPU model's recorded rates (no node: a short run here); the report states budget, plan and
            time used. Repeats are fixed: a static KFP graph cannot repeat a cell while unsettled (run --budget can).
        prometheus_url: Prometheus holding dcgm-exporter's per-pod series of the site's GPU pool
            (http(s)://HOST:9090; '' off): the advise step then advises the pool's layout from this run's costs
            and that usage (sharebench advise), shown as Markdown and HTML in the UI.
        advise_window: Usage the advise step reads, ending when it starts: 24h, 168h (at most 30 days).
        advise_step_s: Seconds between the usage samples it reads.
        advise_class_label: Label naming a pod's class in the usage series (namespace, a team label).
        advise_slo: p95 slowdown target every class keeps in the advice (2: at most twice as slow).
    """
    restore = node_step(
        restore_node(
            node_name=node_name, placement=placement, run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER, node_access=node_access
        ),
        action="restore",
    )
    with dsl.ExitHandler(restore, name="sweep"):
        checked = in_image(
            check_sweep(
                modes=modes,
                gpu_model=gpu_model,
                particle_counts=particle_counts,
                repeats=repeats,
                warmup_repeats=warmup_repeats,
                turns=turns,
                placement=placement,
                workload=workload,
                start_delay_s=start_delay_s,
                operator_namespace=operator_namespace,
                reconfigure_timeout_s=reconfigure_timeout_s,
                force=force,
                node_access=node_access,
                budget=budget,
                node_name=node_name,
            ),
            image,
        )
        swept = sweep_node(
            image=image,
            request=checked.outputs["request"],
            node_name=node_name,
            history=history,
            pushgateway=pushgateway,
            history_s3_endpoint=history_s3_endpoint,
        )
        with dsl.If(prometheus_url != "", name="advise"):
            query = {
                "prometheus_url": prometheus_url,
                "window": advise_window,
                "step_s": advise_step_s,
                "class_label": advise_class_label,
                "slo": advise_slo,
            }
            in_image(advise_pool(results=swept.output, query=query), image)


@dsl.pipeline(
    name=MULTI_NODE_NAME,
    description="The sharebench sweep on several GPU nodes side by side, compared in one report.",
)
def multi_node_pipeline(
    nodes: list[str] = [  # noqa: B006 - KFP reads the default into the spec; the body never mutates it
        "gpu-node-a=A100-40GB",
        "gpu-node-b=H100-80GB",
    ],
    modes: list[str] = steps.DEFAULT_MODES,
    particle_counts: list[int] = steps.DEFAULT_PARTICLE_COUNTS,
    repeats: int = 3,
    warmup_repeats: int = 1,
    turns: int = 10,
    placement: str = "pods",
    image: str = IMAGE,
    workload: dict = DEFAULT_WORKLOAD,
    start_delay_s: float = 60.0,
    operator_namespace: str = "gpu-operator",
    reconfigure_timeout_s: float = 900.0,
    force: bool = False,
    node_access: str = "agent",
    history: str = "",
    pushgateway: str = "",
    history_s3_endpoint: str = KFP_S3_ENDPOINT,
    budget: str = "",
):
    """Sweep several nodes at once (each one mode at a time) and compare them in one report.

    Args:
        nodes: Nodes as NAME=GPU_MODEL (e.g. gpu-node-a=A100-40GB); the first is the reference.
        modes: Sharing modes in the order they run on every node.
        particle_counts: Particles per replica, one cell per count and repeat.
        repeats: Measured repeats per particle count.
        warmup_repeats: Discarded warm-up repeats before them (each its own cell).
        turns: Turns tracked per replica.
        placement: 'pods' (each replica a pod), 'processes' (N processes in one pod) or 'dra' (each
            replica a pod; each cell's GPU from one ResourceClaim, the node never reconfigured).
        image: Image of the replica and analysis tasks, within the site's SHAREBENCH_IMAGE_ALLOW prefixes.
        workload: What every replica runs, one value: engine (simpletrack, xtrack, or exec: any program
            in the image following the replica protocol, SHAREBENCH_WORK = the particle count), device
            (spec inside a replica: auto, cuda[:N], opencl[:P.D], cpu), command and timing (engine
            exec: e.g. 'python -m sharebench.workloads.train'; protocol or process), name (exec: its
            name in the tables), lattice (Xsuite line JSON in the image; null: the generated LHC-like
            ring), seed (of the particle distribution), pattern (batch).
        start_delay_s: Seconds between a cell's start instant being set and the replicas tracking.
        operator_namespace: Namespace of the NVIDIA gpu-operator.
        reconfigure_timeout_s: Longest wait for a node to advertise a mode.
        force: Reconfigure even when pods outside sharebench use a node's GPUs (direct mode only).
        node_access: 'agent' (a request the site's node agent checks and applies; no node right in the run) or
            'direct' (a single-admin cluster: the node steps act on the node with their pod's own account,
            which must then be the node account).
        history: History store the run is added to and checked against ('' off): s3://bucket/prefix (e.g.
            s3://mlpipeline/sharebench/history in KFP's MinIO) or a folder the task sees; a changed loss
            fails the run (sharebench history accept starts a new baseline).
        pushgateway: Prometheus Pushgateway URL (http(s)://HOST:9091) the history step pushes the losses
            and the check to ('' none).
        history_s3_endpoint: S3 API endpoint of an s3:// history store ('' AWS S3).
        budget: Node time the sweep may take: 90s, 10m, 1h30m ('' off). The plan step keeps the modes x particle
            counts that fit (headline modes, the largest count first) at the repeats (fewer only if none fit), from
            the node's GPU model's recorded rates (no node: a short run here); the report states budget, plan and
            time used. Repeats are fixed: a static KFP graph cannot repeat a cell while unsettled (run --budget can).
    """
    restore = node_step(
        restore_node(
            node_names=nodes, placement=placement, run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER, node_access=node_access
        ),
        action="restore",
    )
    with dsl.ExitHandler(restore, name="sweeps"):
        checked = in_image(
            check_sweep(
                modes=modes,
                gpu_model="",
                particle_counts=particle_counts,
                repeats=repeats,
                warmup_repeats=warmup_repeats,
                turns=turns,
                placement=placement,
                workload=workload,
                start_delay_s=start_delay_s,
                operator_namespace=operator_namespace,
                reconfigure_timeout_s=reconfigure_timeout_s,
                force=force,
                node_access=node_access,
                budget=budget,
                nodes=nodes,
            ),
            image,
        )
        swept = sweep_nodes(
            image=image,
            request=checked.outputs["request"],
            nodes=nodes,
            history=history,
            pushgateway=pushgateway,
            history_s3_endpoint=history_s3_endpoint,
        )
        in_image(compare_nodes(results=swept.output), image)


PIPELINES = {
    "sharebench_sweep.yaml": sweep_pipeline,
    "sharebench_multi_node.yaml": multi_node_pipeline,
}
