"""The node agent (issue 37, issue 46): the only holder of the node account, applying the sharing
requests that pipeline steps file in their run namespace. No node credential exists where users submit,
and the agent believes nothing a request says about who filed it.

A request is a ``SharingRequest`` (``sharebench.io/v1alpha1``, :func:`sharebench.manifests.agent.request_crd`)
in a run namespace the site's offer names, named ``sharebench-<attempt>``. Its ``spec`` (every field a
string, only these, :data:`REQUEST_KEYS`; immutable once filed):

=============  ===========================================================================
``action``     ``apply`` (put the node in ``mode``) or ``restore`` (put it back, free it)
``node``       the node; one the site offers (a DNS-1123 subdomain)
``mode``       (apply) the sharing mode, as ``sharebench node apply`` takes it
``image``      the image the run's replicas use; in the site's allow-list (an OCI reference)
``gpuModel``   (optional) the GPU model, when the node's product label is not in sharebench's table
``run``        (optional) the run the step believes it is in; refused when its pod is of another run
``attempt``    this attempt's nonce (32 hex digits, :func:`new_attempt`); the request's name says it too
``token``      the filing pod's projected service-account token for the agent's audience
=============  ===========================================================================

**Who asks** (:func:`prove`). The agent reviews the token with the API server's TokenReview
(``authentication.k8s.io/v1``, audience :data:`~sharebench.manifests.names.AGENT_AUDIENCE`): it must be
a service account of the request's namespace and bound to a pod (the review's ``extra`` names
``authentication.kubernetes.io/pod-name`` and ``pod-uid``; a token is void once its pod is gone, and
expires). The pod must still exist with that uid and be running (a run that has ended files nothing),
own the request (``ownerReferences``), carry the run label KFP gives every pod of a run
(``pipeline/runid``; only the workflow controller may set it, the run-pods admission policy says) and the
node-step label naming the action it may request. The run is that label's value: the Lease's holder is
``<namespace>/<run>``, the image check lists that run's pods, and the one-node-per-run rule counts that
run's Leases, whatever ``spec.run`` says (a ``spec.run`` that differs is refused).

**Once** (:func:`check_replay`). A pod's request for an action on a node is answered once: another
request of the same pod, action and node is a replay, refused. A request copied under a new name is a
new attempt whose name must be ``sharebench-<attempt>``; refiled under the same one, the API server
refuses it (the name exists).

**The answer** is the request's ``status`` subresource (``phase`` — ``Applied``, ``Restored``,
``Refused`` or ``Failed`` —, ``message``, ``result``, the ``attempt``, ``pod``, ``podUID`` and ``run`` it
answered for). A create or update never sets a status subresource, and RBAC lets only the agent write
it: what :func:`wait_request` reads is the agent's. Before it changes anything the agent checks the
request against the site's offer (:data:`~sharebench.manifests.names.OFFER_CONFIGMAP` in sharebench's
own namespace, which submitters cannot write): the node is offered, the image and the images of the
proven run's pods are allowed, and the run holds no other node's Lease; then it applies the request
through :func:`~sharebench.node.reconfigure` or :func:`~sharebench.node.restore` with the run as the
Lease's holder, which refuses a node another run holds. Force is never a request's to ask for.

A pipeline step files a request (:func:`file_request`, with its pod's :class:`StepIdentity`) and waits
for the answer (:func:`wait_request`) with its own pod's account, which needs only the Role
:data:`~sharebench.manifests.names.REQUESTER_ROLE` in its namespace (create, and get by name).
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from sharebench.errors import UserError
from sharebench.manifests.agent import TOKEN_FILE
from sharebench.manifests.names import (
    AGENT_AUDIENCE,
    AGENT_TOKEN_DIR,
    AGENT_TOKEN_PODDEFAULT,
    NODE_STEP_LABEL,
    OFFER_CONFIGMAP,
    OFFER_IMAGE_ALLOW_KEY,
    OFFER_NODE_PREFIX,
    OFFER_RUN_NAMESPACES_KEY,
    PART_OF_LABEL,
    POD_NAME_ENV,
    POD_UID_ENV,
    REQUEST_GROUP,
    REQUEST_KIND,
    REQUEST_PLURAL,
    REQUEST_VERSION,
    RUN_LABEL,
    SYSTEM_NAMESPACE,
)
from sharebench.node.client import NodeError, NodeTimeout, NotFound, Session, check_times
from sharebench.node.images import allowed_prefixes, image_allowed, reference_problem
from sharebench.node.lease import lease_name
from sharebench.node.reconfiguration import ReconfigureOptions, reconfigure, restore
from sharebench.placement import check_label_value, check_node_name

REQUEST_KEYS = ("action", "node", "mode", "run", "image", "gpuModel", "attempt", "token")
ACTIONS = ("apply", "restore")
DONE = {"apply": "Applied", "restore": "Restored"}
TERMINAL = ("Applied", "Restored", "Refused", "Failed")
DEFAULT_IMAGE = "ghcr.io/sharebench/sharebench"  # when the offer names no allow-list (manifests.agent)
MAX_FIELD = 253
MAX_TOKEN = 16384
ATTEMPT = re.compile(r"[0-9a-f]{32}")
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"  # TokenReview's user.extra of a pod-bound token
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
TOKEN_FILE_ENV = "SHAREBENCH_AGENT_TOKEN_FILE"  # where the step reads its token (default: the PodDefault's mount)
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


def new_attempt() -> str:
    """A fresh attempt id: 128 random bits in hex (a request's nonce and its name)."""
    return uuid.uuid4().hex


def request_name(attempt: str) -> str:
    """The one name a request of ``attempt`` may have: a second request of one attempt cannot be filed."""
    return f"sharebench-{attempt}"


@dataclass(frozen=True)
class Request:
    namespace: str
    name: str
    action: str
    node: str
    image: str
    mode: str | None = None
    gpu_model: str | None = None
    run: str = ""  # the run the step names; the agent uses its pod's
    attempt: str = ""
    token: str = field(default="", repr=False)  # never in a message or a log
    owners: tuple[str, ...] = ()  # the uids of the Pods the request names as owners

    def describe(self) -> str:
        what = f"{self.action} {self.mode}" if self.mode else self.action
        return f"request {self.namespace}/{self.name} ({what} on {self.node})"

    def spec(self) -> dict[str, str]:
        """The request's ``spec`` as filed."""
        spec = {"action": self.action, "node": self.node, "image": self.image, "attempt": self.attempt}
        spec.update({k: v for k, v in (("mode", self.mode), ("gpuModel", self.gpu_model), ("run", self.run)) if v})
        return {**spec, "token": self.token}


def _refuse(where: str, what: str) -> RequestRefused:
    return RequestRefused(f"{where}: {what}")


def check_fields(where: str, spec: dict[str, Any]) -> dict[str, str]:
    """The spec's fields, each a one-line string of the right length and grammar; RequestRefused."""
    unknown = sorted(set(spec) - set(REQUEST_KEYS))
    if unknown:
        raise _refuse(where, f"unknown key(s) {', '.join(unknown)}; allowed: {', '.join(REQUEST_KEYS)}")
    for key, value in spec.items():
        limit = MAX_TOKEN if key == "token" else MAX_FIELD
        if not isinstance(value, str) or not value.strip() or len(value) > limit or not value.isprintable():
            raise _refuse(where, f"{key} must be one line of 1..{limit} printable characters")
    action = spec.get("action")
    if action not in ACTIONS:
        raise _refuse(where, f"action {action!r} is not one of {', '.join(ACTIONS)}")
    missing = [
        k for k in ("node", "image", "attempt", "token", *(["mode"] if action == "apply" else [])) if k not in spec
    ]
    if missing:
        raise _refuse(where, f"{action} needs {', '.join(missing)}")
    if action == "restore" and "mode" in spec:
        raise _refuse(where, "restore takes no mode")
    check_grammars(where, spec)
    return spec


def check_grammars(where: str, spec: dict[str, str]) -> None:
    """The node a DNS-1123 subdomain, the run a label value, the image an OCI reference, the attempt 32
    hex digits; RequestRefused naming the value."""
    try:
        check_node_name(spec["node"])
        if "run" in spec:
            check_label_value("run", spec["run"])
    except UserError as exc:
        raise _refuse(where, str(exc)) from None
    if reference_problem(spec["image"]):
        raise _refuse(where, f"image {spec['image']!r} is not an image reference ({reference_problem(spec['image'])})")
    if not ATTEMPT.fullmatch(spec["attempt"]):
        raise _refuse(where, f"attempt {spec['attempt']!r} is not 32 lowercase hex digits")


def parse_request(namespace: str, name: str, spec: Any, owners: tuple[str, ...] = ()) -> Request:
    """The request of a SharingRequest's ``spec``; :class:`RequestRefused` (one line) for a bad one."""
    where = f"request {namespace}/{name}"
    if not isinstance(spec, dict):
        raise _refuse(where, "its spec is not an object")
    fields = check_fields(where, spec)
    if name != request_name(fields["attempt"]):
        raise _refuse(where, f"its name must be {request_name(fields['attempt'])} (one request per attempt)")
    return Request(
        namespace,
        name,
        fields["action"],
        fields["node"],
        fields["image"],
        fields.get("mode"),
        fields.get("gpuModel"),
        fields.get("run", ""),
        fields["attempt"],
        fields["token"],
        owners,
    )


# ---------------------------------------------------------------- who asks
@dataclass(frozen=True)
class Proof:
    """Who filed a request, as the API server says: the pod its token is bound to and that pod's run."""

    user: str
    pod: str
    pod_uid: str
    run: str
    step: str  # the action the pod may request (its node-step label)

    def holder(self, namespace: str) -> str:
        """The Lease's holder: the proven run, in its namespace."""
        return f"{namespace}/{self.run}"


def review(sess: Session, req: Request) -> tuple[str, str, str]:
    """TokenReview of the request's token for the agent's audience: (user, pod name, pod uid); refused
    when the token is not valid, not for the agent, not a service account's of the request's namespace,
    or bound to no pod."""
    body = k8s.V1TokenReview(spec=k8s.V1TokenReviewSpec(token=req.token, audiences=[AGENT_AUDIENCE]))
    api = k8s.AuthenticationV1Api(sess.api_client)
    status = sess.call("create", "tokenreviews", api.create_token_review, body).status
    if status is None or not status.authenticated:
        why = " ".join(str((status and status.error) or "not authenticated").split())[:200]
        raise _refuse(req.describe(), f"its token is not valid (TokenReview: {why})")
    if AGENT_AUDIENCE not in (status.audiences or []):
        raise _refuse(req.describe(), f"its token is not for the node agent (audience {AGENT_AUDIENCE})")
    user = status.user.username or ""
    if not user.startswith(f"system:serviceaccount:{req.namespace}:"):
        raise _refuse(req.describe(), f"its token is {user}'s, not a service account's of {req.namespace}")
    extra = status.user.extra or {}
    pod, uid = ((extra.get(k) or [""])[0] for k in (POD_NAME_EXTRA, POD_UID_EXTRA))
    if not pod or not uid:
        raise _refuse(req.describe(), "its token is bound to no pod (a node step's projected token is needed)")
    return user, pod, uid


def prove(sess: Session, req: Request) -> Proof:
    """Who filed ``req``: its token reviewed, its pod found running and owning it, the pod's run and step."""
    user, name, uid = review(sess, req)
    pods = sess.call(
        "list",
        "pods",
        sess.core.list_namespaced_pod,
        req.namespace,
        field_selector=f"metadata.name={name}",
        namespace=req.namespace,
    ).items
    pod = next((p for p in pods if p.metadata.uid == uid), None)
    where = f"{req.describe()}: its pod {name}"
    if pod is None:
        raise RequestRefused(f"{where} is gone: the request's run has ended")
    phase = (pod.status.phase if pod.status else None) or "Unknown"
    if phase != "Running":
        raise RequestRefused(f"{where} is {phase}, not running: only a running step files a request")
    if uid not in req.owners:
        raise RequestRefused(f"{where} does not own the request (ownerReferences): file it with file_request")
    labels = pod.metadata.labels or {}
    try:
        run = check_label_value(f"its pod's {RUN_LABEL}", labels.get(RUN_LABEL) or "")
    except UserError as exc:
        raise RequestRefused(f"{where}: {exc}") from None
    if not run:
        raise RequestRefused(f"{where} carries no {RUN_LABEL} label: not a pipeline run's pod")
    step = labels.get(NODE_STEP_LABEL) or ""
    if step != req.action:
        raise RequestRefused(f"{where} may request {step or 'nothing'} ({NODE_STEP_LABEL}), not {req.action}")
    if req.run and req.run != run:
        raise RequestRefused(f"{req.describe()}: it names run {req.run}, but its pod {name} is of run {run}")
    return Proof(user, name, uid, run, step)


def check_replay(req: Request, proof: Proof, answered: list[dict]) -> None:
    """A pod's request for an action on a node is answered once: refused when ``answered`` (the namespace's
    answered requests) holds one of the same pod, action and node."""
    for obj in answered:
        status, spec = obj.get("status") or {}, obj.get("spec") or {}
        if (status.get("podUID"), spec.get("action"), spec.get("node")) == (proof.pod_uid, req.action, req.node):
            raise RequestRefused(
                f"{req.describe()}: a replay: pod {proof.pod} already had its {req.action} on {req.node} answered "
                f"(request {obj['metadata']['name']}); a step files one request a node"
            )


# ---------------------------------------------------------------- what it may do
def check_request(sess: Session, req: Request, proof: Proof, offer: Offer) -> None:
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
        label_selector=f"{RUN_LABEL}={proof.run}",  # a label value (prove checked it): no selector of the requester's
        namespace=req.namespace,
    ).items
    for pod in pods:
        spec = pod.spec
        for c in [*(spec.containers or []), *(spec.init_containers or [])]:
            if not image_allowed(c.image or "", offer.image_prefixes):
                raise RequestRefused(
                    f"{req.describe()}: pod {pod.metadata.name} of run {proof.run} runs image {c.image!r}, not "
                    f"allowed (allowed prefixes: {prefixes})"
                )
    check_one_node(sess, req, proof.holder(req.namespace))


