"""Issues 37 and 46: the node agent, the only holder of the node account, against the simulated API server
over HTTP with the official client, with the rendered RBAC and both admission policies enforced.

A run's step files a SharingRequest with its own account and proves its pod with the pod's projected
token (TokenReview); the agent takes the run from the pod, never from the request, and answers in the
status subresource only it may write. Issue 46's five attacks are each refused in one line: restoring
another run's node, a forged answer, two nodes under invented run ids, a replayed request of a finished
run, and a run id that is a label selector. A genuine run's apply, cell and restore still work end to end.
"""

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
    TOKEN_FILE_ENV,
    AgentOptions,
    Request,
    RequestRefused,
    StepIdentity,
    file_request,
    new_attempt,
    request_name,
    serve,
    serve_once,
    status_of,
    wait_request,
)
from sharebench.node.lease import CLAIM
from support.admission import AdmissionPolicy
from support.k8s_sim import API_AUDIENCE, LABEL_DP, SIM_WAIT_S, SimCluster
from support.rbac import Rbac

NODE, NODE2, CONTROL_PLANE = "gpu-node-1", "gpu-node-2", "control-plane-1"
RUNS = names.RUN_NAMESPACE
RUNNER = f"system:serviceaccount:{RUNS}:pipeline-runner"  # the account a run's pods run as
EDITOR = "team-a-editor"  # a namespace editor (Kubeflow's kubeflow-edit): may create pods, file requests
IMAGE = "ghcr.io/sharebench/sharebench:1.0"
OPTIONS = AgentOptions(timeout_s=SIM_WAIT_S, poll_s=0.01)
GROUP, VERSION, PLURAL = names.REQUEST_GROUP, names.REQUEST_VERSION, names.REQUEST_PLURAL


