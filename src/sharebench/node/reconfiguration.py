"""Move a GPU node between exclusive, time-slicing, MPS and MIG through the NVIDIA gpu-operator.

What one call does (official ``kubernetes`` client, no kubectl):

1. pre-flight: the node exists, carries NVIDIA GPU labels (``nvidia.com/gpu.product``,
   ``nvidia.com/gpu.count``), the MIG layout exists on its GPU model, no pod outside
   sharebench uses its GPUs (unless ``force``), the device-plugin ConfigMap exists;
2. records the node's prior state once, as a JSON annotation on the node
   (``sharebench.io/prior-state``), so :func:`restore` works from any process;
3. writes the device-plugin config entry (``timeslice-4``, ``mps-2``, ``exclusive``) into
   the ConfigMap when it is missing or differs, and then restarts the device-plugin and
   GPU-feature-discovery pods on that node (both read the ConfigMap only when they start);
4. labels the node (``nvidia.com/device-plugin.config``, ``nvidia.com/mig.config``);
5. waits, with a deadline and progress reports, for ``nvidia.com/mig.config.state=success``
   (MIG changes) and for the node to advertise what the mode promises (allocatable
   ``nvidia.com/gpu`` = GPUs × N and ``nvidia.com/gpu.replicas`` = N; MIG resources).

Every failure is a :class:`NodeError` (a ``UserError``): one line naming node, mode and state.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from sharebench.errors import UserError
from sharebench.gpus import GpuModel, gpu_model, resolve_layout
from sharebench.modes import Mode, parse_mode
from sharebench.node import manifests as mf

log = logging.getLogger("sharebench.node")

ANNOTATION = "sharebench.io/prior-state"
LABEL_DP = "nvidia.com/device-plugin.config"
LABEL_MIG = "nvidia.com/mig.config"
LABEL_MIG_STATE = "nvidia.com/mig.config.state"
LABEL_PRODUCT = "nvidia.com/gpu.product"
LABEL_COUNT = "nvidia.com/gpu.count"
LABEL_REPLICAS = "nvidia.com/gpu.replicas"
LABEL_MIG_STRATEGY = "nvidia.com/mig.strategy"
LABEL_MIG_CAPABLE = "nvidia.com/mig.capable"
LABEL_SHARING = "nvidia.com/gpu.sharing-strategy"
SHARING_STRATEGY = {"timeslice": "time-slicing", "mps": "mps"}
ADVERTISED_LABELS = (LABEL_PRODUCT, LABEL_REPLICAS, LABEL_SHARING)
# the operands that read the device-plugin ConfigMap when they start: the plugin (allocatable)
# and GPU feature discovery (nvidia.com/gpu.replicas, ...sharing-strategy labels)
PLUGIN_APP = "nvidia-device-plugin-daemonset"
GFD_APP = "gpu-feature-discovery"
PLUGIN_POD_SELECTOR = f"app in ({PLUGIN_APP},{GFD_APP})"
RESTORED_LABELS = (LABEL_DP, LABEL_MIG)
STATE_VERSION = 1
POLL_S = 2.0
REPORT_EVERY_S = 15.0

Progress = Callable[[str], None]


# ---------------------------------------------------------------- errors
class NodeError(UserError):
    """A reconfiguration failed: one line naming node, mode and state."""

    def __init__(self, node: str, mode: str, state: str, what: str):
        self.node, self.mode, self.state = node, mode, state
        super().__init__(f"node {node}, mode {mode}, state {state}: {what}")


class NodeTimeout(NodeError):
    """A wait ran past its deadline."""


class PermissionDenied(NodeError):
    """The API server answered 403: the service account lacks an RBAC verb."""


class _NotFound(Exception):
    pass


# ---------------------------------------------------------------- client
def make_api_client(kubeconfig: str | os.PathLike | None = None, context: str | None = None) -> k8s.ApiClient:
    """An API client from ``kubeconfig`` (or ``$KUBECONFIG``, ``~/.kube/config``), else in-cluster config."""
    if kubeconfig is not None:
        path = Path(kubeconfig).expanduser()
        if not path.is_file():
            raise UserError(f"kubeconfig {str(path)!r} does not exist; pass an existing file to --kubeconfig")
        try:
            return k8s_config.new_client_from_config(config_file=str(path), context=context)
        except (k8s_config.ConfigException, yaml.YAMLError, KeyError, TypeError) as exc:
            raise UserError(f"cannot use kubeconfig {str(path)!r}: {exc}") from exc
    env = os.environ.get("KUBECONFIG")
    if env:
        first = Path(env.split(os.pathsep)[0]).expanduser()
        if not first.is_file():
            raise UserError(f"KUBECONFIG={env!r} names no file; point it at a kubeconfig or unset it")
        return make_api_client(first, context)
    default = Path("~/.kube/config").expanduser()
    if default.is_file():
        return make_api_client(default, context)
    cfg = k8s.Configuration()
    try:
        k8s_config.load_incluster_config(client_configuration=cfg)
    except k8s_config.ConfigException as exc:
        raise UserError("no Kubernetes credentials: pass --kubeconfig, set KUBECONFIG, "
                        "or run in a pod with a service account") from exc
    return k8s.ApiClient(cfg)


# ---------------------------------------------------------------- session
class _Session:
    """One operation on one node: the API, the current state for messages, progress."""

    def __init__(self, node: str, mode: str, api_client, progress: Progress | None,
                 timeout_s: float, poll_s: float):
        self.node, self.mode = node, mode
        self.state = "pre-flight"
        try:
            self.api_client = api_client if api_client is not None else make_api_client()
        except UserError as exc:
            raise self.error(str(exc)) from None
        self.core = k8s.CoreV1Api(self.api_client)
        self.progress = progress
        self.t0 = time.monotonic()
        self.timeout_s = float(timeout_s)
        self.deadline = self.t0 + self.timeout_s
        self.poll_s = POLL_S if poll_s is None else float(poll_s)

    # -- messages
    def say(self, msg: str) -> None:
        line = f"{self.node}: {msg}"
        log.info(line)
        if self.progress is not None:
            self.progress(line)

    def error(self, what: str, cls: type[NodeError] = NodeError) -> NodeError:
        return cls(self.node, self.mode, self.state, what)

    # -- API calls with one-line errors
    def call(self, verb: str, resource: str, fn, *args, namespace: str | None = None, **kwargs):
        where = f" in namespace {namespace}" if namespace else ""
        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            if exc.status == 404:
                raise _NotFound(_status_message(exc)) from None
            if exc.status == 403:
                raise self.error(
                    f"permission denied: cannot {verb} {resource}{where} "
                    f"(RBAC: grant verb {verb!r} on resource {resource!r}; see manifests/rbac/)",
                    PermissionDenied) from None
            if exc.status == 401:
                raise self.error("unauthorized: the API server refused the credentials "
                                 "(check the kubeconfig or service account token)") from None
            raise self.error(f"{verb} {resource}{where} failed: HTTP {exc.status} "
                             f"{exc.reason}: {_status_message(exc)}") from None
        except urllib3.exceptions.HTTPError as exc:
            host = getattr(self.api_client.configuration, "host", "?")
            raise self.error(f"cannot reach the Kubernetes API at {host}: {type(exc).__name__}") from None

    def read_node(self) -> k8s.V1Node:
        try:
            return self.call("get", "nodes", self.core.read_node, self.node)
        except _NotFound:
            hint = ""
            try:
                names = [n.metadata.name for n in self.core.list_node(limit=20).items]
                hint = f"; nodes: {', '.join(names) or 'none'}"
            except Exception:  # the hint is optional (list may be denied)
                pass
            raise self.error(f"node {self.node!r} not found{hint}") from None

    def patch_node(self, body: dict) -> k8s.V1Node:
        try:
            return self.call("patch", "nodes", self.core.patch_node, self.node, body)
        except _NotFound:
            raise self.error(f"node {self.node!r} disappeared") from None

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def elapsed_s(self) -> float:
        return time.monotonic() - self.t0


def _status_message(exc: ApiException) -> str:
    try:
        return " ".join(str(json.loads(exc.body).get("message", "")).split()) or str(exc.reason)
    except (TypeError, ValueError, AttributeError):
        return str(exc.reason)


# ---------------------------------------------------------------- node facts
@dataclass(frozen=True)
class GpuFacts:
    model: GpuModel
    gpus: int              # physical GPUs on the node
    product: str           # nvidia.com/gpu.product as labelled
    mig_strategy: str | None
    mig_capable: bool | None


def _labels(node) -> dict[str, str]:
    return dict(node.metadata.labels or {})


def _annotations(node) -> dict[str, str]:
    return dict(node.metadata.annotations or {})


def gpu_resources(node) -> dict[str, int]:
    """Allocatable NVIDIA GPU resources of a node (``nvidia.com/gpu``, ``.shared``, ``mig-*``)."""
    alloc = (node.status.allocatable if node.status else None) or {}
    out = {}
    for k, v in alloc.items():
        if k.startswith("nvidia.com/gpu") or k.startswith("nvidia.com/mig-"):
            try:
                out[k] = int(v)
            except ValueError:
                continue
    return dict(sorted(out.items()))


def gpu_facts(sess: _Session, node, gpu_model_name: str | None, recorded: dict | None) -> GpuFacts:
    labels = _labels(node)
    product = labels.get(LABEL_PRODUCT)
    count = labels.get(LABEL_COUNT)
    if not product and not gpu_model_name:
        raise sess.error(f"has no NVIDIA GPUs: labels {LABEL_PRODUCT} and {LABEL_COUNT} are absent "
                         "(is the gpu-operator's GPU feature discovery running on it?)")
    try:
        model = gpu_model(gpu_model_name or (recorded or {}).get("gpu_model") or product)
    except UserError as exc:
        raise sess.error(f"{exc}; pass gpu_model= / --gpu-model to name it") from None
    gpus = (recorded or {}).get("gpus")
    if not gpus:
        gpus = _physical_gpus(model, labels)
    if not gpus:
        raise sess.error(f"has no NVIDIA GPUs: {LABEL_COUNT}={count!r}")
    capable = labels.get(LABEL_MIG_CAPABLE)
    return GpuFacts(model, int(gpus), product or model.key, labels.get(LABEL_MIG_STRATEGY),
                    None if capable is None else capable == "true")


def _physical_gpus(model: GpuModel, labels: dict[str, str]) -> int:
    """Physical GPUs, also when GFD labels a MIG node (single: count of instances)."""
    product = labels.get(LABEL_PRODUCT, "")
    try:
        count = int(labels.get(LABEL_COUNT, "0"))
    except ValueError:
        count = 0
    if "-MIG-" in product.upper():
        prof = product.upper().split("-MIG-")[-1].lower()
        try:
            return max(1, -(-count // model.profile(prof).max_count))
        except UserError:
            return count
    if count:
        return count
    # mixed strategy, all GPUs in MIG: nvidia.com/mig-<profile>.count labels
    total = 0.0
    for k, v in labels.items():
        if k.startswith("nvidia.com/mig-") and k.endswith(".count"):
            try:
                total += int(v) / model.profile(k[len("nvidia.com/mig-"):-len(".count")]).max_count
            except (UserError, ValueError):
                continue
    return int(-(-total // 1))


# ---------------------------------------------------------------- pods
def _uses_gpu(pod) -> bool:
    spec = pod.spec
    for c in list(spec.containers or []) + list(spec.init_containers or []):
        res = c.resources
        for d in (res.limits, res.requests) if res else ():
            for k in (d or {}):
                if k.startswith("nvidia.com/gpu") or k.startswith("nvidia.com/mig-"):
                    return True
    return False


def gpu_pods(sess: _Session, operator_ns: str) -> list[str]:
    """``namespace/name`` of running or pending pods on the node that use its GPUs, not sharebench's."""
    pods = sess.call("list", "pods", sess.core.list_pod_for_all_namespaces,
                     field_selector=f"spec.nodeName={sess.node}")
    out = []
    for p in pods.items:
        if (p.status.phase if p.status else None) in ("Succeeded", "Failed"):
            continue
        if p.metadata.namespace == operator_ns:
            continue
        if (p.metadata.labels or {}).get(mf.PART_OF_LABEL[0]) == mf.PART_OF_LABEL[1]:
            continue
        if _uses_gpu(p):
            out.append(f"{p.metadata.namespace}/{p.metadata.name}")
    return sorted(out)


