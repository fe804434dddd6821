"""HTTP 409 is a type: the session raises ``Conflict`` for it, and the writers that read again and retry
(prior state, device-plugin ConfigMap, Lease) branch on that type, against the simulated API server."""

from __future__ import annotations

import pytest
from kubernetes import client

from sharebench.manifests.names import DEVICE_PLUGIN_CONFIGMAP
from sharebench.node import Conflict, NodeError, ReconfigureOptions, make_api_client, reconfigure
from sharebench.node.client import Session
from support.k8s_sim import SIM_WAIT_S, SimCluster

NODE = "gpu-node-1"


@pytest.fixture
def sim(tmp_path):
    with SimCluster(tmp_path) as cluster:
        cluster.add_gpu_node(NODE, "H200", gpus=2)
        yield cluster


def apply(sim: SimCluster, mode: str) -> dict:
    return reconfigure(
        NODE, mode, ReconfigureOptions(timeout_s=SIM_WAIT_S, poll_s=0.01), api_client=make_api_client(sim.kubeconfig)
    )


def test_a_stale_write_raises_conflict(sim):
    sess = Session(NODE, "timeslice:2", make_api_client(sim.kubeconfig), None, timeout_s=SIM_WAIT_S, poll_s=0.01)
    cm = sess.core.read_namespaced_config_map(DEVICE_PLUGIN_CONFIGMAP, sim.ns)
    stale = cm.metadata.resource_version
    sess.core.replace_namespaced_config_map(DEVICE_PLUGIN_CONFIGMAP, sim.ns, cm)  # bumps the version
    cm.metadata.resource_version = stale
    with pytest.raises(Conflict) as exc:
        sess.call("update", "configmaps", sess.core.replace_namespaced_config_map, DEVICE_PLUGIN_CONFIGMAP, sim.ns, cm)
    assert isinstance(exc.value, NodeError) and "\n" not in str(exc.value)
    assert f"node {NODE}, mode timeslice:2" in str(exc.value)


def test_a_create_of_an_existing_object_raises_conflict(sim):
    sess = Session(NODE, "exclusive", make_api_client(sim.kubeconfig), None, timeout_s=SIM_WAIT_S, poll_s=0.01)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="x"), data={"k": "v"})
    sess.call("create", "configmaps", sess.core.create_namespaced_config_map, "default", body)
    with pytest.raises(Conflict):
        sess.call("create", "configmaps", sess.core.create_namespaced_config_map, "default", body)


@pytest.mark.parametrize(
    "verb, resource, mode, gpus",
    [
        ("patch", "nodes", "timeslice:2", 4),
        ("create", "leases", "timeslice:2", 4),
        ("update", "configmaps", "mps:3", 6),  # a ConfigMap entry of its own: an update
    ],
    ids=["prior-state", "lease", "plugin-configmap"],
)
def test_writers_read_again_after_a_conflict(sim, verb, resource, mode, gpus):
    """One 409 on each retrying write: the reconfiguration still ends in the mode."""
    sim.fail_next(verb, resource, status=409, times=1)
    assert apply(sim, mode)["resources"] == {"nvidia.com/gpu": gpus}
    assert all(f[3] == 0 for f in sim.failures)  # the injected 409 was met, and survived


def test_lasting_conflict_is_one_typed_line(sim):
    sim.fail_next("update", "configmaps", status=409, times=10_000)
    with pytest.raises(NodeError) as exc:
        apply(sim, "mps:3")
    assert "kept changing under us" in str(exc.value) and "\n" not in str(exc.value)
    assert isinstance(exc.value, Conflict)
