"""The node's state before sharebench's first change, kept as a JSON annotation on the node
(``sharebench.io/prior-state``) so that a restore works from any process.

Restore applies only a state sharebench wrote: the annotation is signed (HMAC-SHA256 over the node's
name and the annotation's text, in :data:`SIGNATURE`) with a key kept in the Secret
:data:`~sharebench.manifests.names.STATE_KEY_SECRET` of sharebench's own namespace, which only
sharebench's account may read (RBAC by name) and which the first apply creates when absent. A state
without a matching signature (written or edited by anyone without the key, even inside the allow-list
of :func:`prior_problem`) is refused before anything is applied.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hashlib
import hmac
import json
import secrets
from typing import Any

from sharebench.manifests.names import (
    ENTRY_PREFIX,
    PRIOR_STATE_ANNOTATION,
    PRIOR_STATE_SIGNATURE_ANNOTATION,
    STATE_KEY_SECRET,
    SYSTEM_NAMESPACE,
)
from sharebench.node.client import Conflict, NotFound, Session
from sharebench.node.facts import (
    LABEL_DP,
    LABEL_MIG,
    LABEL_PRODUCT,
    LABEL_REPLICAS,
    LABEL_SHARING,
    GpuFacts,
    gpu_resources,
    node_annotations,
    node_labels,
)

ANNOTATION = PRIOR_STATE_ANNOTATION
SIGNATURE = PRIOR_STATE_SIGNATURE_ANNOTATION
KEY_FIELD = "key"  # the Secret's data field holding the key (base64, as every Secret's data)
KEY_BYTES = 32
STATE_VERSION = 1
RESTORED_LABELS = (LABEL_DP, LABEL_MIG)
ADVERTISED_LABELS = (LABEL_PRODUCT, LABEL_REPLICAS, LABEL_SHARING)


def state_key(sess: Session, *, create: bool) -> bytes | None:
    """The signing key from the Secret ``sharebench-system/sharebench-state-key``; created (random, once)
    when absent and ``create``, else None when absent."""
    if sess.state_key is not None:
        return sess.state_key
    ns, name = SYSTEM_NAMESPACE, STATE_KEY_SECRET
    for _ in range(3):
        try:
            secret = sess.call("get", "secrets", sess.core.read_namespaced_secret, name, ns, namespace=ns)
        except NotFound:
            if not create:
                return None
            body = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/part-of": "sharebench"}},
                "type": "Opaque",
                "data": {KEY_FIELD: base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()},
            }
            try:
                sess.call("create", "secrets", sess.core.create_namespaced_secret, ns, body, namespace=ns)
                sess.say(f"created the prior-state signing key (Secret {ns}/{name})")
            except NotFound:
                raise sess.error(f"namespace {ns} not found; apply manifests/namespace/") from None
            except Conflict:
                pass  # another process created it first: read it
            continue
        try:
            key = base64.b64decode((secret.data or {}).get(KEY_FIELD, ""), validate=True)
        except (binascii.Error, ValueError):
            key = b""
        if len(key) < 16:
            raise sess.error(
                f"Secret {ns}/{name} holds no usable key in {KEY_FIELD!r}; delete it to have a new one made"
            )
        sess.state_key = key
        return key
    raise sess.error(f"Secret {ns}/{name} could not be read or created", Conflict)


def signature(key: bytes, node: str, text: str) -> str:
    """The signature of the prior-state annotation ``text`` of ``node`` (the name binds it to its node)."""
    return "hmac-sha256:" + hmac.new(key, f"{node}\n{text}".encode(), hashlib.sha256).hexdigest()


def _unsigned(sess: Session, annotations: dict, raw: str) -> str | None:
    """Why the annotation ``raw`` is not a state sharebench wrote; None when its signature matches."""
    sig = annotations.get(SIGNATURE)
    if not sig:
        return f"carries no signature ({SIGNATURE})"
    key = state_key(sess, create=False)
    if key is None:
        return f"cannot be checked: the key (Secret {SYSTEM_NAMESPACE}/{STATE_KEY_SECRET}) is gone"
    if not hmac.compare_digest(str(sig), signature(key, sess.node, raw)):
        return f"does not match its signature ({SIGNATURE})"
    return None


def read_prior(sess: Session, node: Any, *, verify: bool = True) -> dict | None:
    """The recorded prior state of ``node``; None when there is none, an error when it is unreadable or
    (``verify``) not signed by sharebench."""
    annotations = node_annotations(node)
    raw = annotations.get(ANNOTATION)
    if raw is None:
        return None
    why = _unsigned(sess, annotations, raw) if verify else None
    if why:
        raise sess.error(
            f"annotation {ANNOTATION} {why}: restore applies only a state sharebench wrote, so it refuses; "
            f"inspect it and remove it with 'kubectl annotate node {sess.node} {ANNOTATION}- {SIGNATURE}-'"
        )
    try:
        prior = json.loads(raw)
        if not isinstance(prior, dict) or prior.get("version") != STATE_VERSION:
            raise ValueError("unknown version")
    except ValueError:
        raise sess.error(
            f"annotation {ANNOTATION} is unreadable; inspect it and remove it with "
            f"'kubectl annotate node {sess.node} {ANNOTATION}-'"
        ) from None
    problem = prior_problem(prior)
    if problem:
        raise sess.error(
            f"annotation {ANNOTATION} holds {problem}; restore applies only sharebench's own "
            f"keys, so it refuses: inspect the annotation and remove it with "
            f"'kubectl annotate node {sess.node} {ANNOTATION}-'"
        )
    return prior


def prior_problem(prior: dict) -> str | None:
    """What in a recorded prior state lies outside the allow-list restore may apply (the same one the
    admission policy enforces: the sharing labels, sharebench's own ConfigMap entries); None when fine."""
    labels = prior.get("labels", {})
    if not isinstance(labels, dict):
        return "labels that are not a map"
    for k, v in labels.items():
        if k not in RESTORED_LABELS:
            return f"label {k!r} (allowed: {', '.join(RESTORED_LABELS)})"
        if v is not None and not isinstance(v, str):
            return f"a non-text value for label {k!r}"
    cm = prior.get("configmap", {})
    entries = cm.get("entries", {}) if isinstance(cm, dict) else None
    if not isinstance(entries, dict):
        return "ConfigMap entries that are not a map"
    for k, v in entries.items():
        if not str(k).startswith(ENTRY_PREFIX):
            return f"ConfigMap entry {k!r} (allowed: sharebench's own, {ENTRY_PREFIX}...)"
        if v is not None and not isinstance(v, str):
            return f"a non-text value for ConfigMap entry {k!r}"
    for k in prior.get("advertised_labels", {}) or {}:
        if k not in ADVERTISED_LABELS:
            return f"advertised label {k!r} (allowed: {', '.join(ADVERTISED_LABELS)})"
    return None


def _prior_of(node: Any, facts: GpuFacts, namespace: str, configmap: str) -> dict:
    labels = node_labels(node)
    return {
        "version": STATE_VERSION,
        "recorded_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "labels": {k: labels.get(k) for k in RESTORED_LABELS},
        "unschedulable": bool(node.spec.unschedulable) if node.spec else False,
        "gpu_model": facts.model.key,
        "gpus": facts.gpus,
        "allocatable": gpu_resources(node),
        # what GFD said then; restore waits for these too (counts alone can coincide)
        "advertised_labels": {k: labels[k] for k in ADVERTISED_LABELS if k in labels},
        "configmap": {"namespace": namespace, "name": configmap, "entries": {}},
    }


def record_prior(sess: Session, node: Any, facts: GpuFacts, namespace: str, configmap: str) -> tuple[object, dict]:
    """Store the node's state before the first change (once: later calls keep the first record)."""
    for _ in range(5):
        prior = read_prior(sess, node)
        if prior is not None:
            return node, prior
        prior = _prior_of(node, facts, namespace, configmap)
        body = {"metadata": {"resourceVersion": node.metadata.resource_version, "annotations": _signed(sess, prior)}}
        try:
            node = sess.call("patch", "nodes", sess.core.patch_node, sess.node, body)
            sess.say(f"recorded prior state in annotation {ANNOTATION}")
            return node, prior
        except Conflict:
            node = sess.read_node()
    raise sess.error("could not record the prior state: the node kept changing (HTTP 409)", Conflict)


def _signed(sess: Session, prior: dict) -> dict:
    """The two annotations recording ``prior``: its text and its signature (the key made if absent)."""
    text = json.dumps(prior, sort_keys=True)
    key = state_key(sess, create=True)
    assert key is not None  # create=True: made when absent
    return {ANNOTATION: text, SIGNATURE: signature(key, sess.node, text)}


def save_prior(sess: Session, prior: dict) -> None:
    """Overwrite the recorded prior state with ``prior`` (signed again)."""
    sess.patch_node({"metadata": {"annotations": _signed(sess, prior)}})


def remove_prior(sess: Session) -> Any:
    """Remove the prior-state annotation and its signature; returns the patched node."""
    return sess.patch_node({"metadata": {"annotations": {ANNOTATION: None, SIGNATURE: None}}})
