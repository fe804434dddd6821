"""Least privilege the API server enforces: a ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1)
and its binding, for requests of sharebench's ServiceAccount.

RBAC cannot say *which* labels of a node a ``patch`` may change, nor which pods of a namespace a
``delete`` may remove; this policy can. For the ServiceAccount, the API server admits:

* on nodes, only on the nodes the site labelled :data:`~sharebench.manifests.names.BENCHMARK_LABEL`
  (``sharebench.io/benchmark=allowed``; never the control plane unless the site labels it): changes to
  the sharing labels only (:data:`~sharebench.manifests.names.SHARING_LABELS`), to sharebench's own
  annotations only (``sharebench.io/...``) and to ``spec.unschedulable`` (cordon), the latter only
  while the node carries sharebench's prior-state annotation (so a restore undoes it) - never a
  ``node-restriction.kubernetes.io/`` label, the benchmark label itself, a taint or another field of
  ``spec``;
* on ConfigMaps, changes to sharebench's own entries only (keys ``sharebench-...``): the site's
  default and other entries stay byte for byte;
* pod deletion of the device-plugin and GPU-feature-discovery pods only;
* on Leases (one reconfiguration per node): never a delete, and a change of ``holderIdentity`` only
  from empty (taking a released Lease) or to empty with the old holder named in the annotation
  :data:`~sharebench.manifests.names.LEASE_RELEASED_BY_ANNOTATION` (a release); a renewal keeps the
  holder. CEL has no clock, so the policy cannot tell an expired Lease from a live one: no holder is
  ever replaced in one step, and every takeover is a release that names whom it released. Holders are
  strings the one ServiceAccount writes, so a process that lies about its name is not stopped; a
  mistaken or buggy takeover, a silent delete, and a release that hides whose Lease it was are;
* Secrets: the creation of the prior-state signing key
  (:data:`~sharebench.manifests.names.STATE_KEY_SECRET` in sharebench's namespace) only.

The expressions are plain CEL over ``object``/``oldObject``; tests/manifests/test_policy.py evaluates
them with cel-python on allowed and denied requests.
"""

from __future__ import annotations

from typing import Any

from sharebench.manifests.names import (
    BENCHMARK_LABEL,
    ENTRY_PREFIX,
    LEASE_RELEASED_BY_ANNOTATION,
    OPERATOR_NAMESPACE,
    PRIOR_STATE_ANNOTATION,
    RUN_NAMESPACE,
    SERVICE_ACCOUNT,
    SHARING_LABELS,
    STATE_KEY_SECRET,
    SYSTEM_NAMESPACE,
    metadata,
)

POLICY = "sharebench-node"
ANNOTATION_PREFIX = "sharebench.io/"
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
    ]


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


def validations(operator_namespace: str = OPERATOR_NAMESPACE) -> list[dict]:
    nodes = "request.resource.resource != 'nodes'"
    key, value = BENCHMARK_LABEL
    unschedulable = "(has({0}.unschedulable) && {0}.unschedulable)"
    return [
        {
            "expression": f"{nodes} || ('{key}' in variables.oldLabels && variables.oldLabels['{key}'] == '{value}')",
            "message": f"sharebench may change only nodes labelled {key}={value} (the site sets it)",
        },
        {
            "expression": f"{nodes} || "
            + _only_keys_change("variables.newLabels", "variables.oldLabels", f"k in {_cel_list(SHARING_LABELS)}"),
            "message": f"sharebench may change only the node labels {', '.join(SHARING_LABELS)}",
        },
        {
            "expression": f"{nodes} || "
            + _only_keys_change(
                "variables.newAnnotations", "variables.oldAnnotations", f"k.startsWith('{ANNOTATION_PREFIX}')"
            ),
            "message": f"sharebench may change only its own node annotations ({ANNOTATION_PREFIX}...)",
        },
        {
            "expression": f"{nodes} || ((has(object.spec.taints) ? object.spec.taints : []) == "
            "(has(oldObject.spec.taints) ? oldObject.spec.taints : []))",
            "message": "sharebench may not change a node's taints",
        },
        {
            "expression": f"{nodes} || "
            + _only_keys_change("variables.newSpec", "variables.oldSpec", "k in ['unschedulable', 'taints']"),
            "message": "sharebench may change only spec.unschedulable of a node's spec",
        },
        {
            "expression": f"{nodes} || {unschedulable.format('variables.newSpec')} == "
            f"{unschedulable.format('variables.oldSpec')} || '{PRIOR_STATE_ANNOTATION}' in variables.oldAnnotations "
            f"|| '{PRIOR_STATE_ANNOTATION}' in variables.newAnnotations",
            "message": f"sharebench may cordon or uncordon a node only while it records its prior state "
            f"({PRIOR_STATE_ANNOTATION})",
        },
        {
            "expression": "request.resource.resource != 'configmaps' || "
            + _only_keys_change("variables.newData", "variables.oldData", f"k.startsWith('{ENTRY_PREFIX}')"),
            "message": f"sharebench may change only its own ConfigMap entries ({ENTRY_PREFIX}...)",
        },
        {
            "expression": "request.resource.resource != 'pods' || "
            f"(oldObject.metadata.namespace == '{operator_namespace}' && "
            "has(oldObject.metadata.labels) && 'app' in oldObject.metadata.labels && "
            f"oldObject.metadata.labels['app'] in {_cel_list(OPERAND_APPS)})",
            "message": "sharebench may delete only the device-plugin and GPU-feature-discovery pods",
        },
        *lease_validations(),
        {
            "expression": "request.resource.resource != 'secrets' || "
            f"(object.metadata.namespace == '{SYSTEM_NAMESPACE}' && object.metadata.name == '{STATE_KEY_SECRET}')",
            "message": f"sharebench may create only the Secret {SYSTEM_NAMESPACE}/{STATE_KEY_SECRET}",
        },
    ]


def service_account_user(run_namespace: str = RUN_NAMESPACE) -> str:
    return f"system:serviceaccount:{run_namespace}:{SERVICE_ACCOUNT}"


def policy_objects(
    operator_namespace: str = OPERATOR_NAMESPACE, run_namespace: str = RUN_NAMESPACE
) -> list[tuple[str, dict]]:
    """The policy and its binding (``Deny``), as (file name, object)."""
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
    return [
        (
            f"0400_validatingadmissionpolicy_{POLICY}.yaml",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": metadata(POLICY),
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {"resourceRules": rules},
                    # only sharebench's ServiceAccount: the site's own users and controllers are untouched
                    "matchConditions": [
                        {
                            "name": "sharebench-service-account",
                            "expression": f"request.userInfo.username == '{service_account_user(run_namespace)}'",
                        }
                    ],
                    "variables": variables(),
                    "validations": validations(operator_namespace),
                },
            },
        ),
        (
            f"0410_validatingadmissionpolicybinding_{POLICY}.yaml",
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": metadata(POLICY),
                "spec": {"policyName": POLICY, "validationActions": ["Deny"]},
            },
        ),
    ]
