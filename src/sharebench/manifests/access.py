"""Namespaces and least-privilege RBAC for ``sharebench node apply/restore/status``."""

from __future__ import annotations

from sharebench.manifests.names import (
    DEVICE_PLUGIN_CONFIGMAP,
    NODE_TOKEN_SECRET,
    OFFER_CONFIGMAP,
    OPERATOR_NAMESPACE,
    REPLICA_SERVICE_ACCOUNT,
    REQUEST_GROUP,
    REQUEST_PLURAL,
    REQUESTER_ROLE,
    RUN_NAMESPACE,
    SERVICE_ACCOUNT,
    STATE_KEY_SECRET,
    SYSTEM_NAMESPACE,
    metadata,
)


def namespace_objects(
    operator_namespace: str = OPERATOR_NAMESPACE, run_namespace: str = RUN_NAMESPACE
) -> list[tuple[str, dict]]:
    return [
        (
            f"0100_namespace_{operator_namespace}.yaml",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": operator_namespace,
                    "labels": {
                        # the operator's driver/toolkit pods are privileged
                        "pod-security.kubernetes.io/enforce": "privileged"
                    },
                },
            },
        ),
        # no Namespace for run_namespace: a Kubeflow profile's namespace belongs to the profile controller
        # sharebench's own: the per-node Leases (one reconfiguration per node)
        (
            f"0120_namespace_{SYSTEM_NAMESPACE}.yaml",
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": metadata(SYSTEM_NAMESPACE),
            },
        ),
    ]


RBAC_API = "rbac.authorization.k8s.io/v1"


def role(kind: str, name: str, namespace: str | None, rules: list[dict]) -> dict:
    """A Role (``namespace`` given) or ClusterRole object."""
    return {"apiVersion": RBAC_API, "kind": kind, "metadata": metadata(name, namespace), "rules": rules}


def binding(kind: str, name: str, namespace: str | None, subject: list[dict]) -> dict:
    """The RoleBinding or ClusterRoleBinding of the role of the same name to ``subject``."""
    role_kind = "ClusterRole" if kind == "ClusterRoleBinding" else "Role"
    return {
        "apiVersion": RBAC_API,
        "kind": kind,
        "metadata": metadata(name, namespace),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name},
        "subjects": subject,
    }


def node_account_namespace(node_access: str, run_namespace: str = RUN_NAMESPACE) -> str:
    """Where the node account lives: sharebench's own namespace (agent mode), or the run namespace (direct)."""
    return SYSTEM_NAMESPACE if node_access == "agent" else run_namespace


