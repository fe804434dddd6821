"""Issue 37: the node agent, the only holder of the node account, against the simulated API server over
HTTP with the official client, with the rendered RBAC and admission policy enforced. A run's step files a
sharing request with its own account and waits for the answer; a second run, a run that reaches for a
second node, a node the site never offered, a disallowed image, a request that asks for force, and a
submitter's pod that reaches for node rights are all refused."""

from __future__ import annotations

import threading

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sharebench.components import steps
from sharebench.errors import UserError
from sharebench.manifests import names, render
from sharebench.node import NodeError
from sharebench.node.agent import (
    AgentOptions,
    Request,
    RequestRefused,
    file_request,
    serve,
    serve_once,
    status_of,
    wait_request,
)
from sharebench.node.lease import CLAIM
from support.admission import AdmissionPolicy
from support.k8s_sim import LABEL_DP, SIM_WAIT_S, SimCluster
from support.rbac import Rbac

NODE, NODE2, CONTROL_PLANE = "gpu-node-1", "gpu-node-2", "control-plane-1"
RUNS = names.RUN_NAMESPACE
RUNNER = f"system:serviceaccount:{RUNS}:pipeline-runner"  # the account a run's pods run as
IMAGE = "ghcr.io/sharebench/sharebench:1.0"
OPTIONS = AgentOptions(timeout_s=SIM_WAIT_S, poll_s=0.01)


def site_objects() -> list[dict]:
    """What the site applies: the rendered manifests (agent mode), and its binding of the requester role
    to the account its runs use."""
    objs = [o for _, o in render.kubernetes_objects(render.render())]
    objs.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "runner-requests", "namespace": RUNS},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.REQUESTER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": "pipeline-runner", "namespace": RUNS}],
        }
    )
    return objs


@pytest.fixture
def sim(tmp_path):
    with SimCluster(tmp_path) as cluster:
        cluster.add_gpu_node(NODE, "H200", gpus=2)
        cluster.add_gpu_node(NODE2, "H200", gpus=2)
        cluster.add_gpu_node(CONTROL_PLANE, "H200", gpus=2, labels={"node-role.kubernetes.io/control-plane": ""})
        cluster.offer(NODE, NODE2, image_allow=("ghcr.io/sharebench",), run_namespaces=(RUNS,))
        cluster.add_user("runner-token", RUNNER)
        cluster.add_user("admin-token", "admin")
        objs = site_objects()
        cluster.rbac = Rbac(objs, admins={"admin"})
        (vap,) = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"]
        cluster.admission.append(AdmissionPolicy(vap))
        yield cluster


@pytest.fixture
def agent(sim):
    """The agent's Deployment, in miniature: serve() in a thread, as the node account."""
    stop = threading.Event()
    lines: list[str] = []
    thread = threading.Thread(
        target=serve, args=(sim.api_client(), OPTIONS), kwargs={"every_s": 0.02, "stop": stop, "progress": lines.append}
    )
    thread.start()
    yield lines
    stop.set()
    thread.join(timeout=30)


def request(action: str, node: str, run: str, *, image: str = IMAGE, **kw) -> Request:
    return Request(RUNS, "", action, node, run, image, **kw)


def step(sim, action: str, node: str, run: str, **kw) -> dict:
    """A pipeline step: files a request with the run's own account and waits for the agent's answer."""
    runner = sim.api_client("runner-token")
    name = file_request(runner, request(action, node, run, **kw))
    return wait_request(runner, RUNS, name, timeout_s=SIM_WAIT_S, poll_s=0.02)


def lease_holder(sim, node: str) -> str:
    lease = client.CoordinationV1Api(sim.api_client("admin-token")).read_namespaced_lease(
        f"sharebench-node-{node}", names.SYSTEM_NAMESPACE
    )
    return lease.spec.holder_identity


def test_a_run_applies_and_restores_through_the_agent(sim, agent):
    res = step(sim, "apply", NODE, "run-1", mode="timeslice:2")
    assert res["resources"] == {"nvidia.com/gpu": 4} and res["mode"] == "timeslice:2"
    assert lease_holder(sim, NODE) == f"{RUNS}/run-1"
    assert sim.node(NODE)["metadata"]["annotations"][CLAIM] == f"{RUNS}/run-1"
    assert sim.node(NODE)["metadata"]["labels"][LABEL_DP] == "sharebench-timeslice-2"
    res = step(sim, "restore", NODE, "run-1")
    assert res["restored"] is True and res["resources"] == {"nvidia.com/gpu": 2}
    assert lease_holder(sim, NODE) == "" and CLAIM not in sim.node(NODE)["metadata"]["annotations"]


