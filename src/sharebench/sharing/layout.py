"""The plan of one cell: which replicas run, on which device, pinned how.

``plan_cell(mode, device)`` decides, before anything runs, how a mode lays its replicas out on a
device (the same device N times; disjoint core sets for ``partition:N``; one existing MIG
instance each for ``mig:LAYOUT``), or says in one line why the mode cannot run there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sharebench import gpus
from sharebench.devices import DeviceInfo, as_device
from sharebench.devices.host import usable_cpus
from sharebench.errors import UserError
from sharebench.modes import MPS_DAEMON, Mode, parse_mode
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

    @property
    def n(self) -> int:
        return len(self.replicas)

    @property
    def helper(self) -> str:
        """What the cell needs around its replicas (:attr:`KindSpec.helper`; '' none)."""
        return self.mode.spec.helper

    @property
    def mps(self) -> bool:
        """The replicas are clients of one MPS control daemon the cell starts."""
        return self.helper == MPS_DAEMON


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


@dataclass(frozen=True)
class Place:
    """Where a cell is planned: the device, its MIG instances (None: find them) and the usable CPUs."""

    device: DeviceInfo
    mig_instances: list[MigInstance] | None
    cpus: list[int]

    @property
    def sms(self) -> int | None:
        return gpu_sms(self.device.name) if self.device.is_gpu else None

    def same(self, n: int) -> list[ReplicaPlan]:
        """``n`` replicas on the whole device."""
        dev, cores = self.device, (None if self.device.is_gpu else len(self.cpus))
        return [ReplicaPlan(i, dev.spec, {}, None, parent_uuid=dev.uuid, sms=self.sms, cores=cores) for i in range(n)]


Planner = Callable[[Mode, Place], CellPlan]


def plan_exclusive(m: Mode, place: Place) -> CellPlan:
    """One replica alone on the whole device."""
    return CellPlan(m, place.device, place.same(1))


def plan_timeslice(m: Mode, place: Place) -> CellPlan:
    """N replicas on the same device, taking turns; an interval needs a GPU nvidia-smi can name."""
    if m.interval is not None:
        gpu_target(place.device, m.label)  # an NVIDIA GPU nvidia-smi can name, or a one-line refusal
    return CellPlan(m, place.device, place.same(replica_count(m)))


def plan_mps(m: Mode, place: Place) -> CellPlan:
    """N MPS clients on the same device; a thread share limits each to a share of the SMs."""
    dev = place.device
    check_mps_available(dev, m.label)
    reps = place.same(replica_count(m))
    if m.thread_pct is not None and place.sms:
        for rp in reps:  # a thread share is an SM partition (sharebench.gpus.mps_sms; inferred rounding)
            rp.sms = gpus.mps_sms(dev.name, m.thread_pct)
    return CellPlan(m, dev, reps)


def plan_partition(m: Mode, place: Place) -> CellPlan:
    """N replicas on disjoint core sets of the CPU."""
    dev = place.device
    if dev.is_gpu:
        raise UserError(
            f"{m.label} is for the CPU (disjoint core sets); the device {dev.spec} is a GPU: "
            "use mig:LAYOUT to partition a GPU"
        )
    sets = partition_cpus(replica_count(m), place.cpus)
    return CellPlan(
        m, dev, [ReplicaPlan(i, dev.spec, {}, s, parent_uuid=dev.uuid, cores=len(s)) for i, s in enumerate(sets)]
    )


def plan_mig(m: Mode, place: Place) -> CellPlan:
    """One replica per existing MIG instance of the layout."""
    dev, spec = place.device, place.device.spec
    if dev.backend != "cuda":
        raise UserError(
            f"{m.label} needs an NVIDIA GPU through CUDA (--device cuda); the device is "
            f"{spec or dev.backend} ({dev.name})"
        )
    how, instances = "", place.mig_instances
    if instances is None:
        instances, how = find_mig_instances()
    gpu_index = None
    if spec.startswith("cuda:") and not os.environ.get("CUDA_VISIBLE_DEVICES"):
        gpu_index = int(spec.split(":")[1])
    chosen = select_instances(m.layout or "", instances, gpu_index, how)
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
    return CellPlan(replace(m, replicas=len(reps)), dev, reps)


def plan_cell(
    mode: Mode | str,
    device: DeviceInfo | dict[str, Any],
    *,
    mig_instances: list[MigInstance] | None = None,
    cpus: list[int] | None = None,
) -> CellPlan:
    """Decide the replicas of one cell, or a one-line UserError if the mode cannot run on this device.

    The planner is the mode kind's row of :data:`PLANNERS`."""
    m = parse_mode(mode) if isinstance(mode, str) else mode
    planner = PLANNERS.get(m.kind)
    if planner is None:
        raise UserError(f"sharing mode {m.label!r} has no planner; planned kinds: {', '.join(PLANNERS)}")
    place = Place(as_device(device), mig_instances, sorted(cpus if cpus is not None else usable_cpus()))
    return planner(m, place)


def plan_emulated(m: Mode, place: Place) -> CellPlan:
    """``mig-emulated:LAYOUT``: one MPS client per instance of the layout, each limited to its profile's
    SMs (``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``) and memory (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``).
    An emulation: MPS shares the L2, the memory bandwidth and the fault domain that MIG would split."""
    dev = place.device
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
    return CellPlan(replace(m, replicas=len(reps)), dev, reps)


# each kind's planner, keyed by KindSpec.name (tests/vocabulary/test_kinds.py checks every kind has one)
PLANNERS: dict[str, Planner] = {
    "exclusive": plan_exclusive,
    "timeslice": plan_timeslice,
    "mps": plan_mps,
    "mig": plan_mig,
    "mig-emulated": plan_emulated,
    "partition": plan_partition,
}
