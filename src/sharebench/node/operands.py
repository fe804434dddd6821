"""The gpu-operator's operands as the node operations drive them: the device-plugin ConfigMap
entries, restarting the device-plugin and GPU-feature-discovery pods, the MIG manager's labels,
and the one polling loop every wait goes through."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sharebench.node.client import Conflict, NodeError, NodeTimeout, NotFound, Session
from sharebench.node.facts import (
    LABEL_MIG,
    LABEL_MIG_STATE,
    PLUGIN_APP,
    gpu_pods,
    node_labels,
    plugin_pods,
    pod_ready,
)

Check = Callable[[], tuple[bool, str, str | None]]  # (ok, what is seen, failure or None)


# ---------------------------------------------------------------- waiting
def wait(sess: Session, what: str, check: Check, stuck_hint: Callable[[], str] | None = None) -> None:
    """Poll ``check`` until it holds; it returns (ok, what is seen, failure or None)."""
    last_seen = None
    while True:
        ok, seen, failure = check()
        if failure:
            raise sess.error(failure)
        if ok:
            sess.say(f"ok: {seen} ({sess.elapsed_s():.1f} s)")
            return
        if seen != last_seen:  # a line only when the state changes
            sess.say(f"waiting for {what}: {seen}")
            last_seen = seen
        if sess.remaining_s() <= 0:
            hint = stuck_hint() if stuck_hint else ""
            raise sess.error(
                f"timed out after {sess.timeout_s:g} s waiting for {what}; last seen: {seen}{hint}", NodeTimeout
            )
        time.sleep(max(0.0, min(sess.poll_s, sess.remaining_s())))


# ---------------------------------------------------------------- ConfigMap entries
def read_configmap(sess: Session, namespace: str, name: str) -> Any:
    """The device-plugin ConfigMap; a missing one is an error saying how to create it."""
    try:
        return sess.call(
            "get", "configmaps", sess.core.read_namespaced_config_map, name, namespace, namespace=namespace
        )
    except NotFound:
        raise sess.error(
            f"ConfigMap {namespace}/{name} not found; apply manifests/operator/ "
            "(or pass the device plugin's ConfigMap with --configmap, --namespace)"
        ) from None


def set_entry(
    sess: Session,
    namespace: str,
    name: str,
    entry: str,
    text: str | None,
    before_change: Callable[[str | None], None] | None = None,
) -> bool:
    """Make the ConfigMap entry equal ``text`` (None: remove it). True if it changed."""
    for _ in range(5):
        cm = read_configmap(sess, namespace, name)
        data = dict(cm.data or {})
        current = data.get(entry)
        if current == text:
            return False
        if before_change is not None:
            before_change(current)
        if text is None:
            data.pop(entry, None)
        else:
            data[entry] = text
        cm.data = data
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
            sess.say(f"ConfigMap {namespace}/{name}: entry {entry} " + ("removed" if text is None else "written"))
            return True
        except Conflict:
            continue  # changed under us: read it again
        except NotFound:
            raise sess.error(f"ConfigMap {namespace}/{name} disappeared") from None
    raise sess.error(f"ConfigMap {namespace}/{name} kept changing under us (HTTP 409)", Conflict)


# ---------------------------------------------------------------- device plugin
def restart_device_plugin(sess: Session, namespace: str) -> None:
    """Delete the device-plugin and GPU-feature-discovery pods on the node (both read the
    ConfigMap only when they start) and wait for their DaemonSets to bring ready ones back."""
    old = plugin_pods(sess, namespace)
    apps = sorted({str((p.metadata.labels or {}).get("app")) for p in old})
    if PLUGIN_APP not in apps:
        raise sess.error(
            f"no device-plugin pod (app={PLUGIN_APP}) on the node in namespace "
            f"{namespace}; is the gpu-operator installed there (see --namespace)?"
        )
    old_uids = {p.metadata.uid for p in old}
    for p in old:
        sess.say(f"restarting pod {namespace}/{p.metadata.name} so it re-reads the device-plugin config")
        try:
            sess.call(
                "delete", "pods", sess.core.delete_namespaced_pod, p.metadata.name, namespace, namespace=namespace
            )
        except NotFound:
            pass  # already gone

    def ready() -> tuple[bool, str, str | None]:
        pods = plugin_pods(sess, namespace)
        new = [p for p in pods if p.metadata.uid not in old_uids and pod_ready(p)]
        ok = {(p.metadata.labels or {}).get("app") for p in new} >= set(apps)
        seen = ", ".join(f"{p.metadata.name}={p.status.phase if p.status else '?'}" for p in pods) or "none"
        return ok, f"pods: {seen}", None

    wait(sess, "new ready " + " and ".join(apps) + " pods", ready)


# ---------------------------------------------------------------- MIG manager
def with_state_reset(labels: dict) -> dict:
    """A label patch; where it changes nvidia.com/mig.config it also drops the MIG manager's
    state label, so the ``success`` of the previous layout is not taken for the new one."""
    if LABEL_MIG in labels:
        return {**labels, LABEL_MIG_STATE: None}
    return labels


def wait_mig_state(sess: Session, layout: str, operator_ns: str) -> None:
    """Wait until the MIG manager reports ``layout`` applied (``nvidia.com/mig.config.state=success``)."""
    sess.state = f"waiting for MIG layout {layout}"

    def check() -> tuple[bool, str, str | None]:
        labels = node_labels(sess.read_node())
        st = labels.get(LABEL_MIG_STATE)
        seen = f"{LABEL_MIG}={labels.get(LABEL_MIG)}, {LABEL_MIG_STATE}={st}"
        if labels.get(LABEL_MIG) == layout and st == "failed":
            return (
                False,
                seen,
                (
                    f"the MIG manager failed to apply {layout} ({LABEL_MIG_STATE}=failed); "
                    "is the layout in the mig-parted config, and the GPUs idle?"
                ),
            )
        return labels.get(LABEL_MIG) == layout and st == "success", seen, None

    def stuck() -> str:
        try:
            pods = gpu_pods(sess, operator_ns)
        except NodeError:
            pods = []
        who = f"GPU pods still on the node: {', '.join(pods)}" if pods else "no foreign GPU pod seen"
        return f"; likely cause: GPU pods that would not terminate ({who})"

    wait(sess, f"{LABEL_MIG_STATE}=success", check, stuck)
