"""Issue 14: least privilege the API server enforces. The rendered ValidatingAdmissionPolicy's CEL
expressions evaluated for real (cel-python) on allowed and denied requests over real objects of the
simulated cluster; the node operations pass it end to end while it is enforced; restore checks the
prior-state annotation against the same allow-list."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sharebench.manifests import access, names, operator, policy, render
from sharebench.node import ANNOTATION, NodeError, ReconfigureOptions, reconfigure, restore
from sharebench.node.prior import SIGNATURE, signature
from sharebench.node.prior import prior_problem as policy_prior_problem
from support.admission import AdmissionPolicy
from support.k8s_sim import LABEL_DP, LABEL_MIG, SimCluster

ROOT = Path(__file__).resolve().parents[2]
POLICY_FILE = ROOT / "manifests/rbac/0400_validatingadmissionpolicy_sharebench-node.yaml"
NODE = "gpu-node-1"
OTHER = "control-plane-1"
SA = policy.service_account_user()
CLAIM = names.NODE_CLAIM_ANNOTATION
SITE_ENTRIES = {
    "default": "version: v1\n",
    "any": "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 50\n",
}


@pytest.fixture(scope="module")
def vap() -> AdmissionPolicy:
    return AdmissionPolicy(yaml.safe_load(POLICY_FILE.read_text()))


@pytest.fixture
def sim(tmp_path):
    with SimCluster(tmp_path) as cluster:
        cluster.add_gpu_node(NODE, "H200", gpus=2, labels={"topology.kubernetes.io/zone": "z1"}, offered=True)
        # a node the site did not offer to sharebench: its control plane
        cluster.add_gpu_node(OTHER, "H200", gpus=2, labels={"node-role.kubernetes.io/control-plane": ""})
        # the site's own entries in its device-plugin ConfigMap, beside sharebench's
        cluster.edit(
            "configmaps", cluster.ns, names.DEVICE_PLUGIN_CONFIGMAP, lambda cm: cm["data"].update(SITE_ENTRIES)
        )
        yield cluster


def judge(vap, sim, **request) -> list[str]:
    """The policy's denials of a request of the node account, with the simulated site's offer as params."""
    params = sim.get("configmaps", names.SYSTEM_NAMESPACE, names.OFFER_CONFIGMAP)
    return vap.denials(user=request.pop("user", SA), params=params, **request)


def claimed(node: dict, holder: str = "run-a") -> dict:
    """``node`` as a Lease holder has it: claimed (the annotation the policy requires of a node it lets change)."""
    out = copy.deepcopy(node)
    out["metadata"].setdefault("annotations", {})[CLAIM] = holder
    return out


def test_rendered_policy_and_binding(vap):
    objs = dict(render.kubernetes_objects(render.render()))
    binding = objs["rbac/0410_validatingadmissionpolicybinding_sharebench-node.yaml"]
    assert binding["spec"] == {
        "policyName": vap.name,
        "validationActions": ["Deny"],
        "paramRef": {
            "name": names.OFFER_CONFIGMAP,
            "namespace": names.SYSTEM_NAMESPACE,
            "parameterNotFoundAction": "Deny",
        },
    }
    assert objs["rbac/0400_validatingadmissionpolicy_sharebench-node.yaml"]["spec"]["failurePolicy"] == "Fail"
    # the rules cover every write RBAC grants on nodes, ConfigMaps and pods
    granted = {
        (r, v)
        for _, o in access.rbac_objects()
        for rule in o.get("rules", [])
        for r in rule["resources"]
        for v in rule["verbs"]
        if v in ("patch", "update", "delete")
    }
    assert {("nodes", "patch"), ("configmaps", "update"), ("pods", "delete")} <= granted
    assert vap.matches("nodes", "UPDATE") and vap.matches("configmaps", "UPDATE") and vap.matches("pods", "DELETE")


def changed(obj: dict, fn) -> dict:
    new = copy.deepcopy(obj)
    fn(new)
    return new


def labels(**kv):
    return lambda o: o["metadata"].setdefault("labels", {}).update(kv)


NODE_CASES = [
    ("device-plugin label", lambda o: o["metadata"]["labels"].update({LABEL_DP: "sharebench-timeslice-2"}), None),
    (
        "mig label and state",
        lambda o: (
            o["metadata"]["labels"].update({LABEL_MIG: "all-1g.18gb"}),
            o["metadata"]["labels"].pop("nvidia.com/mig.config.state"),
        ),
        None,
    ),
    ("prior-state annotation", lambda o: o["metadata"]["annotations"].update({ANNOTATION: "{}"}), None),
    (
        "cordon without a prior state",
        lambda o: o["spec"].update({"unschedulable": True}),
        "may cordon or uncordon a node only once its signed prior state is recorded",
    ),
    (  # issue 37: a junk prior state in the very patch that cordons
        "cordon with a junk prior state in the same patch",
        lambda o: (o["spec"].update({"unschedulable": True}), o["metadata"]["annotations"].update({ANNOTATION: "x"})),
        "may cordon or uncordon a node only once its signed prior state is recorded",
    ),
    (
        "ownerReferences",
        lambda o: o["metadata"].update(
            {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "gone", "uid": "0"}]}
        ),
        "may not change a node's ownerReferences or finalizers",
    ),
    (
        "finalizers",
        lambda o: o["metadata"].update({"finalizers": ["example.com/hold"]}),
        "may not change a node's ownerReferences or finalizers",
    ),
    (
        "the MIG manager's state forced to success",
        lambda o: o["metadata"]["labels"].update({"nvidia.com/mig.config.state": "success"}),
        "may only drop the MIG manager's label nvidia.com/mig.config.state, never set it",
    ),
    (
        "another sharebench.io annotation",
        lambda o: o["metadata"]["annotations"].update({"sharebench.io/anything": "1"}),
        "may change only its own node annotations",
    ),
    (
        "the claim moved to another holder",
        lambda o: o["metadata"]["annotations"].update({CLAIM: "run-b"}),
        "may change a node only while a Lease holds it",
    ),
    (
        "the claim cleared with a label change",
        lambda o: (o["metadata"]["annotations"].pop(CLAIM), o["metadata"]["labels"].update({LABEL_DP: "x"})),
        "may change a node only while a Lease holds it",
    ),
    ("the claim cleared alone", lambda o: o["metadata"]["annotations"].pop(CLAIM), None),
    (
        "another spec field",
        lambda o: o["spec"].update({"podCIDR": "10.9.0.0/24"}),
        "may change only spec.unschedulable",
    ),
    (
        "node-restriction label",
        lambda o: o["metadata"]["labels"].update({"node-restriction.kubernetes.io/team": "a"}),
        "may change only the node labels",
    ),
    (
        "site label changed",
        lambda o: o["metadata"]["labels"].update({"topology.kubernetes.io/zone": "z2"}),
        "may change only the node labels",
    ),
    (
        "site label removed",
        lambda o: o["metadata"]["labels"].pop("topology.kubernetes.io/zone"),
        "may change only the node labels",
    ),
    (
        "GFD label",
        lambda o: o["metadata"]["labels"].update({"nvidia.com/gpu.replicas": "50"}),
        "may change only the node labels",
    ),
    (
        "foreign annotation",
        lambda o: o["metadata"]["annotations"].update({"example.com/x": "1"}),
        "may change only its own node annotations",
    ),
    (
        "taint",
        lambda o: o["spec"].update({"taints": [{"key": "k", "effect": "NoSchedule"}]}),
        "may not change a node's taints",
    ),
]


@pytest.mark.parametrize("what, fn, denied", NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_node_updates(vap, sim, what, fn, denied):
    old = claimed(changed(sim.node(NODE), labels(**{"nvidia.com/mig.config.state": "pending"})))
    got = judge(vap, sim, resource="nodes", operation="UPDATE", obj=changed(old, fn), old=old)
    assert got == ([] if denied is None else [m for m in got if denied in m]) and bool(got) == bool(denied)
    # the site's own users and controllers are not judged by the policy
    assert (
        judge(vap, sim, resource="nodes", operation="UPDATE", user="kubernetes-admin", obj=changed(old, fn), old=old)
        == []
    )


def signed_prior(o: dict) -> None:
    o["metadata"]["annotations"].update({ANNOTATION: "{}", SIGNATURE: "sig"})


def test_cordon_once_the_signed_prior_state_is_recorded(vap, sim):
    """The cordon of a MIG change: an earlier patch recorded the signed prior state; then restore uncordons."""
    old = claimed(changed(sim.node(NODE), signed_prior))
    cordoned = changed(old, lambda o: o["spec"].update({"unschedulable": True}))
    assert judge(vap, sim, resource="nodes", operation="UPDATE", obj=cordoned, old=old) == []
    back = changed(cordoned, lambda o: o["spec"].pop("unschedulable"))
    assert judge(vap, sim, resource="nodes", operation="UPDATE", obj=back, old=cordoned) == []


@pytest.mark.parametrize(
    "what, fn",
    [
        ("device-plugin label", lambda o: o["metadata"]["labels"].update({LABEL_DP: "sharebench-timeslice-2"})),
        ("mig label", lambda o: o["metadata"]["labels"].update({LABEL_MIG: "all-1g.18gb"})),
        ("prior state", signed_prior),
    ],
)
def test_an_offered_node_no_lease_holds_is_refused(vap, sim, what, fn):
    """Issue 37: the account could relabel or repartition any other offered node."""
    old = sim.node(NODE)  # offered, not claimed
    got = judge(vap, sim, resource="nodes", operation="UPDATE", obj=changed(old, fn), old=old)
    assert any("may change a node only while a Lease holds it" in m for m in got), got
    claim = changed(old, lambda o: o["metadata"]["annotations"].update({CLAIM: "run-a"}))
    assert judge(vap, sim, resource="nodes", operation="UPDATE", obj=claim, old=old) == []  # claimed alone: yes


@pytest.mark.parametrize(
    "what, fn",
    [
        ("device-plugin label", lambda o: o["metadata"]["labels"].update({LABEL_DP: "sharebench-timeslice-2"})),
        ("mig label", lambda o: o["metadata"]["labels"].update({LABEL_MIG: "all-1g.18gb"})),
        (
            "cordon",
            lambda o: (
                o["spec"].update({"unschedulable": True}),
                o["metadata"]["annotations"].update({ANNOTATION: "{}"}),
            ),
        ),
    ],
)
def test_nodes_the_site_did_not_offer_are_refused(vap, sim, what, fn):
    old = claimed(sim.node(OTHER))
    got = judge(vap, sim, resource="nodes", operation="UPDATE", obj=changed(old, fn), old=old)
    assert OFFER_DENIAL in got
    admin = judge(
        vap, sim, resource="nodes", operation="UPDATE", user="kubernetes-admin", obj=changed(old, fn), old=old
    )
    assert admin == []


OFFER_DENIAL = (
    f"sharebench may change only the nodes the site offers (ConfigMap {names.SYSTEM_NAMESPACE}/{names.OFFER_CONFIGMAP}, "
    f"key {names.OFFER_NODE_PREFIX}<node>)"
)


def test_without_the_sites_offer_everything_is_refused(vap, sim):
    old = claimed(sim.node(NODE))
    new = changed(old, labels(**{LABEL_DP: "sharebench-timeslice-2"}))
    got = vap.denials(resource="nodes", operation="UPDATE", user=SA, obj=new, old=old, params=None)
    assert got and got[0].startswith("no params")


def test_reconfigure_of_a_node_not_offered_is_refused_by_the_enforced_policy(vap, sim):
    sim.admission.append(vap)
    with pytest.raises(NodeError, match="only the nodes the site offers"):
        reconfigure(OTHER, "timeslice:2", ReconfigureOptions(timeout_s=5, poll_s=0.01), api_client=sim.api_client())
    assert LABEL_DP not in sim.node(OTHER)["metadata"]["labels"]


CM_CASES = [
    ("add own entry", lambda d: d.update({"sharebench-mps-3": "version: v1\n"}), False),
    ("change own entry", lambda d: d.update({"sharebench-timeslice-2": "version: v1\n"}), False),
    ("remove own entry", lambda d: d.pop("sharebench-mps-8"), False),
    ("replace the site's entry", lambda d: d.update({"any": "version: v1\n"}), True),
    ("remove the site's entry", lambda d: d.pop("default"), True),
    ("add a site-looking entry", lambda d: d.update({"exclusive": "version: v1\n"}), True),
]


@pytest.mark.parametrize("what, fn, denied", CM_CASES, ids=[c[0] for c in CM_CASES])
def test_configmap_updates(vap, sim, what, fn, denied):
    old = sim.configmap()
    new = changed(old, lambda o: fn(o["data"]))
    got = judge(vap, sim, resource="configmaps", operation="UPDATE", obj=new, old=old)
    assert got == ([CM_DENIAL] if denied else [])


CM_DENIAL = (
    f"sharebench may change only its own ConfigMap entries (sharebench-...) in {names.OPERATOR_NAMESPACE}, and "
    "no ConfigMap elsewhere"
)


def run_cm(**data) -> dict:
    meta = {"name": "r1", "namespace": names.RUN_NAMESPACE, "labels": {"sharebench.io/node-request": "v1"}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"node": NODE, **data}}


@pytest.mark.parametrize(
    "what, fn",
    [
        ("a status key", lambda o: o["data"].update({"status": "{}"})),
        ("its node", lambda o: o["data"].update({"node": OTHER})),
        ("its label", lambda o: o["metadata"]["labels"].clear()),
    ],
)
def test_no_configmap_outside_the_operators_namespace(vap, sim, what, fn):
    """Issue 46: the agent answers in a SharingRequest's status subresource; the node account changes no
    ConfigMap of a run namespace (the last round's request ConfigMaps included)."""
    old = run_cm()
    assert judge(vap, sim, resource="configmaps", operation="UPDATE", obj=changed(old, fn), old=old) == [CM_DENIAL]


RUN_PODS_FILE = ROOT / f"manifests/rbac/0420_validatingadmissionpolicy_{policy.RUN_PODS_POLICY}.yaml"
CREATE_DENIAL = (
    "only the workflow controller (the offer's run-pod-creators) may create a pod labelled pipeline/runid in a "
    "run namespace: a pod's run is KFP's to say"
)
UPDATE_DENIAL = (
    "only the workflow controller may change a pod's pipeline/runid or sharebench.io/node-step label in a run namespace"
)


def run_pod(namespace: str = names.RUN_NAMESPACE, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace, "labels": labels}}


