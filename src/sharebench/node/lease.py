"""One reconfiguration per node: a ``coordination.k8s.io/v1`` Lease per node in sharebench's own
namespace (:data:`~sharebench.manifests.names.SYSTEM_NAMESPACE`), named ``sharebench-node-<node>``.

The protocol (the admission policy of :mod:`sharebench.manifests.policy` enforces its shape for
sharebench's ServiceAccount, which has no ``delete`` verb on Leases):

* :func:`acquire` creates the Lease, renews it when this holder has it, takes it when its holder is
  empty (released), and otherwise refuses in one line naming the holder. It never takes over another
  holder's Lease, expired or not: Kubernetes' CEL has no clock, so the API server cannot tell an
  expired Lease from a live one, and only a release (below) frees one. The one exception: a holder
  that is a ``sharebench`` CLI process of this very machine that no longer runs (its pid is gone) is
  released first (its release names it), then the Lease is taken.
* :func:`release` never deletes: it is an update that empties ``holderIdentity`` and names the old
  holder in the annotation :data:`RELEASED_BY`. A person's ``node restore`` releases a live run's
  Lease only with ``--force``; an expired one without.
* :func:`renew` (between two cells of a run) renews only a Lease this holder still holds; one
  released or held by someone else stops the run with a message naming who holds it.

While a holder has the Lease, the node carries its name in the annotation :data:`CLAIM` (set by
:func:`acquire`, cleared by :func:`release`): the admission policy lets the node account change only a
node so claimed, and a claim moves from one holder to another only through a clear.

Holders are unique per process: a run names its run id; the CLI's default is
``sharebench-cli@HOST:PID.START`` (:func:`default_holder`). Creation and every update go through
``resourceVersion`` preconditions, so two processes racing for a free node cannot both win.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import socket
from typing import Any

import psutil
from kubernetes import client as k8s

from sharebench.manifests.names import LEASE_RELEASED_BY_ANNOTATION, NODE_CLAIM_ANNOTATION, SYSTEM_NAMESPACE
from sharebench.node.client import Conflict, NodeError, NotFound, Session

LEASE_DURATION_S = 3600  # renewed on every apply of a run; a run's cells between two applies fit in it
RELEASED_BY = LEASE_RELEASED_BY_ANNOTATION  # on a released Lease: who held it last
CLAIM = NODE_CLAIM_ANNOTATION  # on the node while a holder has its Lease
CLI_PREFIX = "sharebench-cli@"
_CLI_HOLDER = re.compile(r"sharebench-cli@(?P<host>[^:]+):(?P<pid>\d+)\.(?P<start>\d+)")


class LeaseLost(NodeError):
    """A run's renewal found its Lease released or held by another holder: the run stops."""


def lease_name(node: str) -> str:
    return f"sharebench-node-{node}"[:253]


def default_holder() -> str:
    """The holder when none is named (the CLI): this process of this machine, ``sharebench-cli@HOST:PID.START``
    (the start time tells a reused pid from the process that took the Lease)."""
    return f"{CLI_PREFIX}{socket.gethostname()}:{os.getpid()}.{int(psutil.Process().create_time())}"


