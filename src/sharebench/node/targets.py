"""What a sharing mode requires of a node: the device-plugin entry and MIG layout to set
(:class:`Target`), and the check that the node advertises what the mode promises."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sharebench.errors import UserError
from sharebench.gpus import resolve_layout
from sharebench.manifests.dump import dump_yaml
from sharebench.manifests.operator import device_plugin_config, entry_name
from sharebench.modes import BASELINE, KINDS, Mode
from sharebench.node.client import Session
from sharebench.node.facts import (
    LABEL_MIG,
    LABEL_PRODUCT,
    LABEL_REPLICAS,
    LABEL_SHARING,
    GpuFacts,
    format_pairs,
    gpu_resources,
    node_labels,
)
from sharebench.node.operands import Check


@dataclass(frozen=True)
class Target:
    mode: Mode
    entry: str  # device-plugin config entry
    entry_text: str | None
    mig_layout: str | None  # None: leave the mig.config label alone
    resource: str  # resource the node must advertise
    per_gpu: int  # ... this many per physical GPU
    mig_profile: str = ""  # the MIG profile whose instances the node must advertise ('' none)


@dataclass(frozen=True)
class NodeView:
    """What a node target is decided from: the node's GPU facts, labels, allocatable resources, and
    whether shared replicas are renamed ``nvidia.com/gpu.shared``."""

    facts: GpuFacts
    labels: dict
    alloc: dict
    rename: bool

    @property
    def keep_mig(self) -> str | None:
        """``all-disabled`` when the node has MIG on or carries the label; None: leave the label alone."""
        has_mig = self.labels.get(LABEL_MIG) not in (None, "all-disabled") or any(
            k.startswith("nvidia.com/mig-") and v > 0 for k, v in self.alloc.items()
        )
        return "all-disabled" if has_mig or LABEL_MIG in self.labels else None


NodeTarget = Callable[[Mode, NodeView], Target]


def _exclusive(mode: Mode, mig_layout: str | None) -> Target:
    entry = dump_yaml(device_plugin_config(BASELINE))
    return Target(mode, entry_name(BASELINE), entry, mig_layout, "nvidia.com/gpu", 1)


def target_whole(mode: Mode, node: NodeView) -> Target:
    """One pod per GPU: the baseline's entry, MIG turned off."""
    return _exclusive(mode, node.keep_mig)


def target_shared(mode: Mode, node: NodeView) -> Target:
    """N pods per GPU: the device plugin's entry for the kind's sharing strategy, MIG turned off."""
    n = int(mode.replicas or 1)
    if n == 1:
        return _exclusive(mode, node.keep_mig)
    res = "nvidia.com/gpu.shared" if node.rename else "nvidia.com/gpu"
    return Target(
        mode,
        entry_name(mode.kind, n, rename=node.rename),
        dump_yaml(device_plugin_config(mode.kind, n, rename=node.rename)),
        node.keep_mig,
        res,
        n,
    )


def target_mig(mode: Mode, node: NodeView) -> Target:
    """A MIG layout, under the baseline's entry; the node advertises one resource per instance."""
    facts = node.facts
    layout = resolve_layout(facts.model, mode.layout or "")
    if layout == "all-disabled":
        return _exclusive(mode, layout)
    prof = facts.model.profile(layout[4:])
    res = "nvidia.com/gpu" if facts.mig_strategy == "single" else f"nvidia.com/mig-{prof.name}"
    entry = dump_yaml(device_plugin_config(BASELINE))
    return Target(mode, entry_name(BASELINE), entry, layout, res, prof.max_count, mig_profile=prof.name)


# each kind's node target, keyed by KindSpec.name; a local-only kind has none
# (tests/vocabulary/test_kinds.py checks every other kind has one)
NODE_TARGETS: dict[str, NodeTarget] = {
    "exclusive": target_whole,
    "timeslice": target_shared,
    "mps": target_shared,
    "mig": target_mig,
}


def node_modes() -> str:
    """The modes a node takes, as the help writes them (``exclusive, timeslice:N, mps:N, mig:LAYOUT``)."""
    return ", ".join(KINDS[k].grammar.split("[")[0] for k in NODE_TARGETS if k in KINDS)


def check_node_mode(mode: Mode) -> None:
    """A one-line UserError when ``mode`` cannot be set on a node (a local-only kind, a thread share, an
    interval: the device plugin sets neither)."""
    spec = mode.spec
    if spec.local_only or mode.kind not in NODE_TARGETS:
        cpu = "CPU-only " if spec.device_class == "cpu" else ""
        raise UserError(f"{mode.label} is a {cpu}local mode; a node takes {node_modes()}")
    if mode.thread_pct is not None:
        raise UserError("the device plugin sets the MPS thread share itself (100/N); use mps:N without @PCT")
    if mode.interval is not None:
        raise UserError(
            "the device plugin cannot set the time-slice interval; use timeslice:N here, or the "
            "pipeline's placement dra (the DRA driver sets it per claim)"
        )


def target_for(mode: Mode, facts: GpuFacts, labels: dict, alloc: dict, rename: bool) -> Target:
    """The target of ``mode`` on a node with these facts, labels and allocatable resources: the kind's
    row of :data:`NODE_TARGETS`.

    MIG layouts run under the ``exclusive`` entry; other modes turn MIG off (``all-disabled``)
    when the node has it on or carries the label, and leave the label alone otherwise.
    """
    check_node_mode(mode)
    return NODE_TARGETS[mode.kind](mode, NodeView(facts, labels, alloc, rename))


def advertised_check(sess: Session, t: Target, facts: GpuFacts) -> tuple[Check, str]:
    """A check for :func:`~sharebench.node.operands.wait` that the node advertises ``t``, and what it waits for."""
    want = facts.gpus * t.per_gpu
    strategy = t.mode.spec.plugin_sharing  # '' for the baseline and MIG
    replicas = t.per_gpu if strategy else None

    def check() -> tuple[bool, str, str | None]:
        node = sess.read_node()
        labels, alloc = node_labels(node), gpu_resources(node)
        have = alloc.get(t.resource, 0)
        seen = f"allocatable {format_pairs(alloc)}; {LABEL_REPLICAS}={labels.get(LABEL_REPLICAS)}"
        ok = have == want
        if t.mig_profile:
            # single: nvidia.com/gpu on a "-MIG-<profile>" product (a count alone could be a
            # time-slicing leftover); mixed: nvidia.com/mig-<profile>; unknown strategy: either
            prof = t.mig_profile
            single = (
                alloc.get("nvidia.com/gpu", 0) == want
                and f"-MIG-{prof}".upper() in labels.get(LABEL_PRODUCT, "").upper()
            )
            mixed = alloc.get(f"nvidia.com/mig-{prof}", 0) == want
            ok = {"single": single, "mixed": mixed}.get(facts.mig_strategy or "", single or mixed)
        else:
            others = {k: v for k, v in alloc.items() if k != t.resource and v > 0}
            ok = ok and not others and labels.get(LABEL_REPLICAS, "1") == str(replicas or 1)
            # GFD names the strategy (newer versions): tells timeslice:N from mps:N with equal counts
            sharing = labels.get(LABEL_SHARING)
            if sharing is not None:
                ok = ok and sharing == ((strategy if replicas else "") or "none")
                seen += f"; {LABEL_SHARING}={sharing}"
        return ok, seen, None

    return check, f"{t.resource}={want}" + (f" and {LABEL_REPLICAS}={replicas}" if replicas else "")
