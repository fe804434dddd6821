"""Node reconfiguration against a simulated cluster (tests/support/k8s_sim.py) or, opted in, a real one.

The code under test uses the official kubernetes client through a kubeconfig file. The
simulated cluster is a real HTTP server with a simulated gpu-operator; tests marked
``cluster`` run the same checks on a real cluster when SHAREBENCH_KUBECONFIG and
SHAREBENCH_NODE are set (they reconfigure that node and restore it afterwards).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

import kubernetes.config.incluster_config as incluster
import pytest
import yaml
from kubernetes import client

from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.gpus import GPU_MODELS, resolve_layout
from sharebench.manifests import access, names, operator
from sharebench.manifests.dump import dump_yaml
from sharebench.node import (
    NodeError,
    NodeTimeout,
    PermissionDenied,
    ReconfigureOptions,
    make_api_client,
    reconfigure,
    restore,
    status,
)
from sharebench.node.prior import ANNOTATION
from support.k8s_sim import GFD_DS, LABEL_DP, LABEL_MIG, LABEL_MIG_STATE, SIM_WAIT_S, SimCluster

NODE = "gpu-node-1"
SIM_TIMEOUT_S = SIM_WAIT_S  # a wait that must succeed: counted in the simulator's delays (support.k8s_sim)
SIM_POLL_S = 0.01
SIM_OPTIONS = ReconfigureOptions(timeout_s=SIM_TIMEOUT_S, poll_s=SIM_POLL_S)

ENV_KUBECONFIG = os.environ.get("SHAREBENCH_KUBECONFIG")
ENV_NODE = os.environ.get("SHAREBENCH_NODE")


@dataclass
class Target:
    """Where a test runs: the simulated cluster or the user's real one."""

    api: object
    node: str
    timeout_s: float
    poll_s: float
    sim: SimCluster | None = None

    def apply(self, mode: str, progress=None, **kw) -> dict:
        """``reconfigure`` with ``kw`` as its options (the target's timeout and poll unless given)."""
        kw.setdefault("timeout_s", self.timeout_s)
        options = ReconfigureOptions(poll_s=self.poll_s, **kw)
        return reconfigure(self.node, mode, options, api_client=self.api, progress=progress)

    def restore(self, **kw) -> dict:
        kw.setdefault("timeout_s", self.timeout_s)
        return restore(self.node, api_client=self.api, poll_s=self.poll_s, **kw)

    def status(self) -> dict:
        return status(self.node, api_client=self.api)


@pytest.fixture
def sim(tmp_path):
    with SimCluster(tmp_path) as cluster:
        cluster.add_gpu_node(NODE, "H200", gpus=2)
        cluster.add_node("cpu-node-1")
        yield cluster


@pytest.fixture
def sim_target(sim) -> Target:
    return Target(sim.api_client(), NODE, SIM_TIMEOUT_S, SIM_POLL_S, sim)


@pytest.fixture(params=["sim", pytest.param("cluster", marks=pytest.mark.cluster)])
def target(request, tmp_path):
    """The same checks on the simulated cluster and, opted in, on a real one."""
    if request.param == "sim":
        with SimCluster(tmp_path) as cluster:
            cluster.add_gpu_node(NODE, "H200", gpus=2)
            yield Target(cluster.api_client(), NODE, SIM_TIMEOUT_S, SIM_POLL_S, cluster)
        return
    if not (ENV_KUBECONFIG and ENV_NODE):
        pytest.skip("real-cluster run not requested: set SHAREBENCH_KUBECONFIG and SHAREBENCH_NODE")
    t = Target(make_api_client(ENV_KUBECONFIG), ENV_NODE, 900.0, 2.0)
    yield t
    t.restore()


def node_obj(t: Target):
    return client.CoreV1Api(t.api).read_node(t.node)


def expected(st: dict, mode: str) -> tuple[str, int, dict]:
    """(resource, count, labels) a node with these facts must advertise in ``mode``."""
    g = st["gpus"]
    kind, _, arg = mode.partition(":")
    if kind in ("timeslice", "mps"):
        n = int(arg)
        return "nvidia.com/gpu", g * n, {"nvidia.com/gpu.replicas": str(n)}
    if kind == "mig":
        layout = resolve_layout(st["gpu_model"], arg)
        if layout == "all-disabled":
            return "nvidia.com/gpu", g, {LABEL_MIG: layout, LABEL_MIG_STATE: "success"}
        prof = GPU_MODELS[st["gpu_model"]].profile(layout[4:])
        res = "nvidia.com/gpu" if st["mig_strategy"] == "single" else f"nvidia.com/mig-{prof.name}"
        return res, g * prof.max_count, {LABEL_MIG: layout, LABEL_MIG_STATE: "success"}
    return "nvidia.com/gpu", g, {"nvidia.com/gpu.replicas": "1"}


def gpu_labels(t: Target) -> dict:
    return {k: v for k, v in (node_obj(t).metadata.labels or {}).items() if k.startswith("nvidia.com/")}


def writes(sim: SimCluster) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _ in sim.requests if m in ("PATCH", "PUT", "POST", "DELETE")]


