"""Namespaces and least-privilege RBAC for ``sharebench node apply/restore/status``."""

from __future__ import annotations

from sharebench.manifests.names import (
    DEVICE_PLUGIN_CONFIGMAP,
    OPERATOR_NAMESPACE,
    RUN_NAMESPACE,
    SERVICE_ACCOUNT,
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


def rbac_objects(
    operator_namespace: str = OPERATOR_NAMESPACE, run_namespace: str = RUN_NAMESPACE
) -> list[tuple[str, dict]]:
    """Least privilege for ``sharebench node apply/restore/status``.

    Cluster scope: nodes get/list/patch (labels, prior-state annotation, cordon),
    pods list (refuse when a foreign pod uses the node's GPUs; find the device-plugin
    pod). Operator namespace: the device-plugin ConfigMap get/update (by name) and
    pods delete (restart the device-plugin and GFD pods so they re-read a changed entry).
    No create: the ConfigMap is applied from manifests/operator/, never created by
    the tool.
    """
    name = SERVICE_ACCOUNT
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": run_namespace}]
    return [
        (
            "0100_serviceaccount_sharebench-node.yaml",
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": metadata(name, run_namespace),
            },
        ),
        (
            "0200_clusterrole_sharebench-node.yaml",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": metadata(name),
                "rules": [
                    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
                ],
            },
        ),
        (
            "0210_role_sharebench-node.yaml",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": metadata(name, operator_namespace),
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["configmaps"],
                        "resourceNames": [DEVICE_PLUGIN_CONFIGMAP],
                        "verbs": ["get", "update"],
                    },
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
                ],
            },
        ),
        # one reconfiguration per node: a Lease per node, in sharebench's own namespace only
        (
            "0220_role_sharebench-node-leases.yaml",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": metadata(f"{name}-leases", SYSTEM_NAMESPACE),
                "rules": [
                    {
                        "apiGroups": ["coordination.k8s.io"],
                        "resources": ["leases"],
                        "verbs": ["get", "create", "update", "delete"],
                    },
                ],
            },
        ),
        (
            "0300_clusterrolebinding_sharebench-node.yaml",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": metadata(name),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subject,
            },
        ),
        (
            "0310_rolebinding_sharebench-node.yaml",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": metadata(name, operator_namespace),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": subject,
            },
        ),
        (
            "0320_rolebinding_sharebench-node-leases.yaml",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": metadata(f"{name}-leases", SYSTEM_NAMESPACE),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{name}-leases"},
                "subjects": subject,
            },
        ),
    ]
