"""The simulated cluster answers the official kubernetes client the way an API server does."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sharebench.manifests.names import DEVICE_PLUGIN_CONFIGMAP
from support.k8s_sim import GFD_DS, PLUGIN_DS, SimCluster, match_fields, match_labels


@pytest.fixture
def sim(tmp_path):
    with SimCluster(tmp_path) as cluster:
        cluster.add_gpu_node("gpu-a", "H200", gpus=2)
        cluster.add_gpu_node("gpu-b", "A100-40GB", gpus=4)
        cluster.add_node("cpu-a")
        yield cluster


@pytest.fixture
def core(sim):
    return client.CoreV1Api(sim.api_client())


@pytest.mark.parametrize(
    "selector, names",
    [
        ("nvidia.com/gpu.present=true", ["gpu-a", "gpu-b"]),
        ("nvidia.com/gpu.product==NVIDIA-H200", ["gpu-a"]),
        ("nvidia.com/gpu.product!=NVIDIA-H200", ["cpu-a", "gpu-b"]),
        ("!nvidia.com/gpu.present", ["cpu-a"]),
        ("nvidia.com/gpu.count in (2,3)", ["gpu-a"]),
        ("nvidia.com/gpu.count notin (2),nvidia.com/gpu.present", ["gpu-b"]),
    ],
)
def test_list_nodes_with_label_selectors(core, selector, names):
    assert [n.metadata.name for n in core.list_node(label_selector=selector).items] == names


def test_list_pods_with_field_selectors(sim, core):
    sim.add_pod("team-a", "job-1", "gpu-a")
    sim.add_pod("team-a", "job-2", "gpu-b", phase="Succeeded")
    pods = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=gpu-a").items
    assert sorted(p.metadata.name for p in pods if p.metadata.namespace == "team-a") == ["job-1"]
    running = core.list_namespaced_pod("team-a", field_selector="status.phase!=Succeeded").items
    assert [p.metadata.name for p in running] == ["job-1"]
    with pytest.raises(ApiException) as exc:
        core.list_pod_for_all_namespaces(field_selector="spec.schedulerName=x")
    assert exc.value.status == 400 and "field label not supported" in json.loads(exc.value.body)["message"]


def test_patch_kinds_the_client_sends(sim, core):
    node = core.patch_node("gpu-a", {"metadata": {"labels": {"a": "1", "nvidia.com/gpu.present": None}}})
    assert node.metadata.labels["a"] == "1" and "nvidia.com/gpu.present" not in node.metadata.labels
    node = core.patch_node(
        "gpu-a",
        [
            {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
            {"op": "add", "path": "/metadata/annotations/x~1y", "value": "z"},
        ],
    )
    assert node.metadata.labels["a"] == "2" and node.metadata.annotations["x/y"] == "z"
    kinds = [ctype for method, _, ctype in sim.requests if method == "PATCH"]
    assert kinds == ["application/strategic-merge-patch+json", "application/json-patch+json"]
    with pytest.raises(ApiException) as exc:
        core.patch_node("gpu-a", [{"op": "test", "path": "/metadata/labels/a", "value": "1"}])
    assert exc.value.status == 422


def test_resource_versions_and_conflicts(sim, core):
    cm = core.read_namespaced_config_map(DEVICE_PLUGIN_CONFIGMAP, sim.ns)
    stale = cm.metadata.resource_version
    cm.data["extra"] = "version: v1\n"
    new = core.replace_namespaced_config_map(cm.metadata.name, sim.ns, cm)
    assert int(new.metadata.resource_version) > int(stale)
    cm.metadata.resource_version = stale
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map(cm.metadata.name, sim.ns, cm)
    assert exc.value.status == 409 and json.loads(exc.value.body)["reason"] == "Conflict"
    node = core.read_node("gpu-a")
    with pytest.raises(ApiException) as exc:  # a merge patch carrying a stale resourceVersion is a precondition
        core.patch_node(
            "gpu-a",
            {"metadata": {"resourceVersion": str(int(node.metadata.resource_version) - 1), "labels": {"b": "1"}}},
        )
    assert exc.value.status == 409


def test_status_is_a_subresource(core):
    node = core.read_node("gpu-a")
    node.status.allocatable["nvidia.com/gpu"] = "99"
    assert core.replace_node("gpu-a", node).status.allocatable["nvidia.com/gpu"] == "2"


def test_create_delete_not_found(sim, core):
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="x"), data={"k": "v"})
    assert core.create_namespaced_config_map("default", body).metadata.uid
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("default", body)
    assert exc.value.status == 409 and json.loads(exc.value.body)["reason"] == "AlreadyExists"
    core.delete_namespaced_config_map("x", "default")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("x", "default")
    assert exc.value.status == 404 and json.loads(exc.value.body)["kind"] == "Status"


def test_daemonset_recreates_a_deleted_plugin_pod(sim, core):
    apps = client.AppsV1Api(sim.api_client())
    ds = apps.read_namespaced_daemon_set(PLUGIN_DS, sim.ns)
    assert [d.metadata.name for d in apps.list_daemon_set_for_all_namespaces().items] == [GFD_DS, PLUGIN_DS]
    pods = core.list_namespaced_pod(
        sim.ns, label_selector=f"app={PLUGIN_DS}", field_selector="spec.nodeName=gpu-b"
    ).items
    assert len(pods) == 1 and pods[0].metadata.owner_references[0].uid == ds.metadata.uid
    core.delete_namespaced_pod(pods[0].metadata.name, sim.ns)
    sim.wait_settled("gpu-b")
    again = core.list_namespaced_pod(
        sim.ns, label_selector=f"app={PLUGIN_DS}", field_selector="spec.nodeName=gpu-b"
    ).items
    assert len(again) == 1 and again[0].metadata.uid != pods[0].metadata.uid


def test_rbac_denial(sim, core):
    sim.deny("patch", "nodes")
    with pytest.raises(ApiException) as exc:
        core.patch_node("gpu-a", {"metadata": {"labels": {"a": "1"}}})
    assert exc.value.status == 403
    assert json.loads(exc.value.body)["message"] == (
        'nodes "gpu-a" is forbidden: User "system:serviceaccount:sharebench-system:sharebench-node" cannot patch '
        'resource "nodes" in API group "" at the cluster scope'
    )
    sim.allow()
    assert core.patch_node("gpu-a", {"metadata": {"labels": {"a": "1"}}}).metadata.labels["a"] == "1"


def test_selector_helpers():
    assert match_labels("a=1,b in (x, y)", {"a": "1", "b": "y"})
    assert not match_labels("a=1,b in (x, y)", {"a": "1", "b": "z"})
    assert match_fields(
        "metadata.name=n,metadata.namespace!=kube-system", {"metadata": {"name": "n", "namespace": "d"}}
    )
