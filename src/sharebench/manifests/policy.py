"""Least privilege the API server enforces: a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1)
and its binding, for requests of sharebench's node account (the node agent's, or in direct mode the
node steps').

RBAC cannot say *which* labels of a node a ``patch`` may change, nor which pods of a namespace a
``delete`` may remove; this policy can. Its parameters are the site's offer, the ConfigMap
:data:`~sharebench.manifests.names.OFFER_CONFIGMAP` in sharebench's own namespace (which submitters
cannot write; a missing offer denies every request): a key ``node.<name>`` per node offered. For the
account, the API server admits:

* on nodes, only on the nodes the offer lists (never the control plane unless the site lists it), and
  only while the node is *claimed*: its annotation :data:`~sharebench.manifests.names.NODE_CLAIM_ANNOTATION`
  names the holder of its Lease. A claim is set or cleared alone (a patch that changes nothing else), and
  never moves from one holder to another in one step. There: changes to the device-plugin and MIG layout
  labels; the MIG manager's state label only dropped, never set; sharebench's signed prior state and the
  claim as the only annotations; ``spec.unschedulable`` (cordon) only while the node already carries a
  signed prior state (recorded by an earlier request, so a restore undoes it); never a taint, another
  ``spec`` field, ``ownerReferences`` or ``finalizers``;
* on ConfigMaps: in the operator's namespace, changes to sharebench's own entries only (keys
  ``sharebench-...``); no ConfigMap elsewhere (the agent answers a sharing request in its status
  subresource, which RBAC gives it alone);
* pod deletion of the device-plugin and GPU-feature-discovery pods of an offered node only;
* on Leases (one reconfiguration per node): never a delete, and a change of ``holderIdentity`` only
  from empty (taking a released Lease) or to empty with the old holder named in the annotation
  :data:`~sharebench.manifests.names.LEASE_RELEASED_BY_ANNOTATION` (a release); a renewal keeps the
  holder. CEL has no clock, so the policy cannot tell an expired Lease from a live one: no holder is
  ever replaced in one step, and every takeover is a release that names whom it released;
* Secrets: the creation of the prior-state signing key
  (:data:`~sharebench.manifests.names.STATE_KEY_SECRET` in sharebench's namespace) only.

A second policy, :data:`RUN_PODS_POLICY`, judges everyone's pods in the run namespaces the offer names:
a pod that claims a run (KFP's label :data:`~sharebench.manifests.names.RUN_LABEL`) is created only by
the offer's ``run-pod-creators`` (the workflow controller), and nobody else changes that label or the
label :data:`~sharebench.manifests.names.NODE_STEP_LABEL` of a pod afterwards. So the run a pod belongs
to is what KFP said, and the node agent, which resolves a request's token to its pod and the pod to its
run, learns a run no requester chose.

The expressions are plain CEL over ``object``/``oldObject``/``params``; tests/manifests/test_policy.py
evaluates them with cel-python on allowed and denied requests.
"""

from __future__ import annotations

from typing import Any

from sharebench.manifests.names import (
    ENTRY_PREFIX,
    LEASE_RELEASED_BY_ANNOTATION,
    MIG_STATE_LABEL,
    NODE_CLAIM_ANNOTATION,
    NODE_STEP_LABEL,
    OFFER_CONFIGMAP,
    OFFER_NODE_PREFIX,
    OFFER_POD_CREATORS_KEY,
    OFFER_RUN_NAMESPACES_KEY,
    OPERATOR_NAMESPACE,
    PRIOR_STATE_ANNOTATION,
    PRIOR_STATE_SIGNATURE_ANNOTATION,
    RUN_LABEL,
    SERVICE_ACCOUNT,
    SHARING_LABELS,
    STATE_KEY_SECRET,
    SYSTEM_NAMESPACE,
    metadata,
)

POLICY = "sharebench-node"
RUN_PODS_POLICY = "sharebench-run-pods"
ANNOTATION_PREFIX = "sharebench.io/"
# the node annotations sharebench writes: its signed prior state and the claim of the Lease's holder
NODE_ANNOTATIONS = (PRIOR_STATE_ANNOTATION, PRIOR_STATE_SIGNATURE_ANNOTATION, NODE_CLAIM_ANNOTATION)
LAYOUT_LABELS = tuple(k for k in SHARING_LABELS if k != MIG_STATE_LABEL)  # set by sharebench
OPERAND_APPS = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery")


def _cel_list(items: Any) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