def check_one_node(sess: Session, req: Request, holder: str) -> None:
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
    held = [x.metadata.name for x in leases if x.spec.holder_identity == holder and x.metadata.name != mine]
    if held:
        raise RequestRefused(
            f"{req.describe()}: run {holder} already holds {SYSTEM_NAMESPACE}/{held[0]} (one node per run at a "
            "time); restore that node first"
        )


@dataclass(frozen=True)
class AgentOptions:
    timeout_s: float = 600.0  # per request: the reconfiguration's own deadline
    poll_s: float | None = None  # between two looks at a node (None: 2 s)
    namespace: str = SYSTEM_NAMESPACE  # where the offer and the Leases are


def apply_request(api_client: Any, req: Request, holder: str, options: AgentOptions, progress: Progress | None) -> dict:
    """Apply a checked request for ``holder``; its status (a failure of the node is a Failed one)."""
    try:
        if req.action == "apply":
            opts = ReconfigureOptions(
                gpu_model=req.gpu_model, timeout_s=options.timeout_s, poll_s=options.poll_s, holder=holder
            )
            result = reconfigure(req.node, str(req.mode), opts, api_client=api_client, progress=progress)
        else:
            result = restore(
                req.node, timeout_s=options.timeout_s, poll_s=options.poll_s, api_client=api_client, holder=holder
            )
    except UserError as exc:  # NodeError included: one line naming node, mode and state
        return {"phase": "Failed", "message": f"{req.describe()}: {exc}"}
    result.pop("previous", None)
    return {"phase": DONE[req.action], "message": f"{req.describe()}: done for run {holder}", "result": result}


