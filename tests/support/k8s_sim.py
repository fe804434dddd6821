"""A simulated Kubernetes cluster with a simulated NVIDIA gpu-operator, for tests.

A real HTTP server on loopback (threaded ``http.server``) speaks the subset of the
Kubernetes API that ``sharebench.node`` uses, so the code under test talks to it with
the official ``kubernetes`` client through a generated kubeconfig:

* nodes, configmaps, pods, daemonsets: GET (object and list, ``labelSelector`` and
  ``fieldSelector``), PATCH (strategic-merge and JSON-merge as maps, RFC 6902 JSON
  patch; a ``metadata.resourceVersion`` in a merge patch is a precondition), PUT
  (409 on a stale ``resourceVersion``), POST, DELETE; node ``status`` is a subresource
  (PATCH/PUT of the node keep it); resourceVersion increments on every write; errors
  are ``Status`` objects (401, 403, 404, 409, 400); bearer-token authentication.
* A simulated gpu-operator thread reacting to node labels like the real one:
  - ``nvidia.com/device-plugin.config=<entry>``: after a delay the device plugin advertises
    ``nvidia.com/gpu`` (or ``nvidia.com/gpu.shared`` when renamed) = GPUs × replicas and GPU
    feature discovery labels ``nvidia.com/gpu.replicas`` / ``gpu.sharing-strategy`` / ``gpu.product``.
    Both pods (DaemonSets ``nvidia-device-plugin-daemonset``, ``gpu-feature-discovery``) read the
    ConfigMap when they start: a changed or new entry is seen only by a pod started after it.
  - ``nvidia.com/mig.config=<layout>``: state ``pending``, then after a delay ``success``
    and the MIG resources in allocatable (``nvidia.com/mig-<profile>`` with strategy
    ``mixed``, ``nvidia.com/gpu`` and a ``-MIG-<profile>`` product with ``single``);
    ``failed`` for a layout absent from the mig-parted ConfigMap (or with no item for
    the node's PCI id); stuck ``pending`` while a foreign pod uses the node's GPUs.
* Fault injection: ``deny(verb, resource)`` (RBAC 403), ``fail_next(verb, resource, status)``,
  ``pause_operator()``, ``freeze()`` / ``thaw()`` (requests get no answer).
* Admission: policies appended to ``admission`` (``support.admission.AdmissionPolicy``) judge
  every create, update and delete, as the API server's ValidatingAdmissionPolicy does (422 when denied),
  with the site's offer (``sharebench-system/sharebench-offer``, see :meth:`SimCluster.offer`) as params.
* Identities (issue 37): each bearer token is a user (``add_user``; the default token is the node
  account's); with ``rbac`` set (``support.rbac.Rbac`` over the rendered roles) every request is
  authorised as the API server's RBAC does (403 otherwise).
* Bound service-account tokens (issue 46): :meth:`SimCluster.pod_token` issues a pod's projected token
  (an audience, an expiry, bound to the pod's name and uid; never a bearer token of this API server),
  and ``POST /apis/authentication.k8s.io/v1/tokenreviews`` reviews one as the API server does: valid
  while unexpired and while its pod exists with that uid, for an audience it was issued for, with the
  pod in ``status.user.extra`` (``authentication.kubernetes.io/pod-name``, ``pod-uid``).
* Status subresources: a create of a pod starts it ``Pending``, of a ``SharingRequest`` (the CRD
  ``sharebench.io/v1alpha1``) with no status; a PUT or PATCH of the object keeps its status; only
  ``.../status`` (RBAC resource ``<plural>/status``) changes a SharingRequest's status, and nothing else.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import yaml
from kubernetes import config as k8s_config

from sharebench.gpus import GPU_MODELS, GpuModel
from sharebench.manifests import names, operator, policy
from sharebench.manifests.agent import offer_configmap
from sharebench.manifests.render import resolve_models

LABEL_DP = "nvidia.com/device-plugin.config"
LABEL_MIG = "nvidia.com/mig.config"
LABEL_MIG_STATE = "nvidia.com/mig.config.state"
PLUGIN_DS = "nvidia-device-plugin-daemonset"
GFD_DS = "gpu-feature-discovery"
OPERANDS = {PLUGIN_DS: "nvidia-device-plugin", GFD_DS: "gpu-feature-discovery"}  # DaemonSet -> container
SERVICE_ACCOUNT_USER = policy.service_account_user()  # the node account (agent mode)

KINDS = {  # resource -> (kind, namespaced, api group prefix)
    "nodes": ("Node", False, "/api/v1"),
    "configmaps": ("ConfigMap", True, "/api/v1"),
    "pods": ("Pod", True, "/api/v1"),
    "daemonsets": ("DaemonSet", True, "/apis/apps/v1"),
    # Dynamic Resource Allocation (resource.k8s.io/v1); the allocating driver is support/dra_sim.py
    "resourceclaims": ("ResourceClaim", True, "/apis/resource.k8s.io/v1"),
    "resourceclaimtemplates": ("ResourceClaimTemplate", True, "/apis/resource.k8s.io/v1"),
    "leases": ("Lease", True, "/apis/coordination.k8s.io/v1"),  # issue 14: one reconfiguration per node
    "secrets": ("Secret", True, "/api/v1"),  # issue 27: the prior-state signing key
    "sharingrequests": ("SharingRequest", True, "/apis/sharebench.io/v1alpha1"),  # issue 46: the agent's requests
}
STATUS_SUBRESOURCE = ("nodes", "pods", "daemonsets", "resourceclaims", "sharingrequests")
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"  # the API server's own (a pod's default token)
POD_NAME_EXTRA, POD_UID_EXTRA = "authentication.kubernetes.io/pod-name", "authentication.kubernetes.io/pod-uid"
API_VERSIONS = {
    "/api/v1": "v1",
    "/apis/apps/v1": "apps/v1",
    "/apis/resource.k8s.io/v1": "resource.k8s.io/v1",
    "/apis/coordination.k8s.io/v1": "coordination.k8s.io/v1",
    "/apis/sharebench.io/v1alpha1": "sharebench.io/v1alpha1",
}
PRODUCTS = {
    "A100-40GB": "NVIDIA-A100-SXM4-40GB",
    "A100-80GB": "NVIDIA-A100-SXM4-80GB",
    "H100-80GB": "NVIDIA-H100-80GB-HBM3",
    "H100-NVL": "NVIDIA-H100-NVL",
    "H200": "NVIDIA-H200",
}


class ApiError(Exception):
    def __init__(self, code: int, reason: str, message: str, name: str = "", kind: str = ""):
        super().__init__(message)
        self.code, self.reason, self.message, self.name, self.kind = code, reason, message, name, kind

    def status(self) -> dict:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "details": {"name": self.name, "kind": self.kind},
            "code": self.code,
        }


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- selectors
def _split_terms(s: str) -> list[str]:
    terms, depth, cur = [], 0, ""
    for ch in s:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            terms.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        terms.append(cur.strip())
    return terms


def match_labels(selector: str | None, labels: dict) -> bool:
    if not selector:
        return True
    for term in _split_terms(selector):
        m = re.fullmatch(r"(\S+)\s+(in|notin)\s+\((.*)\)", term)
        if m:
            values = {v.strip() for v in m.group(3).split(",")}
            has = m.group(1) in labels and labels[m.group(1)] in values
            if has != (m.group(2) == "in"):
                return False
            continue
        m = re.fullmatch(r"([^!=\s]+)\s*(==|=|!=)\s*(\S*)", term)
        if m:
            k, op, v = m.groups()
            if (labels.get(k) == v) != (op != "!="):
                return False
            continue
        if term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


FIELD_PATHS = {"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"}


def match_fields(selector: str | None, obj: dict) -> bool:
    if not selector:
        return True
    for term in _split_terms(selector):
        m = re.fullmatch(r"([^!=]+?)\s*(==|=|!=)\s*(.*)", term)
        if not m or m.group(1) not in FIELD_PATHS:
            raise ApiError(400, "BadRequest", f"field label not supported: {term.split('=')[0].rstrip('!')}")
        path, op, want = m.groups()
        cur = obj
        for part in path.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if ((cur or "") == want) != (op != "!="):
            return False
    return True


# ---------------------------------------------------------------- patches
def merge_patch(target, patch):
    """RFC 7386 JSON merge patch (strategic merge on maps behaves the same)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def json_patch(doc: dict, ops: list) -> dict:
    """RFC 6902: add, remove, replace, test."""
    doc = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent.setdefault(p, {})
        last = parts[-1]
        kind = op["op"]
        if kind == "test":
            cur = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if cur != op.get("value"):
                raise ApiError(422, "Invalid", f"test failed at {op['path']}")
        elif kind in ("add", "replace"):
            if isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), op["value"])
            else:
                if kind == "replace" and last not in parent:
                    raise ApiError(422, "Invalid", f"replace of missing path {op['path']}")
                parent[last] = op["value"]
        elif kind == "remove":
            try:
                del parent[int(last) if isinstance(parent, list) else last]
            except (KeyError, IndexError):
                raise ApiError(422, "Invalid", f"remove of missing path {op['path']}") from None
        else:
            raise ApiError(400, "BadRequest", f"unsupported JSON patch op {kind!r}")
    return doc


