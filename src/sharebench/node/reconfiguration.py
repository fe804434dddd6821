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

from dataclasses import dataclass
from typing import Any

from sharebench.errors import UserError
from sharebench.manifests.names import DEVICE_PLUGIN_CONFIGMAP, OPERATOR_NAMESPACE
from sharebench.modes import Mode, parse_mode
from sharebench.node.client import POLL_S, NodeError, Progress, Session, check_times
from sharebench.node.facts import (
    LABEL_DP,
    LABEL_MIG,
    LABEL_MIG_CAPABLE,
    LABEL_MIG_STATE,
    GpuFacts,
    format_pairs,
    gpu_facts,
    gpu_pods,
    gpu_resources,
    node_labels,
    nvidia_labels,
)
from sharebench.node.lease import (
    LEASE_DURATION_S,
    acquire,
    check_release,
    default_holder,
    holder_gone,
    holder_of,
    release,
)
from sharebench.node.operands import (
    read_configmap,
    restart_device_plugin,
    set_entry,
    wait,
    wait_mig_state,
    with_state_reset,
)
from sharebench.node.prior import read_prior, record_prior, remove_prior, save_prior
from sharebench.node.targets import Target, advertised_check, check_node_mode, target_for
from sharebench.placement import check_node_name


@dataclass(frozen=True)
class ReconfigureOptions:
    """How :func:`reconfigure` moves a node; checked when it runs (``timeout_s``, ``poll_s`` > 0)."""

    gpu_model: str | None = None  # GPU model key or product; None: from the node's labels
    namespace: str = OPERATOR_NAMESPACE  # the gpu-operator's namespace
    configmap: str = DEVICE_PLUGIN_CONFIGMAP  # the device plugin's ConfigMap in that namespace
    timeout_s: float = 600  # deadline of the whole call
    poll_s: float | None = None  # between two looks at the node; None: 2 s
    force: bool = False  # proceed although foreign pods use the node's GPUs
    cordon: bool = False  # mark the node unschedulable (restore undoes it)
    rename_shared: bool = False  # advertise shared GPUs as nvidia.com/gpu.shared
    holder: str | None = None  # who holds the node's Lease (a run id); None: this machine
    lease_s: float = LEASE_DURATION_S  # the Lease lasts this long unless renewed (every apply)


# ---------------------------------------------------------------- reconfigure
def reconfigure(
    node: str,
    mode: str,
    options: ReconfigureOptions = ReconfigureOptions(),
    *,
    api_client: Any = None,
    progress: Progress | None = None,
) -> dict:
    """Put ``node`` in sharing ``mode`` and wait until it advertises it.

    ``mode``: ``exclusive``, ``timeslice:N``, ``mps:N``, ``mig:LAYOUT`` (see sharebench.modes).
    Returns what the node advertises (``resources``, ``labels``), the device-plugin
    entry and MIG layout used, and ``previous`` (the prior state :func:`restore` returns to).
    """
    try:
        check_node_name(node)
        m = parse_mode(mode)
        check_times(options.timeout_s, options.poll_s)
    except UserError as exc:
        raise NodeError(node, str(mode), "pre-flight", str(exc)) from None
    sess = Session(node, m.label, api_client, progress, options.timeout_s, options.poll_s)
    n, facts, t = _preflight(sess, m, options)
    # one reconfiguration per node: the last check, and the first write
    acquire(sess, options.holder or default_holder(), options.lease_s)
    try:
        prior, restarted, mig_changed = _apply(sess, n, facts, t, options)
        _wait_advertised(sess, t, facts, mig_changed, options.namespace)
    except NodeError as exc:
        if not sess.changed:  # nothing changed: give the node back to other runs
            try:
                release(sess, options.holder or default_holder())
            except NodeError:
                pass  # it expires by itself
            raise
        # past the pre-flight the node may be half-configured: say how to put it back
        raise type(exc)(
            exc.node,
            exc.mode,
            exc.state,
            f"{exc.what}; the node may be half-configured: run "
            f"'sharebench node restore {node}' to put it back as it was",
        ) from None
    return _reconfigured(sess, facts, t, prior, restarted)


