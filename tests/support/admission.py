"""A ValidatingAdmissionPolicy evaluated the way the API server does, with a real CEL engine
(cel-python): match constraints (resource and operation), match conditions, variables in order,
then every validation; a validation that is false denies the request with its message."""

from __future__ import annotations

import celpy
from celpy import celtypes


class AdmissionPolicy:
    def __init__(self, policy: dict, binding: dict | None = None):
        """``binding``: the policy's binding (its ``parameterNotFoundAction``; none: Deny)."""
        self.name = policy["metadata"]["name"]
        self.not_found = ((binding or {}).get("spec", {}).get("paramRef") or {}).get("parameterNotFoundAction", "Deny")
        spec = policy["spec"]
        self.env = celpy.Environment()
        self.rules = spec["matchConstraints"]["resourceRules"]
        self.namespace_selector = spec["matchConstraints"].get("namespaceSelector")
        self.param_kind = (spec.get("paramKind") or {}).get("kind")
        self.param_ref = "sharebench-system/sharebench-offer"  # the binding's paramRef (rendered)
        self.conditions = [self._program(c["expression"]) for c in spec.get("matchConditions", [])]
        self.variables = [(v["name"], self._program(v["expression"])) for v in spec.get("variables", [])]
        self.validations = [(self._program(v["expression"]), v["message"]) for v in spec["validations"]]

    def _program(self, expr: str):
        return self.env.program(self.env.compile(expr))

    def matches(self, resource: str, operation: str, subresource: str = "", namespace: str = "") -> bool:
        """The match constraints: a rule of the resource (``<resource>/<subresource>`` for one) and the
        operation, and the namespace selector's ``kubernetes.io/metadata.name`` In (the only kind rendered)."""
        name = f"{resource}/{subresource}" if subresource else resource
        if not any(name in r["resources"] and operation in r["operations"] for r in self.rules):
            return False
        for expr in (self.namespace_selector or {}).get("matchExpressions", []):
            assert expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "In", expr
            if namespace not in expr["values"]:
                return False
        return True

    def denials(
        self,
        *,
        resource: str,
        operation: str,
        user: str,
        obj: dict | None,
        old: dict | None,
        params: dict | None = None,
        subresource: str = "",
    ) -> list[str]:
        """The messages of the validations that deny this request ([] when admitted or not matched);
        ``params``: the binding's parameter object (a policy with a ``paramKind`` and none denies, as
        ``parameterNotFoundAction: Deny`` does; a binding's ``Allow``: admitted)."""
        namespace = ((obj or old or {}).get("metadata") or {}).get("namespace", "")
        if not self.matches(resource, operation, subresource, namespace):
            return []
        act = {
            "request": celpy.json_to_cel(
                {
                    "resource": {"group": "", "version": "v1", "resource": resource},
                    "subResource": subresource,
                    "namespace": namespace,
                    "operation": operation,
                    "userInfo": {"username": user},
                }
            ),
            "object": celpy.json_to_cel(obj),
            "oldObject": celpy.json_to_cel(old),
            "params": celpy.json_to_cel(params),
        }
        if not all(bool(c.evaluate(act)) for c in self.conditions):
            return []
        if self.param_kind and params is None:
            if self.not_found == "Allow":
                return []
            return [f"no params: {self.param_kind} {self.param_ref}, named by the binding, is missing"]
        variables = celtypes.MapType({})
        for name, prog in self.variables:
            variables[celtypes.StringType(name)] = prog.evaluate({**act, "variables": variables})
        act["variables"] = variables
        out = []
        for prog, message in self.validations:
            result = prog.evaluate(act)
            if isinstance(result, Exception) or not bool(result):
                out.append(message)
        return out