def relabel(**labels: str):
    return lambda o: o["metadata"]["labels"].update(labels)


@pytest.mark.parametrize(
    "what, user, operation, old, fn, denied",
    [
        ("the controller makes a run's pod", names.WORKFLOW_CONTROLLER, "CREATE", None, None, []),
        ("a user makes a run's pod", "alice", "CREATE", None, None, [CREATE_DENIAL]),
        ("a user's pod of no run", "alice", "CREATE", run_pod(), None, []),
        ("a run's pod elsewhere", "alice", "CREATE", run_pod("team-b", **{names.RUN_LABEL: "r"}), None, []),
        ("a user relabels a pod into a run", "alice", "UPDATE", run_pod(), relabel(**{names.RUN_LABEL: "r"}),
         [UPDATE_DENIAL]),
        ("a user moves a pod to another run", "alice", "UPDATE", run_pod(**{names.RUN_LABEL: "r"}),
         relabel(**{names.RUN_LABEL: "s"}), [UPDATE_DENIAL]),
        ("a user gives a pod another action", "alice", "UPDATE", run_pod(**{names.NODE_STEP_LABEL: "apply"}),
         relabel(**{names.NODE_STEP_LABEL: "restore"}), [UPDATE_DENIAL]),
        ("a user's other label", "alice", "UPDATE", run_pod(**{names.RUN_LABEL: "r"}), relabel(team="a"), []),
    ],
)  # fmt: skip
def test_run_pods_policy(sim, what, user, operation, old, fn, denied):
    """Issue 46: a pod's run (KFP's label) is the workflow controller's to say, so the agent's proof of a
    request's run holds: everyone's pods of a run namespace, evaluated with cel-python."""
    doc = yaml.safe_load(RUN_PODS_FILE.read_text())
    vap = AdmissionPolicy(doc)
    new = run_pod(**{names.RUN_LABEL: "r"}) if old is None else changed(old, fn) if fn else old
    params = sim.get("configmaps", names.SYSTEM_NAMESPACE, names.OFFER_CONFIGMAP)
    got = vap.denials(resource="pods", operation=operation, user=user, obj=new, old=old if fn else None, params=params)
    assert got == denied
    if new["metadata"]["namespace"] == names.RUN_NAMESPACE:  # matched by its namespace selector
        assert vap.matches("pods", operation, namespace=names.RUN_NAMESPACE)
    assert not vap.matches("pods", "CREATE", namespace="kube-system")


