"""The node agent (issue 37): the only holder of the node account, applying the sharing requests that
pipeline steps file in their run namespace. No node credential exists where users submit.

A request is a ConfigMap labelled :data:`~sharebench.manifests.names.REQUEST_LABEL` in a run namespace
the site's offer names. Its data, every key a string, only these keys (:data:`REQUEST_KEYS`):

=============  ===========================================================================
``action``     ``apply`` (put the node in ``mode``) or ``restore`` (put it back, free it)
``node``       the node; one the site offers
``mode``       (apply) the sharing mode, as ``sharebench node apply`` takes it
``run``        the run (its KFP run id): the Lease's holder is ``<namespace>/<run>``, so a run
               of another namespace can never pass for it
``image``      the image the run's replicas use; in the site's allow-list
``gpu-model``  (optional) the GPU model, when the node's product label is not in sharebench's table
=============  ===========================================================================

The agent answers in the one key it writes, ``status`` (JSON: ``phase`` — ``Applied``, ``Restored``,
``Refused`` or ``Failed`` —, ``message``, ``result``, and ``observed``, the digest of the request it
answered; a request edited after its answer is a new request). Before it changes anything it checks
the request against the site's offer (:data:`~sharebench.manifests.names.OFFER_CONFIGMAP` in
sharebench's own namespace, which submitters cannot write): the node is offered, the image and the
images of the run's pods (``pipeline/runid=<run>``) are allowed, and the run holds no other node's Lease
(one node per run at a time); then it applies the request through :func:`~sharebench.node.reconfigure`
or :func:`~sharebench.node.restore` with the run as the Lease's holder, which refuses a node another run
holds. Force is never a request's to ask for.

A pipeline step files a request (:func:`file_request`) and waits for the answer (:func:`wait_request`)
with its own pod's account, which needs only the Role
:data:`~sharebench.manifests.names.REQUESTER_ROLE` in its namespace.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s

from sharebench.errors import UserError
from sharebench.manifests.names import (
    OFFER_CONFIGMAP,
    OFFER_IMAGE_ALLOW_KEY,
    OFFER_NODE_PREFIX,
    OFFER_RUN_NAMESPACES_KEY,
    PART_OF_LABEL,
    REQUEST_LABEL,
    REQUEST_STATUS_KEY,
    SYSTEM_NAMESPACE,
)
from sharebench.node.client import Conflict, NodeError, NodeTimeout, NotFound, Session, check_times
from sharebench.node.images import allowed_prefixes, image_allowed
from sharebench.node.lease import lease_name
from sharebench.node.reconfiguration import ReconfigureOptions, reconfigure, restore

REQUEST_KEYS = ("action", "node", "mode", "run", "image", "gpu-model")
ACTIONS = ("apply", "restore")
DONE = {"apply": "Applied", "restore": "Restored"}
TERMINAL = ("Applied", "Restored", "Refused", "Failed")
RUN_LABEL = "pipeline/runid"  # KFP's label on every pod of a run
DEFAULT_IMAGE = "ghcr.io/sharebench/sharebench"  # when the offer names no allow-list (manifests.agent)
MAX_FIELD = 253
Progress = Callable[[str], None]


class RequestRefused(UserError):
    """A request the agent refuses before any change (its message is one line)."""


@dataclass(frozen=True)
class Offer:
    """The site's offer: the nodes sharebench may reconfigure, the image prefixes, the run namespaces."""

    nodes: frozenset[str]
    image_prefixes: tuple[str, ...]
    run_namespaces: tuple[str, ...]

    @classmethod
    def from_data(cls, data: dict[str, str]) -> Offer:
        nodes = frozenset(k[len(OFFER_NODE_PREFIX) :] for k in data if k.startswith(OFFER_NODE_PREFIX))
        spaces = tuple(n.strip() for n in data.get(OFFER_RUN_NAMESPACES_KEY, "").split(",") if n.strip())
        return cls(nodes, allowed_prefixes(data.get(OFFER_IMAGE_ALLOW_KEY), DEFAULT_IMAGE), spaces)