@dataclass
class Round:
    """One look at a run namespace's requests: the offer, the agent's options, its progress, and the
    requests already answered there (a replay is refused against them)."""

    offer: Offer
    options: AgentOptions
    progress: Progress | None
    answered: list[dict]


def answer(api_client: Any, req: Request, rnd: Round) -> dict:
    """Prove, check and apply one request; its status (never raises for a refusal or a node's failure)."""
    options = rnd.options
    sess = Session(req.node, req.action, api_client, rnd.progress, options.timeout_s, options.poll_s)
    proof = None
    try:
        proof = prove(sess, req)
        check_replay(req, proof, rnd.answered)
        check_request(sess, req, proof, rnd.offer)
    except RequestRefused as exc:
        return {"phase": "Refused", "message": str(exc), **_who(proof)}
    except NodeError as exc:
        return {"phase": "Failed", "message": f"{req.describe()}: {exc}", **_who(proof)}
    return {**apply_request(api_client, req, proof.holder(req.namespace), options, rnd.progress), **_who(proof)}


def _who(proof: Proof | None) -> dict[str, str]:
    return {} if proof is None else {"pod": proof.pod, "podUID": proof.pod_uid, "run": proof.run}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _objects(sess: Session) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(sess.api_client)


def write_status(sess: Session, namespace: str, name: str, attempt: str, status: dict) -> None:
    """Write the answer into the request's status subresource (nothing when the request is gone)."""
    body = {"status": {**status, "attempt": attempt, "answeredAt": _now()}}
    api = _objects(sess)
    try:
        sess.call(
            "patch",
            f"{REQUEST_PLURAL}/status",
            api.patch_namespaced_custom_object_status,
            REQUEST_GROUP,
            REQUEST_VERSION,
            namespace,
            REQUEST_PLURAL,
            name,
            body,
            namespace=namespace,
        )
    except NotFound:
        return  # withdrawn with its pod: nobody waits for it