def _plugin_pods(sess: _Session, namespace: str) -> list:
    return sess.call("list", "pods", sess.core.list_namespaced_pod, namespace, namespace=namespace,
                     label_selector=PLUGIN_POD_SELECTOR, field_selector=f"spec.nodeName={sess.node}").items


def _pod_ready(p) -> bool:
    if not p.status or p.status.phase != "Running" or p.metadata.deletion_timestamp:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))


def restart_device_plugin(sess: _Session, namespace: str) -> None:
    """Delete the device-plugin and GPU-feature-discovery pods on the node (both read the
    ConfigMap only when they start) and wait for their DaemonSets to bring ready ones back."""
    old = _plugin_pods(sess, namespace)
    apps = sorted({(p.metadata.labels or {}).get("app") for p in old})
    if PLUGIN_APP not in apps:
        raise sess.error(f"no device-plugin pod (app={PLUGIN_APP}) on the node in namespace "
                         f"{namespace}; is the gpu-operator installed there (see --namespace)?")
    old_uids = {p.metadata.uid for p in old}
    for p in old:
        sess.say(f"restarting pod {namespace}/{p.metadata.name} so it re-reads the device-plugin config")
        try:
            sess.call("delete", "pods", sess.core.delete_namespaced_pod, p.metadata.name, namespace,
                      namespace=namespace)
        except _NotFound:
            pass  # already gone

    def ready():
        pods = _plugin_pods(sess, namespace)
        new = [p for p in pods if p.metadata.uid not in old_uids and _pod_ready(p)]
        ok = {(p.metadata.labels or {}).get("app") for p in new} >= set(apps)
        seen = ", ".join(f"{p.metadata.name}={p.status.phase if p.status else '?'}" for p in pods) or "none"
        return ok, f"pods: {seen}", None

    _wait(sess, "new ready " + " and ".join(apps) + " pods", ready)