def refusal(sim, action: str, node: str, run: str, **kw) -> str:
    with pytest.raises(NodeError) as exc:
        step(sim, action, node, run, **kw)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def test_a_second_run_is_refused_the_node_and_cannot_restore_it(sim, agent):
    step(sim, "apply", NODE, "run-1", mode="timeslice:2")
    msg = refusal(sim, "apply", NODE, "run-2", mode="mps:2")
    assert f"refusing: the node is being reconfigured by {RUNS}/run-1" in msg
    msg = refusal(sim, "restore", NODE, "run-2")
    assert f"is held by {RUNS}/run-1, not {RUNS}/run-2" in msg
    assert sim.node(NODE)["metadata"]["labels"][LABEL_DP] == "sharebench-timeslice-2"  # untouched


def test_a_run_that_tries_another_node_is_refused(sim, agent):
    step(sim, "apply", NODE, "run-1", mode="timeslice:2")
    msg = refusal(sim, "apply", NODE2, "run-1", mode="timeslice:2")
    assert msg.endswith(
        f"the run already holds {names.SYSTEM_NAMESPACE}/sharebench-node-{NODE} (one node per run at a time); "
        "restore that node first"
    )
    assert (
        LABEL_DP not in sim.node(NODE2)["metadata"]["labels"]
        and CLAIM not in sim.node(NODE2)["metadata"]["annotations"]
    )
    step(sim, "restore", NODE, "run-1")
    assert step(sim, "apply", NODE2, "run-1", mode="mps:2")["resources"] == {"nvidia.com/gpu": 4}  # one at a time


@pytest.mark.parametrize(
    "node, kw, refused",
    [
        (CONTROL_PLANE, {}, f"node {CONTROL_PLANE} is not offered by the site (offered: {NODE}, {NODE2})"),
        (NODE, {"image": "ghcr.io/sharebench-evil/x:1"}, "image 'ghcr.io/sharebench-evil/x:1' is not allowed"),
    ],
)
def test_requests_outside_the_offer_are_refused(sim, agent, node, kw, refused):
    msg = refusal(sim, "apply", node, "run-1", mode="timeslice:2", **kw)
    assert "Refused" in msg and refused in msg
    assert all(LABEL_DP not in sim.node(n)["metadata"]["labels"] for n in (NODE, CONTROL_PLANE))


def test_a_run_whose_pods_run_a_disallowed_image_is_refused(sim, agent):
    sim.add_pod(RUNS, "replica-0", NODE, labels={"pipeline/runid": "run-1"})  # image busybox
    msg = refusal(sim, "apply", NODE, "run-1", mode="timeslice:2")
    assert "pod replica-0 of the run runs image 'busybox', not allowed" in msg


def test_a_request_with_a_field_outside_the_schema_is_refused(sim):
    runner = sim.api_client("runner-token")
    body = {
        "metadata": {"name": "forced", "labels": dict([names.REQUEST_LABEL])},
        "data": {"action": "apply", "node": NODE, "run": "r", "image": IMAGE, "mode": "timeslice:2", "force": "true"},
    }
    client.CoreV1Api(runner).create_namespaced_config_map(RUNS, body)
    assert serve_once(sim.api_client(), OPTIONS) == 1
    cm = client.CoreV1Api(runner).read_namespaced_config_map("forced", RUNS)
    status = status_of(cm.data)
    assert status is not None and status["phase"] == "Refused"
    assert status["message"] == (
        f"request {RUNS}/forced: unknown key(s) force; allowed: action, node, mode, run, image, gpu-model"
    )
    assert serve_once(sim.api_client(), OPTIONS) == 0  # answered once
    with pytest.raises(RequestRefused, match="gpu-model must be one line"):  # the step's side refuses before filing
        file_request(runner, request("apply", NODE, "r", mode="timeslice:2", gpu_model="\n"))