@pytest.mark.parametrize(
    "namespace, app, node, denied",
    [
        (names.OPERATOR_NAMESPACE, "nvidia-device-plugin-daemonset", NODE, False),
        (names.OPERATOR_NAMESPACE, "gpu-feature-discovery", NODE, False),
        (names.OPERATOR_NAMESPACE, "nvidia-driver-daemonset", NODE, True),
        (names.OPERATOR_NAMESPACE, None, NODE, True),
        ("team-a", "nvidia-device-plugin-daemonset", NODE, True),
        # issue 37: the device-plugin pod of a node the site never offered, the control plane's
        (names.OPERATOR_NAMESPACE, "nvidia-device-plugin-daemonset", OTHER, True),
    ],
)
def test_pod_deletes(vap, sim, namespace, app, node, denied):
    pod = sim.add_pod(namespace, "p", node, labels={"app": app} if app else {})
    got = judge(vap, sim, resource="pods", operation="DELETE", obj=None, old=pod)
    assert bool(got) == denied


def test_node_operations_pass_the_enforced_policy_and_keep_the_sites_entries(vap, sim):
    sim.admission.append(vap)
    api = sim.api_client()
    for mode in ("timeslice:2", "mps:3", "mig:1g", "timeslice:3"):
        reconfigure(NODE, mode, ReconfigureOptions(timeout_s=5, poll_s=0.01, cordon=True), api_client=api)
    restore(NODE, api_client=api, timeout_s=5, poll_s=0.01)
    data = sim.configmap()["data"]
    assert {k: data[k] for k in SITE_ENTRIES} == SITE_ENTRIES  # untouched
    assert sorted(data) == sorted([*SITE_ENTRIES, *operator.device_plugin_entries()])  # added ones removed
    assert sim.node(NODE)["metadata"]["labels"]["topology.kubernetes.io/zone"] == "z1"
    # the policy really is enforced: a write outside it is refused by the API server
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(api).patch_node(NODE, {"metadata": {"labels": {"node-restriction.kubernetes.io/x": "1"}}})
    assert exc.value.status == 422  # restored and released: no Lease holds the node any more
    assert "may change a node only while a Lease holds it" in json.loads(exc.value.body)["message"]
    assert CLAIM not in sim.node(NODE)["metadata"]["annotations"]