# ---------------------------------------------------------------- every mode, and back
MODES = [
    "exclusive",
    "timeslice:2",
    "timeslice:4",
    "timeslice:8",
    "mps:2",
    "mps:4",
    "mps:8",
    "mig:7g",
    "mig:1g",
    "mig:3g",
    "mig:disabled",
]


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_then_restore(target: Target, mode: str):
    before_labels = gpu_labels(target)
    before = target.status()
    if (
        mode.startswith("mig:")
        and mode != "mig:disabled"
        and node_obj(target).metadata.labels.get("nvidia.com/mig.capable") == "false"
    ):
        pytest.skip(f"{target.node} is not MIG capable")
    res = target.apply(mode)
    resource, count, labels = expected(before, mode)
    assert res["resources"][resource] == count
    assert {k: v for k, v in res["labels"].items() if k in labels} == labels
    others = {k: v for k, v in res["resources"].items() if k != resource and v > 0}
    assert others == {}
    assert res["previous"]["labels"] == {LABEL_DP: before_labels.get(LABEL_DP), LABEL_MIG: before_labels.get(LABEL_MIG)}
    assert ANNOTATION in (node_obj(target).metadata.annotations or {})

    back = target.restore()
    assert back["restored"] is True
    assert {k: v for k, v in back["resources"].items() if v > 0} == {
        k: v for k, v in before["resources"].items() if v > 0
    }
    after_labels = gpu_labels(target)
    for key in (LABEL_DP, LABEL_MIG):
        assert after_labels.get(key) == before_labels.get(key)
    assert ANNOTATION not in (node_obj(target).metadata.annotations or {})


def test_sweep_through_modes_records_prior_state_once(target: Target):
    before = gpu_labels(target)
    first = target.apply("timeslice:2")
    second = target.apply("mig:1g")
    third = target.apply("mps:4")
    assert first["previous"]["labels"] == second["previous"]["labels"] == third["previous"]["labels"]
    assert third["previous"]["labels"][LABEL_DP] == before.get(LABEL_DP)
    assert third["resources"]["nvidia.com/gpu"] == 4 * third["gpus"]
    assert gpu_labels(target)[LABEL_MIG] == "all-disabled"  # MIG turned off for MPS
    assert target.restore()["restored"] is True
    assert target.restore()["restored"] is False  # idempotent


# ---------------------------------------------------------------- GPU models, MIG strategies
@pytest.mark.parametrize(
    "model, mode, resource, per_gpu",
    [
        ("A100-40GB", "mig:1g", "nvidia.com/mig-1g.5gb", 7),
        ("A100-40GB", "mig:1g.10gb", "nvidia.com/mig-1g.10gb", 4),
        ("A100-80GB", "mig:1g", "nvidia.com/mig-1g.10gb", 7),
        ("A100-80GB", "mig:7g", "nvidia.com/mig-7g.80gb", 1),
        ("H100-80GB", "mig:3g", "nvidia.com/mig-3g.40gb", 2),
        ("H100-80GB", "mig:all-1g.20gb", "nvidia.com/mig-1g.20gb", 4),
        ("H100-NVL", "mig:2g", "nvidia.com/mig-2g.24gb", 3),
        ("H200", "mig:1g.35gb", "nvidia.com/mig-1g.35gb", 4),
    ],
)
def test_mig_layouts_per_model(tmp_path, model, mode, resource, per_gpu):
    with SimCluster(tmp_path) as sim:
        sim.add_gpu_node("n1", model, gpus=4)
        res = reconfigure("n1", mode, SIM_OPTIONS, api_client=sim.api_client())
        assert res["gpu_model"] == model
        assert res["resources"][resource] == 4 * per_gpu
        assert res["resources"]["nvidia.com/gpu"] == 0


