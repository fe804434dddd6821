"""RBAC the way the API server's authorizer evaluates it, over rendered Role/ClusterRole objects and their
bindings (tests/support/k8s_sim.py enforces it when a test attaches one): a request is allowed when a rule
of a role bound to its user matches its verb, resource, namespace and (where the rule names some) object
name. Users that ``admins`` names are allowed everything (the site's admin)."""

from __future__ import annotations

from collections.abc import Iterable


class Rbac:
    def __init__(self, objects: Iterable[dict], admins: Iterable[str] = ()):
        self.admins = set(admins)
        roles: dict[tuple[str, str], list[dict]] = {}
        bindings: list[dict] = []
        for obj in objects:
            kind = obj.get("kind")
            if kind in ("Role", "ClusterRole"):
                roles[(obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = obj.get("rules") or []
            elif kind in ("RoleBinding", "ClusterRoleBinding"):
                bindings.append(obj)
        self.grants: list[tuple[str, str | None, list[dict]]] = []  # (user, namespace or None: cluster, rules)
        for b in bindings:
            ns = b["metadata"].get("namespace") if b["kind"] == "RoleBinding" else None
            ref = b["roleRef"]
            rules = roles.get(("" if ref["kind"] == "ClusterRole" else ns or "", ref["name"]), [])
            for s in b.get("subjects") or []:
                if s["kind"] == "ServiceAccount":
                    self.grants.append((f"system:serviceaccount:{s['namespace']}:{s['name']}", ns, rules))
                else:
                    self.grants.append((s["name"], ns, rules))

    def allows(self, user: str, verb: str, resource: str, namespace: str | None, name: str | None) -> bool:
        if user in self.admins:
            return True
        for who, ns, rules in self.grants:
            if who != user or (ns is not None and ns != (namespace or "")):
                continue
            for r in rules:
                if resource not in r.get("resources", []) or verb not in r.get("verbs", []):
                    continue
                names = r.get("resourceNames")
                if names and (name is None or name not in names):
                    continue
                return True
        return False