def test_a_submitters_pod_cannot_reach_node_rights(sim):
    """Issue 37, item 2: a submitter's own code runs with the run's account; it has no node rights and
    no node token to mount: none exists in the run namespace."""
    runner = sim.api_client("runner-token")
    core = client.CoreV1Api(runner)
    attempts = [
        lambda: core.patch_node(NODE, {"metadata": {"labels": {LABEL_DP: "sharebench-timeslice-2"}}}),
        lambda: core.delete_namespaced_pod(sim.plugin_pods(NODE)[0]["metadata"]["name"], names.OPERATOR_NAMESPACE),
        lambda: core.list_namespaced_secret(RUNS),
        lambda: core.read_namespaced_secret(names.NODE_TOKEN_SECRET, RUNS),
        lambda: core.patch_namespaced_config_map(
            names.OFFER_CONFIGMAP, names.SYSTEM_NAMESPACE, {"data": {f"node.{CONTROL_PLANE}": "offered"}}
        ),
        lambda: client.CoordinationV1Api(runner).create_namespaced_lease(
            names.SYSTEM_NAMESPACE, {"metadata": {"name": f"sharebench-node-{NODE}"}, "spec": {"holderIdentity": "me"}}
        ),
    ]
    for attempt in attempts:
        with pytest.raises(ApiException) as exc:
            attempt()
        assert exc.value.status == 403
    rendered = render.kubernetes_objects(render.render())
    assert not [o for _, o in rendered if o["kind"] == "Secret"]  # no node token anywhere
    accounts = [o for _, o in rendered if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == "sharebench-node"]
    assert [a["metadata"]["namespace"] for a in accounts] == [names.SYSTEM_NAMESPACE]
    deployment = yaml.safe_load(render.render()["agent/0200_deployment_sharebench-node-agent.yaml"])
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == names.SERVICE_ACCOUNT
    assert deployment["metadata"]["namespace"] == names.SYSTEM_NAMESPACE


def test_no_answer_names_the_agent(sim):
    runner = sim.api_client("runner-token")
    name = file_request(runner, request("apply", NODE, "r", mode="timeslice:2"))
    with pytest.raises(NodeError, match="no answer from the node agent after 0.2 s; is it running"):
        wait_request(runner, RUNS, name, timeout_s=0.2, poll_s=0.05)


def test_the_pipelines_node_steps_file_requests_and_wait_for_the_agent(sim, agent, tmp_path, monkeypatch, capsys):
    """components/steps.py's reconfigure and restore in agent mode, as the component calls them: the
    step's pod holds only the run's account (a kubeconfig with the runner's token), files its request in
    its own namespace over HTTP and waits on the status the agent writes back."""
    cfg = yaml.safe_load(sim.kubeconfig.read_text())
    cfg["users"][0]["user"]["token"] = "runner-token"
    (tmp_path / "runner.kubeconfig").write_text(yaml.safe_dump(cfg))
    (tmp_path / "namespace").write_text(RUNS + "\n")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "runner.kubeconfig"))
    monkeypatch.setattr(steps, "POD_NAMESPACE_FILE", tmp_path / "namespace")
    common = {"gpu_model": "H200", "placement": "pods", "image": IMAGE, "timeout_s": SIM_WAIT_S}

    placed = steps.reconfigure(node_name=NODE, mode="timeslice:2", run_id="run-7", **common)
    assert (placed["resource"], placed["count"], placed["reconfigured"]) == ("nvidia.com/gpu", 1, True)
    assert placed["node_selector"] == {"kubernetes.io/hostname": NODE}
    assert lease_holder(sim, NODE) == f"{RUNS}/run-7"
    assert sim.node(NODE)["metadata"]["labels"][LABEL_DP] == "sharebench-timeslice-2"
    admin = client.CoreV1Api(sim.api_client("admin-token"))
    (filed,) = admin.list_namespaced_config_map(RUNS, label_selector="=".join(names.REQUEST_LABEL)).items
    assert (filed.data["action"], filed.data["run"], filed.data["mode"]) == ("apply", "run-7", "timeslice:2")
    assert status_of(dict(filed.data))["phase"] == "Applied"
    out = capsys.readouterr().out
    assert f"request {RUNS}/{filed.metadata.name} filed; waiting for the node agent" in out
    assert "the node agent answered: done" in out

    with pytest.raises(NodeError, match=f"refusing: the node is being reconfigured by {RUNS}/run-7"):
        steps.reconfigure(node_name=NODE, mode="mps:2", run_id="run-8", **common)
    with pytest.raises(UserError, match="force is never a request's to ask for"):
        steps.reconfigure(node_name=NODE, mode="mps:2", run_id="run-7", force=True, **common)

    (restored,) = steps.restore(node_names=[NODE], run_id="run-7", timeout_s=SIM_WAIT_S)
    assert restored["restored"] is True and restored["resources"] == {"nvidia.com/gpu": 2}
    assert lease_holder(sim, NODE) == "" and LABEL_DP not in sim.node(NODE)["metadata"]["labels"]