def test_mig_single_strategy(tmp_path):
    with SimCluster(tmp_path, mig_strategy="single") as sim:
        sim.add_gpu_node("n1", "H200", gpus=2)
        api = sim.api_client()
        res = reconfigure("n1", "mig:1g", SIM_OPTIONS, api_client=api)
        assert res["resource"] == "nvidia.com/gpu"
        assert res["resources"] == {"nvidia.com/gpu": 14}
        assert res["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H200-MIG-1g.18gb"
        # GFD now reports 14 "GPUs": the physical count comes from the recorded prior state
        res = reconfigure("n1", "timeslice:2", SIM_OPTIONS, api_client=api)
        assert res["gpus"] == 2 and res["resources"] == {"nvidia.com/gpu": 4}
        assert restore("n1", api_client=api, poll_s=SIM_POLL_S)["resources"] == {"nvidia.com/gpu": 2}


@pytest.mark.parametrize(
    "strategy, resource, count", [("single", "nvidia.com/gpu", 14), ("mixed", "nvidia.com/mig-1g.18gb", 14)]
)
def test_mig_without_strategy_label_names_the_advertised_resource(tmp_path, strategy, resource, count):
    with SimCluster(tmp_path, mig_strategy=strategy) as sim:
        sim.add_gpu_node("n1", "H200", gpus=2)
        sim.edit("nodes", "", "n1", lambda n: n["metadata"]["labels"].pop("nvidia.com/mig.strategy"))
        res = reconfigure("n1", "mig:1g", SIM_OPTIONS, api_client=sim.api_client())
        assert res["mig_strategy"] is None
        assert (res["resource"], res["resources"][resource]) == (resource, count)


def test_status_of_a_node_already_in_single_mig(tmp_path):
    with SimCluster(tmp_path, mig_strategy="single") as sim:
        sim.add_gpu_node("n1", "A100-40GB", gpus=3)
        api = sim.api_client()
        reconfigure("n1", "mig:1g", SIM_OPTIONS, api_client=api)
        # another process, annotation removed by hand: facts come from GFD's MIG labels
        sim.edit("nodes", "", "n1", lambda n: n["metadata"]["annotations"].pop(ANNOTATION))
        st = status("n1", api_client=api)
        assert (st["gpu_model"], st["gpus"], st["resources"]) == ("A100-40GB", 3, {"nvidia.com/gpu": 21})


def test_renamed_shared_resource(sim_target: Target):
    sim = sim_target.sim
    starts = sim.gpu_nodes[NODE].plugin_starts
    res = sim_target.apply("timeslice:4", rename_shared=True)
    assert res["device_plugin_config"] == "sharebench-timeslice-4-shared"
    assert res["resources"]["nvidia.com/gpu.shared"] == 8
    assert res["resources"]["nvidia.com/gpu"] == 0
    assert res["plugin_restarted"] is True and sim.gpu_nodes[NODE].plugin_starts == starts + 1
    back = sim_target.restore()
    assert back["entries_left"] == []  # the entry sharebench added, unused now, is removed
    assert "sharebench-timeslice-4-shared" not in sim_target.sim.configmap()["data"]
    assert back["resources"]["nvidia.com/gpu"] == 2


# ---------------------------------------------------------------- ConfigMap entries and plugin restarts
def test_changed_entry_is_rewritten_plugin_restarted_and_restored(sim_target: Target):
    sim = sim_target.sim
    site_entry = dump_yaml(operator.device_plugin_config("timeslice", 3))
    sim.edit(
        "configmaps",
        sim.ns,
        names.DEVICE_PLUGIN_CONFIGMAP,
        lambda cm: cm["data"].update({"sharebench-timeslice-4": site_entry}),
    )
    for ds in sim.gpu_nodes[NODE].starts:  # the site's operands read it
        sim.delete_pod(sim.ns, sim.plugin_pods(NODE, ds)[0]["metadata"]["name"])
    time.sleep(0.05)
    sim.wait_settled(NODE)
    starts = sim.gpu_nodes[NODE].plugin_starts

    gfd_starts = sim.gpu_nodes[NODE].starts[GFD_DS]
    res = sim_target.apply("timeslice:4")
    assert res["plugin_restarted"] is True
    assert sim.gpu_nodes[NODE].plugin_starts == starts + 1
    assert sim.gpu_nodes[NODE].starts[GFD_DS] == gfd_starts + 1
    assert res["labels"]["nvidia.com/gpu.replicas"] == "4"
    assert res["resources"]["nvidia.com/gpu"] == 8
    assert res["previous"]["configmap"]["entries"] == {"sharebench-timeslice-4": site_entry}
    entry = "sharebench-timeslice-4"
    assert sim.configmap()["data"][entry] == operator.device_plugin_entries()[entry]

    sim_target.restore()
    assert sim.configmap()["data"]["sharebench-timeslice-4"] == site_entry
    assert sim.gpu_nodes[NODE].plugin_starts == starts + 2


@pytest.mark.parametrize(
    "first, second, strategy", [("timeslice:2", "mps:2", "mps"), ("mps:4", "timeslice:4", "time-slicing")]
)
def test_same_count_other_strategy_waits_for_the_switch(tmp_path, first, second, strategy):
    """timeslice:2 and mps:2 advertise the same count: the wait also reads GFD's sharing-strategy label."""
    with SimCluster(tmp_path, delay_s=0.2) as sim:
        sim.add_gpu_node("n1", "H200", gpus=2)
        api = sim.api_client()
        reconfigure("n1", first, SIM_OPTIONS, api_client=api)
        res = reconfigure("n1", second, SIM_OPTIONS, api_client=api)
        assert res["labels"]["nvidia.com/gpu.sharing-strategy"] == strategy
        assert res["elapsed_s"] >= 0.2


def test_mig_single_is_not_fooled_by_a_timeslice_leftover(tmp_path):
    """timeslice:7 leaves nvidia.com/gpu = 7 x GPUs, the count of all-1g.18gb under strategy single."""
    with SimCluster(tmp_path, mig_strategy="single", delay_s=0.2) as sim:
        sim.add_gpu_node("n1", "H200", gpus=1)
        api = sim.api_client()
        reconfigure("n1", "timeslice:7", SIM_OPTIONS, api_client=api)
        res = reconfigure("n1", "mig:1g", SIM_OPTIONS, api_client=api)
        assert res["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H200-MIG-1g.18gb"
        assert res["labels"]["nvidia.com/gpu.replicas"] == "1"


def test_unchanged_entry_needs_no_restart(sim_target: Target):
    starts = sim_target.sim.gpu_nodes[NODE].plugin_starts
    res = sim_target.apply("mps:8")
    assert res["plugin_restarted"] is False
    assert sim_target.sim.gpu_nodes[NODE].plugin_starts == starts
    assert not [w for w in writes(sim_target.sim) if "configmaps" in w[1]]


def test_sim_operands_ignore_entry_changes_until_restarted(sim):
    """As the real operands: a label alone does not pick up an edited entry; each pod sees it after its restart."""
    sim.edit(
        "configmaps",
        sim.ns,
        names.DEVICE_PLUGIN_CONFIGMAP,
        lambda cm: cm["data"].update(
            {"sharebench-timeslice-2": dump_yaml(operator.device_plugin_config("timeslice", 5))}
        ),
    )
    sim.edit("nodes", "", NODE, lambda n: n["metadata"]["labels"].update({LABEL_DP: "sharebench-timeslice-2"}))
    sim.wait_settled(NODE)
    node = sim.node(NODE)
    assert (node["status"]["allocatable"]["nvidia.com/gpu"], node["metadata"]["labels"]["nvidia.com/gpu.replicas"]) == (
        "4",
        "2",
    )
    sim.delete_pod(sim.ns, sim.plugin_pods(NODE)[0]["metadata"]["name"])  # the device plugin only
    time.sleep(0.05)
    sim.wait_settled(NODE)
    node = sim.node(NODE)
    assert (node["status"]["allocatable"]["nvidia.com/gpu"], node["metadata"]["labels"]["nvidia.com/gpu.replicas"]) == (
        "10",
        "2",
    )
    sim.delete_pod(sim.ns, sim.plugin_pods(NODE, GFD_DS)[0]["metadata"]["name"])  # then GFD
    time.sleep(0.05)
    sim.wait_settled(NODE)
    assert sim.node(NODE)["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "5"


def test_missing_configmap(sim_target: Target):
    sim = sim_target.sim
    with sim.lock:
        sim.objects.pop(("configmaps", sim.ns, names.DEVICE_PLUGIN_CONFIGMAP))
    with pytest.raises(
        NodeError,
        match=r"ConfigMap gpu-operator/sharebench-device-plugin-config not found; "
        r"apply manifests/operator/",
    ):
        sim_target.apply("timeslice:2")
    assert ANNOTATION not in sim.node(NODE)["metadata"]["annotations"]


def test_wrong_operator_namespace(sim_target: Target):
    with pytest.raises(NodeError, match=r"ConfigMap elsewhere/sharebench-device-plugin-config not found"):
        sim_target.apply("timeslice:2", namespace="elsewhere")


# ---------------------------------------------------------------- failures, timeouts, restore
def test_timeout_names_node_mode_state(sim_target: Target):
    sim_target.sim.pause_operator()
    t0 = time.monotonic()
    with pytest.raises(NodeTimeout) as exc:
        sim_target.apply("timeslice:2", timeout_s=0.3)
    assert time.monotonic() - t0 < 2.0
    msg = str(exc.value)
    assert msg.startswith(
        f"node {NODE}, mode timeslice:2, state waiting for nvidia.com/gpu=4 and "
        "nvidia.com/gpu.replicas=2: timed out after 0.3 s waiting for nvidia.com/gpu=4"
    )
    assert "last seen: allocatable nvidia.com/gpu=2; nvidia.com/gpu.replicas=1" in msg
    assert "\n" not in msg


def test_restore_after_failure_mid_sweep_from_another_process(sim_target: Target):
    """A pipeline dies mid-sweep: `sharebench node restore --force` in a new process puts the node back (the
    Lease is unexpired and its holder, this process, still runs: without --force it is refused)."""
    sim = sim_target.sim
    before = gpu_labels(sim_target)
    sim_target.apply("timeslice:2")
    sim.pause_operator()  # the operator stalls during the next step
    with pytest.raises(NodeTimeout, match="waiting for nvidia.com/mig.config.state=success"):
        sim_target.apply("mig:1g", timeout_s=0.3)
    assert sim.node(NODE)["metadata"]["labels"][LABEL_MIG] == "all-1g.18gb"
    sim.pause_operator(False)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "sharebench",
            "node",
            "restore",
            NODE,
            "--kubeconfig",
            str(sim.kubeconfig),
            "--timeout",
            "10",
            "--poll",
            "0.1",
            "--json",
            "--force",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["restored"] is True
    assert res["resources"]["nvidia.com/gpu"] == 2
    assert {k: v for k, v in res["resources"].items() if v > 0} == {"nvidia.com/gpu": 2}
    after = gpu_labels(sim_target)
    assert (after.get(LABEL_DP), after[LABEL_MIG], after[LABEL_MIG_STATE]) == (
        before.get(LABEL_DP),
        "all-disabled",
        "success",
    )
    assert ANNOTATION not in sim.node(NODE)["metadata"]["annotations"]


def test_restore_after_injected_api_failure(sim_target: Target):
    sim = sim_target.sim
    sim_target.apply("mps:2")
    sim.fail_next("update", "configmaps", status=500, times=10_000)  # 5xx are retried: a lasting failure
    with pytest.raises(
        NodeError,
        match=r"state writing device-plugin entry sharebench-mps-3: update configmaps in "
        r"namespace gpu-operator failed: HTTP 500.*sharebench node restore gpu-node-1",
    ):
        sim_target.apply("mps:3", timeout_s=0.5)
    sim.failures.clear()
    fresh = Target(sim.api_client(), NODE, SIM_TIMEOUT_S, SIM_POLL_S, sim)  # a new client, as a new process
    res = fresh.restore()
    assert res["restored"] is True and res["resources"] == {"nvidia.com/gpu": 2}
    assert LABEL_DP not in sim.node(NODE)["metadata"]["labels"]
    assert "sharebench-mps-3" not in sim.configmap()["data"]  # never written


def test_restore_waits_for_the_prior_strategy_not_just_the_count(tmp_path):
    """The site ran time-slicing x2; after mps:2 the counts match already: restore waits for the label."""
    with SimCluster(tmp_path, delay_s=0.2) as sim:
        sim.add_gpu_node("n1", "H200", gpus=2)
        api = sim.api_client()
        sim.edit("nodes", "", "n1", lambda n: n["metadata"]["labels"].update({LABEL_DP: "sharebench-timeslice-2"}))
        sim.wait_settled("n1")
        reconfigure("n1", "mps:2", SIM_OPTIONS, api_client=api)
        res = restore("n1", api_client=api, timeout_s=SIM_TIMEOUT_S, poll_s=SIM_POLL_S)
        assert res["labels"]["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
        assert res["labels"][LABEL_DP] == "sharebench-timeslice-2" and res["elapsed_s"] >= 0.2


def test_restore_without_record_changes_nothing(sim_target: Target):
    res = sim_target.restore()
    assert res["restored"] is False
    assert writes(sim_target.sim) == []


def test_restore_removes_mig_label_that_was_absent(tmp_path):
    """A node without nvidia.com/mig.config: MIG is disabled before the label is dropped again."""
    with SimCluster(tmp_path) as sim:
        sim.add_gpu_node("n1", "H100-80GB", gpus=1)
        sim.edit("nodes", "", "n1", lambda n: [n["metadata"]["labels"].pop(k) for k in (LABEL_MIG, LABEL_MIG_STATE)])
        api = sim.api_client()
        reconfigure("n1", "mig:7g", SIM_OPTIONS, api_client=api)
        res = restore("n1", api_client=api, timeout_s=SIM_TIMEOUT_S, poll_s=SIM_POLL_S)
        assert LABEL_MIG not in res["labels"]
        assert sim.gpu_nodes["n1"].mig_applied == "all-disabled"
        assert {k: v for k, v in res["resources"].items() if v} == {"nvidia.com/gpu": 1}


def test_cordon_and_restore(sim_target: Target):
    res = sim_target.apply("timeslice:2", cordon=True)
    assert res["cordoned"] is True and sim_target.sim.node(NODE)["spec"]["unschedulable"] is True
    assert sim_target.restore()["cordoned"] is False
    assert not sim_target.sim.node(NODE)["spec"].get("unschedulable")


def test_restore_keeps_a_cordon_that_was_there(sim_target: Target):
    sim_target.sim.edit("nodes", "", NODE, lambda n: n["spec"].update({"unschedulable": True}))
    sim_target.apply("timeslice:2", cordon=True)
    assert sim_target.restore()["cordoned"] is True


# ---------------------------------------------------------------- MIG failures
def test_layout_missing_from_mig_parted_config_fails(sim_target: Target):
    sim_target.sim.remove_mig_layout("all-3g.71gb")
    with pytest.raises(
        NodeError,
        match=r"state waiting for MIG layout all-3g.71gb: the MIG manager failed to apply "
        r"all-3g.71gb \(nvidia.com/mig.config.state=failed\)",
    ):
        sim_target.apply("mig:3g")
    assert sim_target.restore()["restored"] is True


def test_mig_stuck_pending_names_the_pod(sim_target: Target):
    sim_target.sim.add_pod("team-a", "trainer-0", NODE)
    with pytest.raises(NodeTimeout) as exc:
        sim_target.apply("mig:1g", force=True, timeout_s=0.4)
    msg = str(exc.value)
    assert "nvidia.com/mig.config.state=pending" in msg
    assert "likely cause: GPU pods that would not terminate (GPU pods still on the node: team-a/trainer-0)" in msg
    sim_target.sim.delete_pod("team-a", "trainer-0")
    assert sim_target.restore()["restored"] is True


def test_not_mig_capable(tmp_path):
    with SimCluster(tmp_path) as sim:
        sim.add_gpu_node("n1", "H200", gpus=1, mig_capable=False)
        with pytest.raises(NodeError, match=r"NVIDIA-H200 GPUs on this node are not MIG capable"):
            reconfigure("n1", "mig:1g", SIM_OPTIONS, api_client=sim.api_client())


# ---------------------------------------------------------------- pre-flight refusals
@pytest.mark.parametrize(
    "pod, refused",
    [
        (dict(gpu=1), True),
        (dict(gpu=1, resource="nvidia.com/mig-1g.18gb"), True),
        (dict(gpu=1, phase="Pending"), True),
        (dict(gpu=1, labels={"app.kubernetes.io/part-of": "sharebench", "pipeline/runid": "run-1"}), False),
        (dict(gpu=1, phase="Succeeded"), False),
        (dict(gpu=None), False),
    ],
    ids=["gpu-pod", "mig-pod", "pending-gpu-pod", "sharebench-pod", "finished-pod", "cpu-pod"],
)
def test_refuses_foreign_gpu_pods(sim_target: Target, pod, refused):
    sim_target.sim.add_pod("team-a", "job-1", NODE, **pod)
    if not refused:
        assert sim_target.apply("timeslice:2", holder="run-1")["resources"]["nvidia.com/gpu"] == 4
        return
    with pytest.raises(NodeError) as exc:
        sim_target.apply("timeslice:2")
    assert str(exc.value) == (
        f"node {NODE}, mode timeslice:2, state pre-flight: refusing: pods outside this run use "
        "this node's GPUs (team-a/job-1); a reconfiguration would disturb or evict them; "
        "pass --force to proceed anyway"
    )
    assert writes(sim_target.sim) == []


def test_force_proceeds_with_foreign_pods(sim_target: Target):
    sim_target.sim.add_pod("team-a", "job-1", NODE)
    lines = []
    res = sim_target.apply("timeslice:2", force=True, progress=lines.append)
    assert res["resources"]["nvidia.com/gpu"] == 4
    assert any("--force: proceeding although GPU pods run here: team-a/job-1" in line for line in lines)


def test_operator_pods_are_not_foreign(sim_target: Target):
    sim_target.sim.add_pod(names.OPERATOR_NAMESPACE, "nvidia-cuda-validator-x", NODE)
    assert sim_target.apply("mps:2")["resources"]["nvidia.com/gpu"] == 4


@pytest.mark.parametrize(
    "model, mode, allowed",
    [
        ("H200", "mig:1g.5gb", "allowed: 1g.18gb, 1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb"),
        ("H200", "mig:5g", "allowed sizes: 1g, 2g, 3g, 4g, 7g"),
        ("A100-40GB", "mig:1g.18gb", "allowed: 1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb"),
    ],
)
def test_invalid_layout_for_model(tmp_path, model, mode, allowed):
    with SimCluster(tmp_path) as sim:
        sim.add_gpu_node("n1", model, gpus=1)
        with pytest.raises(NodeError) as exc:
            reconfigure("n1", mode, SIM_OPTIONS, api_client=sim.api_client())
        assert str(exc.value).startswith(f"node n1, mode {mode}, state pre-flight: ")
        assert allowed in str(exc.value) and model in str(exc.value)
        assert writes(sim) == []


def test_missing_node(sim_target: Target):
    with pytest.raises(NodeError) as exc:
        reconfigure("nope", "timeslice:2", ReconfigureOptions(timeout_s=1), api_client=sim_target.api)
    assert str(exc.value) == (
        f"node nope, mode timeslice:2, state pre-flight: node 'nope' not found; nodes: cpu-node-1, {NODE}"
    )


def test_missing_node_on_target(target: Target):
    with pytest.raises(NodeError, match=r"state pre-flight: node 'sharebench-no-such-node' not found"):
        reconfigure("sharebench-no-such-node", "mps:2", ReconfigureOptions(timeout_s=1), api_client=target.api)


def test_invalid_layout_on_target(target: Target):
    model = target.status()["gpu_model"]
    foreign = "1g.18gb" if model != "H200" else "1g.5gb"
    with pytest.raises(NodeError, match=rf"state pre-flight: MIG profile '{foreign}' does not exist on {model}"):
        target.apply(f"mig:{foreign}")
    assert ANNOTATION not in (node_obj(target).metadata.annotations or {})


def test_node_without_gpus(sim_target: Target):
    with pytest.raises(
        NodeError,
        match=r"node cpu-node-1, mode mps:2, state pre-flight: has no NVIDIA GPUs: labels "
        r"nvidia.com/gpu.product and nvidia.com/gpu.count are absent",
    ):
        reconfigure("cpu-node-1", "mps:2", ReconfigureOptions(timeout_s=1), api_client=sim_target.api)


def test_unknown_product_needs_gpu_model(tmp_path):
    with SimCluster(tmp_path) as sim:
        sim.add_gpu_node("n1", "H100-80GB", gpus=1, labels={"nvidia.com/gpu.product": "NVIDIA-H100-SXM5-94GB-X"})
        api = sim.api_client()
        with pytest.raises(NodeError, match=r"unknown GPU model 'NVIDIA-H100-SXM5-94GB-X'.*pass gpu_model="):
            reconfigure("n1", "mig:1g", ReconfigureOptions(timeout_s=1), api_client=api)
        res = reconfigure(
            "n1",
            "mig:1g",
            ReconfigureOptions(gpu_model="H100-80GB", timeout_s=SIM_TIMEOUT_S, poll_s=SIM_POLL_S),
            api_client=api,
        )
        assert res["resources"]["nvidia.com/mig-1g.10gb"] == 7


@pytest.mark.parametrize(
    "mode, message",
    [
        ("partition:2", "partition:2 is a CPU-only local mode"),
        ("mps:2@50", "the device plugin sets the MPS thread share itself"),
        ("mig-emulated:7x1g.18gb", "mig-emulated:7x1g.18gb is a local mode"),
    ],
)
def test_modes_a_node_cannot_take(sim_target: Target, mode, message):
    with pytest.raises(NodeError, match=message):
        sim_target.apply(mode)


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"timeout_s": 0}, "timeout_s must be a finite number of seconds > 0 (got 0)"),
        ({"poll_s": -1}, "poll_s must be a finite number of seconds > 0 (got -1)"),
    ],
)
def test_bad_times(sim_target: Target, kw, message):
    with pytest.raises(UserError, match=re.escape(message)):
        reconfigure(NODE, "mps:2", ReconfigureOptions(**kw), api_client=sim_target.api)
    with pytest.raises(UserError, match=re.escape(message)):
        restore(NODE, api_client=sim_target.api, **kw)