def preview(
    node: str, mode: str, options: ReconfigureOptions = ReconfigureOptions(), *, api_client: Any = None
) -> dict:
    """What :func:`reconfigure` would change, changing nothing (``node apply --dry-run``): the same
    pre-flight checks, then the ConfigMap entry and node labels it would write and the Lease's holder."""
    try:
        check_node_name(node)
        m = parse_mode(mode)
    except UserError as exc:
        raise NodeError(node, str(mode), "pre-flight", str(exc)) from None
    sess = Session(node, m.label, api_client, None, options.timeout_s, options.poll_s)
    n, _facts, t = _preflight(sess, m, options)
    current_text = (read_configmap(sess, options.namespace, options.configmap).data or {}).get(t.entry)
    labels = node_labels(n)
    want = {LABEL_DP: t.entry, **({LABEL_MIG: t.mig_layout} if t.mig_layout is not None else {})}
    label_changes = {k: v for k, v in want.items() if labels.get(k) != v}
    entry_change = "unchanged" if current_text == t.entry_text else "add" if current_text is None else "replace"
    lease = holder_of(sess)
    holder = options.holder or default_holder()
    return {
        "node": node,
        "mode": m.label,
        "dry_run": True,
        "configmap": f"{options.namespace}/{options.configmap}",
        "entry": f"{t.entry}: {entry_change}",
        "label_changes": {k: f"{labels.get(k, '(absent)')} -> {v}" for k, v in label_changes.items()},
        "restarts_device_plugin": entry_change != "unchanged",
        "cordon": bool(options.cordon and not (n.spec and n.spec.unschedulable)),
        "lease": (
            f"held by {lease['holder']} (expires in {lease['expires_in_s']:.0f} s): refused"
            if lease and lease["holder"] != holder and not holder_gone(lease["holder"])
            else f"taken by {holder}"
        ),
        "resource": t.resource,
    }


def _preflight(sess: Session, m: Mode, options: ReconfigureOptions) -> tuple[Any, GpuFacts, Target]:
    """Step 1: check everything before the first change; the node, its GPU facts and the target."""
    try:
        check_node_mode(m)  # a local-only kind, a thread share or an interval: before anything is read
    except UserError as exc:
        raise sess.error(str(exc)) from None
    n = sess.read_node()
    prior_seen = read_prior(sess, n)
    facts = gpu_facts(sess, n, options.gpu_model, prior_seen)
    labels, alloc = node_labels(n), gpu_resources(n)
    try:
        t = target_for(m, facts, labels, alloc, options.rename_shared)
    except UserError as exc:
        raise sess.error(str(exc)) from None
    if t.mig_layout not in (None, "all-disabled") and facts.mig_capable is False:
        raise sess.error(f"{facts.product} GPUs on this node are not MIG capable ({LABEL_MIG_CAPABLE}=false)")
    foreign = gpu_pods(sess, options.namespace, options.holder)
    if foreign:
        if not options.force:
            raise sess.error(
                f"refusing: pods outside this run use this node's GPUs ({', '.join(foreign)}); "
                "a reconfiguration would disturb or evict them; pass --force to proceed anyway"
            )
        sess.say(f"--force: proceeding although GPU pods run here: {', '.join(foreign)}")
    read_configmap(sess, options.namespace, options.configmap)  # exists and is readable, before any change
    return n, facts, t


def _apply(sess: Session, n: Any, facts: GpuFacts, t: Target, options: ReconfigureOptions) -> tuple[dict, bool, bool]:
    """Steps 2-4: record the prior state, cordon, write the entry, label; (prior, plugin restarted, MIG changed)."""
    sess.state = "recording prior state"
    n, prior = record_prior(sess, n, facts, options.namespace, options.configmap)
    sess.changed = True
    if options.cordon and not (n.spec and n.spec.unschedulable):
        sess.state = "cordoning"
        sess.patch_node({"spec": {"unschedulable": True}})
        sess.say("cordoned (spec.unschedulable=true)")
    restarted = _write_entry(sess, t, prior, options)
    mig_changed = _label(sess, t)
    return prior, restarted, mig_changed


def _write_entry(sess: Session, t: Target, prior: dict, options: ReconfigureOptions) -> bool:
    """Step 3: write the device-plugin entry, remembering its old text; restart the plugin if it changed."""
    sess.state = f"writing device-plugin entry {t.entry}"

    def remember(current: str | None) -> None:
        entries = prior.setdefault("configmap", {}).setdefault("entries", {})
        if t.entry not in entries:
            entries[t.entry] = current
            save_prior(sess, prior)

    changed = set_entry(sess, options.namespace, options.configmap, t.entry, t.entry_text, remember)
    if changed:  # a new or changed entry: the running plugin would not see it
        sess.state = "restarting the device plugin"
        restart_device_plugin(sess, options.namespace)
    return changed