# ---------------------------------------------------------------- simulated GPU nodes
@dataclass
class SimGpuNode:
    name: str
    model: GpuModel
    gpus: int
    product: str
    pci_id: str
    mig_capable: bool = True
    mig_applied: str = "all-disabled"
    mig_seen: str | None = None  # last value of nvidia.com/mig.config acted on
    mig_target: str | None = None
    mig_due: float = 0.0
    # per DaemonSet (device plugin, GFD): the ConfigMap entries its pod read at start, whether it
    # runs, when its DaemonSet recreates it, how often it started
    snapshot: dict = field(default_factory=dict)
    up: dict = field(default_factory=dict)
    due: dict = field(default_factory=dict)
    starts: dict = field(default_factory=lambda: dict.fromkeys(OPERANDS, 0))
    advertised: tuple | None = None  # (allocatable from the plugin, labels from GFD)
    pending: tuple | None = None
    pending_due: float = 0.0

    @property
    def plugin_starts(self) -> int:
        return self.starts[PLUGIN_DS]


# How long a test waits for a change the simulated operator makes, counted in the simulator's own delays, not
# in seconds of the clock: idle, a change settles within a few delays (0.1 s); a loaded machine slows the
# simulator and the client alike (a 2-core machine at load 8-18 took over 5 s), so a wait that must succeed
# is given PATIENCE_DELAYS delays and ends as soon as the simulator has settled. A test of a timeout pauses
# or freezes the simulator (it then never answers) and keeps a short timeout of its own.
PATIENCE_DELAYS = 4000
DEFAULT_DELAY_S = 0.03
SIM_WAIT_S = PATIENCE_DELAYS * DEFAULT_DELAY_S  # a wait of the default simulator: 120 s, at most