def read_offer(sess: Session, namespace: str = SYSTEM_NAMESPACE) -> Offer:
    """The offer ConfigMap; a missing one is a one-line error naming it."""
    try:
        cm = sess.call("get", "configmaps", sess.core.read_namespaced_config_map, OFFER_CONFIGMAP, namespace)
    except NotFound:
        raise sess.error(
            f"no offer: ConfigMap {namespace}/{OFFER_CONFIGMAP} is missing; apply manifests/agent/ "
            "(rendered with the nodes the site offers)"
        ) from None
    return Offer.from_data(dict(cm.data or {}))


@dataclass(frozen=True)
class Request:
    namespace: str
    name: str
    action: str
    node: str
    run: str
    image: str
    mode: str | None = None
    gpu_model: str | None = None

    @property
    def holder(self) -> str:
        """The Lease's holder: the run, in its namespace."""
        return f"{self.namespace}/{self.run}"

    def describe(self) -> str:
        what = f"{self.action} {self.mode}" if self.mode else self.action
        return f"request {self.namespace}/{self.name} ({what} on {self.node} for run {self.run})"


def request_fields(data: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in data.items() if k != REQUEST_STATUS_KEY}


def digest(data: dict[str, str]) -> str:
    """What identifies a request's content (its status aside)."""
    return hashlib.sha256(json.dumps(request_fields(data), sort_keys=True).encode()).hexdigest()[:16]


def parse_request(namespace: str, name: str, data: dict[str, str]) -> Request:
    """The request in a ConfigMap's ``data``; :class:`RequestRefused` (one line) for a bad one."""
    fields = request_fields(data)
    where = f"request {namespace}/{name}"
    unknown = sorted(set(fields) - set(REQUEST_KEYS))
    if unknown:
        raise RequestRefused(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(REQUEST_KEYS)}")
    for key, value in fields.items():
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_FIELD or "\n" in value:
            raise RequestRefused(f"{where}: {key} must be one line of 1..{MAX_FIELD} characters")
    action = fields.get("action")
    if action not in ACTIONS:
        raise RequestRefused(f"{where}: action {action!r} is not one of {', '.join(ACTIONS)}")
    need = ["node", "run", "image", *(["mode"] if action == "apply" else [])]
    missing = [k for k in need if k not in fields]
    if missing:
        raise RequestRefused(f"{where}: {action} needs {', '.join(missing)}")
    if action == "restore" and "mode" in fields:
        raise RequestRefused(f"{where}: restore takes no mode")
    return Request(
        namespace,
        name,
        action,
        fields["node"].strip(),
        fields["run"].strip(),
        fields["image"].strip(),
        fields.get("mode"),
        fields.get("gpu-model"),
    )


def check_request(sess: Session, req: Request, offer: Offer) -> None:
    """The request within the offer: node offered, images allowed, one node per run; RequestRefused."""
    if req.namespace not in offer.run_namespaces:
        raise RequestRefused(f"{req.describe()}: namespace {req.namespace} is not one the site serves")
    if req.node not in offer.nodes:
        offered = ", ".join(sorted(offer.nodes)) or "none"
        raise RequestRefused(f"{req.describe()}: node {req.node} is not offered by the site (offered: {offered})")
    prefixes = ", ".join(offer.image_prefixes)
    if not image_allowed(req.image, offer.image_prefixes):
        raise RequestRefused(f"{req.describe()}: image {req.image!r} is not allowed (allowed prefixes: {prefixes})")
    pods = sess.call(
        "list",
        "pods",
        sess.core.list_namespaced_pod,
        req.namespace,
        label_selector=f"{RUN_LABEL}={req.run}",
        namespace=req.namespace,
    ).items
    for pod in pods:
        spec = pod.spec
        for c in [*(spec.containers or []), *(spec.init_containers or [])]:
            if not image_allowed(c.image or "", offer.image_prefixes):
                raise RequestRefused(
                    f"{req.describe()}: pod {pod.metadata.name} of the run runs image {c.image!r}, not allowed "
                    f"(allowed prefixes: {prefixes})"
                )
    check_one_node(sess, req)