def _label(sess: Session, t: Target) -> bool:
    """Step 4: label the node with the entry and MIG layout; True when the MIG manager has work to do."""
    sess.state = "labelling"
    want = {LABEL_DP: t.entry}
    if t.mig_layout is not None:
        want[LABEL_MIG] = t.mig_layout
    current = node_labels(sess.read_node())
    patch = {k: v for k, v in want.items() if current.get(k) != v}
    mig_changed = LABEL_MIG in patch or (
        t.mig_layout is not None and current.get(LABEL_MIG_STATE) not in ("success", None)
    )
    if patch:
        sess.patch_node({"metadata": {"labels": with_state_reset(patch)}})
        sess.say(f"labelled {format_pairs(patch)}")
    return mig_changed


def _wait_advertised(sess: Session, t: Target, facts: GpuFacts, mig_changed: bool, namespace: str) -> None:
    """Step 5: wait for the MIG manager (when the layout changed), then for what the mode promises."""
    if mig_changed and t.mig_layout is not None:
        wait_mig_state(sess, t.mig_layout, namespace)
    check, what = advertised_check(sess, t, facts)
    sess.state = f"waiting for {what}"
    wait(sess, what, check)


def _reconfigured(sess: Session, facts: GpuFacts, t: Target, prior: dict, restarted: bool) -> dict:
    """What :func:`reconfigure` returns: what the node advertises now, and the prior state."""
    final = sess.read_node()
    fl = node_labels(final)
    resource = t.resource
    # no nvidia.com/mig.strategy label: name the resource the node turned out to advertise
    if (
        t.mig_profile
        and facts.mig_strategy is None
        and gpu_resources(final).get(t.resource, 0) != facts.gpus * t.per_gpu
    ):
        resource = "nvidia.com/gpu"
    return {
        "node": sess.node,
        "mode": t.mode.label,
        "gpu_model": facts.model.key,
        "gpus": facts.gpus,
        "device_plugin_config": t.entry,
        "mig_config": fl.get(LABEL_MIG),
        "mig_strategy": facts.mig_strategy,
        "resource": resource,
        "resources": gpu_resources(final),
        "labels": nvidia_labels(final),
        "cordoned": bool(final.spec and final.spec.unschedulable),
        "plugin_restarted": restarted,
        "elapsed_s": round(sess.elapsed_s(), 3),
        "previous": prior,
    }


# ---------------------------------------------------------------- restore
def restore(
    node: str,
    *,
    timeout_s: float = 600,
    poll_s: float | None = None,
    api_client: Any = None,
    progress: Progress | None = None,
    holder: str | None = None,
    force: bool = False,
) -> dict:
    """Put the node back as it was before sharebench's first change; idempotent.

    Reads the prior state from the node's annotation (so it works from another process
    after a killed pipeline), restores changed ConfigMap entries, labels and cordon,
    waits for the operator, then removes the annotation and releases the node's Lease.
    Without an annotation it changes nothing and returns ``restored: False``. A state
    sharebench did not sign is refused. ``holder`` (a run's own restore) is refused on
    another run's node; a person's restore (``holder`` None) of a node a live run holds
    needs ``force`` (the refusal names the run, which stops at its next renewal).
    """
    try:
        check_node_name(node)
        check_times(timeout_s, poll_s)
    except UserError as exc:
        raise NodeError(node, "restore", "pre-flight", str(exc)) from None
    sess = Session(node, "restore", api_client, progress, timeout_s, poll_s)
    n = sess.read_node()
    check_release(sess, holder, force=force)  # another run's node: refused before any change
    prior = read_prior(sess, n)
    if prior is None:
        sess.say("no recorded prior state: nothing to restore")
        release(sess, holder, force=force)
        return {"node": node, "restored": False, "resources": gpu_resources(n), "labels": nvidia_labels(n)}
    ns, added = _restore_entries(sess, prior)
    _restore_labels(sess, prior, ns)
    _wait_restored(sess, prior)
    left = _remove_added_entries(sess, prior, added)
    sess.state = "removing the prior-state annotation"
    final = remove_prior(sess)
    sess.say("restored; prior-state annotation removed")
    release(sess, holder, force=force)
    return {
        "node": node,
        "restored": True,
        "resources": gpu_resources(final),
        "labels": nvidia_labels(final),
        "cordoned": bool(final.spec and final.spec.unschedulable),
        "entries_left": left,
        "elapsed_s": round(sess.elapsed_s(), 3),
        "previous": prior,
    }