def _map(expr: str) -> str:
    """``expr`` (a map field that may be absent) or ``{}``."""
    obj, _, field = expr.rpartition(".")
    return f"(has({obj}.{field}) ? {obj}.{field} : {{}})"


def _only_keys_change(new: str, old: str, allowed: str) -> str:
    """CEL: every key added, removed or changed between maps ``old`` and ``new`` satisfies ``allowed(k)``."""
    return f"{new}.all(k, {allowed} || (k in {old} && {old}[k] == {new}[k])) && {old}.all(k, {allowed} || k in {new})"


def variables() -> list[dict]:
    return [
        {"name": "newLabels", "expression": _map("object.metadata.labels")},
        {"name": "oldLabels", "expression": _map("oldObject.metadata.labels")},
        {"name": "newAnnotations", "expression": _map("object.metadata.annotations")},
        {"name": "oldAnnotations", "expression": _map("oldObject.metadata.annotations")},
        {"name": "newSpec", "expression": _map("object.spec")},
        {"name": "oldSpec", "expression": _map("oldObject.spec")},
        {"name": "newData", "expression": _map("object.data")},
        {"name": "oldData", "expression": _map("oldObject.data")},
        {"name": "newHolder", "expression": _holder("object")},
        {"name": "oldHolder", "expression": _holder("oldObject")},
        {"name": "newClaim", "expression": _annotation("variables.newAnnotations", NODE_CLAIM_ANNOTATION)},
        {"name": "oldClaim", "expression": _annotation("variables.oldAnnotations", NODE_CLAIM_ANNOTATION)},
    ]


def _annotation(annotations: str, key: str) -> str:
    """CEL: the value of ``key`` in the map ``annotations`` ('' when absent)."""
    return f"'{key}' in {annotations} ? {annotations}['{key}'] : ''"


def _list(expr: str) -> str:
    """``expr`` (a list field that may be absent) or ``[]``."""
    obj, _, field = expr.rpartition(".")
    return f"(has({obj}.{field}) ? {obj}.{field} : [])"


def _offered(name: str) -> str:
    """CEL: the node ``name`` (an expression) is in the site's offer (the policy's params)."""
    return f"(has(params.data) && ('{OFFER_NODE_PREFIX}' + {name}) in params.data)"


def _holder(obj: str) -> str:
    """CEL: a Lease update's ``holderIdentity`` in ``obj`` ('' when absent or not a Lease update)."""
    return (
        f"request.resource.resource == 'leases' && request.operation == 'UPDATE' && has({obj}.spec.holderIdentity) "
        f"? {obj}.spec.holderIdentity : ''"
    )


def lease_validations() -> list[dict]:
    """A Lease is never deleted; its holder changes only from empty or to empty naming the old one."""
    leases = "request.resource.resource != 'leases'"
    released_by = f"'{LEASE_RELEASED_BY_ANNOTATION}'"
    return [
        {
            "expression": f"{leases} || request.operation != 'DELETE'",
            "message": "sharebench may not delete a Lease: a release empties its holder",
        },
        {
            "expression": f"{leases} || request.operation != 'UPDATE' || variables.newHolder == variables.oldHolder "
            "|| variables.oldHolder == '' || (variables.newHolder == '' && "
            f"{released_by} in variables.newAnnotations && variables.newAnnotations[{released_by}] == "
            "variables.oldHolder)",
            "message": "sharebench may take only a released Lease (no holder), and release one only naming its holder "
            f"in {LEASE_RELEASED_BY_ANNOTATION}",
        },
    ]


