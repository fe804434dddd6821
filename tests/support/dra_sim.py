"""A simulated NVIDIA DRA driver (plus the scheduler's allocation step) behind support/k8s_sim.py.

Attach it with ``SimDraDriver(sim, node="gpu-node-a", gpus=2)``; the cluster's background loop then
calls :meth:`SimDraDriver.reconcile`, which, like the scheduler and the driver's kubelet plugin:

* checks every ResourceClaim (``resource.k8s.io/v1``): its request must name device class
  ``gpu.nvidia.com`` (or ``mig.nvidia.com`` with a ``profile`` selector evaluated by cel-python, when the node has MIG
  devices), its opaque config for driver ``gpu.nvidia.com`` must be a valid GpuConfig
  (support/dra_schemas.py) -- a bad one is recorded in ``errors`` and never allocated;
* allocates one free GPU of the node to a claim as soon as a pod references it
  (``spec.resourceClaims[].resourceClaimName``), or at once with ``immediate=True``: ``status.allocation``
  (device result, the config ``FromClaim``, the node selector) and ``status.reservedFor`` (the pods);
* applies the sharing: ``applied`` records (claim, device, sharing), and a TimeSlicing interval is
  recorded as the ``nvidia-smi compute-policy --set-timeslice`` code of that GPU (``timeslice``);
* frees the device when the claim is deleted (``released``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import celpy

from support.dra_schemas import gpu_config_problems

DRIVER = "gpu.nvidia.com"
INTERVAL_CODES = {"Default": 0, "Short": 1, "Medium": 2, "Long": 3}


@dataclass
class Applied:
    claim: str
    device: str
    sharing: dict[str, Any] | None
    pods: list[str] = field(default_factory=list)


def _selects(expression: str, profile: str) -> bool:
    """A device selector's CEL expression, evaluated (cel-python) on a MIG device of ``profile``."""
    env = celpy.Environment()
    device = celpy.json_to_cel({"driver": DRIVER, "attributes": {DRIVER: {"profile": profile}}})
    return bool(env.program(env.compile(expression)).evaluate({"device": device}))


class SimDraDriver:
    def __init__(
        self,
        sim,
        *,
        node: str = "gpu-node-a",
        gpus: int = 1,
        immediate: bool = False,
        mig_devices: dict[str, str] | None = None,
    ):
        self.sim, self.node, self.immediate = sim, node, immediate
        self.devices = [f"gpu-{i}" for i in range(gpus)]
        self.mig_devices = dict(mig_devices or {})  # device name -> profile
        self.owner: dict[str, tuple[str, str]] = {}  # device -> (namespace, claim)
        self.applied: list[Applied] = []
        self.timeslice: dict[str, int] = dict.fromkeys(self.devices, 0)
        self.errors: dict[str, str] = {}  # claim -> why it is not allocated
        self.created: list[str] = []  # every claim seen, in order
        self.released: list[str] = []
        self.most_at_once = 0  # the most claims that existed together
        sim.dra = self

    # ------------------------------------------------------------ helpers
    def _pods_of(self, namespace: str, claim: str) -> list[dict]:
        return [
            o
            for (r, ns, _), o in sorted(self.sim.objects.items())
            if r == "pods"
            and ns == namespace
            and any(rc.get("resourceClaimName") == claim for rc in (o.get("spec") or {}).get("resourceClaims", []))
        ]

    def _check(self, claim: dict) -> tuple[dict, dict | None, str]:
        devices = claim.get("spec", {}).get("devices", {})
        reqs = devices.get("requests") or []
        if len(reqs) != 1 or "exactly" not in reqs[0]:
            return {}, None, "want exactly one request with 'exactly'"
        exactly = reqs[0]["exactly"]
        if exactly.get("deviceClassName") not in ("gpu.nvidia.com", "mig.nvidia.com"):
            return exactly, None, f"unknown device class {exactly.get('deviceClassName')!r}"
        config = None
        for c in devices.get("config") or []:
            op = c.get("opaque") or {}
            if op.get("driver") != DRIVER:
                continue
            problems = gpu_config_problems(op.get("parameters") or {})
            if problems:
                return exactly, None, "invalid GpuConfig: " + "; ".join(problems)
            config = op["parameters"]
        return exactly, config, ""

    def _free(self, exactly: dict) -> str | None:
        if exactly.get("deviceClassName") == "mig.nvidia.com":
            exprs = [s.get("cel", {}).get("expression", "") for s in exactly.get("selectors") or []]
            pool = [d for d, prof in self.mig_devices.items() if all(_selects(e, prof) for e in exprs)]
        else:
            pool = self.devices
        return next((d for d in pool if d not in self.owner), None)

    # ------------------------------------------------------------ the loop
    def reconcile(self) -> None:
        sim = self.sim
        claims = {(ns, name): o for (r, ns, name), o in sim.objects.items() if r == "resourceclaims"}
        self.most_at_once = max(self.most_at_once, len(claims))
        for key, (ns, name) in list(self.owner.items()):
            if (ns, name) not in claims:
                del self.owner[key]
                self.released.append(name)
        for (ns, name), claim in sorted(claims.items()):
            if name not in self.created:
                self.created.append(name)
            pods = self._pods_of(ns, name)
            status = claim.get("status") or {}
            if status.get("allocation"):
                reserved = [
                    {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in pods
                ]
                if reserved != status.get("reservedFor", []):
                    sim.edit("resourceclaims", ns, name, lambda o, r=reserved: o["status"].update(reservedFor=r))
                continue
            if name in self.errors or not (pods or self.immediate):
                continue
            exactly, config, error = self._check(claim)
            device = None if error else self._free(exactly)
            if error or device is None:
                self.errors[name] = error or "no free device"
                continue
            self.owner[device] = (ns, name)
            sharing = (config or {}).get("sharing")
            interval = ((sharing or {}).get("timeSlicingConfig") or {}).get("interval")
            if interval is not None:
                self.timeslice[device] = INTERVAL_CODES[interval]
            self.applied.append(Applied(name, device, sharing, [p["metadata"]["name"] for p in pods]))
            allocation = {
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": self.node, "device": device}],
                    "config": (
                        [
                            {
                                "source": "FromClaim",
                                "requests": ["gpu"],
                                "opaque": {"driver": DRIVER, "parameters": config},
                            }
                        ]
                        if config
                        else []
                    ),
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [self.node]}]}
                    ]
                },
            }
            reserved = [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]} for p in pods]
            sim.edit(
                "resourceclaims",
                ns,
                name,
                lambda o, a=allocation, r=reserved: o.__setitem__("status", {"allocation": a, "reservedFor": r}),
            )

    def claim_pod(self, namespace: str, name: str, claim: str) -> dict:
        """A pod (as KFP would make it with the pod-spec patch) that references ``claim``."""
        return self.sim.put_object(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {"app.kubernetes.io/part-of": "sharebench"},
                },
                "spec": {
                    "nodeName": self.node,
                    "resourceClaims": [{"name": "gpu-0", "resourceClaimName": claim}],
                    "containers": [{"name": "main", "image": "busybox", "resources": {"claims": [{"name": "gpu-0"}]}}],
                },
                "status": {"phase": "Running"},
            }
        )