def _restore_entries(sess: Session, prior: dict) -> tuple[str, list[str]]:
    """Put back the ConfigMap entries sharebench changed; (operator namespace, entries it added and left)."""
    cm = prior.get("configmap", {})
    ns, cm_name = cm.get("namespace", OPERATOR_NAMESPACE), cm.get("name", DEVICE_PLUGIN_CONFIGMAP)
    changed = False
    left = []
    sess.state = "restoring ConfigMap entries"
    for entry, text in sorted(cm.get("entries", {}).items()):
        if text is None:
            left.append(entry)  # added by sharebench: removed once the node no longer uses it
            continue
        changed |= set_entry(sess, ns, cm_name, entry, text)
    if changed:
        sess.state = "restarting the device plugin"
        restart_device_plugin(sess, ns)
    return ns, left


def _remove_added_entries(sess: Session, prior: dict, added: list[str]) -> list[str]:
    """Remove the entries sharebench added to the site's ConfigMap, except those a node still uses
    (another node's run); returns those left."""
    cm = prior.get("configmap", {})
    ns, cm_name = cm.get("namespace", OPERATOR_NAMESPACE), cm.get("name", DEVICE_PLUGIN_CONFIGMAP)
    sess.state = "removing sharebench's ConfigMap entries"
    left = []
    for entry in added:
        users = sess.call("list", "nodes", sess.core.list_node, label_selector=f"{LABEL_DP}={entry}").items
        if users:
            left.append(entry)
            sess.say(
                f"ConfigMap {ns}/{cm_name}: entry {entry} left, node(s) "
                f"{', '.join(u.metadata.name for u in users)} use it"
            )
            continue
        set_entry(sess, ns, cm_name, entry, None)
    return left


def _restore_labels(sess: Session, prior: dict, ns: str) -> None:
    """Put back the recorded labels and schedulability; wait for the MIG manager where MIG changes."""
    sess.state = "restoring labels"
    want = prior.get("labels", {})
    current = node_labels(sess.read_node())
    mig_prev = want.get(LABEL_MIG)
    mig_now = current.get(LABEL_MIG)
    if mig_prev is None and mig_now not in (None, "all-disabled"):
        # removing the label would leave MIG as it is: disable MIG first, then drop the label
        sess.patch_node({"metadata": {"labels": with_state_reset({LABEL_MIG: "all-disabled"})}})
        sess.say(f"labelled {LABEL_MIG}=all-disabled before removing the label")
        wait_mig_state(sess, "all-disabled", ns)
    patch = {k: v for k, v in want.items() if current.get(k) != v}
    body: dict = {"metadata": {"labels": with_state_reset(patch)}} if patch else {}
    node_now = sess.read_node()
    if bool(node_now.spec and node_now.spec.unschedulable) != bool(prior.get("unschedulable")):
        body["spec"] = {"unschedulable": bool(prior.get("unschedulable")) or None}
    if body:
        sess.patch_node(body)
        sess.say(f"restored {format_pairs(patch)}" + (" and schedulability" if "spec" in body else ""))
    if mig_prev is not None and LABEL_MIG in patch:
        wait_mig_state(sess, mig_prev, ns)


def _wait_restored(sess: Session, prior: dict) -> None:
    """Wait until the node advertises the recorded allocatable resources and GFD labels again."""
    want_alloc = {k: int(v) for k, v in prior.get("allocatable", {}).items() if int(v) > 0}
    want_labels = dict(prior.get("advertised_labels", {}))
    sess.state = "waiting for the operator"

    def check() -> tuple[bool, str, str | None]:
        n_now = sess.read_node()
        got = {k: v for k, v in gpu_resources(n_now).items() if v > 0}
        labels_now = node_labels(n_now)
        got_labels = {k: labels_now.get(k) for k in want_labels}
        ok = got == want_alloc and got_labels == want_labels
        return ok, f"allocatable {format_pairs(got)}" + (f"; {format_pairs(got_labels)}" if got_labels else ""), None

    wait(
        sess,
        f"allocatable {format_pairs(want_alloc)}" + (f"; {format_pairs(want_labels)}" if want_labels else ""),
        check,
    )


# ---------------------------------------------------------------- status
def status(
    node: str, *, namespace: str = OPERATOR_NAMESPACE, gpu_model: str | None = None, api_client: Any = None
) -> dict:
    """What the node advertises now, its GPU facts, GPU pods on it and any recorded prior state."""
    check_node_name(node)
    sess = Session(node, "status", api_client, None, 0, POLL_S)
    n = sess.read_node()
    prior = read_prior(sess, n, verify=False)  # shown, never applied: status needs no key
    facts = gpu_facts(sess, n, gpu_model, prior)
    labels = node_labels(n)
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
        "lease": holder_of(sess),
    }