def sim_key(sim) -> bytes:
    """The signing key the first apply created in the simulated cluster's Secret."""
    secret = sim.get("secrets", names.SYSTEM_NAMESPACE, names.STATE_KEY_SECRET)
    return base64.b64decode(secret["data"]["key"])


def tamper(sim, edit, *, sign_with: bytes | None = None, node: str = NODE) -> None:
    """Edit the recorded prior state behind sharebench's back (as a user with node-annotation rights
    would); ``sign_with``: sign the edit with that key (a holder of the key), else keep the old signature."""

    def change(obj):
        ann = obj["metadata"]["annotations"]
        prior = json.loads(ann[ANNOTATION])
        edit(prior)
        ann[ANNOTATION] = json.dumps(prior, sort_keys=True)
        if sign_with is not None:
            ann[SIGNATURE] = signature(sign_with, node, ann[ANNOTATION])

    sim.edit("nodes", "", NODE, change)


def refused(sim, api) -> str:
    before = (sim.node(NODE)["metadata"]["labels"], sim.configmap()["data"])
    with pytest.raises(NodeError) as exc:
        restore(NODE, api_client=api, timeout_s=5, poll_s=0.01)
    assert (sim.node(NODE)["metadata"]["labels"], sim.configmap()["data"]) == before  # nothing applied
    msg = str(exc.value)
    assert "\n" not in msg and "refuses" in msg
    return msg


