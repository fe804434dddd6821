"""Issues 14 and 27: one reconfiguration per node. A coordination.k8s.io Lease per node in sharebench's
own namespace, renewed by its holder, never deleted and never taken over: a release empties the holder
and names the old one; a second run (or a second CLI process) is refused in one line naming the holder;
a person's restore of a live run's node needs --force and names the run; a run whose renewal finds its
Lease released or taken stops, naming who holds it. Against k8s_sim with the official kubernetes client,
and with the rendered admission policy enforced by a real CEL engine."""

from __future__ import annotations

import datetime as dt
import json
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sharebench.manifests.names import LEASE_RELEASED_BY_ANNOTATION, SYSTEM_NAMESPACE
from sharebench.node import NodeError, ReconfigureOptions, reconfigure, renew_lease, restore, status
from sharebench.node.lease import LeaseLost, default_holder, holder_gone
from support.admission import AdmissionPolicy
from support.k8s_sim import LABEL_DP, SIM_WAIT_S, SimCluster

NODE = "gpu-node-1"
LEASE = f"sharebench-node-{NODE}"
ROOT = Path(__file__).resolve().parents[2]
POLICY_FILE = ROOT / "manifests/rbac/0400_validatingadmissionpolicy_sharebench-node.yaml"


@pytest.fixture(params=["no policy", "policy enforced"])
def sim(tmp_path, request):
    with SimCluster(tmp_path) as cluster:
        cluster.add_gpu_node(NODE, "H200", gpus=2, offered=True)
        if request.param == "policy enforced":
            cluster.admission.append(AdmissionPolicy(yaml.safe_load(POLICY_FILE.read_text())))
        yield cluster


def apply(sim, mode, holder, **kw):
    return reconfigure(
        NODE,
        mode,
        ReconfigureOptions(timeout_s=SIM_WAIT_S, poll_s=0.01, holder=holder, **kw),
        api_client=sim.api_client(),
    )


def person_restore(sim, **kw):
    return restore(NODE, api_client=sim.api_client(), timeout_s=SIM_WAIT_S, poll_s=0.01, **kw)


def lease(sim):
    return client.CoordinationV1Api(sim.api_client()).read_namespaced_lease(LEASE, SYSTEM_NAMESPACE)


def writes(sim) -> int:
    return len([r for r in sim.requests if r[0] != "GET"])


def test_second_run_is_refused_naming_the_holder(sim):
    apply(sim, "timeslice:2", "run-a")
    held = lease(sim)
    assert held.spec.holder_identity == "run-a" and held.spec.lease_duration_seconds == 3600
    writes_before = writes(sim)
    with pytest.raises(NodeError) as exc:
        apply(sim, "mps:2", "run-b")
    msg = str(exc.value)
    assert msg.startswith(
        f"node {NODE}, mode mps:2, state taking Lease {SYSTEM_NAMESPACE}/{LEASE}: refusing: "
        f"the node is being reconfigured by run-a (Lease {SYSTEM_NAMESPACE}/{LEASE}, expires in "
    )
    assert msg.endswith(f"if it is gone, run 'sharebench node restore {NODE} --force'") and "\n" not in msg
    assert writes(sim) == writes_before  # nothing changed
    assert sim.node(NODE)["metadata"]["labels"][LABEL_DP] == "sharebench-timeslice-2"
    # run-b's restore cannot reset run-a's node either
    with pytest.raises(NodeError, match="refusing: the node's Lease .* is held by run-a, not run-b"):
        person_restore(sim, holder="run-b")
    assert sim.node(NODE)["metadata"]["labels"][LABEL_DP] == "sharebench-timeslice-2"


def test_holder_renews_and_restore_releases_without_deleting(sim):
    apply(sim, "timeslice:2", "run-a")
    first = lease(sim)
    apply(sim, "mps:2", "run-a")
    renewed = lease(sim)
    assert renewed.spec.renew_time > first.spec.renew_time
    assert renewed.spec.acquire_time == first.spec.acquire_time and renewed.spec.lease_transitions == 0
    assert status(NODE, api_client=sim.api_client())["lease"]["holder"] == "run-a"
    assert person_restore(sim, holder="run-a")["restored"]
    released = lease(sim)  # still there: a release empties the holder and names the old one
    assert not released.spec.holder_identity
    assert released.metadata.annotations[LEASE_RELEASED_BY_ANNOTATION] == "run-a"
    assert status(NODE, api_client=sim.api_client())["lease"] is None
    assert not [r for r in sim.requests if r[0] == "DELETE" and "/leases/" in r[1]]
    apply(sim, "mps:2", "run-b")  # free again
    taken = lease(sim)
    assert taken.spec.holder_identity == "run-b" and taken.spec.lease_transitions == 1


def expire(sim):
    def edit(obj):
        old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=7200)
        obj["spec"]["renewTime"] = old.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    sim.edit("leases", SYSTEM_NAMESPACE, LEASE, edit)


