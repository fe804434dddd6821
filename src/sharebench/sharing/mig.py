"""MIG instances that already exist, found through NVML or ``nvidia-smi -L``.

sharebench never changes MIG mode or the layout on a local machine; it only
reads what is there and pins one replica to each instance with
``CUDA_VISIBLE_DEVICES=MIG-<uuid>``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

from sharebench import gpus
from sharebench.devices import nvml
from sharebench.errors import UserError


@dataclass(frozen=True)
class MigInstance:
    uuid: str  # MIG-...
    profile: str  # e.g. "1g.18gb"
    parent_uuid: str  # GPU-...
    parent_index: int
    parent_name: str  # e.g. "NVIDIA H200"
    sms: int | None = None
    memory_bytes: int | None = None


_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s+(.*?)\s+\(UUID:\s*(GPU-[^)\s]+)\)")
_MIG_LINE = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s+\(UUID:\s*(MIG-[^)\s]+)\)")


def parse_nvidia_smi_list(text: str) -> list[MigInstance]:
    """Instances from ``nvidia-smi -L`` output (MIG lines sit under their GPU's line)."""
    out: list[MigInstance] = []
    parent = None
    for line in text.splitlines():
        m = _GPU_LINE.match(line)
        if m:
            parent = (int(m.group(1)), m.group(2).strip(), m.group(3))
            continue
        m = _MIG_LINE.match(line)
        if m and parent is not None:
            profile = m.group(1)
            out.append(
                MigInstance(
                    uuid=m.group(3),
                    profile=profile,
                    parent_uuid=parent[2],
                    parent_index=parent[0],
                    parent_name=parent[1],
                    sms=_table_sms(parent[1], profile),
                )
            )
    return out


def _table_sms(gpu_name: str, profile: str) -> int | None:
    try:
        return gpus.gpu_model(gpu_name).profile(profile).sms
    except UserError:
        return None


def _from_nvml() -> tuple[list[MigInstance], str]:
    try:
        with nvml.session() as nv:
            out = []
            for i in range(nv.nvmlDeviceGetCount()):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                name, puuid = nvml.text(nv.nvmlDeviceGetName(h)), nvml.text(nv.nvmlDeviceGetUUID(h))
                for inst in nvml.mig_devices(nv, h):
                    m = re.search(r"(\d+g\.\d+gb)", inst["name"] or "")
                    profile = m.group(1) if m else (inst["name"] or "")
                    sms = inst["sms"] if inst["sms"] is not None else _table_sms(name, profile)
                    out.append(MigInstance(inst["uuid"], profile, puuid, i, name, sms, inst["memory_bytes"]))
            return out, "NVML"
    except nvml.NvmlUnavailable as exc:
        return [], str(exc)


def find_mig_instances() -> tuple[list[MigInstance], str]:
    """(instances, how they were looked for / why none): NVML first, then ``nvidia-smi -L``."""
    found, how = _from_nvml()
    if found:
        return found, how
    reasons = [how]
    smi = shutil.which("nvidia-smi")
    if not smi:
        reasons.append("nvidia-smi not found")
        return [], "; ".join(reasons)
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        reasons.append(f"nvidia-smi -L: {exc}")
        return [], "; ".join(reasons)
    found = parse_nvidia_smi_list(out.stdout)
    if found:
        return found, "nvidia-smi -L"
    reasons.append("nvidia-smi -L lists no MIG device")
    return [], "; ".join(reasons)


def select_instances(
    layout: str, instances: list[MigInstance], gpu_index: int | None = None, how: str = ""
) -> list[MigInstance]:
    """The existing instances a ``mig:LAYOUT`` cell uses: all instances of the layout's profile on one GPU."""
    label = f"mig:{layout}"
    if not instances:
        raise UserError(
            f"{label}: no MIG instances exist on this machine ({how or 'none found'}); "
            "sharebench does not change MIG mode or layout locally: create them with nvidia-smi mig "
            "(or use the cluster pipeline)"
        )
    by_gpu: dict[int, list[MigInstance]] = {}
    for inst in instances:
        by_gpu.setdefault(inst.parent_index, []).append(inst)
    if gpu_index is not None:
        by_gpu = {k: v for k, v in by_gpu.items() if k == gpu_index}
        if not by_gpu:
            raise UserError(f"{label}: GPU {gpu_index} has no MIG instances")
    existing = []
    for idx, insts in sorted(by_gpu.items()):
        have = sorted({i.profile for i in insts})
        existing.append(f"GPU {idx}: " + ", ".join(f"{p} x{sum(i.profile == p for i in insts)}" for p in have))
        try:
            wanted = gpus.resolve_layout(insts[0].parent_name, layout)
        except UserError as exc:
            raise UserError(f"{label}: {exc}") from None
        if wanted == "all-disabled":
            raise UserError(f"{label}: 'disabled' is not a MIG layout to measure; use exclusive for the full GPU")
        chosen = [i for i in insts if i.profile == wanted[4:]]
        if chosen:
            return sorted(chosen, key=lambda i: i.uuid)
    raise UserError(
        f"{label}: the layout does not match the MIG instances that exist ({'; '.join(existing)}); "
        "give a layout that exists, e.g. mig:" + existing[0].split(": ")[1].split(" x")[0]
    )