def node_validations() -> list[dict]:
    """Only offered, claimed nodes; only the layout labels, sharebench's signed annotations and a cordon
    that a recorded prior state undoes; never owners, finalizers, taints or the MIG manager's state."""
    nodes = "request.resource.resource != 'nodes'"
    unschedulable = "(has({0}.unschedulable) && {0}.unschedulable)"
    claim_alone = (
        "variables.newLabels == variables.oldLabels && variables.newSpec == variables.oldSpec && "
        + _only_keys_change("variables.newAnnotations", "variables.oldAnnotations", f"k == '{NODE_CLAIM_ANNOTATION}'")
    )
    signed = " && ".join(f"'{k}' in variables.oldAnnotations" for k in NODE_ANNOTATIONS[:2])
    return [
        {
            "expression": f"{nodes} || {_offered('oldObject.metadata.name')}",
            "message": f"sharebench may change only the nodes the site offers (ConfigMap {SYSTEM_NAMESPACE}/"
            f"{OFFER_CONFIGMAP}, key {OFFER_NODE_PREFIX}<node>)",
        },
        {
            "expression": f"{nodes} || (variables.newClaim == variables.oldClaim ? variables.oldClaim != '' : "
            f"((variables.oldClaim == '' || variables.newClaim == '') && {claim_alone}))",
            "message": f"sharebench may change a node only while a Lease holds it ({NODE_CLAIM_ANNOTATION}), and "
            "sets or clears that claim alone, never from one holder to another",
        },
        {
            "expression": f"{nodes} || "
            + _only_keys_change("variables.newLabels", "variables.oldLabels", f"k in {_cel_list(SHARING_LABELS)}"),
            "message": f"sharebench may change only the node labels {', '.join(SHARING_LABELS)}",
        },
        {
            "expression": f"{nodes} || !('{MIG_STATE_LABEL}' in variables.newLabels) || "
            f"('{MIG_STATE_LABEL}' in variables.oldLabels && "
            f"variables.oldLabels['{MIG_STATE_LABEL}'] == variables.newLabels['{MIG_STATE_LABEL}'])",
            "message": f"sharebench may only drop the MIG manager's label {MIG_STATE_LABEL}, never set it",
        },
        {
            "expression": f"{nodes} || "
            + _only_keys_change(
                "variables.newAnnotations", "variables.oldAnnotations", f"k in {_cel_list(NODE_ANNOTATIONS)}"
            ),
            "message": f"sharebench may change only its own node annotations ({', '.join(NODE_ANNOTATIONS)})",
        },
        {
            "expression": f"{nodes} || ({_list('object.spec.taints')} == {_list('oldObject.spec.taints')})",
            "message": "sharebench may not change a node's taints",
        },
        {
            "expression": f"{nodes} || ({_list('object.metadata.ownerReferences')} == "
            f"{_list('oldObject.metadata.ownerReferences')} && {_list('object.metadata.finalizers')} == "
            f"{_list('oldObject.metadata.finalizers')})",
            "message": "sharebench may not change a node's ownerReferences or finalizers",
        },
        {
            "expression": f"{nodes} || "
            + _only_keys_change("variables.newSpec", "variables.oldSpec", "k in ['unschedulable', 'taints']"),
            "message": "sharebench may change only spec.unschedulable of a node's spec",
        },
        {
            "expression": f"{nodes} || {unschedulable.format('variables.newSpec')} == "
            f"{unschedulable.format('variables.oldSpec')} || ({signed})",
            "message": f"sharebench may cordon or uncordon a node only once its signed prior state is recorded "
            f"({PRIOR_STATE_ANNOTATION}, by an earlier change)",
        },
    ]


def validations(operator_namespace: str = OPERATOR_NAMESPACE) -> list[dict]:
    entries = _only_keys_change("variables.newData", "variables.oldData", f"k.startsWith('{ENTRY_PREFIX}')")
    return [
        *node_validations(),
        {
            "expression": "request.resource.resource != 'configmaps' || "
            f"(oldObject.metadata.namespace == '{operator_namespace}' && ({entries}))",
            "message": f"sharebench may change only its own ConfigMap entries ({ENTRY_PREFIX}...) in "
            f"{operator_namespace}, and no ConfigMap elsewhere",
        },
        {
            "expression": "request.resource.resource != 'pods' || "
            f"(oldObject.metadata.namespace == '{operator_namespace}' && "
            "has(oldObject.metadata.labels) && 'app' in oldObject.metadata.labels && "
            f"oldObject.metadata.labels['app'] in {_cel_list(OPERAND_APPS)} && "
            f"has(oldObject.spec.nodeName) && {_offered('oldObject.spec.nodeName')})",
            "message": "sharebench may delete only the device-plugin and GPU-feature-discovery pods of an offered node",
        },
        *lease_validations(),
        {
            "expression": "request.resource.resource != 'secrets' || "
            f"(object.metadata.namespace == '{SYSTEM_NAMESPACE}' && object.metadata.name == '{STATE_KEY_SECRET}')",
            "message": f"sharebench may create only the Secret {SYSTEM_NAMESPACE}/{STATE_KEY_SECRET}",
        },
    ]


def _listed(key: str, item: str) -> str:
    """CEL: ``item`` (an expression) is one of the comma-separated values of the offer's ``key``."""
    listed = f"string(',' + params.data['{key}'] + ',')"  # string(): one type whatever the engine concatenates
    return f"(has(params.data) && '{key}' in params.data && {listed}.contains(',' + {item} + ','))"