# ---------------------------------------------------------------- waiting
def _wait(sess: _Session, what: str, check: Callable[[], tuple[bool, str, str | None]],
          stuck_hint: Callable[[], str] | None = None) -> None:
    """Poll ``check`` until it holds; it returns (ok, what is seen, failure or None)."""
    last_seen, last_report = None, 0.0
    while True:
        ok, seen, failure = check()
        if failure:
            raise sess.error(failure)
        if ok:
            sess.say(f"ok: {seen} ({sess.elapsed_s():.1f} s)")
            return
        now = time.monotonic()
        if seen != last_seen or now - last_report >= REPORT_EVERY_S:
            sess.say(f"waiting for {what}: {seen}")
            last_seen, last_report = seen, now
        if sess.remaining_s() <= 0:
            hint = stuck_hint() if stuck_hint else ""
            raise sess.error(f"timed out after {sess.timeout_s:g} s waiting for {what}; last seen: {seen}{hint}",
                             NodeTimeout)
        time.sleep(max(0.0, min(sess.poll_s, sess.remaining_s())))


def _fmt(d: dict) -> str:
    return ", ".join(f"{k}={'(removed)' if v is None else v}" for k, v in d.items()) or "none"


def _wait_mig_state(sess: _Session, layout: str, operator_ns: str) -> None:
    sess.state = f"waiting for MIG layout {layout}"

    def check():
        labels = _labels(sess.read_node())
        st = labels.get(LABEL_MIG_STATE)
        seen = f"{LABEL_MIG}={labels.get(LABEL_MIG)}, {LABEL_MIG_STATE}={st}"
        if labels.get(LABEL_MIG) == layout and st == "failed":
            return False, seen, (f"the MIG manager failed to apply {layout} ({LABEL_MIG_STATE}=failed); "
                                 "is the layout in the mig-parted config, and the GPUs idle?")
        return labels.get(LABEL_MIG) == layout and st == "success", seen, None

    def stuck():
        try:
            pods = gpu_pods(sess, operator_ns)
        except NodeError:
            pods = []
        who = f"GPU pods still on the node: {', '.join(pods)}" if pods else "no foreign GPU pod seen"
        return f"; likely cause: GPU pods that would not terminate ({who})"

    _wait(sess, f"{LABEL_MIG_STATE}=success", check, stuck)