def test_bad_mode_string(sim_target: Target):
    with pytest.raises(
        NodeError,
        match=rf"^node {NODE}, mode timeslicing:2, state pre-flight: "
        r"unknown sharing mode 'timeslicing:2'",
    ):
        sim_target.apply("timeslicing:2")


# ---------------------------------------------------------------- RBAC and credentials
@pytest.mark.parametrize(
    "verb, resource, mode, state",
    [
        ("get", "nodes", "timeslice:2", "pre-flight"),
        ("list", "pods", "timeslice:2", "pre-flight"),
        ("get", "configmaps", "timeslice:2", "pre-flight"),
        ("patch", "nodes", "timeslice:2", f"taking Lease sharebench-system/sharebench-node-{NODE}"),  # the claim
        ("update", "configmaps", "timeslice:3", "writing device-plugin entry sharebench-timeslice-3"),
        ("delete", "pods", "timeslice:3", "restarting the device plugin"),
    ],
)
def test_permission_denied_names_verb_and_resource(sim_target: Target, verb, resource, mode, state):
    sim_target.sim.deny(verb, resource)
    with pytest.raises(PermissionDenied) as exc:
        sim_target.apply(mode)
    msg = str(exc.value)
    assert msg.startswith(f"node {NODE}, mode {mode}, state {state}: permission denied: cannot {verb} {resource}")
    assert f"RBAC: grant verb '{verb}' on resource '{resource}'" in msg
    sim_target.sim.allow()
    sim_target.restore()