def test_an_expired_lease_is_not_taken_over_until_a_person_restores(sim):
    apply(sim, "timeslice:2", "run-a")
    expire(sim)
    with pytest.raises(NodeError) as exc:
        apply(sim, "mps:2", "run-b")
    msg = str(exc.value)
    assert re.search(f"refusing: the node's Lease {SYSTEM_NAMESPACE}/{LEASE} held by run-a expired 36\\d\\d s ago", msg)
    assert msg.endswith(f"if that run is gone, run 'sharebench node restore {NODE}' to put the node back and free it")
    assert lease(sim).spec.holder_identity == "run-a"
    assert person_restore(sim)["restored"]  # expired: no --force needed
    assert apply(sim, "mps:2", "run-b")["resources"] == {"nvidia.com/gpu": 4}
    assert lease(sim).spec.holder_identity == "run-b"


def renewed_ahead(sim, seconds: float):
    def edit(obj):
        ahead = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=seconds)
        obj["spec"]["renewTime"] = ahead.strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    sim.edit("leases", SYSTEM_NAMESPACE, LEASE, edit)


def test_a_lease_renewed_a_year_ahead_is_invalid_not_a_year_long_block(sim):
    """Issue 37: a Lease renewed a year ahead blocked its node for a year (and a person's restore needed
    --force). A renew time beyond one duration in the future is invalid, so expired."""
    apply(sim, "timeslice:2", "run-a")
    renewed_ahead(sim, 365 * 86400)
    with pytest.raises(NodeError) as exc:
        apply(sim, "mps:2", "run-b")
    msg = str(exc.value)
    assert re.search(
        r"held by run-a is not taken over although its renew time \S+ is 315\d{5} s in the future, "
        r"beyond its 3600 s duration: invalid, so expired; run 'sharebench node restore",
        msg,
    ), msg
    assert status(NODE, api_client=sim.api_client())["lease"]["expires_in_s"] == 0
    assert person_restore(sim)["restored"]  # no --force: it blocks nothing
    assert apply(sim, "mps:2", "run-b")["resources"] == {"nvidia.com/gpu": 4}


def test_a_renew_time_ahead_within_the_duration_is_a_live_lease(sim):
    apply(sim, "timeslice:2", "run-a")
    renewed_ahead(sim, 60)  # a clock a minute ahead: still live, for 61 minutes
    with pytest.raises(NodeError, match="refusing: the node is being reconfigured by run-a"):
        apply(sim, "mps:2", "run-b")
    with pytest.raises(NodeError, match="pass --force"):
        person_restore(sim)


@pytest.mark.parametrize("poll", ["1e-9", "0.05"])
def test_the_poll_has_a_floor(sim, capsys, poll):
    """Issue 37: --poll 1e-9 sent 2,549 API requests in 4 s."""
    from sharebench.cli import main

    before = len(sim.requests)
    assert main(["node", "apply", NODE, "timeslice:2", "--kubeconfig", str(sim.kubeconfig), "--poll", poll]) == 2
    assert capsys.readouterr().err == (
        f"sharebench: error: --poll must be at least 0.1 s (got {float(poll)!r}): each check is an API request\n"
    )
    assert len(sim.requests) == before


def test_a_person_restores_a_live_runs_node_only_with_force_naming_the_run(sim):
    apply(sim, "timeslice:2", "run-a")
    before = writes(sim)
    with pytest.raises(NodeError) as exc:
        person_restore(sim)
    msg = str(exc.value)
    assert msg.startswith(
        f"node {NODE}, mode restore, state pre-flight: refusing: the node is leased by the live run run-a "
        f"(Lease {SYSTEM_NAMESPACE}/{LEASE}, expires in "
    )
    assert msg.endswith("pass --force to restore anyway (that run then stops at its next renewal)")
    assert writes(sim) == before and sim.node(NODE)["metadata"]["labels"][LABEL_DP] == "sharebench-timeslice-2"
    assert person_restore(sim, force=True)["restored"]
    assert lease(sim).metadata.annotations[LEASE_RELEASED_BY_ANNOTATION] == "run-a"


