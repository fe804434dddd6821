"""What a sharing mode requires of a node: the device-plugin entry and MIG layout to set
(:class:`Target`), and the check that the node advertises what the mode promises."""

from __future__ import annotations

from dataclasses import dataclass

from sharebench.gpus import resolve_layout
from sharebench.manifests.dump import dump_yaml
from sharebench.manifests.operator import device_plugin_config, entry_name
from sharebench.modes import Mode
from sharebench.node.client import Session
from sharebench.node.facts import (
    LABEL_MIG,
    LABEL_PRODUCT,
    LABEL_REPLICAS,
    LABEL_SHARING,
    SHARING_STRATEGY,
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


def _exclusive(mode: Mode, mig_layout: str | None) -> Target:
    return Target(
        mode, entry_name("exclusive"), dump_yaml(device_plugin_config("exclusive")), mig_layout, "nvidia.com/gpu", 1
    )


def target_for(mode: Mode, facts: GpuFacts, labels: dict, alloc: dict, rename: bool) -> Target:
    """The target of ``mode`` on a node with these facts, labels and allocatable resources.

    MIG layouts run under the ``exclusive`` entry; other modes turn MIG off (``all-disabled``)
    when the node has it on or carries the label, and leave the label alone otherwise.
    """
    has_mig = labels.get(LABEL_MIG) not in (None, "all-disabled") or any(
        k.startswith("nvidia.com/mig-") and v > 0 for k, v in alloc.items()
    )
    if mode.kind == "mig":
        layout = resolve_layout(facts.model, mode.layout or "")
        if layout == "all-disabled":
            return _exclusive(mode, layout)
        prof = facts.model.profile(layout[4:])
        res = "nvidia.com/gpu" if facts.mig_strategy == "single" else f"nvidia.com/mig-{prof.name}"
        return Target(
            mode, entry_name("exclusive"), dump_yaml(device_plugin_config("exclusive")), layout, res, prof.max_count
        )
    keep_mig = "all-disabled" if has_mig or LABEL_MIG in labels else None
    n = 1 if mode.kind == "exclusive" else int(mode.replicas or 1)
    if n == 1:
        return _exclusive(mode, keep_mig)
    res = "nvidia.com/gpu.shared" if rename else "nvidia.com/gpu"
    return Target(
        mode,
        entry_name(mode.kind, n, rename=rename),
        dump_yaml(device_plugin_config(mode.kind, n, rename=rename)),
        keep_mig,
        res,
        n,
    )


def advertised_check(sess: Session, t: Target, facts: GpuFacts) -> tuple[Check, str]:
    """A check for :func:`~sharebench.node.operands.wait` that the node advertises ``t``, and what it waits for."""
    want = facts.gpus * t.per_gpu
    replicas = t.per_gpu if t.mode.kind in ("timeslice", "mps") else None

    def check() -> tuple[bool, str, str | None]:
        node = sess.read_node()
        labels, alloc = node_labels(node), gpu_resources(node)
        have = alloc.get(t.resource, 0)
        seen = f"allocatable {format_pairs(alloc)}; {LABEL_REPLICAS}={labels.get(LABEL_REPLICAS)}"
        ok = have == want
        if t.mode.kind == "mig" and t.mig_layout is not None and t.mig_layout != "all-disabled":
            # single: nvidia.com/gpu on a "-MIG-<profile>" product (a count alone could be a
            # time-slicing leftover); mixed: nvidia.com/mig-<profile>; unknown strategy: either
            prof = t.mig_layout[4:]
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
                ok = ok and sharing == SHARING_STRATEGY.get(t.mode.kind if replicas else "", "none")
                seen += f"; {LABEL_SHARING}={sharing}"
        return ok, seen, None

    return check, f"{t.resource}={want}" + (f" and {LABEL_REPLICAS}={replicas}" if replicas else "")