def rbac_objects(
    operator_namespace: str = OPERATOR_NAMESPACE, run_namespace: str = RUN_NAMESPACE, node_access: str = "agent"
) -> list[tuple[str, dict]]:
    """Least privilege for the node account (``sharebench node agent``, or ``node apply/restore/status``).

    Cluster scope: nodes get/list/patch (labels, prior-state annotation, cordon),
    pods list (refuse when a foreign pod uses the node's GPUs; find the device-plugin
    pod). Operator namespace: the device-plugin ConfigMap get/update (by name) and
    pods delete (restart the device-plugin and GFD pods so they re-read a changed entry).
    No create: the ConfigMap is applied from manifests/operator/, never created by
    the tool. sharebench's own namespace: Leases get/create/update, never delete (a
    release empties the holder; the admission policy fences who may change it), and the
    prior-state signing key, a Secret read by name and created once (RBAC cannot name
    what a create makes: the admission policy admits that one name only).

    ``node_access="agent"`` (the default): the account lives in sharebench's own namespace, where
    only the node agent's Deployment runs as it; no token of it exists in the run namespace. The
    agent reads the site's offer (the ConfigMap :data:`OFFER_CONFIGMAP`, by name), reviews the tokens
    requests carry (``tokenreviews`` create, the one right of ``system:auth-delegator`` it needs) and, in
    the run namespace, reads the sharing requests and writes their status subresource, which nobody else
    may. The run's own account files requests with the Role :data:`REQUESTER_ROLE` (the site binds it):
    create, and get by name; no list or watch (another run's request, and the token in it, stay
    unseen), no update or delete (a request is answered once, and goes with its pod). ``node_access="direct"`` (a single-admin cluster):
    the account and its token Secret :data:`NODE_TOKEN_SECRET` live in the run namespace, mounted by
    the pipeline's node steps.

    The replica and analysis tasks run as :data:`REPLICA_SERVICE_ACCOUNT`: no role is
    bound to it and its token is not mounted.
    """
    name = SERVICE_ACCOUNT
    home = node_account_namespace(node_access, run_namespace)
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": home}]
    leases, key = f"{name}-leases", f"{name}-state-key"
    objects = [
        (
            f"0100_serviceaccount_{name}.yaml",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(name, home)},
        ),
        *([] if node_access == "agent" else [_token_secret(run_namespace)]),
        (
            f"0110_serviceaccount_{REPLICA_SERVICE_ACCOUNT}.yaml",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": metadata(REPLICA_SERVICE_ACCOUNT, run_namespace),
                "automountServiceAccountToken": False,
            },
        ),
    ]
    roles = [
        ("ClusterRole", name, None, _cluster_rules()),
        ("Role", name, operator_namespace, _operator_rules()),
        ("Role", leases, SYSTEM_NAMESPACE, LEASE_RULES),
        ("Role", key, SYSTEM_NAMESPACE, KEY_RULES),
    ]
    if node_access == "agent":
        roles += [
            ("Role", f"{name}-offer", SYSTEM_NAMESPACE, OFFER_RULES),
            ("Role", f"{name}-requests", run_namespace, AGENT_REQUEST_RULES),
            ("ClusterRole", f"{name}-token-reviews", None, TOKEN_REVIEW_RULES),
        ]
    for i, (kind, role_name, ns, rules) in enumerate(roles):
        objects.append((f"02{i}0_{kind.lower()}_{role_name}.yaml", role(kind, role_name, ns, rules)))
    for i, (kind, role_name, ns, _rules) in enumerate(roles):
        bind = "ClusterRoleBinding" if kind == "ClusterRole" else "RoleBinding"
        objects.append((f"03{i}0_{bind.lower()}_{role_name}.yaml", binding(bind, role_name, ns, subject)))
    if node_access == "agent":  # for the site to bind to its runs' account: file requests, read their status
        objects.append(
            (f"0500_role_{REQUESTER_ROLE}.yaml", role("Role", REQUESTER_ROLE, run_namespace, REQUESTER_RULES))
        )
    return objects


def _token_secret(run_namespace: str) -> tuple[str, dict]:
    """Direct mode: the node account's token as a Secret of the run namespace (the node steps mount it)."""
    return (
        f"0105_secret_{NODE_TOKEN_SECRET}.yaml",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": {
                **metadata(NODE_TOKEN_SECRET, run_namespace),
                "annotations": {"kubernetes.io/service-account.name": SERVICE_ACCOUNT},
            },
        },
    )


def _cluster_rules() -> list[dict]:
    return [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    ]


def _operator_rules() -> list[dict]:
    return [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [DEVICE_PLUGIN_CONFIGMAP],
            "verbs": ["get", "update"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
    ]


# one reconfiguration per node: a Lease per node, in sharebench's own namespace only
LEASE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "create", "update"]}
]
KEY_RULES = [
    {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [STATE_KEY_SECRET], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
]
OFFER_RULES = [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [OFFER_CONFIGMAP], "verbs": ["get"]}]
AGENT_REQUEST_RULES = [
    {"apiGroups": [REQUEST_GROUP], "resources": [REQUEST_PLURAL], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [REQUEST_GROUP], "resources": [f"{REQUEST_PLURAL}/status"], "verbs": ["update", "patch"]},
]
TOKEN_REVIEW_RULES = [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}]
REQUESTER_RULES = [{"apiGroups": [REQUEST_GROUP], "resources": [REQUEST_PLURAL], "verbs": ["create", "get"]}]
