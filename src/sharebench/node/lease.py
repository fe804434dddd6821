"""One reconfiguration per node: a ``coordination.k8s.io/v1`` Lease per node in sharebench's own
namespace (:data:`~sharebench.manifests.names.SYSTEM_NAMESPACE`), named ``sharebench-node-<node>``.

:func:`acquire` creates it, renews it when this holder has it, takes it over only when it has
expired, and otherwise refuses in one line naming the holder. :func:`release` deletes it (restore).
Creation and renewal go through ``resourceVersion`` preconditions, so two runs racing for a free
node cannot both win.
"""

from __future__ import annotations

import datetime as _dt
import socket
from typing import Any

from kubernetes import client as k8s

from sharebench.manifests.names import SYSTEM_NAMESPACE
from sharebench.node.client import Conflict, NotFound, Session

LEASE_DURATION_S = 3600  # renewed on every apply of a run; a run's cells between two applies fit in it


def lease_name(node: str) -> str:
    return f"sharebench-node-{node}"[:253]


def default_holder() -> str:
    """The holder when none is named (the CLI): this machine."""
    return f"sharebench-cli@{socket.gethostname()}"


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _stamp(t: _dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # MicroTime


def _expires_in(lease: Any) -> float:
    spec = lease.spec
    renewed = spec.renew_time or spec.acquire_time
    if renewed is None or not spec.lease_duration_seconds:
        return 0.0
    return (renewed + _dt.timedelta(seconds=spec.lease_duration_seconds) - _now()).total_seconds()


def _api(sess: Session) -> k8s.CoordinationV1Api:
    return k8s.CoordinationV1Api(sess.api_client)


def read_lease(sess: Session, namespace: str = SYSTEM_NAMESPACE) -> Any:
    """The node's Lease, or None."""
    try:
        return sess.call(
            "get", "leases", _api(sess).read_namespaced_lease, lease_name(sess.node), namespace, namespace=namespace
        )
    except NotFound:
        return None


def holder_of(sess: Session, namespace: str = SYSTEM_NAMESPACE) -> dict | None:
    """Who holds the node's Lease and for how much longer (``status``); None when nobody."""
    lease = read_lease(sess, namespace)
    if lease is None or not lease.spec.holder_identity:
        return None
    return {
        "holder": lease.spec.holder_identity,
        "expires_in_s": round(_expires_in(lease), 1),
        "lease": f"{namespace}/{lease_name(sess.node)}",
    }


def acquire(
    sess: Session, holder: str, duration_s: float = LEASE_DURATION_S, namespace: str = SYSTEM_NAMESPACE
) -> None:
    """Hold the node's Lease for ``holder``: create, renew, or take over an expired one; else refuse."""
    api, name = _api(sess), lease_name(sess.node)
    sess.state = f"taking Lease {namespace}/{name}"
    for _ in range(5):
        lease = read_lease(sess, namespace)
        now = _stamp(_now())
        spec = {"holderIdentity": holder, "leaseDurationSeconds": int(duration_s), "renewTime": now}
        if lease is None:
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {"app.kubernetes.io/part-of": "sharebench"},
                },
                "spec": {**spec, "acquireTime": now, "leaseTransitions": 0},
            }
            try:
                sess.call("create", "leases", api.create_namespaced_lease, namespace, body, namespace=namespace)
            except NotFound:
                raise sess.error(
                    f"namespace {namespace} not found; apply manifests/namespace/ "
                    "(sharebench keeps its per-node Leases there)"
                ) from None
            except Conflict:
                continue  # another run created it first: look again
            sess.say(f"holding Lease {namespace}/{name} as {holder}")
            return
        current = lease.spec.holder_identity
        left = _expires_in(lease)
        if current and current != holder and left > 0:
            raise sess.error(
                f"refusing: the node is being reconfigured by {current} (Lease {namespace}/{name}, "
                f"expires in {left:.0f} s unless renewed); wait for that run to end, or, if it is gone, "
                f"run 'sharebench node restore {sess.node}'"
            )
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": lease.metadata.resource_version,
                "labels": dict(lease.metadata.labels or {}),
            },
            "spec": spec
            if current == holder
            else {**spec, "acquireTime": now, "leaseTransitions": (lease.spec.lease_transitions or 0) + 1},
        }
        if current == holder:
            body["spec"]["acquireTime"] = _stamp(lease.spec.acquire_time) if lease.spec.acquire_time else now
            body["spec"]["leaseTransitions"] = lease.spec.lease_transitions or 0
        try:
            sess.call("update", "leases", api.replace_namespaced_lease, name, namespace, body, namespace=namespace)
        except NotFound:
            continue
        except Conflict:
            continue  # changed under us (another run renewed or took it): look again
        if current != holder:
            sess.say(f"took over Lease {namespace}/{name} from {current or 'nobody'} (expired) as {holder}")
        return
    raise sess.error(f"Lease {namespace}/{name} kept changing under us (HTTP 409)", Conflict)


def check_release(sess: Session, holder: str | None, namespace: str = SYSTEM_NAMESPACE) -> Any:
    """The node's Lease (or None) when ``holder`` may release it: ``holder`` None (a person's restore)
    may release anyone's; a named holder only its own or an expired one, and is refused while
    another run holds it."""
    lease = read_lease(sess, namespace)
    if lease is None:
        return None
    current = lease.spec.holder_identity
    if holder is not None and current not in (None, "", holder) and _expires_in(lease) > 0:
        raise sess.error(
            f"refusing: the node's Lease {namespace}/{lease_name(sess.node)} is held by {current}, "
            f"not {holder}; that run restores the node itself"
        )
    return lease


def renew(
    node: str,
    holder: str,
    *,
    lease_s: float = LEASE_DURATION_S,
    timeout_s: float = 30,
    api_client: Any = None,
    progress: Any = None,
) -> None:
    """Renew ``holder``'s Lease on ``node`` between two applies of a run (each cell); refused in one line
    when another run holds it."""
    sess = Session(node, "renew", api_client, progress, timeout_s, None)
    acquire(sess, holder, lease_s)


def release(sess: Session, holder: str | None, namespace: str = SYSTEM_NAMESPACE) -> None:
    """Give the node's Lease up (see :func:`check_release` for who may)."""
    lease = check_release(sess, holder, namespace)
    if lease is None:
        return
    current = lease.spec.holder_identity
    try:
        sess.call(
            "delete",
            "leases",
            _api(sess).delete_namespaced_lease,
            lease_name(sess.node),
            namespace,
            namespace=namespace,
        )
    except NotFound:
        return
    sess.say(f"released Lease {namespace}/{lease_name(sess.node)}" + (f" (held by {current})" if current else ""))