def test_permission_denied_on_restore(sim_target: Target):
    sim_target.apply("timeslice:2")
    sim_target.sim.deny("patch", "nodes")
    with pytest.raises(
        PermissionDenied, match=r"mode restore, state restoring labels: permission denied: cannot patch nodes"
    ):
        sim_target.restore()
    sim_target.sim.allow()
    assert sim_target.restore()["restored"] is True


def test_rbac_manifests_cover_every_request(sim_target: Target):
    """Every request the code makes in a sweep is allowed by manifests/rbac, and nothing more is granted."""
    sim_target.apply("timeslice:3", cordon=True)  # new entry: update + pod delete
    sim_target.apply("mig:1g")
    sim_target.apply("mps:2")
    sim_target.restore()
    sim_target.status()
    with pytest.raises(NodeError, match="not found; nodes: "):  # the hint lists nodes
        status("nope", api_client=sim_target.api)
    rules = []
    for _, obj in access.rbac_objects(node_access="direct"):  # the agent's own reads aside (below)
        for rule in obj.get("rules", []):
            ns = obj["metadata"].get("namespace") if obj["kind"] == "Role" else None
            rules.append((ns, rule))
    verbs = {"GET": "get", "PATCH": "patch", "PUT": "update", "POST": "create", "DELETE": "delete"}
    used = set()
    for method, path, _ in sim_target.sim.requests:
        parts = path.split("?")[0].strip("/").split("/")
        ns = parts[parts.index("namespaces") + 1] if "namespaces" in parts else None
        rest = parts[parts.index("namespaces") + 2 :] if ns else parts[2:]
        resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
        verb = "list" if method == "GET" and name is None else verbs[method]
        used.add((verb, resource, ns))
        assert any(
            resource in r["resources"]
            and verb in r["verbs"]
            and (rns is None or rns == ns)
            and (name in r.get("resourceNames", [name]))
            for rns, r in rules
        ), (method, path)
    granted = {(v, res) for _, r in rules for res in r["resources"] for v in r["verbs"]}
    assert granted - {("list", "leases")} == {(v, r) for v, r, _ in used}  # the agent lists a run's Leases


