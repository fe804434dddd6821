"""Namespaces and least-privilege RBAC for ``sharebench node apply/restore/status``."""

from __future__ import annotations

from sharebench.manifests.names import (
    DEVICE_PLUGIN_CONFIGMAP,
    NODE_TOKEN_SECRET,
    OPERATOR_NAMESPACE,
    REPLICA_SERVICE_ACCOUNT,
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


def rbac_objects(
    operator_namespace: str = OPERATOR_NAMESPACE, run_namespace: str = RUN_NAMESPACE
) -> list[tuple[str, dict]]:
    """Least privilege for ``sharebench node apply/restore/status``.

    Cluster scope: nodes get/list/patch (labels, prior-state annotation, cordon),
    pods list (refuse when a foreign pod uses the node's GPUs; find the device-plugin
    pod). Operator namespace: the device-plugin ConfigMap get/update (by name) and
    pods delete (restart the device-plugin and GFD pods so they re-read a changed entry).
    No create: the ConfigMap is applied from manifests/operator/, never created by
    the tool. sharebench's own namespace: Leases get/create/update, never delete (a
    release empties the holder; the admission policy fences who may change it), and the
    prior-state signing key, a Secret read by name and created once (RBAC cannot name
    what a create makes: the admission policy admits that one name only).

    The replica and analysis tasks run as :data:`REPLICA_SERVICE_ACCOUNT`: no role is
    bound to it and its token is not mounted. The node account's token is the Secret
    :data:`NODE_TOKEN_SECRET` (filled in by Kubernetes' token controller), which only the
    pipeline's node steps mount.
    """
    name = SERVICE_ACCOUNT
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": run_namespace}]
    cluster_rules = [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    ]
    operator_rules = [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [DEVICE_PLUGIN_CONFIGMAP],
            "verbs": ["get", "update"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
    ]
    # one reconfiguration per node: a Lease per node, in sharebench's own namespace only
    lease_rules = [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}
    ]
    key_rules = [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [STATE_KEY_SECRET], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ]
    leases, key = f"{name}-leases", f"{name}-state-key"
    return [
        (
            f"0100_serviceaccount_{name}.yaml",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(name, run_namespace)},
        ),
        (
            f"0105_secret_{NODE_TOKEN_SECRET}.yaml",
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "kubernetes.io/service-account-token",
                "metadata": {
                    **metadata(NODE_TOKEN_SECRET, run_namespace),
                    "annotations": {"kubernetes.io/service-account.name": name},
                },
            },
        ),
        (
            f"0110_serviceaccount_{REPLICA_SERVICE_ACCOUNT}.yaml",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": metadata(REPLICA_SERVICE_ACCOUNT, run_namespace),
                "automountServiceAccountToken": False,
            },
        ),
        (f"0200_clusterrole_{name}.yaml", role("ClusterRole", name, None, cluster_rules)),
        (f"0210_role_{name}.yaml", role("Role", name, operator_namespace, operator_rules)),
        (f"0220_role_{leases}.yaml", role("Role", leases, SYSTEM_NAMESPACE, lease_rules)),
        (f"0230_role_{key}.yaml", role("Role", key, SYSTEM_NAMESPACE, key_rules)),
        (f"0300_clusterrolebinding_{name}.yaml", binding("ClusterRoleBinding", name, None, subject)),
        (f"0310_rolebinding_{name}.yaml", binding("RoleBinding", name, operator_namespace, subject)),
        (f"0320_rolebinding_{leases}.yaml", binding("RoleBinding", leases, SYSTEM_NAMESPACE, subject)),
        (f"0330_rolebinding_{key}.yaml", binding("RoleBinding", key, SYSTEM_NAMESPACE, subject)),
    ]