class SimCluster:
    """Start with ``with SimCluster(tmp_path) as sim:``; ``sim.kubeconfig`` is the file to use."""

    def __init__(
        self,
        workdir: Path,
        *,
        delay_s: float = DEFAULT_DELAY_S,
        mig_strategy: str = "mixed",
        operator_namespace: str = names.OPERATOR_NAMESPACE,
        token: str = "sim-token",
        gpus_models: tuple[str, ...] = (),
    ):
        self.workdir = Path(workdir)
        self.delay_s = delay_s
        self.mig_strategy = mig_strategy
        self.ns = operator_namespace
        self.token = token
        self.default_entry = operator.DEFAULT_ENTRY
        self.lock = threading.RLock()
        self.objects: dict[tuple[str, str, str], dict] = {}
        self._rv = itertools.count(1000)
        self.gpu_nodes: dict[str, SimGpuNode] = {}
        self.denied: set[tuple[str, str]] = set()
        self.failures: list[list] = []  # [verb, resource, status, times]
        self.requests: list[tuple[str, str, str]] = []
        self.operator_paused = False
        self.dra = None  # a support.dra_sim.SimDraDriver, when one is attached
        self.admission: list = []  # issue 14: support.admission.AdmissionPolicy, enforced
        self.users: dict[str, str] = {token: SERVICE_ACCOUNT_USER}  # bearer token -> user
        self.pod_tokens: dict[str, dict] = {}  # issue 46: a pod's projected token -> its claims
        self.rbac = None  # a support.rbac.Rbac, enforced when set
        self.thawed = threading.Event()  # issue 14: freeze() holds every request until thaw()
        self.thawed.set()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self.kubeconfig = self.workdir / "kubeconfig.yaml"
        # the operator's namespace objects, as applied from manifests/
        self.put_object(operator.device_plugin_configmap(self.ns))
        self.put_object(offer_configmap((names.RUN_NAMESPACE,), (), ()))  # the site's offer: no node yet
        self.put_object(operator.mig_parted_configmap(resolve_models(gpus_models), self.ns))
        for ds, container in OPERANDS.items():
            pod_spec = {"containers": [{"name": container, "image": "nvcr.io/nvidia/k8s-device-plugin"}]}
            self.put_object(
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "metadata": {"name": ds, "namespace": self.ns},
                    "spec": {
                        "selector": {"matchLabels": {"app": ds}},
                        "template": {"metadata": {"labels": {"app": ds}}, "spec": pod_spec},
                    },
                    "status": {
                        "desiredNumberScheduled": 0,
                        "numberReady": 0,
                        "currentNumberScheduled": 0,
                        "numberMisscheduled": 0,
                    },
                }
            )

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> SimCluster:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        sim = self

        class Handler(_Handler):
            cluster = sim

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="k8s-sim-api", daemon=True
        ).start()
        threading.Thread(target=self._operator_loop, name="k8s-sim-operator", daemon=True).start()
        host, port = self._server.server_address
        self.url = f"http://{host}:{port}"
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "sim",
                    "clusters": [{"name": "sim", "cluster": {"server": self.url}}],
                    "users": [{"name": "sim", "user": {"token": self.token}}],
                    "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}],
                }
            )
        )

    def stop(self) -> None:
        self._stop.set()
        self.thawed.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def api_client(self, token: str | None = None):
        """A client of the official library; ``token``: another user's (:meth:`add_user`)."""
        api = k8s_config.new_client_from_config(config_file=str(self.kubeconfig))
        if token is not None:  # the kubeconfig loader's hook would put the kubeconfig's token back
            api.configuration.refresh_api_key_hook = None
            api.configuration.api_key = {"authorization": f"Bearer {token}"}
        return api

    def add_user(self, token: str, user: str) -> None:
        """Requests with ``token`` are ``user``'s (``system:serviceaccount:NS:NAME`` for a pod's account)."""
        self.users[token] = user

    def pod_token(
        self, namespace: str, pod: str, audience: str = names.AGENT_AUDIENCE, expiration_s: float = 3600
    ) -> str:
        """The projected token the kubelet would mount in ``pod`` (its service account, ``audience``,
        expiring in ``expiration_s``, bound to the pod's name and uid). Not a bearer token of this API."""
        obj = self.get("pods", namespace, pod)
        if obj is None:
            raise KeyError(f"no pod {namespace}/{pod}")
        account = obj["spec"].get("serviceAccountName") or "default"
        token = f"sim-projected-{uuid.uuid4().hex}"
        self.pod_tokens[token] = {
            "user": f"system:serviceaccount:{namespace}:{account}",
            "namespace": namespace,
            "pod": pod,
            "uid": obj["metadata"]["uid"],
            "audiences": [audience],
            "expires": time.monotonic() + expiration_s,
        }
        return token

    def review(self, spec: dict) -> dict:
        """A TokenReview's status, as the API server's service-account authenticator gives it."""
        claims = self.pod_tokens.get(str(spec.get("token") or ""))
        wanted = list(spec.get("audiences") or [API_AUDIENCE])
        if claims is None:
            return {
                "authenticated": False,
                "error": "[invalid bearer token, square/go-jose: error in cryptographic primitive]",
            }
        if time.monotonic() > claims["expires"]:
            return {"authenticated": False, "error": "[invalid bearer token, service account token has expired]"}
        audiences = [a for a in wanted if a in claims["audiences"]]
        if not audiences:
            return {
                "authenticated": False,
                "error": "[invalid bearer token, token audiences is invalid for the target audiences]",
            }
        pod = self.get("pods", claims["namespace"], claims["pod"])
        if pod is None or pod["metadata"]["uid"] != claims["uid"]:
            return {
                "authenticated": False,
                "error": "[invalid bearer token, service account token has been invalidated]",
            }
        extra = {POD_NAME_EXTRA: [claims["pod"]], POD_UID_EXTRA: [claims["uid"]]}
        groups = ["system:serviceaccounts", f"system:serviceaccounts:{claims['namespace']}", "system:authenticated"]
        user = {
            "username": claims["user"],
            "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, claims["user"])),
            "groups": groups,
            "extra": extra,
        }
        return {"authenticated": True, "user": user, "audiences": audiences}

    def offer(self, *nodes: str, image_allow: tuple[str, ...] = (), run_namespaces: tuple[str, ...] = ()) -> None:
        """The site's offer (the policy's params, the agent's configuration): these nodes too."""
        cm = self.get("configmaps", names.SYSTEM_NAMESPACE, names.OFFER_CONFIGMAP) or {"data": {}}
        offered = tuple(k[len(names.OFFER_NODE_PREFIX) :] for k in cm["data"] if k.startswith(names.OFFER_NODE_PREFIX))
        old_allow = tuple(p for p in cm["data"].get(names.OFFER_IMAGE_ALLOW_KEY, "").split(",") if p)
        old_runs = tuple(p for p in cm["data"].get(names.OFFER_RUN_NAMESPACES_KEY, "").split(",") if p)
        self.put_object(offer_configmap(run_namespaces or old_runs, (*offered, *nodes), image_allow or old_allow))

    # ------------------------------------------------------------ store
    def _key(self, obj: dict) -> tuple[str, str, str]:
        kind = obj["kind"]
        res = {v[0]: k for k, v in KINDS.items()}[kind]
        return res, obj["metadata"].get("namespace", "") if KINDS[res][1] else "", obj["metadata"]["name"]

    def put_object(self, obj: dict) -> dict:
        with self.lock:
            obj = copy.deepcopy(obj)
            meta = obj.setdefault("metadata", {})
            key = self._key(obj)
            old = self.objects.get(key)
            meta["uid"] = old["metadata"]["uid"] if old else str(uuid.uuid4())
            meta["creationTimestamp"] = old["metadata"]["creationTimestamp"] if old else _now()
            meta["resourceVersion"] = str(next(self._rv))
            self.objects[key] = obj
            return copy.deepcopy(obj)

    def get(self, resource: str, namespace: str, name: str) -> dict | None:
        with self.lock:
            obj = self.objects.get((resource, namespace if KINDS[resource][1] else "", name))
            return copy.deepcopy(obj) if obj else None

    def node(self, name: str) -> dict:
        return self.get("nodes", "", name)

    def configmap(self, name: str = names.DEVICE_PLUGIN_CONFIGMAP, namespace: str | None = None) -> dict:
        return self.get("configmaps", namespace or self.ns, name)

    def edit(self, resource: str, namespace: str, name: str, fn) -> None:
        """Change a stored object in place: ``fn(obj)``, then store it back (under the lock, as one
        read-modify-write); nothing when there is no such object. Tests use it to change the
        cluster behind the code's back."""
        with self.lock:
            obj = self.get(resource, namespace, name)
            if obj is not None:
                fn(obj)
                self.put_object(obj)

    # ------------------------------------------------------------ set-up helpers
    def add_gpu_node(
        self,
        name: str,
        model: str = "H200",
        gpus: int = 2,
        *,
        mig_capable: bool = True,
        labels: dict | None = None,
        offered: bool = False,
    ) -> dict:
        """A GPU node; ``offered``: the site's offer lists it (the admission policy lets the node account change it)."""
        if offered:
            self.offer(name)
        m = GPU_MODELS[model]
        sn = SimGpuNode(name, m, gpus, PRODUCTS[model], operator.PCI_DEVICE_IDS[model][0], mig_capable)
        base = {
            "kubernetes.io/hostname": name,
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": sn.product,
            "nvidia.com/gpu.count": str(gpus),
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/mig.capable": "true" if mig_capable else "false",
            "nvidia.com/mig.strategy": self.mig_strategy,
        }
        if mig_capable:  # the operator labels MIG-capable nodes with migManager.config.default
            base[LABEL_MIG] = "all-disabled"
            base[LABEL_MIG_STATE] = "success"
        base.update(labels or {})
        node = self.add_node(name, base, {"nvidia.com/gpu": str(gpus)})
        with self.lock:
            self.gpu_nodes[name] = sn
            sn.advertised = None
            for ds in OPERANDS:
                self._start_operand_pod(sn, ds)
            sn.mig_seen = base.get(LABEL_MIG)
            sn.advertised = self._desired(sn, self.node(name)["metadata"]["labels"])
        return node

    def add_node(self, name: str, labels: dict | None = None, extra_resources: dict | None = None) -> dict:
        res = {"cpu": "64", "memory": "512Gi", "pods": "110", **(extra_resources or {})}
        return self.put_object(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": dict(labels or {"kubernetes.io/hostname": name}),
                    "annotations": {},
                },
                "spec": {},
                "status": {
                    "capacity": dict(res),
                    "allocatable": dict(res),
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )

    def add_pod(
        self,
        namespace: str,
        name: str,
        node: str,
        *,
        gpu: int | None = 1,
        resource: str = "nvidia.com/gpu",
        labels: dict | None = None,
        phase: str = "Running",
        image: str = "busybox",
        service_account: str = "default",
    ) -> dict:
        """A pod as the scheduler and kubelet left it (``phase``), put straight into the store."""
        res = {"limits": {resource: str(gpu)}} if gpu else {}
        container = {"name": "main", "image": image, "resources": res}
        return self.put_object(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
                "spec": {"nodeName": node, "serviceAccountName": service_account, "containers": [container]},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]},
            }
        )

    def set_pod_phase(self, namespace: str, name: str, phase: str) -> None:
        """The kubelet's report: the pod's phase (Succeeded when its container ended)."""
        self.edit("pods", namespace, name, lambda pod: pod["status"].update(phase=phase))

    def delete_pod(self, namespace: str, name: str) -> None:
        with self.lock:
            obj = self.objects.pop(("pods", namespace, name), None)
            if obj:
                self._on_pod_deleted(obj)

    def deny(self, verb: str, resource: str) -> None:
        self.denied.add((verb, resource))

    def allow(self) -> None:
        self.denied.clear()

    def fail_next(self, verb: str, resource: str, status: int = 500, times: int = 1) -> None:
        self.failures.append([verb, resource, status, times])

    def freeze(self) -> None:
        """A frozen API server: requests are accepted and get no answer until :meth:`thaw`."""
        self.thawed.clear()

    def thaw(self) -> None:
        self.thawed.set()

    def pause_operator(self, paused: bool = True) -> None:
        self.operator_paused = paused

    def remove_mig_layout(self, layout: str) -> None:
        """Take a layout out of the mig-parted config (a site whose config lacks it)."""

        def edit(cm):
            cfg = yaml.safe_load(cm["data"][operator.MIG_PARTED_KEY])
            cfg["mig-configs"].pop(layout, None)
            cm["data"][operator.MIG_PARTED_KEY] = yaml.safe_dump(cfg)

        self.edit("configmaps", self.ns, names.MIG_PARTED_CONFIGMAP, edit)

    def plugin_pods(self, node: str, ds: str = PLUGIN_DS) -> list[dict]:
        with self.lock:
            return [
                copy.deepcopy(o)
                for (r, ns, _), o in self.objects.items()
                if r == "pods"
                and ns == self.ns
                and o["spec"].get("nodeName") == node
                and o["metadata"].get("labels", {}).get("app") == ds
            ]

    @property
    def patience_s(self) -> float:
        """How long a wait for this simulator's change may take (:data:`PATIENCE_DELAYS` of its delays)."""
        return PATIENCE_DELAYS * self.delay_s

    def wait_settled(self, node: str, timeout_s: float | None = None) -> None:
        """Until the simulated operator has nothing pending for the node (at most ``timeout_s``, default
        :attr:`patience_s`)."""
        end = time.monotonic() + (self.patience_s if timeout_s is None else timeout_s)
        while time.monotonic() < end:
            with self.lock:
                sn = self.gpu_nodes[node]
                labels = self.node(node)["metadata"]["labels"]
                if all(sn.up.values()) and sn.mig_target is None and sn.advertised == self._desired(sn, labels):
                    return
            time.sleep(0.005)
        raise AssertionError(f"simulated operator did not settle on {node}")

    # ------------------------------------------------------------ simulated DaemonSet and operator
    def _start_operand_pod(self, sn: SimGpuNode, ds_name: str) -> None:
        """The DaemonSet's pod on the node; it reads the device-plugin ConfigMap as it starts."""
        ds = self.get("daemonsets", self.ns, ds_name)
        self.put_object(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{ds_name}-{uuid.uuid4().hex[:5]}",
                    "namespace": self.ns,
                    "labels": {"app": ds_name},
                    "ownerReferences": [
                        {
                            "apiVersion": "apps/v1",
                            "kind": "DaemonSet",
                            "name": ds_name,
                            "uid": ds["metadata"]["uid"],
                            "controller": True,
                        }
                    ],
                },
                "spec": {
                    "nodeName": sn.name,
                    "containers": [{"name": OPERANDS[ds_name], "image": "nvcr.io/nvidia/k8s-device-plugin"}],
                },
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
        cm = self.configmap()
        sn.snapshot[ds_name] = dict((cm or {}).get("data") or {})
        sn.up[ds_name] = True
        sn.due[ds_name] = None
        sn.starts[ds_name] += 1

    def _on_pod_deleted(self, pod: dict) -> None:
        owners = pod["metadata"].get("ownerReferences") or []
        node = pod["spec"].get("nodeName")
        for o in owners:
            if o.get("kind") == "DaemonSet" and o.get("name") in OPERANDS and node in self.gpu_nodes:
                sn = self.gpu_nodes[node]
                sn.up[o["name"]] = False
                sn.due[o["name"]] = time.monotonic() + self.delay_s

    def _operator_loop(self) -> None:
        while not self._stop.is_set():
            if not self.operator_paused:
                with self.lock:
                    for sn in list(self.gpu_nodes.values()):
                        self._reconcile(sn)
                    if self.dra is not None:
                        self.dra.reconcile()
            time.sleep(0.003)

    def _foreign_gpu_pods(self, node: str) -> list[str]:
        out = []
        for (r, ns, name), o in self.objects.items():
            if r != "pods" or ns == self.ns or o["spec"].get("nodeName") != node:
                continue
            if o.get("status", {}).get("phase") not in ("Running", "Pending"):
                continue
            for c in o["spec"].get("containers", []):
                lim = (c.get("resources") or {}).get("limits") or {}
                if any(k.startswith(("nvidia.com/gpu", "nvidia.com/mig-")) for k in lim):
                    out.append(f"{ns}/{name}")
        return out

    def _mig_item(self, sn: SimGpuNode, layout: str) -> dict | None:
        cm = self.get("configmaps", self.ns, names.MIG_PARTED_CONFIGMAP)
        if not cm:
            return None
        cfg = yaml.safe_load(cm["data"][operator.MIG_PARTED_KEY]) or {}
        for item in (cfg.get("mig-configs") or {}).get(layout) or []:
            filt = item.get("device-filter")
            ids = [filt] if isinstance(filt, str) else list(filt or [])
            if not ids or sn.pci_id.upper() in (i.upper() for i in ids):
                return item
        return None

    def _set_node_labels(self, sn: SimGpuNode, labels: dict) -> None:
        def edit(node):
            lab = node["metadata"].setdefault("labels", {})
            for k, v in labels.items():
                if v is None:
                    lab.pop(k, None)
                else:
                    lab[k] = v

        self.edit("nodes", "", sn.name, edit)

    def _reconcile(self, sn: SimGpuNode) -> None:
        now = time.monotonic()
        for ds in OPERANDS:
            if not sn.up.get(ds) and sn.due.get(ds) is not None and now >= sn.due[ds]:
                self._start_operand_pod(sn, ds)
        node = self.node(sn.name)
        if node is None:
            return
        labels = node["metadata"].get("labels", {})
        # --- MIG manager: every new value of the label is applied (pending, then success/failed)
        want = labels.get(LABEL_MIG)
        if want != sn.mig_seen:
            sn.mig_seen = want
            if want is not None:
                sn.mig_target, sn.mig_due = want, now + self.delay_s
                self._set_node_labels(sn, {LABEL_MIG_STATE: "pending"})
                return
            sn.mig_target = None
        if sn.mig_target is not None:
            if now < sn.mig_due or self._foreign_gpu_pods(sn.name):
                return  # stuck pending while a GPU pod would not terminate
            item = self._mig_item(sn, sn.mig_target) if sn.mig_capable else None
            if item is None:
                sn.mig_target = None
                self._set_node_labels(sn, {LABEL_MIG_STATE: "failed"})
                return
            sn.mig_applied, sn.mig_target = sn.mig_target, None
            self._set_node_labels(sn, {LABEL_MIG_STATE: "success"})
            return
        # --- device plugin (allocatable) and GPU feature discovery (labels)
        desired = self._desired(sn, labels)
        if desired == sn.advertised:
            sn.pending = None
            return
        if sn.pending != desired:
            sn.pending, sn.pending_due = desired, now + self.delay_s
            return
        if now >= sn.pending_due:
            self._advertise(sn, desired)

    def _desired(self, sn: SimGpuNode, labels: dict) -> tuple:
        """(allocatable from the device plugin, labels from GFD) as they would be now.

        Each operand uses the entry as its pod read it at start; one that is down, or never
        read that entry (its config-manager fails), keeps what it advertised."""
        entry = labels.get(LABEL_DP) or self.default_entry
        current = sn.advertised or (None, None)
        parts = []
        for i, ds in enumerate((PLUGIN_DS, GFD_DS)):
            text = sn.snapshot.get(ds, {}).get(entry) if sn.up.get(ds) else None
            parts.append(current[i] if text is None else self._advert(sn, text)[i])
        return tuple(parts)

    def _advert(self, sn: SimGpuNode, text: str) -> tuple:
        cfg = yaml.safe_load(text) or {}
        sharing = cfg.get("sharing") or {}
        kind, spec = next(iter(sharing.items()), ("none", {}))
        replicas, rename = 1, bool(spec.get("renameByDefault")) if spec else False
        for r in (spec or {}).get("resources", []):
            if r.get("name") == "nvidia.com/gpu":
                replicas = int(r.get("replicas", 1))
        g = sn.gpus
        if sn.mig_applied != "all-disabled":
            item = self._mig_item(sn, sn.mig_applied) or {}
            ((prof, count),) = (item.get("mig-devices") or {"?": 0}).items()
            if self.mig_strategy == "single":
                alloc = {"nvidia.com/gpu": g * count}
                lab = {
                    "nvidia.com/gpu.product": f"{sn.product}-MIG-{prof}",
                    "nvidia.com/gpu.count": str(g * count),
                    "nvidia.com/gpu.replicas": "1",
                    "nvidia.com/gpu.sharing-strategy": "none",
                }
            else:
                alloc = {"nvidia.com/gpu": 0, f"nvidia.com/mig-{prof}": g * count}
                lab = {
                    "nvidia.com/gpu.product": sn.product,
                    "nvidia.com/gpu.count": str(g),
                    f"nvidia.com/mig-{prof}.count": str(g * count),
                    "nvidia.com/gpu.replicas": "1",
                    "nvidia.com/gpu.sharing-strategy": "none",
                }
        else:
            shared = rename and replicas > 1
            res = "nvidia.com/gpu.shared" if shared else "nvidia.com/gpu"
            alloc = {res: g * replicas}
            strategy = {"timeSlicing": "time-slicing", "mps": "mps"}.get(kind, "none") if replicas > 1 else "none"
            lab = {
                "nvidia.com/gpu.product": sn.product + ("-SHARED" if shared else ""),
                "nvidia.com/gpu.count": str(g),
                "nvidia.com/gpu.replicas": str(replicas),
                "nvidia.com/gpu.sharing-strategy": strategy,
            }
        return (tuple(sorted(alloc.items())), tuple(sorted(lab.items())))

    def _advertise(self, sn: SimGpuNode, desired: tuple) -> None:
        alloc, lab = dict(desired[0] or ()), dict(desired[1] or ())

        def edit(node):
            st = node.setdefault("status", {})
            for key in ("capacity", "allocatable"):
                cur = st.setdefault(key, {})
                for k in list(cur):
                    if k.startswith("nvidia.com/"):
                        cur[k] = "0"  # a resource once advertised stays at 0 (as kubelet does)
                cur.update({k: str(v) for k, v in alloc.items()})
            labels = node["metadata"].setdefault("labels", {})
            for k in [k for k in labels if re.fullmatch(r"nvidia\.com/mig-.*\.count", k)]:
                del labels[k]
            labels.update(lab)

        self.edit("nodes", "", sn.name, edit)
        sn.advertised, sn.pending = desired, None

    # ------------------------------------------------------------ API dispatch
    def handle(self, method: str, path: str, query: dict, headers, body: bytes) -> tuple[int, dict]:
        auth = headers.get("Authorization", "")
        user = self.users.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        if user is None:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        if path == "/version":
            return 200, {"major": "1", "minor": "33", "gitVersion": "v1.33.0-sim"}
        if path == "/apis/authentication.k8s.io/v1/tokenreviews" and method == "POST":
            self._authorize("create", "tokenreviews", None, None, user)
            spec = (json.loads(body or b"{}").get("spec")) or {}
            status = self.review(spec)
            doc = {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1", "metadata": {}}
            return 201, {**doc, "spec": {"audiences": spec.get("audiences") or []}, "status": status}
        groups = r"/api/v1|/apis/apps/v1|/apis/resource\.k8s\.io/v1|/apis/coordination\.k8s\.io/v1|/apis/sharebench\.io/v1alpha1"
        m = re.fullmatch(rf"({groups})(?:/namespaces/([^/]+))?/([a-z]+)(?:/([^/]+))?(?:/(status))?", path)
        if not m or m.group(3) not in KINDS or KINDS[m.group(3)][2] != m.group(1):
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        _, namespace, resource, name, sub = m.groups()
        kind, namespaced, _prefix = KINDS[resource]
        if namespaced is False and namespace:
            raise ApiError(404, "NotFound", f"{resource} are not namespaced")
        if sub and (not name or method not in ("GET", "PUT", "PATCH") or resource not in STATUS_SUBRESOURCE):
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({path})")
        verb = {
            "GET": "get" if name else "list",
            "PATCH": "patch",
            "PUT": "update",
            "POST": "create",
            "DELETE": "delete",
        }[method]
        self._authorize(verb, f"{resource}/{sub}" if sub else resource, namespace, name, user)
        ns = namespace or ""
        with self.lock:
            if method == "GET" and not name:
                return 200, self._list(resource, kind, namespace, query)
            if method == "POST":
                obj = json.loads(body or b"{}")
                obj.setdefault("metadata", {})
                if namespaced:
                    obj["metadata"]["namespace"] = ns
                obj.setdefault("kind", kind)
                obj.setdefault("apiVersion", API_VERSIONS[m.group(1)])
                if self.get(resource, ns, obj["metadata"].get("name", "")):
                    raise ApiError(
                        409,
                        "AlreadyExists",
                        f'{resource} "{obj["metadata"]["name"]}" already exists',
                        obj["metadata"]["name"],
                        resource,
                    )
                if resource == "pods":  # a new pod is Pending until the kubelet says more
                    obj["status"] = {"phase": "Pending"}
                elif resource == "sharingrequests":  # a status subresource: never set by a create
                    obj.pop("status", None)
                self.admit(resource, "CREATE", obj, None, user)
                return 201, self.put_object(obj)
            cur = self.get(resource, ns, name)
            if cur is None:
                raise ApiError(404, "NotFound", f'{resource} "{name}" not found', name, resource)
            if method == "GET":
                return 200, cur
            if method == "DELETE":
                self.admit(resource, "DELETE", None, cur, user)
                self.objects.pop((resource, ns if namespaced else "", name), None)
                if resource == "pods":
                    self._on_pod_deleted(cur)
                return 200, cur
            if method == "PUT":
                new = json.loads(body or b"{}")
                rv = (new.get("metadata") or {}).get("resourceVersion")
                if rv and rv != cur["metadata"]["resourceVersion"]:
                    raise ApiError(
                        409,
                        "Conflict",
                        f'Operation cannot be fulfilled on {resource} "{name}": '
                        "the object has been modified; please apply your changes to the latest "
                        "version and try again",
                        name,
                        resource,
                    )
            else:  # PATCH
                ctype = headers.get("Content-Type", "")
                patch = json.loads(body or b"null")
                if ctype.startswith("application/json-patch+json"):
                    new = json_patch(cur, patch)
                elif ctype.startswith(("application/strategic-merge-patch+json", "application/merge-patch+json")):
                    rv = ((patch or {}).get("metadata") or {}).get("resourceVersion")
                    if rv and rv != cur["metadata"]["resourceVersion"]:
                        raise ApiError(
                            409,
                            "Conflict",
                            f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified',
                            name,
                            resource,
                        )
                    new = merge_patch(cur, patch)
                else:
                    raise ApiError(
                        415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {ctype}"
                    )
            new.setdefault("metadata", {})["name"] = name
            if namespaced:
                new["metadata"]["namespace"] = ns
            new["kind"], new["apiVersion"] = cur["kind"], cur["apiVersion"]
            if sub:  # .../status: the status alone changes
                status = new.get("status")
                new = copy.deepcopy(cur)
                new["status"] = status
            elif resource in STATUS_SUBRESOURCE:
                if "status" in cur:
                    new["status"] = cur["status"]  # status is a subresource
                else:
                    new.pop("status", None)
            self.admit(resource, "UPDATE", new, cur, user, sub or "")
            return 200, self.put_object(new)

    def admit(
        self,
        resource: str,
        operation: str,
        new: dict | None,
        old: dict | None,
        user: str = SERVICE_ACCOUNT_USER,
        subresource: str = "",
    ) -> None:
        """The enforced admission policies, with the site's offer as params: 422 when one denies."""
        params = self.get("configmaps", names.SYSTEM_NAMESPACE, names.OFFER_CONFIGMAP)
        for vap in self.admission:
            denied = vap.denials(
                resource=resource,
                operation=operation,
                user=user,
                obj=new,
                old=old,
                params=params,
                subresource=subresource,
            )
            if denied:
                raise ApiError(
                    422,
                    "Invalid",
                    f"ValidatingAdmissionPolicy '{vap.name}' with binding '{vap.name}' denied request: {denied[0]}",
                    (old or new or {}).get("metadata", {}).get("name", ""),
                    resource,
                )

    def _authorize(
        self, verb: str, resource: str, namespace: str | None, name: str | None, user: str = SERVICE_ACCOUNT_USER
    ) -> None:
        for f in self.failures:
            if f[0] == verb and f[1] == resource and f[3] > 0:
                f[3] -= 1
                raise ApiError(f[2], "InternalError", f"injected failure on {verb} {resource}")
        if (verb, resource) in self.denied or (
            self.rbac is not None and not self.rbac.allows(user, verb, resource, namespace, name)
        ):
            scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            what = f'{resource} "{name}"' if name else resource
            raise ApiError(
                403,
                "Forbidden",
                f'{what} is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group "" {scope}',
                name or "",
                resource,
            )

    def _list(self, resource: str, kind: str, namespace: str | None, query: dict) -> dict:
        lsel = (query.get("labelSelector") or [None])[0]
        fsel = (query.get("fieldSelector") or [None])[0]
        items = []
        for (r, ns, _), o in sorted(self.objects.items()):
            if r != resource or (namespace and ns != namespace):
                continue
            if match_labels(lsel, o["metadata"].get("labels") or {}) and match_fields(fsel, o):
                items.append(copy.deepcopy(o))
        rv = str(next(self._rv))
        return {
            "kind": f"{kind}List",
            "apiVersion": items[0]["apiVersion"] if items else "v1",
            "metadata": {"resourceVersion": rv},
            "items": items,
        }


class _Handler(BaseHTTPRequestHandler):
    cluster: SimCluster
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle + delayed ACK add 40 ms a request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args) -> None:  # quiet
        pass

    def _serve(self, method: str) -> None:
        url = urlparse(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.cluster.requests.append((method, self.path, self.headers.get("Content-Type", "")))
        self.cluster.thawed.wait()
        try:
            code, obj = self.cluster.handle(method, url.path, parse_qs(url.query), self.headers, body)
        except ApiError as exc:
            code, obj = exc.code, exc.status()
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        try:
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a read timeout against a frozen server)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_PATCH(self) -> None:
        self._serve("PATCH")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")