def check_one_node(sess: Session, req: Request) -> None:
    """A run holds at most one node's Lease: a request for another node is refused while it holds one."""
    leases = sess.call(
        "list",
        "leases",
        k8s.CoordinationV1Api(sess.api_client).list_namespaced_lease,
        SYSTEM_NAMESPACE,
        label_selector=f"{PART_OF_LABEL[0]}={PART_OF_LABEL[1]}",
        namespace=SYSTEM_NAMESPACE,
    ).items
    mine = lease_name(req.node)
    held = [x.metadata.name for x in leases if x.spec.holder_identity == req.holder and x.metadata.name != mine]
    if held:
        raise RequestRefused(
            f"{req.describe()}: the run already holds {SYSTEM_NAMESPACE}/{held[0]} (one node per run at a time); "
            "restore that node first"
        )


@dataclass(frozen=True)
class AgentOptions:
    timeout_s: float = 600.0  # per request: the reconfiguration's own deadline
    poll_s: float | None = None  # between two looks at a node (None: 2 s)
    namespace: str = SYSTEM_NAMESPACE  # where the offer and the Leases are


def answer(api_client: Any, req: Request, offer: Offer, options: AgentOptions, progress: Progress | None) -> dict:
    """Check and apply one request; its status (never raises for a refusal or a failure of the node)."""
    sess = Session(req.node, req.action, api_client, progress, options.timeout_s, options.poll_s)
    try:
        check_request(sess, req, offer)
    except RequestRefused as exc:
        return {"phase": "Refused", "message": str(exc)}
    except NodeError as exc:
        return {"phase": "Failed", "message": f"{req.describe()}: {exc}"}
    try:
        if req.action == "apply":
            opts = ReconfigureOptions(
                gpu_model=req.gpu_model, timeout_s=options.timeout_s, poll_s=options.poll_s, holder=req.holder
            )
            result = reconfigure(req.node, str(req.mode), opts, api_client=api_client, progress=progress)
        else:
            result = restore(
                req.node, timeout_s=options.timeout_s, poll_s=options.poll_s, api_client=api_client, holder=req.holder
            )
    except UserError as exc:  # NodeError included: one line naming node, mode and state
        return {"phase": "Failed", "message": f"{req.describe()}: {exc}"}
    result.pop("previous", None)
    return {"phase": DONE[req.action], "message": f"{req.describe()}: done", "result": result}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_status(sess: Session, namespace: str, name: str, observed: str, status: dict) -> None:
    """Write ``status`` into the request's one status key (an update with its resourceVersion)."""
    body = json.dumps({**status, "observed": observed, "answered_at": _now()}, sort_keys=True, default=str)
    for _ in range(5):
        try:
            cm = sess.call("get", "configmaps", sess.core.read_namespaced_config_map, name, namespace)
        except NotFound:
            return  # withdrawn: nobody waits for it
        data = dict(cm.data or {})
        if digest(data) != observed:
            return  # edited meanwhile: the edit is a new request, answered next
        cm.data = {**data, REQUEST_STATUS_KEY: body}
        try:
            sess.call(
                "update",
                "configmaps",
                sess.core.replace_namespaced_config_map,
                name,
                namespace,
                cm,
                namespace=namespace,
            )
            return
        except Conflict:
            continue


def status_of(data: dict[str, str]) -> dict | None:
    """The answer in a request's data, when it answers this very request; else None."""
    try:
        status = json.loads(data.get(REQUEST_STATUS_KEY) or "null")
    except json.JSONDecodeError:
        return None
    if not isinstance(status, dict) or status.get("observed") != digest(data) or status.get("phase") not in TERMINAL:
        return None
    return status