def _with_state_reset(labels: dict) -> dict:
    """A label patch; where it changes nvidia.com/mig.config it also drops the MIG manager's
    state label, so the ``success`` of the previous layout is not taken for the new one."""
    if LABEL_MIG in labels:
        return {**labels, LABEL_MIG_STATE: None}
    return labels


# ---------------------------------------------------------------- targets
@dataclass(frozen=True)
class _Target:
    mode: Mode
    entry: str | None           # device-plugin config entry
    entry_text: str | None
    mig_layout: str | None      # None: leave the mig.config label alone
    resource: str               # resource the node must advertise
    per_gpu: int                # ... this many per physical GPU


def _target(mode: Mode, facts: GpuFacts, labels: dict, alloc: dict, rename: bool) -> _Target:
    has_mig = labels.get(LABEL_MIG) not in (None, "all-disabled") or any(
        k.startswith("nvidia.com/mig-") and v > 0 for k, v in alloc.items())
    if mode.kind == "mig":
        layout = resolve_layout(facts.model, mode.layout)
        entry = mf.entry_name("exclusive")
        text = mf.dump_yaml(mf.device_plugin_config("exclusive"))
        if layout == "all-disabled":
            return _Target(mode, entry, text, layout, "nvidia.com/gpu", 1)
        prof = facts.model.profile(layout[4:])
        res = "nvidia.com/gpu" if facts.mig_strategy == "single" else f"nvidia.com/mig-{prof.name}"
        return _Target(mode, entry, text, layout, res, prof.max_count)
    keep_mig = "all-disabled" if has_mig or LABEL_MIG in labels else None
    if mode.kind == "exclusive":
        return _Target(mode, mf.entry_name("exclusive"), mf.dump_yaml(mf.device_plugin_config("exclusive")),
                       keep_mig, "nvidia.com/gpu", 1)
    n = int(mode.replicas or 1)
    if n == 1:
        return _Target(mode, mf.entry_name("exclusive"), mf.dump_yaml(mf.device_plugin_config("exclusive")),
                       keep_mig, "nvidia.com/gpu", 1)
    res = "nvidia.com/gpu.shared" if rename else "nvidia.com/gpu"
    return _Target(mode, mf.entry_name(mode.kind, n, rename=rename),
                   mf.dump_yaml(mf.device_plugin_config(mode.kind, n, rename=rename)), keep_mig, res, n)