def status_of(obj: dict) -> dict | None:
    """The agent's answer in a request object, when it has one; else None."""
    status = obj.get("status")
    if not isinstance(status, dict) or status.get("phase") not in TERMINAL:
        return None
    return status


def list_requests(sess: Session, namespace: str) -> list[dict]:
    """Every request of ``namespace``, oldest first."""
    api = _objects(sess)
    items = sess.call(
        "list",
        REQUEST_PLURAL,
        api.list_namespaced_custom_object,
        REQUEST_GROUP,
        REQUEST_VERSION,
        namespace,
        REQUEST_PLURAL,
        namespace=namespace,
    ).get("items", [])
    return sorted(items, key=lambda o: (str(o["metadata"].get("creationTimestamp") or ""), o["metadata"]["name"]))


def owners_of(obj: dict) -> tuple[str, ...]:
    """The uids of the Pods a request names as its owners."""
    refs = obj.get("metadata", {}).get("ownerReferences") or []
    return tuple(str(r.get("uid")) for r in refs if r.get("kind") == "Pod" and r.get("apiVersion") == "v1")


def serve_once(api_client: Any, options: AgentOptions = AgentOptions(), progress: Progress | None = None) -> int:
    """Answer every unanswered request in the offer's run namespaces, oldest first; how many."""
    sess = Session("-", "agent", api_client, progress, 60.0, None)
    offer = read_offer(sess, options.namespace)
    count = 0
    for ns in offer.run_namespaces:
        items = list_requests(sess, ns)
        rnd = Round(offer, options, progress, [o for o in items if status_of(o) is not None])
        for obj in [o for o in items if status_of(o) is None]:
            name = obj["metadata"]["name"]
            try:
                req = parse_request(ns, name, obj.get("spec"), owners_of(obj))
            except RequestRefused as exc:
                status, attempt = {"phase": "Refused", "message": str(exc)}, ""
            else:
                status, attempt = answer(api_client, req, rnd), req.attempt
            if progress is not None:
                progress(f"agent: {status['phase']}: {status['message']}")
            write_status(sess, ns, name, attempt, status)
            rnd.answered.append({**obj, "status": status})
            count += 1
    return count


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
@dataclass(frozen=True)
class StepIdentity:
    """What a node step proves itself with: its pod (name, uid: the request's owner) and its projected
    token for the agent (the PodDefault's mount)."""

    pod: str
    pod_uid: str
    token: str = field(repr=False)

    @classmethod
    def from_environment(cls) -> StepIdentity:
        """This pod's: the downward API's name and uid, the token file; one line when any is missing."""
        path = Path(os.environ.get(TOKEN_FILE_ENV) or Path(AGENT_TOKEN_DIR) / TOKEN_FILE)
        pod, uid = os.environ.get(POD_NAME_ENV, ""), os.environ.get(POD_UID_ENV, "")
        try:
            token = path.read_text().strip()
        except OSError:
            token = ""
        if not (token and pod and uid):
            raise UserError(
                f"node_access agent: this step has no agent token at {path} or no {POD_NAME_ENV}/{POD_UID_ENV}: the "
                f"PodDefault {AGENT_TOKEN_PODDEFAULT} (manifests/agent/, Kubeflow's admission webhook) mounts it in "
                f"pods labelled {NODE_STEP_LABEL}, as the pipeline's node steps are"
            )
        return cls(pod, uid, token)