def crafted(prior: dict) -> None:
    """The issue's case, inside the allow-list: a MIG layout to set, and the shared exclusive entry rewritten."""
    prior["labels"][LABEL_MIG] = "all-1g.18gb"
    prior["configmap"]["entries"]["sharebench-exclusive"] = SITE_ENTRIES["any"]


def test_restore_refuses_a_crafted_state_inside_the_allow_list(vap, sim):
    sim.admission.append(vap)
    api = sim.api_client()
    reconfigure(NODE, "timeslice:3", ReconfigureOptions(timeout_s=5, poll_s=0.01), api_client=api)
    signed = sim.node(NODE)["metadata"]["annotations"]
    assert signed[SIGNATURE] == signature(sim_key(sim), NODE, signed[ANNOTATION])
    tamper(sim, crafted)
    assert policy_prior_problem(json.loads(sim.node(NODE)["metadata"]["annotations"][ANNOTATION])) is None
    msg = refused(sim, api)
    assert f"annotation {ANNOTATION} does not match its signature ({SIGNATURE}): restore applies only a state " in msg
    assert f"'kubectl annotate node {NODE} {ANNOTATION}- {SIGNATURE}-'" in msg
    # no signature at all
    sim.edit("nodes", "", NODE, lambda o: o["metadata"]["annotations"].pop(SIGNATURE))
    assert f"annotation {ANNOTATION} carries no signature ({SIGNATURE})" in refused(sim, api)


