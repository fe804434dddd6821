"""The node's state before sharebench's first change, kept as a JSON annotation on the node
(``sharebench.io/prior-state``) so that a restore works from any process."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

from sharebench.manifests.names import ENTRY_PREFIX, PRIOR_STATE_ANNOTATION
from sharebench.node.client import Conflict, Session
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
STATE_VERSION = 1
RESTORED_LABELS = (LABEL_DP, LABEL_MIG)
ADVERTISED_LABELS = (LABEL_PRODUCT, LABEL_REPLICAS, LABEL_SHARING)


def read_prior(sess: Session, node: Any) -> dict | None:
    """The recorded prior state of ``node``; None when there is none, an error when it is unreadable."""
    raw = node_annotations(node).get(ANNOTATION)
    if raw is None:
        return None
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
        body = {
            "metadata": {
                "resourceVersion": node.metadata.resource_version,
                "annotations": {ANNOTATION: json.dumps(prior, sort_keys=True)},
            }
        }
        try:
            node = sess.call("patch", "nodes", sess.core.patch_node, sess.node, body)
            sess.say(f"recorded prior state in annotation {ANNOTATION}")
            return node, prior
        except Conflict:
            node = sess.read_node()
    raise sess.error("could not record the prior state: the node kept changing (HTTP 409)", Conflict)


def save_prior(sess: Session, prior: dict) -> None:
    """Overwrite the recorded prior state with ``prior``."""
    sess.patch_node({"metadata": {"annotations": {ANNOTATION: json.dumps(prior, sort_keys=True)}}})


def remove_prior(sess: Session) -> Any:
    """Remove the prior-state annotation; returns the patched node."""
    return sess.patch_node({"metadata": {"annotations": {ANNOTATION: None}}})