def site_objects() -> list[dict]:
    """What the site applies: the rendered manifests (agent mode), its binding of the requester role to
    the account its runs use and to its editors, and the editors' own right to make pods."""
    objs = [o for _, o in render.kubernetes_objects(render.render())]
    edit = {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "patch", "update", "get", "list"]}
    objs.append({"kind": "Role", "metadata": {"name": "edit", "namespace": RUNS}, "rules": [edit]})
    for name, role, subject in [
        (
            "runner-requests",
            names.REQUESTER_ROLE,
            {"kind": "ServiceAccount", "name": "pipeline-runner", "namespace": RUNS},
        ),
        ("editor-requests", names.REQUESTER_ROLE, {"kind": "User", "name": EDITOR}),
        ("editor-pods", "edit", {"kind": "User", "name": EDITOR}),
    ]:
        objs.append(
            {
                "kind": "RoleBinding",
                "metadata": {"name": name, "namespace": RUNS},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                "subjects": [subject],
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
        cluster.add_user("editor-token", EDITOR)
        cluster.add_user("argo-token", names.WORKFLOW_CONTROLLER)
        objs = site_objects()
        cluster.rbac = Rbac(objs, admins={"admin", names.WORKFLOW_CONTROLLER})
        bindings = {o["spec"]["policyName"]: o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding"}
        for vap in [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"]:
            cluster.admission.append(AdmissionPolicy(vap, bindings[vap["metadata"]["name"]]))
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


def step_pod(sim, run: str, action: str, name: str = "", **labels: str) -> StepIdentity:
    """A node step's pod as the workflow controller makes it (run label, node-step label, the run's
    account), running, with the projected token the site's PodDefault mounts: its identity."""
    name = name or f"{run}-{action}-{len(sim.objects)}"
    pod_labels = {names.RUN_LABEL: run, names.NODE_STEP_LABEL: action, **labels}
    pod = sim.add_pod(RUNS, name, NODE, gpu=None, labels=pod_labels, image=IMAGE, service_account="pipeline-runner")
    return StepIdentity(name, pod["metadata"]["uid"], sim.pod_token(RUNS, name))


def request(action: str, node: str, run: str = "", *, image: str = IMAGE, **kw) -> Request:
    return Request(RUNS, "", action, node, image, run=run, **kw)


def step(sim, identity: StepIdentity, action: str, node: str, run: str = "", **kw) -> dict:
    """A pipeline step: files a request with the run's own account, proven by its pod, and waits."""
    runner = sim.api_client("runner-token")
    filed = file_request(runner, request(action, node, run, **kw), identity)
    return wait_request(runner, filed, timeout_s=SIM_WAIT_S, poll_s=0.02)


def refusal(sim, identity: StepIdentity, action: str, node: str, run: str = "", **kw) -> str:
    with pytest.raises(NodeError) as exc:
        step(sim, identity, action, node, run, **kw)
    msg = str(exc.value)
    assert "\n" not in msg and identity.token not in msg
    return msg


def lease_holder(sim, node: str) -> str:
    lease = client.CoordinationV1Api(sim.api_client("admin-token")).read_namespaced_lease(
        f"sharebench-node-{node}", names.SYSTEM_NAMESPACE
    )
    return lease.spec.holder_identity


def sharing(sim, node: str) -> str | None:
    return sim.node(node)["metadata"]["labels"].get(LABEL_DP)


def objects(sim, token: str = "admin-token") -> client.CustomObjectsApi:
    return client.CustomObjectsApi(sim.api_client(token))


def test_a_run_applies_and_restores_through_the_agent(sim, agent):
    res = step(sim, step_pod(sim, "run-1", "apply"), "apply", NODE, "run-1", mode="timeslice:2")
    assert res["resources"] == {"nvidia.com/gpu": 4} and res["mode"] == "timeslice:2"
    assert lease_holder(sim, NODE) == f"{RUNS}/run-1"
    assert sim.node(NODE)["metadata"]["annotations"][CLAIM] == f"{RUNS}/run-1"
    assert sharing(sim, NODE) == "sharebench-timeslice-2"
    res = step(sim, step_pod(sim, "run-1", "restore"), "restore", NODE)  # the run is the pod's: none named
    assert res["restored"] is True and res["resources"] == {"nvidia.com/gpu": 2}
    assert lease_holder(sim, NODE) == "" and CLAIM not in sim.node(NODE)["metadata"]["annotations"]


def test_a_second_run_is_refused_the_node(sim, agent):
    step(sim, step_pod(sim, "run-1", "apply"), "apply", NODE, "run-1", mode="timeslice:2")
    msg = refusal(sim, step_pod(sim, "run-2", "apply"), "apply", NODE, "run-2", mode="mps:2")
    assert f"refusing: the node is being reconfigured by {RUNS}/run-1" in msg
    assert sharing(sim, NODE) == "sharebench-timeslice-2"  # untouched


# ---------------------------------------------------------------- issue 46: the five attacks
def test_attack_1_another_runs_node_is_not_restored(sim, agent):
    """A requester restores run-1's node in the middle of its measurement: with its own run's pod, naming
    run-1 or not; with a pod's token for the API server; with a made-up token. Each refused in one line."""
    step(sim, step_pod(sim, "run-1", "apply"), "apply", NODE, "run-1", mode="timeslice:2")
    theirs = step_pod(sim, "run-2", "restore")
    assert refusal(sim, theirs, "restore", NODE, "run-1").endswith(
        f"it names run run-1, but its pod {theirs.pod} is of run run-2"
    )
    assert f"is held by {RUNS}/run-1, not {RUNS}/run-2" in refusal(sim, theirs, "restore", NODE)
    api_token = StepIdentity(theirs.pod, theirs.pod_uid, sim.pod_token(RUNS, theirs.pod, API_AUDIENCE))
    assert "its token is not valid (TokenReview: [invalid bearer token, token audiences is invalid" in refusal(
        sim, api_token, "restore", NODE, "run-1"
    )
    forged = StepIdentity(theirs.pod, theirs.pod_uid, "eyJhbGciOiJSUzI1NiJ9.forged.sig")
    assert "its token is not valid (TokenReview: [invalid bearer token" in refusal(sim, forged, "restore", NODE)
    # and the run's own apply pod may not restore (the action its pod may request is apply)
    ours = step_pod(sim, "run-1", "apply")
    assert refusal(sim, ours, "restore", NODE).endswith(
        f"its pod {ours.pod} may request apply ({names.NODE_STEP_LABEL}), not restore"
    )
    assert lease_holder(sim, NODE) == f"{RUNS}/run-1" and sharing(sim, NODE) == "sharebench-timeslice-2"


def test_attack_2_no_forged_answer_reaches_a_step(sim):
    """A requester cannot delete a pending request, nor write an answer: a status in a create is dropped
    (status subresource), and neither the request nor its status may be changed by the run's account."""
    runner = sim.api_client("runner-token")
    filed = file_request(runner, request("apply", NODE, "run-1", mode="timeslice:2"), step_pod(sim, "run-1", "apply"))
    forged = {"phase": "Applied", "attempt": filed.attempt, "result": {"mode": "timeslice:4"}}
    api = objects(sim, "runner-token")
    for attempt in [
        lambda: api.delete_namespaced_custom_object(GROUP, VERSION, RUNS, PLURAL, filed.name),
        lambda: api.patch_namespaced_custom_object_status(GROUP, VERSION, RUNS, PLURAL, filed.name, {"status": forged}),
        lambda: api.patch_namespaced_custom_object(GROUP, VERSION, RUNS, PLURAL, filed.name, {"status": forged}),
        lambda: api.list_namespaced_custom_object(GROUP, VERSION, RUNS, PLURAL),  # nor see another's token
    ]:
        with pytest.raises(ApiException) as exc:
            attempt()
        assert exc.value.status == 403
    again = new_attempt()  # a new request filed with the answer already in it
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": names.REQUEST_KIND,
        "metadata": {"name": request_name(again)},
        "spec": {**filed.spec(), "attempt": again},
        "status": {**forged, "attempt": again},
    }
    created = api.create_namespaced_custom_object(GROUP, VERSION, RUNS, PLURAL, body)
    assert (
        "status" not in created
        and status_of(api.get_namespaced_custom_object(GROUP, VERSION, RUNS, PLURAL, request_name(again))) is None
    )
    with pytest.raises(NodeError, match="no answer from the node agent after 0.2 s"):
        wait_request(
            runner, Request(RUNS, request_name(again), "apply", NODE, IMAGE, attempt=again), timeout_s=0.2, poll_s=0.05
        )
    assert sharing(sim, NODE) is None


def test_attack_3_one_node_per_run_whatever_id_is_written(sim, agent):
    step(sim, step_pod(sim, "run-1", "apply"), "apply", NODE, "run-1", mode="timeslice:2")
    second = step_pod(sim, "run-1", "apply")
    assert refusal(sim, second, "apply", NODE2, "run-1-other", mode="timeslice:2").endswith(
        f"it names run run-1-other, but its pod {second.pod} is of run run-1"
    )
    assert refusal(sim, step_pod(sim, "run-1", "apply"), "apply", NODE2, mode="timeslice:2").endswith(
        f"run {RUNS}/run-1 already holds {names.SYSTEM_NAMESPACE}/sharebench-node-{NODE} (one node per run at a "
        "time); restore that node first"
    )
    assert sharing(sim, NODE2) is None and CLAIM not in sim.node(NODE2)["metadata"]["annotations"]
    step(sim, step_pod(sim, "run-1", "restore"), "restore", NODE)
    assert step(sim, step_pod(sim, "run-1", "apply"), "apply", NODE2, mode="mps:2")["resources"] == {
        "nvidia.com/gpu": 4
    }  # one at a time


def test_attack_4_a_finished_runs_request_replayed_is_refused(sim, agent):
    """run-1 applies and restores, then its requests are filed again: the same object (the API server's
    409), the same pod's token under a new attempt (a replay; once the pod ended, not running; once it is
    gone, a void token)."""
    applier = step_pod(sim, "run-1", "apply")
    runner = sim.api_client("runner-token")
    filed = file_request(runner, request("apply", NODE, "run-1", mode="timeslice:2"), applier)
    wait_request(runner, filed, timeout_s=SIM_WAIT_S, poll_s=0.02)
    assert refusal(sim, applier, "apply", NODE, mode="timeslice:2").endswith(
        f"a replay: pod {applier.pod} already had its apply on {NODE} answered (request {filed.name}); "
        "a step files one request a node"
    )
    step(sim, step_pod(sim, "run-1", "restore"), "restore", NODE)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": names.REQUEST_KIND, "metadata": {"name": filed.name}}
    with pytest.raises(ApiException) as exc:
        objects(sim, "runner-token").create_namespaced_custom_object(
            GROUP, VERSION, RUNS, PLURAL, {**body, "spec": filed.spec()}
        )
    assert exc.value.status == 409
    sim.set_pod_phase(RUNS, applier.pod, "Succeeded")
    assert refusal(sim, applier, "apply", NODE2, mode="timeslice:2").endswith(
        f"its pod {applier.pod} is Succeeded, not running: only a running step files a request"
    )
    sim.delete_pod(RUNS, applier.pod)
    assert "service account token has been invalidated" in refusal(sim, applier, "apply", NODE2, mode="timeslice:2")
    assert lease_holder(sim, NODE) == "" and sharing(sim, NODE2) is None


def test_attack_5_a_run_id_is_a_label_value_and_the_image_check_is_the_proven_runs(sim, agent):
    runner = sim.api_client("runner-token")
    pod = step_pod(sim, "run-1", "apply")
    with pytest.raises(RequestRefused, match=r"run 'run-1,nosuchlabel' is not a Kubernetes label value"):
        file_request(runner, request("apply", NODE, "run-1,nosuchlabel", mode="timeslice:2"), pod)
    sim.add_pod(RUNS, "replica-0", NODE, labels={names.RUN_LABEL: "run-1"})  # image busybox
    sim.add_pod(RUNS, "other-run", NODE, labels={names.RUN_LABEL: "run-9"}, image=IMAGE)
    assert refusal(sim, pod, "apply", NODE, mode="timeslice:2").endswith(
        "pod replica-0 of run run-1 runs image 'busybox', not allowed (allowed prefixes: ghcr.io/sharebench)"
    )
    assert sharing(sim, NODE) is None


def test_only_the_workflow_controller_makes_a_pod_of_a_run(sim):
    """The run-pods policy: a namespace editor who may create pods cannot make one of run-1 (nor relabel
    one into it); the workflow controller can, and the editor's own pods are untouched."""
    meta = {"name": "mine", "labels": {names.RUN_LABEL: "run-1", names.NODE_STEP_LABEL: "restore"}}
    pod = {"metadata": meta, "spec": {"containers": [{"name": "c", "image": IMAGE}]}}
    editor = client.CoreV1Api(sim.api_client("editor-token"))
    with pytest.raises(ApiException) as exc:
        editor.create_namespaced_pod(RUNS, pod)
    assert exc.value.status == 422 and "only the workflow controller (the offer's run-pod-creators)" in exc.value.body
    editor.create_namespaced_pod(RUNS, {**pod, "metadata": {"name": "mine"}})
    with pytest.raises(ApiException) as exc:
        editor.patch_namespaced_pod("mine", RUNS, {"metadata": {"labels": {names.RUN_LABEL: "run-1"}}})
    assert exc.value.status == 422 and "may change a pod's pipeline/runid" in exc.value.body
    made = client.CoreV1Api(sim.api_client("argo-token")).create_namespaced_pod(
        RUNS, {**pod, "metadata": {**meta, "name": "step"}}
    )
    assert made.status.phase == "Pending"  # and a pod's status is the kubelet's, not its creator's


@pytest.mark.parametrize(
    "spec, refused",
    [
        ({"force": "true"}, "unknown key(s) force; allowed: action, node, mode, run, image, gpuModel, attempt, token"),
        ({"node": "gpu;reboot"}, "node name 'gpu;reboot' is not a Kubernetes node name"),
        ({"image": "ghcr.io/sharebench/../evil:1"}, "image 'ghcr.io/sharebench/../evil:1' is not an image reference"),
        ({"token": ""}, "token must be one line of 1..16384 printable characters"),
    ],
)
def test_a_request_outside_the_schema_is_refused_without_a_look_at_its_token(sim, spec, refused):
    runner = objects(sim, "runner-token")
    attempt = new_attempt()
    base = {"action": "apply", "node": NODE, "image": IMAGE, "mode": "timeslice:2", "attempt": attempt, "token": "t"}
    body = {"metadata": {"name": request_name(attempt)}, "spec": {**base, **spec}}
    runner.create_namespaced_custom_object(GROUP, VERSION, RUNS, PLURAL, body)
    assert serve_once(sim.api_client(), OPTIONS) == 1
    status = status_of(objects(sim).get_namespaced_custom_object(GROUP, VERSION, RUNS, PLURAL, request_name(attempt)))
    assert status is not None and status["phase"] == "Refused"
    assert status["message"].startswith(f"request {RUNS}/{request_name(attempt)}: {refused}")
    assert serve_once(sim.api_client(), OPTIONS) == 0  # answered once


def test_a_step_without_its_token_says_what_mounts_it(monkeypatch, tmp_path):
    monkeypatch.setenv(TOKEN_FILE_ENV, str(tmp_path / "absent"))
    with pytest.raises(UserError, match=r"no agent token at .*absent .*the PodDefault sharebench-agent-token"):
        StepIdentity.from_environment()


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
        lambda: client.AuthenticationV1Api(runner).create_token_review({"spec": {"token": "x"}}),
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
    filed = file_request(runner, request("apply", NODE, "r", mode="timeslice:2"), step_pod(sim, "r", "apply"))
    with pytest.raises(NodeError, match="no answer from the node agent after 0.2 s; is it running"):
        wait_request(runner, filed, timeout_s=0.2, poll_s=0.05)


def as_step(monkeypatch, sim, run: str, action: str) -> None:
    """This process as a node step's pod: its token file and the downward API's name and uid."""
    identity = step_pod(sim, run, action)
    path = sim.workdir / f"{identity.pod}.token"
    path.write_text(identity.token)
    monkeypatch.setenv(TOKEN_FILE_ENV, str(path))
    monkeypatch.setenv(names.POD_NAME_ENV, identity.pod)
    monkeypatch.setenv(names.POD_UID_ENV, identity.pod_uid)


def test_a_genuine_run_applies_measures_and_restores_through_the_pipeline_steps(
    sim, agent, tmp_path, monkeypatch, capsys
):
    """components/steps.py in agent mode, as the components call them, each from a pod of its own: the
    reconfigure step applies, the cell's schedule_start renews the run's Lease through a request, the cell
    is measured, and the exit task restores. Each pod holds only the run's account (a kubeconfig with the
    runner's token) and its projected token."""
    cfg = yaml.safe_load(sim.kubeconfig.read_text())
    cfg["users"][0]["user"]["token"] = "runner-token"
    (tmp_path / "runner.kubeconfig").write_text(yaml.safe_dump(cfg))
    (tmp_path / "namespace").write_text(RUNS + "\n")
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "runner.kubeconfig"))
    monkeypatch.setattr(steps, "POD_NAMESPACE_FILE", tmp_path / "namespace")
    common = {"gpu_model": "H200", "placement": "processes", "image": IMAGE, "timeout_s": SIM_WAIT_S}

    as_step(monkeypatch, sim, "run-7", "apply")
    placed = steps.reconfigure(node_name=NODE, mode="timeslice:2", run_id="run-7", **common)
    assert (placed["resource"], placed["count"], placed["reconfigured"]) == ("nvidia.com/gpu", 1, True)
    assert lease_holder(sim, NODE) == f"{RUNS}/run-7" and sharing(sim, NODE) == "sharebench-timeslice-2"
    (filed,) = objects(sim).list_namespaced_custom_object(GROUP, VERSION, RUNS, PLURAL)["items"]
    assert (filed["spec"]["action"], filed["spec"]["run"], filed["status"]["run"]) == ("apply", "run-7", "run-7")
    out = capsys.readouterr().out
    assert (
        "request filed (attempt" in out
        and "the node agent answered: done" in out
        and filed["metadata"]["name"] not in out
    )

    request = dict(modes=["timeslice:2"], gpu_model="H200", particle_counts=[100], repeats=1, turns=1,
                   placement="processes", start_delay_s=0, workload={"device": "cpu"})  # fmt: skip
    plan = steps.plan_sweep(request=request, node_name=f"{NODE}=H200")
    as_step(monkeypatch, sim, "run-7", "apply")
    cell = steps.schedule_start(plan=plan, cell=plan["cells"][0], placed=placed, run_id="run-7")
    rows = steps.run_simpletrack(
        mode=cell["mode"], particles=100, turns=1, repeat=1, replica=0, replicas=2, processes=2,
        start_at=cell["start_at"], workload={"device": "cpu"}, out_path=str(tmp_path / "rows.json"),
    )  # fmt: skip
    assert len(rows) == 2 and {r["status"] for r in rows} == {"ok"}

    with pytest.raises(UserError, match="force is never a request's to ask for"):
        steps.reconfigure(node_name=NODE, mode="mps:2", run_id="run-7", force=True, **common)
    as_step(monkeypatch, sim, "run-7", "restore")
    (restored,) = steps.restore(node_names=[NODE], run_id="run-7", timeout_s=SIM_WAIT_S)
    assert restored["restored"] is True and restored["resources"] == {"nvidia.com/gpu": 2}
    assert lease_holder(sim, NODE) == "" and sharing(sim, NODE) is None