def serve_once(api_client: Any, options: AgentOptions = AgentOptions(), progress: Progress | None = None) -> int:
    """Answer every unanswered request in the offer's run namespaces, oldest first; how many."""
    sess = Session("-", "agent", api_client, progress, 60.0, None)
    offer = read_offer(sess, options.namespace)
    selector = f"{REQUEST_LABEL[0]}={REQUEST_LABEL[1]}"
    todo = []
    for ns in offer.run_namespaces:
        items = sess.call(
            "list", "configmaps", sess.core.list_namespaced_config_map, ns, label_selector=selector, namespace=ns
        ).items
        todo += [cm for cm in items if status_of(dict(cm.data or {})) is None]
    todo.sort(key=lambda cm: (str(cm.metadata.creation_timestamp or ""), cm.metadata.namespace, cm.metadata.name))
    for cm in todo:
        data = dict(cm.data or {})
        ns, name = cm.metadata.namespace, cm.metadata.name
        try:
            req = parse_request(ns, name, data)
        except RequestRefused as exc:
            status = {"phase": "Refused", "message": str(exc)}
        else:
            status = answer(api_client, req, offer, options, progress)
        if progress is not None:
            progress(f"agent: {status['phase']}: {status['message']}")
        write_status(
            Session(str(data.get("node", "-")), "agent", api_client, None, 60.0, None), ns, name, digest(data), status
        )
    return len(todo)


def serve(
    api_client: Any,
    options: AgentOptions = AgentOptions(),
    *,
    every_s: float = 2.0,
    stop: threading.Event | None = None,
    progress: Progress | None = None,
) -> None:
    """Answer requests until ``stop`` is set (the Deployment's process: until it is stopped). An API
    failure is reported and retried at the next round; the agent keeps serving."""
    stop = stop or threading.Event()
    while not stop.is_set():
        try:
            serve_once(api_client, options, progress)
        except UserError as exc:
            if progress is not None:
                progress(f"agent: {exc}")
        stop.wait(every_s)


# ---------------------------------------------------------------- the step's side
def file_request(api_client: Any, req: Request) -> str:
    """File ``req`` in its namespace (the step's own run namespace) for the agent; returns the name it
    was filed under (``req.name`` when given, else a new one). A bad request is refused before."""
    data = {"action": req.action, "node": req.node, "run": req.run, "image": req.image}
    if req.mode is not None:
        data["mode"] = req.mode
    if req.gpu_model:
        data["gpu-model"] = req.gpu_model
    name = req.name or f"sharebench-{req.action}-{uuid.uuid4().hex[:12]}"
    parse_request(req.namespace, name, data)
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": req.namespace,
            "labels": {REQUEST_LABEL[0]: REQUEST_LABEL[1], PART_OF_LABEL[0]: PART_OF_LABEL[1]},
        },
        "data": data,
    }
    sess = Session(req.node, req.action, api_client, None, 60.0, None)
    sess.state = f"filing request {req.namespace}/{name}"
    sess.call(
        "create", "configmaps", sess.core.create_namespaced_config_map, req.namespace, body, namespace=req.namespace
    )
    return name


def wait_request(
    api_client: Any,
    namespace: str,
    name: str,
    *,
    timeout_s: float = 900.0,
    poll_s: float = 2.0,
) -> dict:
    """Wait for the agent's answer to request ``namespace/name``: its result when applied or restored;
    NodeError (one line, the agent's message) when refused or failed; NodeTimeout when no answer comes."""
    check_times(timeout_s, poll_s)
    sess = Session("-", "request", api_client, None, timeout_s, poll_s)
    sess.state = f"waiting for the node agent's answer to {namespace}/{name}"
    while True:
        try:
            cm = sess.call("get", "configmaps", sess.core.read_namespaced_config_map, name, namespace)
        except NotFound:
            raise sess.error(f"request {namespace}/{name} is gone (deleted before the agent answered)") from None
        status = status_of(dict(cm.data or {}))
        if status is not None:
            if status["phase"] in DONE.values():
                return dict(status.get("result") or {})
            raise NodeError(cm.data.get("node", "-"), cm.data.get("action", "-"), status["phase"], status["message"])
        if sess.remaining_s() <= 0:
            raise sess.error(
                f"no answer from the node agent after {timeout_s:g} s; is it running "
                f"(kubectl -n {SYSTEM_NAMESPACE} get deployment sharebench-node-agent)?",
                NodeTimeout,
            )
        time.sleep(min(sess.poll_s, max(0.0, sess.remaining_s())))