def file_request(api_client: Any, req: Request, identity: StepIdentity) -> Request:
    """File ``req`` (its namespace: the step's own) for the agent, as the pod ``identity`` proves, under a
    new attempt; the request as filed (its ``name`` and ``attempt``). A bad request is refused before."""
    attempt = new_attempt()
    filed = Request(
        req.namespace,
        request_name(attempt),
        req.action,
        req.node,
        req.image,
        req.mode,
        req.gpu_model,
        req.run,
        attempt,
        identity.token,
        (identity.pod_uid,),
    )
    parse_request(filed.namespace, filed.name, filed.spec(), filed.owners)
    owner = {"apiVersion": "v1", "kind": "Pod", "name": identity.pod, "uid": identity.pod_uid}
    body = {
        "apiVersion": f"{REQUEST_GROUP}/{REQUEST_VERSION}",
        "kind": REQUEST_KIND,
        "metadata": {
            "name": filed.name,
            "namespace": filed.namespace,
            "labels": {PART_OF_LABEL[0]: PART_OF_LABEL[1]},
            "ownerReferences": [owner],  # it goes with the pod
        },
        "spec": filed.spec(),
    }
    sess = Session(req.node, req.action, api_client, None, 60.0, None)
    sess.state = f"filing request {filed.namespace}/{filed.name[:19]}..."
    api = _objects(sess)
    sess.call(
        "create",
        REQUEST_PLURAL,
        api.create_namespaced_custom_object,
        REQUEST_GROUP,
        REQUEST_VERSION,
        filed.namespace,
        REQUEST_PLURAL,
        body,
        namespace=filed.namespace,
    )
    return filed


