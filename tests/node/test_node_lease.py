"""Issue 14: one reconfiguration per node. A coordination.k8s.io Lease per node in sharebench's own
namespace, renewed by its holder, taken over only once expired; a second run is refused in one line
naming the holder; another run's sharebench pods count as foreign. Against k8s_sim with the
official kubernetes client."""

from __future__ import annotations

import datetime as dt

import pytest
from kubernetes import client

from sharebench.manifests.names import SYSTEM_NAMESPACE
from sharebench.node import NodeError, ReconfigureOptions, reconfigure, restore, status
from support.k8s_sim import LABEL_DP, SimCluster

NODE = "gpu-node-1"
LEASE = f"sharebench-node-{NODE}"


@pytest.fixture
def sim(tmp_path):
    with SimCluster(tmp_path) as cluster:
        cluster.add_gpu_node(NODE, "H200", gpus=2)
        yield cluster


def apply(sim, mode, holder, **kw):
    return reconfigure(
        NODE, mode, ReconfigureOptions(timeout_s=5, poll_s=0.01, holder=holder, **kw), api_client=sim.api_client()
    )


def lease(sim):
    return client.CoordinationV1Api(sim.api_client()).read_namespaced_lease(LEASE, SYSTEM_NAMESPACE)


def test_second_run_is_refused_naming_the_holder(sim):
    apply(sim, "timeslice:2", "run-a")
    held = lease(sim)
    assert held.spec.holder_identity == "run-a" and held.spec.lease_duration_seconds == 3600
    writes_before = len([r for r in sim.requests if r[0] != "GET"])
    with pytest.raises(NodeError) as exc:
        apply(sim, "mps:2", "run-b")
    msg = str(exc.value)
    assert msg.startswith(
        f"node {NODE}, mode mps:2, state taking Lease {SYSTEM_NAMESPACE}/{LEASE}: refusing: "
        f"the node is being reconfigured by run-a (Lease {SYSTEM_NAMESPACE}/{LEASE}, expires in "
    )
    assert "\n" not in msg
    assert len([r for r in sim.requests if r[0] != "GET"]) == writes_before  # nothing changed
    assert sim.node(NODE)["metadata"]["labels"][LABEL_DP] == "sharebench-timeslice-2"
    # run-b's restore cannot reset run-a's node either
    with pytest.raises(NodeError, match="refusing: the node's Lease .* is held by run-a, not run-b"):
        restore(NODE, api_client=sim.api_client(), timeout_s=5, poll_s=0.01, holder="run-b")
    assert sim.node(NODE)["metadata"]["labels"][LABEL_DP] == "sharebench-timeslice-2"


def test_holder_renews_and_restore_releases(sim):
    apply(sim, "timeslice:2", "run-a")
    first = lease(sim)
    apply(sim, "mps:2", "run-a")
    renewed = lease(sim)
    assert renewed.spec.renew_time > first.spec.renew_time
    assert renewed.spec.acquire_time == first.spec.acquire_time and renewed.spec.lease_transitions == 0
    assert status(NODE, api_client=sim.api_client())["lease"]["holder"] == "run-a"
    assert restore(NODE, api_client=sim.api_client(), timeout_s=5, poll_s=0.01, holder="run-a")["restored"]
    assert sim.get("leases", SYSTEM_NAMESPACE, LEASE) is None
    apply(sim, "mps:2", "run-b")  # free again
    assert lease(sim).spec.holder_identity == "run-b"


def test_expired_lease_is_taken_over(sim):
    apply(sim, "timeslice:2", "run-a")

    def expire(obj):
        old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=7200)
        obj["spec"]["renewTime"] = old.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    sim.edit("leases", SYSTEM_NAMESPACE, LEASE, expire)
    res = apply(sim, "mps:2", "run-b")
    assert res["resources"] == {"nvidia.com/gpu": 4}
    taken = lease(sim)
    assert taken.spec.holder_identity == "run-b" and taken.spec.lease_transitions == 1


def test_a_person_restores_whoever_holds_it(sim):
    apply(sim, "timeslice:2", "run-a")
    assert restore(NODE, api_client=sim.api_client(), timeout_s=5, poll_s=0.01)["restored"]
    assert sim.get("leases", SYSTEM_NAMESPACE, LEASE) is None


def test_racing_runs_one_wins(sim):
    """Both see no Lease; the API server lets one create succeed (409 for the other), which then
    reads the winner's Lease and is refused."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(apply, sim, "timeslice:2", f"run-{i}") for i in range(2)]
        outcomes = []
        for f in futures:
            try:
                f.result()
                outcomes.append("ok")
            except NodeError as exc:
                outcomes.append(str(exc))
    assert outcomes.count("ok") == 1, outcomes
    assert any("refusing: the node is being reconfigured by run-" in o for o in outcomes)


def test_other_runs_pods_are_foreign(sim):
    sim.add_pod(
        "team-a", "replica-0", NODE, labels={"app.kubernetes.io/part-of": "sharebench", "pipeline/runid": "run-a"}
    )
    with pytest.raises(NodeError, match=r"refusing: pods outside this run use this node's GPUs \(team-a/replica-0\)"):
        apply(sim, "timeslice:2", "run-b")
    assert apply(sim, "timeslice:2", "run-a")["resources"] == {"nvidia.com/gpu": 4}


def test_missing_namespace_is_named(sim):
    sim.fail_next("create", "leases", status=404)
    with pytest.raises(NodeError, match=f"namespace {SYSTEM_NAMESPACE} not found; apply manifests/namespace/"):
        apply(sim, "timeslice:2", "run-a")
