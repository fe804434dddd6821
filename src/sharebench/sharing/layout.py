"""The plan of one cell: which replicas run, on which device, pinned how.

``plan_cell(mode, device)`` decides, before anything runs, how a mode lays its replicas out on a
device (the same device N times; disjoint core sets for ``partition:N``; one existing MIG
instance each for ``mig:LAYOUT``), or says in one line why the mode cannot run there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from sharebench import gpus
from sharebench.devices import DeviceInfo, as_device
from sharebench.devices.host import usable_cpus
from sharebench.errors import UserError
from sharebench.modes import Mode, parse_mode
from sharebench.sharing.cpus import partition_cpus
from sharebench.sharing.mig import MigInstance, find_mig_instances, select_instances
from sharebench.sharing.mps import check_mps_available
from sharebench.sharing.timeslice import gpu_target


@dataclass
class ReplicaPlan:
    replica: int
    device: str  # device spec the replica opens
    env: dict[str, str] = field(default_factory=dict)  # extra environment
    cpus: list[int] | None = None
    mig_uuid: str = ""
    parent_uuid: str = ""
    mig_profile: str = ""
    sms: int | None = None
    cores: int | None = None
    memory_bytes: int | None = None  # memory this replica may use (MIG instance), else None


@dataclass
class CellPlan:
    mode: Mode
    device: DeviceInfo
    replicas: list[ReplicaPlan]
    mps: bool = False

    @property
    def n(self) -> int:
        return len(self.replicas)


def replica_count(m: Mode) -> int:
    """How many replicas a shared mode runs (timeslice:N, mps:N, partition:N name N)."""
    if m.replicas is None:
        raise ValueError(f"{m.label} names no replica count")
    return int(m.replicas)


def gpu_sms(name: str) -> int | None:
    try:
        return gpus.gpu_model(name).sms
    except UserError:
        return None


def plan_cell(
    mode: Mode | str,
    device: DeviceInfo | dict[str, Any],
    *,
    mig_instances: list[MigInstance] | None = None,
    cpus: list[int] | None = None,
) -> CellPlan:
    """Decide the replicas of one cell, or a one-line UserError if the mode cannot run on this device."""
    m = parse_mode(mode) if isinstance(mode, str) else mode
    dev = as_device(device)
    backend, spec = dev.backend, dev.spec
    is_gpu = dev.is_gpu
    sms = gpu_sms(dev.name) if is_gpu else None
    all_cpus = sorted(cpus if cpus is not None else usable_cpus())
    cores = None if is_gpu else len(all_cpus)
    uuid = dev.uuid

    def same(n: int, env: dict[str, str] | None = None) -> list[ReplicaPlan]:
        return [ReplicaPlan(i, spec, dict(env or {}), None, parent_uuid=uuid, sms=sms, cores=cores) for i in range(n)]

    if m.kind == "exclusive":
        return CellPlan(m, dev, same(1))
    if m.kind == "timeslice":
        if m.interval is not None:
            gpu_target(dev, m.label)  # an NVIDIA GPU nvidia-smi can name, or a one-line refusal
        return CellPlan(m, dev, same(replica_count(m)))
    if m.kind == "mps":
        check_mps_available(dev, m.label)
        reps = same(replica_count(m))
        if m.thread_pct is not None and sms:
            for rp in reps:  # a thread share is an SM partition (sharebench.gpus.mps_sms; inferred rounding)
                rp.sms = gpus.mps_sms(dev.name, m.thread_pct)
        return CellPlan(m, dev, reps, mps=True)
    if m.kind == "mig-emulated":
        return plan_emulated(m, dev)
    if m.kind == "partition":
        if is_gpu:
            raise UserError(
                f"{m.label} is for the CPU (disjoint core sets); the device {spec} is a GPU: "
                "use mig:LAYOUT to partition a GPU"
            )
        sets = partition_cpus(replica_count(m), all_cpus)
        return CellPlan(
            m, dev, [ReplicaPlan(i, spec, {}, s, parent_uuid=uuid, cores=len(s)) for i, s in enumerate(sets)]
        )
    if m.kind == "mig":
        if backend != "cuda":
            raise UserError(
                f"{m.label} needs an NVIDIA GPU through CUDA (--device cuda); the device is "
                f"{spec or backend} ({dev.name})"
            )
        how = ""
        if mig_instances is None:
            mig_instances, how = find_mig_instances()
        gpu_index = None
        if spec.startswith("cuda:") and not os.environ.get("CUDA_VISIBLE_DEVICES"):
            gpu_index = int(spec.split(":")[1])
        chosen = select_instances(m.layout or "", mig_instances, gpu_index, how)
        reps = [
            ReplicaPlan(
                i,
                "cuda:0",
                {"CUDA_VISIBLE_DEVICES": inst.uuid},
                None,
                mig_uuid=inst.uuid,
                parent_uuid=inst.parent_uuid,
                mig_profile=inst.profile,
                sms=inst.sms,
                memory_bytes=inst.memory_bytes,
            )
            for i, inst in enumerate(chosen)
        ]
        return CellPlan(Mode("mig", len(reps), layout=m.layout), dev, reps)
    raise UserError(f"unknown sharing mode {m.label!r}")  # pragma: no cover - parse_mode rejects first


def plan_emulated(m: Mode, dev: DeviceInfo) -> CellPlan:
    """``mig-emulated:LAYOUT``: one MPS client per instance of the layout, each limited to its profile's
    SMs (``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``) and memory (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``).
    An emulation: MPS shares the L2, the memory bandwidth and the fault domain that MIG would split."""
    if dev.backend != "cuda":
        raise UserError(
            f"{m.label} needs an NVIDIA GPU through CUDA (--device cuda) for MPS; the device is "
            f"{dev.spec or dev.backend} ({dev.name})"
        )
    try:
        model = gpus.gpu_model(dev.name)
    except UserError:
        raise UserError(
            f"{m.label}: the GPU {dev.name!r} has no MIG profile table; emulated layouts need one "
            f"of {', '.join(gpus.GPU_MODELS)}"
        ) from None
    profiles = gpus.emulated_layout(model, m.layout or "")
    check_mps_available(dev, m.label)
    index = dev.spec.split(":")[1] if dev.spec.startswith("cuda:") else "0"
    reps = []
    for i, p in enumerate(profiles):
        pct = gpus.mps_pct_for_sms(model, p.sms)
        env = {
            "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(pct),
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"{index}={int(p.mem_gb * 1000)}M",
        }
        reps.append(
            ReplicaPlan(
                i,
                dev.spec,
                env,
                None,
                parent_uuid=dev.uuid,
                mig_profile=p.name,
                sms=gpus.mps_sms(model, pct),
                memory_bytes=int(p.mem_gb * 1e9),
            )
        )
    return CellPlan(Mode("mig-emulated", len(reps), layout=m.layout), dev, reps, mps=True)