def _advertised_check(sess: _Session, t: _Target, facts: GpuFacts):
    want = facts.gpus * t.per_gpu
    replicas = t.per_gpu if t.mode.kind in ("timeslice", "mps") else None

    def check():
        node = sess.read_node()
        labels, alloc = _labels(node), gpu_resources(node)
        have = alloc.get(t.resource, 0)
        seen = f"allocatable {_fmt(alloc)}; {LABEL_REPLICAS}={labels.get(LABEL_REPLICAS)}"
        ok = have == want
        if t.mode.kind == "mig" and t.mig_layout != "all-disabled":
            # single: nvidia.com/gpu on a "-MIG-<profile>" product (a count alone could be a
            # time-slicing leftover); mixed: nvidia.com/mig-<profile>; unknown strategy: either
            prof = t.mig_layout[4:]
            single = (alloc.get("nvidia.com/gpu", 0) == want
                      and f"-MIG-{prof}".upper() in labels.get(LABEL_PRODUCT, "").upper())
            mixed = alloc.get(f"nvidia.com/mig-{prof}", 0) == want
            ok = {"single": single, "mixed": mixed}.get(facts.mig_strategy or "", single or mixed)
        else:
            others = {k: v for k, v in alloc.items() if k != t.resource and v > 0}
            ok = ok and not others and labels.get(LABEL_REPLICAS, "1") == str(replicas or 1)
            # GFD names the strategy (newer versions): tells timeslice:N from mps:N with equal counts
            sharing = labels.get(LABEL_SHARING)
            if sharing is not None:
                ok = ok and sharing == SHARING_STRATEGY.get(t.mode.kind if replicas else "", "none")
                seen += f"; {LABEL_SHARING}={sharing}"
        return ok, seen, None

    return check, f"{t.resource}={want}" + (f" and {LABEL_REPLICAS}={replicas}" if replicas else "")


# ---------------------------------------------------------------- prior state
def _read_prior(sess: _Session, node) -> dict | None:
    raw = _annotations(node).get(ANNOTATION)
    if raw is None:
        return None
    try:
        prior = json.loads(raw)
        if not isinstance(prior, dict) or prior.get("version") != STATE_VERSION:
            raise ValueError("unknown version")
        return prior
    except ValueError:
        raise sess.error(f"annotation {ANNOTATION} is unreadable; inspect it and remove it with "
                         f"'kubectl annotate node {sess.node} {ANNOTATION}-'") from None