def wait_request(api_client: Any, req: Request, *, timeout_s: float = 900.0, poll_s: float = 2.0) -> dict:
    """Wait for the agent's answer to the filed ``req``: its result when applied or restored; NodeError
    (one line, the agent's message) when refused or failed; NodeTimeout when no answer comes. Only the
    agent writes a request's status, and only an answer to this attempt counts."""
    check_times(timeout_s, poll_s)
    sess = Session(req.node, req.action, api_client, None, timeout_s, poll_s)
    sess.state = "waiting for the node agent's answer"
    api = _objects(sess)
    while True:
        try:
            obj = sess.call(
                "get",
                REQUEST_PLURAL,
                api.get_namespaced_custom_object,
                REQUEST_GROUP,
                REQUEST_VERSION,
                req.namespace,
                REQUEST_PLURAL,
                req.name,
                namespace=req.namespace,
            )
        except NotFound:
            raise sess.error(f"{req.describe()} is gone (deleted before the agent answered)") from None
        status = status_of(obj)
        if status is not None and status.get("attempt") == req.attempt:
            if status["phase"] in DONE.values():
                return dict(status.get("result") or {})
            raise NodeError(req.node, req.action, status["phase"], str(status.get("message") or "-"))
        if sess.remaining_s() <= 0:
            raise sess.error(
                f"no answer from the node agent after {timeout_s:g} s; is it running "
                f"(kubectl -n {SYSTEM_NAMESPACE} get deployment sharebench-node-agent)?",
                NodeTimeout,
            )
        time.sleep(min(sess.poll_s, max(0.0, sess.remaining_s())))