def test_restore_refuses_a_state_signed_for_another_node(sim):
    api = sim.api_client()
    reconfigure(NODE, "timeslice:3", ReconfigureOptions(timeout_s=5, poll_s=0.01), api_client=api)
    tamper(sim, crafted, sign_with=sim_key(sim), node=OTHER)  # a valid signature, of another node's state
    assert "does not match its signature" in refused(sim, api)


def test_restore_refuses_when_the_key_is_gone(sim):
    api = sim.api_client()
    reconfigure(NODE, "timeslice:3", ReconfigureOptions(timeout_s=5, poll_s=0.01), api_client=api)
    with sim.lock:
        sim.objects.pop(("secrets", names.SYSTEM_NAMESPACE, names.STATE_KEY_SECRET))
    msg = refused(sim, api)
    assert f"cannot be checked: the key (Secret {names.SYSTEM_NAMESPACE}/{names.STATE_KEY_SECRET}) is gone" in msg
    assert sim.get("secrets", names.SYSTEM_NAMESPACE, names.STATE_KEY_SECRET) is None  # restore never makes one


@pytest.mark.parametrize(
    "edit, problem",
    [
        (
            lambda p: p["labels"].update({"node-restriction.kubernetes.io/team": "a"}),
            "label 'node-restriction.kubernetes.io/team'",
        ),
        (
            lambda p: p["configmap"]["entries"].update({"any": SITE_ENTRIES["default"]}),
            "ConfigMap entry 'any' (allowed: sharebench's own, sharebench-...)",
        ),
        (
            lambda p: p["advertised_labels"].update({"kubernetes.io/hostname": "x"}),
            "advertised label 'kubernetes.io/hostname'",
        ),
    ],
)
def test_restore_refuses_a_prior_state_outside_the_allow_list_even_signed(sim, edit, problem):
    """The allow-list still holds for a state signed with the key (whoever holds the key)."""
    api = sim.api_client()
    reconfigure(NODE, "timeslice:3", ReconfigureOptions(timeout_s=5, poll_s=0.01), api_client=api)
    tamper(sim, edit, sign_with=sim_key(sim))
    assert f"annotation {ANNOTATION} holds {problem}" in refused(sim, api)


@pytest.mark.parametrize(
    "name, namespace, denied",
    [
        (names.STATE_KEY_SECRET, names.SYSTEM_NAMESPACE, False),
        ("other", names.SYSTEM_NAMESPACE, True),
        (names.STATE_KEY_SECRET, names.RUN_NAMESPACE, True),
    ],
)
def test_secret_creates(vap, sim, name, namespace, denied):
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}, "data": {}}
    got = judge(vap, sim, resource="secrets", operation="CREATE", obj=obj, old=None)
    assert got == (
        [f"sharebench may create only the Secret {names.SYSTEM_NAMESPACE}/{names.STATE_KEY_SECRET}"] if denied else []
    )