def test_unauthorized_token(sim_target: Target, tmp_path):
    cfg = yaml.safe_load(sim_target.sim.kubeconfig.read_text())
    cfg["users"][0]["user"]["token"] = "wrong"
    path = tmp_path / "bad-kubeconfig.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(NodeError, match=r"state pre-flight: unauthorized: the API server refused the credentials"):
        reconfigure(NODE, "mps:2", ReconfigureOptions(timeout_s=1), api_client=make_api_client(path))


def test_unreachable_api(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "kubeconfig.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    with pytest.raises(NodeError, match=rf"cannot reach the Kubernetes API at http://127.0.0.1:{port}"):
        status("n1", api_client=make_api_client(path))


def test_in_cluster_credentials(tmp_path, monkeypatch):
    token, cert = tmp_path / "token", tmp_path / "ca.crt"
    token.write_text("pod-token")
    cert.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr(incluster, "SERVICE_TOKEN_FILENAME", str(token))
    monkeypatch.setattr(incluster, "SERVICE_CERT_FILENAME", str(cert))
    cfg = make_api_client().configuration
    assert cfg.host == "https://10.96.0.1:443"
    assert cfg.api_key["authorization"].lower() == "bearer pod-token"


def test_node_step_uses_the_mounted_node_token_over_the_pods_own(tmp_path, monkeypatch):
    """Issue 27: in a pipeline's node step the node account's token is mounted (Secret sharebench-node-token);
    the client uses it, not the pod's own account (which holds no node rights)."""
    pod = tmp_path / "pod"
    node = tmp_path / "node"
    for folder, tok in ((pod, "pod-token"), (node, "node-token")):
        folder.mkdir()
        (folder / "token").write_text(tok)
        (folder / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    monkeypatch.setattr(incluster, "SERVICE_TOKEN_FILENAME", str(pod / "token"))
    monkeypatch.setattr(incluster, "SERVICE_CERT_FILENAME", str(pod / "ca.crt"))
    monkeypatch.setenv("SHAREBENCH_NODE_TOKEN_DIR", str(node))
    cfg = make_api_client().configuration
    assert cfg.host == "https://10.96.0.1:443" and cfg.ssl_ca_cert == str(node / "ca.crt")
    assert cfg.api_key["authorization"].lower() == "bearer node-token"
    monkeypatch.setenv("SHAREBENCH_NODE_TOKEN_DIR", str(tmp_path / "not-mounted"))  # any other task: its own
    assert make_api_client().configuration.api_key["authorization"].lower() == "bearer pod-token"


def test_no_credentials(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(
        UserError,
        match=r"^no Kubernetes credentials: pass --kubeconfig, set KUBECONFIG, "
        r"or run in a pod with a service account$",
    ):
        make_api_client()


def test_kubeconfig_from_environment(sim, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(sim.kubeconfig))
    assert status(NODE, api_client=make_api_client())["gpus"] == 2
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "gone.yaml"))
    with pytest.raises(UserError, match=r"KUBECONFIG='.*gone.yaml' names no file"):
        make_api_client()


def test_unusable_kubeconfig(tmp_path):
    path = tmp_path / "kubeconfig.yaml"
    path.write_text("apiVersion: v1\nkind: Config\ncurrent-context: nowhere\n")
    with pytest.raises(UserError, match=r"^cannot use kubeconfig '.*kubeconfig.yaml': "):
        make_api_client(path)


def test_missing_kubeconfig(tmp_path):
    with pytest.raises(UserError, match=r"kubeconfig '.*nope.yaml' does not exist"):
        make_api_client(tmp_path / "nope.yaml")


# ---------------------------------------------------------------- CLI
def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_apply_status_restore(sim, capsys):
    k = str(sim.kubeconfig)
    code, out, err = run_cli(
        capsys, "node", "apply", NODE, "timeslice:4", "--kubeconfig", k, "--timeout", f"{SIM_WAIT_S:g}", "--poll", "0.1"
    )
    assert code == 0, err
    assert "resources: nvidia.com/gpu=8" in out.splitlines()
    assert "device_plugin_config: sharebench-timeslice-4" in out.splitlines()
    assert f"{NODE}: labelled nvidia.com/device-plugin.config=sharebench-timeslice-4" in err
    code, out, _ = run_cli(capsys, "node", "status", NODE, "--kubeconfig", k, "--json")
    st = json.loads(out)
    assert code == 0 and st["device_plugin_config"] == "sharebench-timeslice-4"
    assert st["prior_state"]["labels"][LABEL_DP] is None
    code, out, _ = run_cli(capsys, "node", "restore", NODE, "--kubeconfig", k, "--poll", "0.1")
    assert code == 0 and "restored: True" in out.splitlines()
    code, out, _ = run_cli(capsys, "node", "restore", NODE, "--kubeconfig", k, "--poll", "0.1")
    assert code == 0 and "restored: False" in out.splitlines()


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["node", "apply", "nope", "mps:2"],
            "sharebench: error: node nope, mode mps:2, state pre-flight: "
            f"node 'nope' not found; nodes: cpu-node-1, {NODE}\n",
        ),
        (
            ["node", "apply", NODE, "mig:big"],
            f"sharebench: error: node {NODE}, mode mig:big, state pre-flight: bad MIG "
            "layout in 'mig:big'; allowed: mig:7g, mig:1g, mig:1g.18gb, mig:all-1g.5gb\n",
        ),
        (
            ["node", "apply", NODE, "mig:9g"],
            f"sharebench: error: node {NODE}, mode mig:9g, state pre-flight: "
            "MIG layout '9g' has no profile on H200; allowed sizes: 1g, 2g, 3g, 4g, 7g\n",
        ),
        (
            ["node", "apply", NODE, "fast:2"],
            f"sharebench: error: node {NODE}, mode fast:2, state pre-flight: unknown "
            "sharing mode 'fast:2'; allowed: exclusive, timeslice:N[/INTERVAL], "
            "mps:N[@PCT], mig:LAYOUT, mig-emulated:LAYOUT, partition:N\n",
        ),
        (
            ["node", "apply", NODE, "mps:2", "--timeout", "0"],
            "sharebench: error: --timeout must be a finite number of seconds > 0 (got 0.0)\n",
        ),
        (
            ["node", "apply", NODE, "mps:2", "--timeout", "inf"],
            "sharebench: error: --timeout must be a finite number of seconds > 0 (got inf)\n",
        ),
        (
            ["node", "restore", NODE, "--timeout", "nan"],
            "sharebench: error: --timeout must be a finite number of seconds > 0 (got nan)\n",
        ),
        (
            ["node", "status", "cpu-node-1"],
            "sharebench: error: node cpu-node-1, mode status, state pre-flight: has no NVIDIA GPUs",
        ),
    ],
)
def test_cli_user_errors_exit_2_with_one_line(sim, capsys, argv, message):
    code, out, err = run_cli(capsys, *argv, "--kubeconfig", str(sim.kubeconfig))
    assert code == 2
    assert err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err