def run_pod_validations() -> list[dict]:
    """Everyone's pods in a run namespace: only the workflow controller makes a pod that claims a run,
    and nobody changes a pod's run or node-step label afterwards."""
    runs = _listed(OFFER_RUN_NAMESPACES_KEY, "request.namespace")
    creator = _listed(OFFER_POD_CREATORS_KEY, "request.userInfo.username")
    new, old = "variables.newLabels", "variables.oldLabels"
    kept = " && ".join(
        f"(('{k}' in {new}) == ('{k}' in {old}) && (!('{k}' in {new}) || {new}['{k}'] == {old}['{k}']))"
        for k in (RUN_LABEL, NODE_STEP_LABEL)
    )
    return [
        {
            "expression": f"!{runs} || {creator} || request.operation != 'CREATE' || !('{RUN_LABEL}' in {new})",
            "message": f"only the workflow controller (the offer's {OFFER_POD_CREATORS_KEY}) may create a pod "
            f"labelled {RUN_LABEL} in a run namespace: a pod's run is KFP's to say",
        },
        {
            "expression": f"!{runs} || {creator} || request.operation != 'UPDATE' || ({kept})",
            "message": f"only the workflow controller may change a pod's {RUN_LABEL} or {NODE_STEP_LABEL} label "
            "in a run namespace",
        },
    ]


def service_account_user(namespace: str = SYSTEM_NAMESPACE) -> str:
    """The node account's user name; ``namespace``: where it lives (sharebench's own in agent mode, the
    run namespace in direct mode: ``access.node_account_namespace``)."""
    return f"system:serviceaccount:{namespace}:{SERVICE_ACCOUNT}"


def policy_objects(
    operator_namespace: str = OPERATOR_NAMESPACE,
    account_namespace: str = SYSTEM_NAMESPACE,
    run_namespaces: tuple[str, ...] = (),
) -> list[tuple[str, dict]]:
    """The policies and their bindings (the site's offer as their parameters), as (file name, object): the
    node account's (no offer: deny), and with ``run_namespaces`` (agent mode) everyone's pods there (no
    offer: allow; the agent then serves no request either)."""
    rules = [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]},
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["configmaps"]},
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["DELETE"], "resources": ["pods"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "apiVersions": ["v1"],
            "operations": ["UPDATE", "DELETE"],
            "resources": ["leases"],
        },
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["secrets"]},
    ]
    # only sharebench's ServiceAccount: the site's own users and controllers are untouched
    account = {
        "name": "sharebench-service-account",
        "expression": f"request.userInfo.username == '{service_account_user(account_namespace)}'",
    }
    spec = _spec({"resourceRules": rules}, variables(), validations(operator_namespace), [account])
    out = _policy(POLICY, "0400", spec)
    if run_namespaces:
        match = {
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": sorted(run_namespaces)}
                ]
            },
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}
            ],
        }
        labels = [v for v in variables() if v["name"] in ("newLabels", "oldLabels")]
        out += _policy(RUN_PODS_POLICY, "0420", _spec(match, labels, run_pod_validations()), not_found="Allow")
    return out


def _spec(match: dict, names: list[dict], checks: list[dict], conditions: list[dict] | None = None) -> dict[str, Any]:
    """A policy's spec: fail closed, the offer (a ConfigMap) as params, ``match`` (and ``conditions``),
    variables, validations."""
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
        "matchConstraints": match,
    }
    if conditions:
        spec["matchConditions"] = conditions
    return {**spec, "variables": names, "validations": checks}


def _policy(name: str, number: str, spec: dict[str, Any], not_found: str = "Deny") -> list[tuple[str, dict]]:
    """A ValidatingAdmissionPolicy and its binding (the offer as params; none: ``not_found``), as two files."""
    binding = {
        "policyName": name,
        "validationActions": ["Deny"],
        "paramRef": {"name": OFFER_CONFIGMAP, "namespace": SYSTEM_NAMESPACE, "parameterNotFoundAction": not_found},
    }
    kind = "admissionregistration.k8s.io/v1"
    return [
        (
            f"{number}_validatingadmissionpolicy_{name}.yaml",
            {"apiVersion": kind, "kind": "ValidatingAdmissionPolicy", "metadata": metadata(name), "spec": spec},
        ),
        (
            f"{int(number) + 10:04d}_validatingadmissionpolicybinding_{name}.yaml",
            {
                "apiVersion": kind,
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": metadata(name),
                "spec": binding,
            },
        ),
    ]