def test_cli_restore_needs_force_for_a_live_run(sim, capsys):
    from sharebench.cli import main

    apply(sim, "timeslice:2", "run-a")
    argv = [
        "node",
        "restore",
        NODE,
        "--kubeconfig",
        str(sim.kubeconfig),
        "--poll",
        "0.1",
        "--timeout",
        f"{SIM_WAIT_S:g}",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "leased by the live run run-a" in err and "pass --force" in err
    assert main([*argv, "--force"]) == 0
    assert "restored: True" in capsys.readouterr().out.splitlines()


def test_a_run_whose_lease_was_released_stops_naming_it(sim):
    apply(sim, "timeslice:2", "run-a")
    renew_lease(NODE, "run-a", api_client=sim.api_client())  # held: renewed
    person_restore(sim, force=True)
    with pytest.raises(LeaseLost) as exc:
        renew_lease(NODE, "run-a", api_client=sim.api_client())
    msg = str(exc.value)
    assert (
        f"this run (run-a) no longer holds Lease {SYSTEM_NAMESPACE}/{LEASE}: it was released (last held by run-a)"
        in msg
    )
    assert msg.endswith("the node may have been put back, so the run stops") and "\n" not in msg
    assert not lease(sim).spec.holder_identity  # the renewal did not take it back
    apply(sim, "mps:2", "run-b")
    with pytest.raises(
        LeaseLost,
        match=f"this run \\(run-a\\) no longer holds Lease {SYSTEM_NAMESPACE}/{LEASE}: "
        "run-b holds it now; the run stops",
    ):
        renew_lease(NODE, "run-a", api_client=sim.api_client())
    assert lease(sim).spec.holder_identity == "run-b"


def test_racing_runs_one_wins(sim):
    """Both see no Lease; the API server lets one create succeed (409 for the other), which then
    reads the winner's Lease and is refused."""
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


def test_holders_are_unique_per_process():
    here = default_holder()
    assert here == default_holder()  # one process, one holder
    code = "from sharebench.node.lease import default_holder; print(default_holder())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    host = socket.gethostname()
    assert here.startswith(f"sharebench-cli@{host}:") and other.startswith(f"sharebench-cli@{host}:")
    assert other != here
    assert holder_gone(other) and not holder_gone(here)  # that process has ended; this one runs
    assert not holder_gone("run-a") and not holder_gone("sharebench-cli@another-host:1.1")


def test_two_cli_applies_from_one_machine_the_second_is_refused(sim):
    sim.pause_operator()  # the first apply waits for the node to advertise: it still runs
    cmd = [sys.executable, "-m", "sharebench", "node", "apply", NODE]
    opts = ["--kubeconfig", str(sim.kubeconfig), "--poll", "0.1", "--timeout", "30"]
    first = subprocess.Popen([*cmd, "timeslice:2", *opts], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while sim.get("leases", SYSTEM_NAMESPACE, LEASE) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        holder = sim.get("leases", SYSTEM_NAMESPACE, LEASE)["spec"]["holderIdentity"]
        assert holder.startswith(f"sharebench-cli@{socket.gethostname()}:{first.pid}.")
        second = subprocess.run([*cmd, "mps:2", *opts], capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert f"refusing: the node is being reconfigured by {holder} (Lease" in second.stderr
        assert second.stderr.count("\n") == 1
    finally:
        sim.pause_operator(False)
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert sim.node(NODE)["metadata"]["labels"][LABEL_DP] == "sharebench-timeslice-2"
    # the first process has ended: an apply from this machine releases its Lease (naming it) and takes it
    res = apply(sim, "mps:2", None)
    assert res["resources"] == {"nvidia.com/gpu": 4}
    assert lease(sim).spec.holder_identity == default_holder()


def test_a_gone_cli_process_of_this_machine_is_released_then_taken(sim):
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    gone = f"sharebench-cli@{socket.gethostname()}:{done.pid}.{int(psutil.Process(done.pid).create_time())}"
    done.wait()
    apply(sim, "timeslice:2", gone)
    apply(sim, "mps:2", "run-b")
    taken = lease(sim)
    assert taken.spec.holder_identity == "run-b"
    assert taken.metadata.annotations[LEASE_RELEASED_BY_ANNOTATION] == gone


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


# ---------------------------------------------------------------- the API server enforces the protocol
def raw_lease_api(sim) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(sim.api_client())


def denial(call) -> str:
    with pytest.raises(ApiException) as exc:
        call()
    assert exc.value.status == 422
    return json.loads(exc.value.body)["message"]


def test_policy_denies_delete_takeover_and_an_anonymous_release(tmp_path):
    with SimCluster(tmp_path) as sim:
        sim.add_gpu_node(NODE, "H200", gpus=2, offered=True)
        sim.admission.append(AdmissionPolicy(yaml.safe_load(POLICY_FILE.read_text())))
        apply(sim, "timeslice:2", "run-a")
        api = raw_lease_api(sim)
        msg = denial(lambda: api.delete_namespaced_lease(LEASE, SYSTEM_NAMESPACE))
        assert "sharebench may not delete a Lease: a release empties its holder" in msg

        def replaced(holder, annotations=None):
            obj = api.read_namespaced_lease(LEASE, SYSTEM_NAMESPACE)
            obj.spec.holder_identity = holder
            obj.metadata.annotations = {**(obj.metadata.annotations or {}), **(annotations or {})}
            return lambda: api.replace_namespaced_lease(LEASE, SYSTEM_NAMESPACE, obj)

        taken = "sharebench may take only a released Lease (no holder), and release one only naming its holder"
        assert taken in denial(replaced("run-b"))  # a takeover in one step
        assert taken in denial(replaced(""))  # a release that does not say whose
        assert taken in denial(replaced("", {LEASE_RELEASED_BY_ANNOTATION: "run-z"}))  # nor lies about it
        assert lease(sim).spec.holder_identity == "run-a"
        replaced("", {LEASE_RELEASED_BY_ANNOTATION: "run-a"})()  # a release naming its holder: admitted
        replaced("run-b")()  # taking a released Lease: admitted
        assert lease(sim).spec.holder_identity == "run-b"