def test_cli_permission_denied(sim, capsys):
    sim.deny("patch", "nodes")
    code, _, err = run_cli(capsys, "node", "apply", NODE, "mps:2", "--kubeconfig", str(sim.kubeconfig))
    assert code == 2
    assert err.splitlines(keepends=True)[-1] == (
        f"sharebench: error: node {NODE}, mode mps:2, state taking Lease sharebench-system/sharebench-node-{NODE}: "
        "permission denied: "
        "cannot patch nodes (RBAC: grant verb 'patch' on resource 'nodes'; see manifests/rbac/)\n"
    )
    released = sim.get("leases", names.SYSTEM_NAMESPACE, f"sharebench-node-{NODE}")  # nothing changed: released
    assert released["spec"]["holderIdentity"] == "" and released["metadata"]["annotations"]["sharebench.io/released-by"]


def test_cli_refusal_then_force(sim, capsys):
    sim.add_pod("team-a", "job-1", NODE)
    args = [
        "node",
        "apply",
        NODE,
        "mps:4",
        "--kubeconfig",
        str(sim.kubeconfig),
        "--poll",
        "0.1",
        "--timeout",
        f"{SIM_WAIT_S:g}",
    ]
    code, _, err = run_cli(capsys, *args)
    assert code == 2 and "refusing: pods outside this run use this node's GPUs (team-a/job-1)" in err
    code, out, _ = run_cli(capsys, *args, "--force")
    assert code == 0 and "resources: nvidia.com/gpu=8" in out.splitlines()


def test_cli_timeout_exit_2(sim, capsys):
    sim.pause_operator()
    code, _, err = run_cli(
        capsys,
        "node",
        "apply",
        NODE,
        "mps:2",
        "--kubeconfig",
        str(sim.kubeconfig),
        "--timeout",
        "0.2",
        "--poll",
        "0.1",
    )
    assert code == 2
    assert err.splitlines()[-1].startswith(
        f"sharebench: error: node {NODE}, mode mps:2, state waiting for "
        "nvidia.com/gpu=4 and nvidia.com/gpu.replicas=2: timed out after 0.2 s"
    )
