"""The compiled pipelines: the committed YAML is current, and it parses back into what we wired."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from google.protobuf import json_format

pytest.importorskip("kfp", reason="kfp not installed (pip install -e '.[kfp]')")

from kfp import components as kfp_components
from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s_pb2
from kfp.pipeline_spec import pipeline_spec_pb2

from sharebench.components import steps
from sharebench.components.image import IMAGE
from sharebench.manifests.names import NODE_TOKEN_DIR, NODE_TOKEN_SECRET
from sharebench.node.images import IMAGE_ALLOW_ENV, SITE_CONFIGMAP, SITE_IMAGE_ALLOW_KEY
from sharebench.pipelines.sweep_pipeline import KFP_S3_ENDPOINT, KFP_S3_SECRET, KFP_S3_SECRET_ENV
from sharebench.sweep.grid import REQUEST_KEYS
from sharebench.workloads import Workload
from support.paths import ROOT

PIPELINES = ROOT / "pipelines"
FILES = ["sharebench_sweep.yaml", "sharebench_multi_node.yaml"]
# the executors that act on the node (reconfigure, Lease renewal, claims, restore)
NODE_STEPS = {"exec-reconfigure-node", "exec-schedule-start", "exec-check-cell", "exec-restore-node"}
# the history step (issue 25): the object store's credentials in its environment, so also the compiled image
HISTORY_STEP = "exec-record-history"


def _docs(path: Path) -> tuple[pipeline_spec_pb2.PipelineSpec, pipeline_spec_pb2.PlatformSpec]:
    docs = list(yaml.safe_load_all(path.read_text()))
    assert len(docs) == 2, f"{path.name}: expected a pipeline spec and a platform spec"
    spec = json_format.ParseDict(docs[0], pipeline_spec_pb2.PipelineSpec())
    platform = json_format.ParseDict(docs[1], pipeline_spec_pb2.PlatformSpec())
    return spec, platform


def _k8s(platform: pipeline_spec_pb2.PlatformSpec, executor: str) -> k8s_pb2.KubernetesExecutorConfig:
    raw = platform.platforms["kubernetes"].deployment_spec.executors[executor]
    return json_format.ParseDict(json_format.MessageToDict(raw), k8s_pb2.KubernetesExecutorConfig())


def _all_tasks(spec: pipeline_spec_pb2.PipelineSpec):
    """(component name, task name, task spec) over the root and every sub-DAG."""
    yield from ((("root"), n, t) for n, t in spec.root.dag.tasks.items())
    for cname, comp in spec.components.items():
        if comp.WhichOneof("implementation") == "dag":
            yield from ((cname, n, t) for n, t in comp.dag.tasks.items())


def _from_root(task) -> dict[str, str]:
    """A task's input -> the pipeline parameter it is wired to (inside a group: its ``pipelinechannel--``)."""
    prefix = "pipelinechannel--"
    return {
        k: v.component_input_parameter.removeprefix(prefix)
        for k, v in task.inputs.parameters.items()
        if v.component_input_parameter
    }


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """The pipelines compiled now, by the CLI, with the default image (no SHAREBENCH_IMAGE)."""
    out = tmp_path_factory.mktemp("compiled")
    env = {k: v for k, v in os.environ.items() if k != "SHAREBENCH_IMAGE"}
    proc = subprocess.run(
        [sys.executable, "-m", "sharebench", "compile", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(Path(p).name for p in proc.stdout.split()) == sorted(FILES)
    return out


@pytest.mark.parametrize("name", FILES)
def test_committed_yaml_is_current(fresh, name):
    committed = (PIPELINES / name).read_text()
    assert (fresh / name).read_text() == committed, (
        f"pipelines/{name} is stale: run `sharebench compile` and commit the result"
    )


def test_image_is_one_setting_overridable_at_compile_time(tmp_path):
    env = dict(os.environ, SHAREBENCH_IMAGE="registry.example.org/team/sharebench:test-1")
    proc = subprocess.run(
        [sys.executable, "-m", "sharebench", "compile", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    spec, _ = _docs(tmp_path / "sharebench_sweep.yaml")
    doc = yaml.safe_load_all((tmp_path / "sharebench_sweep.yaml").read_text())
    executors = next(doc)["deploymentSpec"]["executors"]
    # the replica and analysis tasks run the image the run names (its default: the compile-time setting);
    # the steps that act on the node always run the compile-time image, never the run's (issue 27)
    images = {name: e["container"]["image"] for name, e in executors.items()}
    compiled = NODE_STEPS | {HISTORY_STEP}
    assert {n for n, i in images.items() if i == "registry.example.org/team/sharebench:test-1"} == compiled
    assert {i for n, i in images.items() if n not in compiled} == {"{{$.inputs.parameters['pipelinechannel--image']}}"}
    assert (
        spec.root.input_definitions.parameters["image"].default_value.string_value
        == "registry.example.org/team/sharebench:test-1"
    )


@pytest.mark.parametrize("name", FILES)
def test_yaml_parses_back_into_pipeline_and_platform_specs(name):
    spec, platform = _docs(PIPELINES / name)
    assert spec.sdk_version == "kfp-2.17.3"
    root = spec.root.input_definitions.parameters
    assert [v.string_value for v in root["modes"].default_value.list_value.values] == steps.DEFAULT_MODES
    assert [v.number_value for v in root["particle_counts"].default_value.list_value.values] == [5e6, 1e7, 1.5e7]
    assert root["placement"].default_value.string_value == "pods"
    # the workload is one struct parameter whose default is the default Workload (seed 1.0: a struct's number)
    assert Workload.from_dict(json_format.MessageToDict(root["workload"].default_value.struct_value)) == Workload()
    for p in ("modes", "particle_counts", "repeats", "turns", "placement", "image", "workload"):
        assert root[p].description, f"parameter {p} has no description in {name}"

    # the node is restored by the exit handler's task, whatever fails before it
    exit_tasks = [t for _, n, t in _all_tasks(spec) if n == "restore-node"]
    assert len(exit_tasks) == 1
    (restore,) = exit_tasks
    policy = pipeline_spec_pb2.PipelineTaskSpec.TriggerPolicy.TriggerStrategy
    assert restore.trigger_policy.strategy == policy.ALL_UPSTREAM_TASKS_COMPLETED
    assert restore.inputs.parameters["status"].HasField("task_final_status")

    # modes and cells strictly one at a time; a cell's replicas all at once
    limits = {}
    for comp in spec.components.values():
        if comp.WhichOneof("implementation") != "dag":
            continue
        for t in comp.dag.tasks.values():
            if t.WhichOneof("iterator"):
                inner = {x.component_ref.name for x in spec.components[t.component_ref.name].dag.tasks.values()}
                limits[frozenset(inner)] = t.iterator_policy.parallelism_limit
    assert limits[frozenset({"comp-reconfigure-node", "comp-pick-cells", "comp-sharebench-cells"})] == 1
    assert limits[frozenset({"comp-schedule-start", "comp-sharebench-cell"})] == 1
    assert limits[frozenset({"comp-run-simpletrack"})] == 0

    # replica pods: the mode's resource from reconfigure_node, the node selector, the GPU taint
    run_exec = spec.components["comp-run-simpletrack"].executor_label
    deploy = json_format.MessageToDict(spec.deployment_spec)
    acc = deploy["executors"][run_exec]["container"]["resources"]["accelerator"]
    assert acc == {
        "resourceType": "{{$.inputs.parameters['pipelinechannel--resource']}}",
        "resourceCount": "{{$.inputs.parameters['pipelinechannel--resource_count']}}",
    }
    k8s = _k8s(platform, run_exec)
    assert k8s.node_selector.node_selector_json.component_input_parameter == "pipelinechannel--node_selector"
    assert [(t.key, t.operator, t.effect) for t in k8s.tolerations] == [("nvidia.com/gpu", "Exists", "NoSchedule")]
    # every pod carries the label the node step uses to tell sharebench's GPU pods from others
    # issue 46: the steps that file sharing requests say the one action the agent takes from them, and know
    # their own pod (the request's owner); the site's PodDefault mounts their token for the agent
    steps_filing = {"exec-reconfigure-node": "apply", "exec-schedule-start": "apply", "exec-restore-node": "restore"}
    for label in spec.deployment_spec.fields["executors"].struct_value.fields:
        k8s = _k8s(platform, label)
        action = {"sharebench.io/node-step": steps_filing[label]} if label in steps_filing else {}
        assert dict(k8s.pod_metadata.labels) == {"app.kubernetes.io/part-of": "sharebench", **action}, label
        fields = {(e.name, e.field_path) for e in k8s.field_path_as_env}
        want = {("SHAREBENCH_POD_NAME", "metadata.name"), ("SHAREBENCH_POD_UID", "metadata.uid")} if action else set()
        assert fields == want, label
    # no container task is cached: a cached measurement (or start instant) would be a wrong one
    containers = [
        t
        for _, _, t in _all_tasks(spec)
        if spec.components[t.component_ref.name].WhichOneof("implementation") == "executor_label"
    ]
    assert len(containers) >= 9
    assert not [t.task_info.name for t in containers if t.caching_options.enable_cache]


@pytest.mark.parametrize(
    "name, pipeline, extra",
    [
        ("sharebench_sweep.yaml", "sharebench-sweep", {"node_name", "gpu_model"}),
        ("sharebench_multi_node.yaml", "sharebench-multi-node", {"nodes"}),
    ],
)
def test_yaml_loads_as_a_component(name, pipeline, extra):
    comp = kfp_components.load_component_from_file(str(PIPELINES / name))
    assert comp.name == pipeline
    assert extra | {"modes", "particle_counts", "repeats", "turns", "placement", "image", "workload"} <= set(
        comp.component_spec.inputs
    )
    assert comp.component_spec.description


def test_multi_node_runs_nodes_side_by_side_and_compares_them():
    spec, _ = _docs(PIPELINES / "sharebench_multi_node.yaml")
    tasks = {n: t for _, n, t in _all_tasks(spec)}
    assert "compare-nodes" in tasks
    node_loops = [
        t
        for t in tasks.values()
        if t.WhichOneof("iterator") and t.parameter_iterator.items.input_parameter == "pipelinechannel--nodes"
    ]
    assert len(node_loops) == 1 and node_loops[0].iterator_policy.parallelism_limit == 0
    assert tasks["restore-node"].inputs.parameters["node_names"].component_input_parameter == "nodes"


@pytest.mark.parametrize("name", FILES)
def test_node_rights_only_in_node_steps_which_run_the_compiled_image(name):
    """Issue 27 and 37: no task mounts a node credential; a submitter-chosen ``image`` never runs in the
    node steps; the node step checks the run's image against the site's allow-list
    (ConfigMap sharebench-site, optional) first."""
    spec, platform = _docs(PIPELINES / name)
    deploy = json_format.MessageToDict(spec.deployment_spec)["executors"]
    assert set(deploy) >= NODE_STEPS
    for executor, body in deploy.items():
        if executor in NODE_STEPS | {HISTORY_STEP}:
            assert body["container"]["image"] == IMAGE, executor
        else:
            assert body["container"]["image"] == "{{$.inputs.parameters['pipelinechannel--image']}}", executor
    env = _k8s(platform, "exec-reconfigure-node").config_map_as_env
    assert len(env) == 1 and env[0].config_map_name == SITE_CONFIGMAP and env[0].optional
    assert [(k.config_map_key, k.env_var) for k in env[0].key_to_env] == [(SITE_IMAGE_ALLOW_KEY, IMAGE_ALLOW_ENV)]
    # issue 37: no task mounts a node credential (agent mode files requests; direct mode's pods run as the
    # node account), and no volume or env of any task names the node token
    for executor in platform.platforms["kubernetes"].deployment_spec.executors:
        mounts = [(v.secret_name, v.mount_path) for v in _k8s(platform, executor).secret_as_volume]
        assert mounts == [], executor
        assert NODE_TOKEN_SECRET not in str(_k8s(platform, executor)), executor
    assert NODE_TOKEN_DIR not in (PIPELINES / name).read_text()
    # agent mode is the default; direct mode a parameter for a single-admin cluster
    access = spec.root.input_definitions.parameters["node_access"]
    assert access.default_value.string_value == "agent"
    # the exit task takes it as a parameter; the node steps inside a node's sweep read it from the plan
    (restore,) = [t for _, n, t in _all_tasks(spec) if n == "restore-node"]
    assert restore.inputs.parameters["node_access"].component_input_parameter == "node_access"
    (check,) = [t for _, n, t in _all_tasks(spec) if n == "check-sweep"]
    assert _from_root(check)["node_access"] == "node_access"
    for step in ("reconfigure-node", "schedule-start", "check-cell"):
        found = [t for _, n, t in _all_tasks(spec) if n == step]
        assert found and all("plan" in t.inputs.parameters for t in found), step
        # the object store's credentials only in the history step, as env (optional: a folder store)
        secrets = [
            (e.secret_name, e.optional, sorted((k.secret_key, k.env_var) for k in e.key_to_env))
            for e in _k8s(platform, executor).secret_as_env
        ]
        want_env = [(KFP_S3_SECRET, True, sorted(KFP_S3_SECRET_ENV.items()))] if executor == HISTORY_STEP else []
        assert secrets == want_env, executor
    # the run's image reaches the node step as the value it checks
    tasks = [t for _, n, t in _all_tasks(spec) if n == "reconfigure-node"]
    assert tasks and all("image" in t.inputs.parameters for t in tasks)


@pytest.mark.parametrize("name", FILES)
def test_history_step_runs_last_only_when_a_store_is_given(name):
    """Issue 25, item 4: parameters history ('' off), pushgateway and the store's S3 endpoint; the
    record-history step under a condition on history, after the node's report, fed the results folder."""
    spec, _ = _docs(PIPELINES / name)
    root = spec.root.input_definitions.parameters
    assert root["history"].default_value.string_value == ""
    assert root["pushgateway"].default_value.string_value == ""
    assert root["history_s3_endpoint"].default_value.string_value == KFP_S3_ENDPOINT
    for p in ("history", "pushgateway", "history_s3_endpoint"):
        assert root[p].description, f"parameter {p} has no description in {name}"
    node_dag = spec.components["comp-sharebench-node"].dag.tasks
    (cond,) = [t for t in node_dag.values() if t.task_info.name == "history"]
    assert cond.trigger_policy.condition == "inputs.parameter_values['pipelinechannel--history'] != ''"
    assert {"write-report", "collect-results"} <= set(cond.dependent_tasks)
    # nothing in the node's sweep waits for the history step: it is the last
    assert not [n for n, t in node_dag.items() if "condition-1" in t.dependent_tasks]
    (step,) = spec.components[cond.component_ref.name].dag.tasks.values()
    assert step.component_ref.name == "comp-record-history"
    assert step.inputs.artifacts["results"].component_input_artifact == "pipelinechannel--collect-results-results"
    params = {k: v.component_input_parameter for k, v in step.inputs.parameters.items()}
    assert params == {
        "store": "pipelinechannel--history",
        "pushgateway": "pipelinechannel--pushgateway",
        "s3_endpoint": "pipelinechannel--history_s3_endpoint",
    }


@pytest.mark.parametrize("name", FILES)
def test_budget_is_a_parameter_the_plan_step_plans_and_the_report_states(name):
    """Issue 24, item 1: ``budget`` ('' off) reaches each node's plan_sweep in the request; the modes and each
    mode's cells come from its plan (pick_cells gives a mode its own); the plan, with the budget's summary,
    reaches collect_results."""
    spec, _ = _docs(PIPELINES / name)
    root = spec.root.input_definitions.parameters
    assert root["budget"].default_value.string_value == ""
    assert "a static KFP graph cannot repeat a cell while unsettled" in " ".join(root["budget"].description.split())
    (check,) = [t for _, n, t in _all_tasks(spec) if n == "check-sweep"]
    assert _from_root(check)["budget"] == "budget"
    node = spec.components["comp-sharebench-node"]
    assert node.input_definitions.parameters["request"].parameter_type == pipeline_spec_pb2.ParameterType.STRUCT
    tasks = node.dag.tasks
    assert tasks["plan-sweep"].inputs.parameters["request"].component_input_parameter == "request"
    wired = {k: v.task_output_parameter for k, v in tasks["sharebench-modes"].inputs.parameters.items()}
    for key in ("plan", "modes"):
        assert (wired[key].producer_task, wired[key].output_parameter_key) == ("plan-sweep", key)
    plan = tasks["collect-results"].inputs.parameters["plan"].task_output_parameter
    assert (plan.producer_task, plan.output_parameter_key) == ("plan-sweep", "plan")
    (picks,) = [t for _, n, t in _all_tasks(spec) if n == "pick-cells"]
    assert picks.inputs.parameters["plan"].component_input_parameter == "pipelinechannel--plan"


SUB_PIPELINES = ("comp-sharebench-node", "comp-sharebench-modes", "comp-sharebench-cells", "comp-sharebench-cell")


@pytest.mark.parametrize("name", FILES)
def test_sub_pipelines_take_the_plan_as_one_value(name):
    """Issue 41, item 4: the inner sub-pipelines take a few values each (the request or the plan, a loop's
    items, what KFP needs as its own channel), at most 8; the cells are values, never indices."""
    spec, _ = _docs(PIPELINES / name)
    struct = pipeline_spec_pb2.ParameterType.STRUCT
    for comp in SUB_PIPELINES + (("comp-sharebench-nodes",) if "multi" in name else ()):
        params = spec.components[comp].input_definitions.parameters
        assert len(params) <= 8, f"{comp} takes {len(params)} parameters: {sorted(params)}"
        assert {"plan", "request"} & set(params), comp
        assert all(params[p].parameter_type == struct for p in {"plan", "request", "placed"} & set(params)), comp
        assert not {"cell_index", "particle_counts", "repeats", "warmup_repeats", "turns"} & set(params), comp
    cells = spec.components["comp-sharebench-cells"].input_definitions.parameters["cells"]
    assert cells.parameter_type == pipeline_spec_pb2.ParameterType.LIST


@pytest.mark.parametrize("name", FILES)
def test_every_sweep_parameter_reaches_the_request(name):
    """The top-level signatures stay flat (the Kubeflow UI's form); check_sweep turns every sweep parameter
    into the one request value (sharebench.sweep.grid.REQUEST_KEYS), so no sub-pipeline names one."""
    spec, _ = _docs(PIPELINES / name)
    (check,) = [t for _, n, t in _all_tasks(spec) if n == "check-sweep"]
    root = spec.root.input_definitions.parameters
    passed = {k for k, v in _from_root(check).items() if v == k}
    request_keys = set(REQUEST_KEYS) - {"node_name", "gpu_model"}
    assert request_keys <= passed <= set(root), sorted(request_keys - passed)
    takes = set(spec.components["comp-check-sweep"].input_definitions.parameters)
    assert takes - {"node_name", "nodes"} == set(REQUEST_KEYS) - {"node_name"}