def _record_prior(sess: _Session, node, facts: GpuFacts, namespace: str, configmap: str) -> tuple[object, dict]:
    """Store the node's state before the first change (once: later calls keep the first record)."""
    for _ in range(5):
        prior = _read_prior(sess, node)
        if prior is not None:
            return node, prior
        labels = _labels(node)
        prior = {
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
        body = {"metadata": {"resourceVersion": node.metadata.resource_version,
                             "annotations": {ANNOTATION: json.dumps(prior, sort_keys=True)}}}
        try:
            node = sess.call("patch", "nodes", sess.core.patch_node, sess.node, body)
            sess.say(f"recorded prior state in annotation {ANNOTATION}")
            return node, prior
        except NodeError as exc:
            if "HTTP 409" not in str(exc):
                raise
            node = sess.read_node()
    raise sess.error("could not record the prior state: the node kept changing (HTTP 409)")


def _save_prior(sess: _Session, prior: dict) -> None:
    sess.patch_node({"metadata": {"annotations": {ANNOTATION: json.dumps(prior, sort_keys=True)}}})


# ---------------------------------------------------------------- ConfigMap entries
def _read_configmap(sess: _Session, namespace: str, name: str):
    try:
        return sess.call("get", "configmaps", sess.core.read_namespaced_config_map, name, namespace,
                         namespace=namespace)
    except _NotFound:
        raise sess.error(f"ConfigMap {namespace}/{name} not found; apply manifests/operator/ "
                         "(or pass the device plugin's ConfigMap with --configmap, --namespace)") from None


def _set_entry(sess: _Session, namespace: str, name: str, entry: str, text: str | None,
               before_change: Callable[[str | None], None] | None = None) -> bool:
    """Make the ConfigMap entry equal ``text`` (None: remove it). True if it changed."""
    for _ in range(5):
        cm = _read_configmap(sess, namespace, name)
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
            sess.call("update", "configmaps", sess.core.replace_namespaced_config_map, name, namespace, cm,
                      namespace=namespace)
            sess.say(f"ConfigMap {namespace}/{name}: entry {entry} " + ("removed" if text is None else "written"))
            return True
        except NodeError as exc:
            if "HTTP 409" not in str(exc):
                raise
        except _NotFound:
            raise sess.error(f"ConfigMap {namespace}/{name} disappeared") from None
    raise sess.error(f"ConfigMap {namespace}/{name} kept changing under us (HTTP 409)")


# ---------------------------------------------------------------- public API
def _check_times(timeout_s: float, poll_s: float | None) -> None:
    if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
        raise UserError(f"timeout_s must be a number of seconds > 0 (got {timeout_s!r})")
    if poll_s is not None and not (isinstance(poll_s, (int, float)) and poll_s > 0):
        raise UserError(f"poll_s must be a number of seconds > 0 (got {poll_s!r})")


def reconfigure(node: str, mode: str, *, gpu_model: str | None = None, namespace: str = mf.OPERATOR_NAMESPACE,
                timeout_s: float = 600, force: bool = False, cordon: bool = False, api_client=None,
                progress: Progress | None = None, configmap: str = mf.DEVICE_PLUGIN_CONFIGMAP,
                rename_shared: bool = False, poll_s: float | None = None) -> dict:
    """Put ``node`` in sharing ``mode`` and wait until it advertises it.

    ``mode``: ``exclusive``, ``timeslice:N``, ``mps:N``, ``mig:LAYOUT`` (see sharebench.modes).
    Returns what the node advertises (``resources``, ``labels``), the device-plugin
    entry and MIG layout used, and ``previous`` (the prior state :func:`restore` returns to).
    """
    try:
        m = parse_mode(mode)
        _check_times(timeout_s, poll_s)
    except UserError as exc:
        raise NodeError(node, str(mode), "pre-flight", str(exc)) from None
    sess = _Session(node, m.label, api_client, progress, timeout_s, poll_s)
    if m.kind == "partition":
        raise sess.error("partition:N is a CPU-only local mode; a node takes exclusive, timeslice:N, mps:N, mig:LAYOUT")
    if m.kind == "mps" and m.thread_pct is not None:
        raise sess.error("the device plugin sets the MPS thread share itself (100/N); use mps:N without @PCT")

    n = sess.read_node()
    prior_seen = _read_prior(sess, n)
    facts = gpu_facts(sess, n, gpu_model, prior_seen)
    labels, alloc = _labels(n), gpu_resources(n)
    try:
        t = _target(m, facts, labels, alloc, rename_shared)
    except UserError as exc:
        raise sess.error(str(exc)) from None
    if t.mig_layout not in (None, "all-disabled") and facts.mig_capable is False:
        raise sess.error(f"{facts.product} GPUs on this node are not MIG capable ({LABEL_MIG_CAPABLE}=false)")
    foreign = gpu_pods(sess, namespace)
    if foreign:
        if not force:
            raise sess.error(f"refusing: pods outside sharebench use this node's GPUs ({', '.join(foreign)}); "
                             "a reconfiguration would disturb or evict them; pass --force to proceed anyway")
        sess.say(f"--force: proceeding although GPU pods run here: {', '.join(foreign)}")
    _read_configmap(sess, namespace, configmap)  # exists and is readable, before any change

    sess.state = "recording prior state"
    n, prior = _record_prior(sess, n, facts, namespace, configmap)

    if cordon and not (n.spec and n.spec.unschedulable):
        sess.state = "cordoning"
        n = sess.patch_node({"spec": {"unschedulable": True}})
        sess.say("cordoned (spec.unschedulable=true)")

    sess.state = f"writing device-plugin entry {t.entry}"

    def remember(current: str | None) -> None:
        entries = prior.setdefault("configmap", {}).setdefault("entries", {})
        if t.entry not in entries:
            entries[t.entry] = current
            _save_prior(sess, prior)

    changed = _set_entry(sess, namespace, configmap, t.entry, t.entry_text, remember)
    restarted = False
    if changed:  # a new or changed entry: the running plugin would not see it
        sess.state = "restarting the device plugin"
        restart_device_plugin(sess, namespace)
        restarted = True

    sess.state = "labelling"
    want = {LABEL_DP: t.entry}
    if t.mig_layout is not None:
        want[LABEL_MIG] = t.mig_layout
    current = _labels(sess.read_node())
    patch = {k: v for k, v in want.items() if current.get(k) != v}
    mig_changed = LABEL_MIG in patch or (
        t.mig_layout is not None and current.get(LABEL_MIG_STATE) not in ("success", None))
    if patch:
        sess.patch_node({"metadata": {"labels": _with_state_reset(patch)}})
        sess.say(f"labelled {_fmt(patch)}")

    if mig_changed and t.mig_layout is not None:
        _wait_mig_state(sess, t.mig_layout, namespace)
    check, what = _advertised_check(sess, t, facts)
    sess.state = f"waiting for {what}"
    _wait(sess, what, check)

    final = sess.read_node()
    fl = _labels(final)
    resource = t.resource
    if t.mode.kind == "mig" and facts.mig_strategy is None and t.mig_layout != "all-disabled":
        # no nvidia.com/mig.strategy label: name the resource the node turned out to advertise
        if gpu_resources(final).get(t.resource, 0) != facts.gpus * t.per_gpu:
            resource = "nvidia.com/gpu"
    return {
        "node": node,
        "mode": m.label,
        "gpu_model": facts.model.key,
        "gpus": facts.gpus,
        "device_plugin_config": t.entry,
        "mig_config": fl.get(LABEL_MIG),
        "mig_strategy": facts.mig_strategy,
        "resource": resource,
        "resources": gpu_resources(final),
        "labels": {k: v for k, v in sorted(fl.items()) if k.startswith("nvidia.com/")},
        "cordoned": bool(final.spec and final.spec.unschedulable),
        "plugin_restarted": restarted,
        "elapsed_s": round(sess.elapsed_s(), 3),
        "previous": prior,
    }


def restore(node: str, *, api_client=None, timeout_s: float = 600, progress: Progress | None = None,
            poll_s: float | None = None) -> dict:
    """Put the node back as it was before sharebench's first change; idempotent.

    Reads the prior state from the node's annotation (so it works from another process
    after a killed pipeline), restores changed ConfigMap entries, labels and cordon,
    waits for the operator, then removes the annotation. Without an annotation it
    changes nothing and returns ``restored: False``.
    """
    try:
        _check_times(timeout_s, poll_s)
    except UserError as exc:
        raise NodeError(node, "restore", "pre-flight", str(exc)) from None
    sess = _Session(node, "restore", api_client, progress, timeout_s, poll_s)
    n = sess.read_node()
    prior = _read_prior(sess, n)
    if prior is None:
        sess.say("no recorded prior state: nothing to restore")
        return {"node": node, "restored": False, "resources": gpu_resources(n),
                "labels": {k: v for k, v in sorted(_labels(n).items()) if k.startswith("nvidia.com/")}}
    cm = prior.get("configmap", {})
    ns, cm_name = cm.get("namespace", mf.OPERATOR_NAMESPACE), cm.get("name", mf.DEVICE_PLUGIN_CONFIGMAP)
    changed = False
    left = []
    sess.state = "restoring ConfigMap entries"
    for entry, text in sorted(cm.get("entries", {}).items()):
        if text is None:
            left.append(entry)  # added by sharebench; harmless, maybe used by another node: left
            continue
        changed |= _set_entry(sess, ns, cm_name, entry, text)
    if changed:
        sess.state = "restarting the device plugin"
        restart_device_plugin(sess, ns)

    sess.state = "restoring labels"
    want = prior.get("labels", {})
    current = _labels(sess.read_node())
    mig_prev = want.get(LABEL_MIG)
    mig_now = current.get(LABEL_MIG)
    if mig_prev is None and mig_now not in (None, "all-disabled"):
        # removing the label would leave MIG as it is: disable MIG first, then drop the label
        sess.patch_node({"metadata": {"labels": _with_state_reset({LABEL_MIG: "all-disabled"})}})
        sess.say(f"labelled {LABEL_MIG}=all-disabled before removing the label")
        _wait_mig_state(sess, "all-disabled", ns)
    patch = {k: v for k, v in want.items() if current.get(k) != v}
    body: dict = {"metadata": {"labels": _with_state_reset(patch)}} if patch else {}
    node_now = sess.read_node()
    if bool(node_now.spec and node_now.spec.unschedulable) != bool(prior.get("unschedulable")):
        body["spec"] = {"unschedulable": bool(prior.get("unschedulable")) or None}
    if body:
        sess.patch_node(body)
        sess.say(f"restored {_fmt(patch)}" + (" and schedulability" if "spec" in body else ""))
    if mig_prev is not None and LABEL_MIG in patch:
        _wait_mig_state(sess, mig_prev, ns)

    want_alloc = {k: int(v) for k, v in prior.get("allocatable", {}).items() if int(v) > 0}
    want_labels = dict(prior.get("advertised_labels", {}))
    sess.state = "waiting for the operator"

    def check():
        n_now = sess.read_node()
        got = {k: v for k, v in gpu_resources(n_now).items() if v > 0}
        labels_now = _labels(n_now)
        got_labels = {k: labels_now.get(k) for k in want_labels}
        ok = got == want_alloc and got_labels == want_labels
        return ok, f"allocatable {_fmt(got)}" + (f"; {_fmt(got_labels)}" if got_labels else ""), None

    _wait(sess, f"allocatable {_fmt(want_alloc)}" + (f"; {_fmt(want_labels)}" if want_labels else ""), check)
    sess.state = "removing the prior-state annotation"
    final = sess.patch_node({"metadata": {"annotations": {ANNOTATION: None}}})
    sess.say("restored; prior-state annotation removed")
    return {
        "node": node,
        "restored": True,
        "resources": gpu_resources(final),
        "labels": {k: v for k, v in sorted(_labels(final).items()) if k.startswith("nvidia.com/")},
        "cordoned": bool(final.spec and final.spec.unschedulable),
        "entries_left": left,
        "elapsed_s": round(sess.elapsed_s(), 3),
        "previous": prior,
    }


def status(node: str, *, api_client=None, namespace: str = mf.OPERATOR_NAMESPACE, gpu_model: str | None = None) -> dict:
    """What the node advertises now, its GPU facts, GPU pods on it and any recorded prior state."""
    sess = _Session(node, "status", api_client, None, 0, POLL_S)
    n = sess.read_node()
    prior = _read_prior(sess, n)
    facts = gpu_facts(sess, n, gpu_model, prior)
    labels = _labels(n)
    return {
        "node": node,
        "gpu_model": facts.model.key,
        "gpus": facts.gpus,
        "product": facts.product,
        "mig_strategy": facts.mig_strategy,
        "device_plugin_config": labels.get(LABEL_DP),
        "mig_config": labels.get(LABEL_MIG),
        "mig_config_state": labels.get(LABEL_MIG_STATE),
        "resources": gpu_resources(n),
        "cordoned": bool(n.spec and n.spec.unschedulable),
        "gpu_pods": gpu_pods(sess, namespace),
        "prior_state": prior,
    }