def holder_gone(holder: str) -> bool:
    """True when ``holder`` is a CLI process of this machine that no longer runs; False when it runs,
    or when it is not such a holder (a run id, another machine: nothing here can tell)."""
    m = _CLI_HOLDER.fullmatch(holder or "")
    if m is None or m["host"] != socket.gethostname():
        return False
    try:
        return int(psutil.Process(int(m["pid"])).create_time()) != int(m["start"])
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _stamp(t: _dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # MicroTime


def _expires_in(lease: Any) -> float:
    """Seconds until the Lease expires (<= 0: expired). A renew time further in the future than the
    Lease's duration (a clock a year ahead, a hand edit) is invalid and counts as expired: no holder
    can block a node for longer than one duration from now."""
    spec = lease.spec
    renewed = spec.renew_time or spec.acquire_time
    if renewed is None or not spec.lease_duration_seconds or invalid_renewal(lease):
        return 0.0
    return (renewed + _dt.timedelta(seconds=spec.lease_duration_seconds) - _now()).total_seconds()


def invalid_renewal(lease: Any) -> str | None:
    """Why the Lease's renew time cannot be believed (it lies more than its duration in the future), or None."""
    spec = lease.spec
    renewed = spec.renew_time or spec.acquire_time
    if renewed is None or not spec.lease_duration_seconds:
        return None
    ahead = (renewed - _now()).total_seconds()
    if ahead <= spec.lease_duration_seconds:
        return None
    return (
        f"its renew time {_stamp(renewed)} is {ahead:.0f} s in the future, beyond its "
        f"{spec.lease_duration_seconds} s duration: invalid, so expired"
    )


def _api(sess: Session) -> k8s.CoordinationV1Api:
    return k8s.CoordinationV1Api(sess.api_client)


def _where(namespace: str, node: str) -> str:
    return f"Lease {namespace}/{lease_name(node)}"


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


def _body(lease: Any, name: str, namespace: str, spec: dict, annotations: dict | None = None) -> dict:
    """The whole Lease for an update (``replace``), with ``resourceVersion`` as its precondition."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "resourceVersion": lease.metadata.resource_version,
        "labels": dict(lease.metadata.labels or {}),
        "annotations": {**(lease.metadata.annotations or {}), **(annotations or {})},
    }
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}


def _create(sess: Session, holder: str, duration_s: float, namespace: str) -> bool:
    """Create the Lease held by ``holder``; False when another process created it first."""
    now = _stamp(_now())
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": lease_name(sess.node),
            "namespace": namespace,
            "labels": {"app.kubernetes.io/part-of": "sharebench"},
        },
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": int(duration_s),
            "renewTime": now,
            "acquireTime": now,
            "leaseTransitions": 0,
        },
    }
    try:
        sess.call("create", "leases", _api(sess).create_namespaced_lease, namespace, body, namespace=namespace)
    except NotFound:
        raise sess.error(
            f"namespace {namespace} not found; apply manifests/namespace/ (sharebench keeps its per-node Leases there)"
        ) from None
    except Conflict:
        return False
    return True


def _update(sess: Session, body: dict, namespace: str) -> bool:
    """Replace the Lease with ``body``; False when it changed (or went) since it was read."""
    try:
        sess.call(
            "update",
            "leases",
            _api(sess).replace_namespaced_lease,
            lease_name(sess.node),
            namespace,
            body,
            namespace=namespace,
        )
    except (NotFound, Conflict):
        return False
    return True


def _held_spec(lease: Any, holder: str, duration_s: float) -> dict:
    """The spec of ``lease`` held (renewed, or newly taken) by ``holder``."""
    now = _stamp(_now())
    spec = lease.spec
    renewing = spec.holder_identity == holder
    return {
        "holderIdentity": holder,
        "leaseDurationSeconds": int(duration_s),
        "renewTime": now,
        "acquireTime": (_stamp(spec.acquire_time) if spec.acquire_time else now) if renewing else now,
        "leaseTransitions": (spec.lease_transitions or 0) + (0 if renewing else 1),
    }


def _refusal(sess: Session, current: str, lease: Any, namespace: str) -> NodeError:
    where = _where(namespace, sess.node)
    left = _expires_in(lease)
    invalid = invalid_renewal(lease)
    if invalid:
        return sess.error(
            f"refusing: the node's {where} held by {current} is not taken over although {invalid}; run "
            f"'sharebench node restore {sess.node}' to put the node back and free it"
        )
    if left > 0:
        return sess.error(
            f"refusing: the node is being reconfigured by {current} ({where}, expires in {left:.0f} s "
            f"unless renewed); wait for that run to end, or, if it is gone, run "
            f"'sharebench node restore {sess.node} --force'"
        )
    return sess.error(
        f"refusing: the node's {where} held by {current} expired {-left:.0f} s ago and is not taken over "
        f"(the API server cannot tell an expired Lease from a live one); if that run is gone, run "
        f"'sharebench node restore {sess.node}' to put the node back and free it"
    )


def acquire(
    sess: Session, holder: str, duration_s: float = LEASE_DURATION_S, namespace: str = SYSTEM_NAMESPACE
) -> None:
    """Hold the node's Lease for ``holder``: create it, renew it, or take a released one; else refuse."""
    where = _where(namespace, sess.node)
    sess.state = f"taking {where}"
    for _ in range(5):
        lease = read_lease(sess, namespace)
        if lease is None:
            if _create(sess, holder, duration_s, namespace):
                sess.say(f"holding {where} as {holder}")
                _claim_or_give_back(sess, holder, namespace)
                return
            continue  # another process created it first: look again
        current = lease.spec.holder_identity or ""
        if current and current != holder:
            if not holder_gone(current):
                raise _refusal(sess, current, lease, namespace)
            sess.say(f"the process that held {where} ({current}) is gone: releasing it")
            _update(sess, _released(lease, lease_name(sess.node), namespace), namespace)
            continue
        if not _update(
            sess, _body(lease, lease_name(sess.node), namespace, _held_spec(lease, holder, duration_s)), namespace
        ):
            continue  # changed under us (another process renewed or took it): look again
        if current != holder:
            sess.say(f"holding {where} as {holder}")
        _claim_or_give_back(sess, holder, namespace)
        return
    raise sess.error(f"{where} kept changing under us (HTTP 409)", Conflict)


def _claim_or_give_back(sess: Session, holder: str, namespace: str) -> None:
    """Claim the node for ``holder``; when that fails, release the Lease just taken (nothing changed)."""
    try:
        claim(sess, holder)
    except NodeError:
        try:
            release(sess, holder, namespace)
        except NodeError:
            pass  # it expires by itself; the claim's own error says what to fix
        raise


def claim(sess: Session, holder: str) -> None:
    """Name ``holder`` in the node's :data:`CLAIM` annotation (a stale claim is cleared first: a claim
    never moves from one holder to another in one patch)."""
    for _ in range(5):
        current = (sess.read_node().metadata.annotations or {}).get(CLAIM) or ""
        if current == holder:
            return
        try:
            sess.patch_node({"metadata": {"annotations": {CLAIM: None if current else holder}}})
        except Conflict:
            continue  # read again
    raise sess.error(f"could not claim the node for {holder}: it kept changing (HTTP 409)", Conflict)


def unclaim(sess: Session) -> None:
    """Clear the node's :data:`CLAIM` annotation (alone in its patch), when it has one."""
    if (sess.read_node().metadata.annotations or {}).get(CLAIM):
        sess.patch_node({"metadata": {"annotations": {CLAIM: None}}})


def renew(
    node: str,
    holder: str,
    *,
    lease_s: float = LEASE_DURATION_S,
    timeout_s: float = 30,
    api_client: Any = None,
    progress: Any = None,
    namespace: str = SYSTEM_NAMESPACE,
) -> None:
    """Renew ``holder``'s Lease on ``node`` between two cells of a run. A Lease this holder no longer
    holds (released by a person's restore, or held by another) raises :class:`LeaseLost` naming who
    holds it: the run stops rather than measure a node that was put back under it."""
    sess = Session(node, "renew", api_client, progress, timeout_s, None)
    where = _where(namespace, node)
    sess.state = f"renewing {where}"
    for _ in range(5):
        lease = read_lease(sess, namespace)
        current = (lease.spec.holder_identity or "") if lease is not None else ""
        if current != holder:
            raise sess.error(_lost(lease, holder, current, where), LeaseLost)
        if _update(sess, _body(lease, lease_name(node), namespace, _held_spec(lease, holder, lease_s)), namespace):
            return
    raise sess.error(f"{where} kept changing under us (HTTP 409)", Conflict)


def _lost(lease: Any, holder: str, current: str, where: str) -> str:
    if current:
        return f"this run ({holder}) no longer holds {where}: {current} holds it now; the run stops"
    by = ((lease.metadata.annotations or {}).get(RELEASED_BY) if lease is not None else None) or holder
    how = "it was deleted" if lease is None else f"it was released (last held by {by})"
    return (
        f"this run ({holder}) no longer holds {where}: {how}, by a person's 'sharebench node restore'; "
        "the node may have been put back, so the run stops"
    )


def check_release(sess: Session, holder: str | None, namespace: str = SYSTEM_NAMESPACE, *, force: bool = False) -> Any:
    """The node's Lease (or None) when it may be released. A named ``holder`` (a run's own restore) may
    release only its own, a released or an expired one. ``holder`` None is a person: a live run's
    Lease (unexpired, another holder) needs ``force``; the refusal names that run."""
    lease = read_lease(sess, namespace)
    if lease is None:
        return None
    current = lease.spec.holder_identity or ""
    live = bool(current) and _expires_in(lease) > 0 and not holder_gone(current)
    where = _where(namespace, sess.node)
    if holder is not None:
        if live and current != holder:
            raise sess.error(
                f"refusing: the node's {where} is held by {current}, not {holder}; that run restores the node itself"
            )
        return lease
    if live and current != default_holder():
        if not force:
            raise sess.error(
                f"refusing: the node is leased by the live run {current} ({where}, expires in "
                f"{_expires_in(lease):.0f} s); restoring it would pull the node from under that run: "
                "pass --force to restore anyway (that run then stops at its next renewal)"
            )
        sess.say(f"--force: taking the node back from {current}")
    return lease


def _released(lease: Any, name: str, namespace: str) -> dict:
    """``lease`` released: no holder, the old one named in :data:`RELEASED_BY` (never a delete)."""
    spec = lease.spec
    now = _stamp(_now())
    released_spec = {
        "holderIdentity": "",
        "leaseDurationSeconds": 1,
        "renewTime": now,
        "acquireTime": _stamp(spec.acquire_time) if spec.acquire_time else now,
        "leaseTransitions": spec.lease_transitions or 0,
    }
    return _body(lease, name, namespace, released_spec, {RELEASED_BY: spec.holder_identity or ""})


def release(sess: Session, holder: str | None, namespace: str = SYSTEM_NAMESPACE, *, force: bool = False) -> None:
    """Give the node's Lease up (see :func:`check_release` for who may): an update that empties its holder."""
    for _ in range(5):
        lease = check_release(sess, holder, namespace, force=force)
        if lease is None or not lease.spec.holder_identity:
            unclaim(sess)
            return
        current = lease.spec.holder_identity
        if _update(sess, _released(lease, lease_name(sess.node), namespace), namespace):
            sess.say(f"released {_where(namespace, sess.node)} (held by {current})")
            unclaim(sess)
            return
    raise sess.error(f"{_where(namespace, sess.node)} kept changing under us (HTTP 409)", Conflict)
