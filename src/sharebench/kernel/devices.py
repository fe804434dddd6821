"""Devices and contexts: ``cpu``, ``cuda[:N]``, ``opencl[:P.D]``, ``auto``.

``auto`` picks a CUDA GPU, else an OpenCL GPU, else the CPU through the
``cpu`` context (C + OpenMP): on a machine whose only OpenCL device is a CPU
(PoCL), the ``cpu`` context is the one chosen; see docs/readme/kernel.md for the
measured comparison.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from dataclasses import asdict, dataclass

from sharebench.errors import UserError

_SPEC_RE = re.compile(r"^(auto|cpu|cuda(?::(\d+))?|opencl(?::(\d+)\.(\d+))?)$")
ALLOWED_SPECS = "auto, cpu, cuda[:N], opencl[:P.D]"


@dataclass(frozen=True)
class DeviceInfo:
    """One device a run can use."""

    spec: str  # canonical spec: "cpu", "cuda:0", "opencl:0.0"
    kind: str  # "gpu" | "cpu"
    backend: str  # "cuda" | "opencl" | "cpu"
    name: str
    uuid: str
    memory_bytes: int
    platform: str

    def to_dict(self) -> dict:
        return asdict(self)


def host_id() -> str:
    """A stable id of this host (machine-id if present, else the host name)."""
    seed = ""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            with open(path) as fh:
                seed = fh.read().strip()
        except OSError:
            continue
        if seed:
            break
    seed = seed or socket.gethostname()
    return "host-" + hashlib.sha1(seed.encode()).hexdigest()[:16]


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "cpu"


def _cpu_device() -> DeviceInfo:
    import psutil

    return DeviceInfo(
        spec="cpu",
        kind="cpu",
        backend="cpu",
        name=_cpu_name(),
        uuid=host_id(),
        memory_bytes=int(psutil.virtual_memory().total),
        platform="cpu",
    )


def _format_uuid(raw: bytes, prefix: str = "GPU-") -> str:
    h = bytes(raw).hex()
    return f"{prefix}{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _nvidia_uuid_for_pci(bus: int, slot: int) -> str:
    """The GPU UUID of the NVIDIA device at PCI bus/slot (NVML, else CuPy), or ''."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                pci = pynvml.nvmlDeviceGetPciInfo(h)
                if int(pci.bus) == bus and int(pci.device) == slot:
                    u = pynvml.nvmlDeviceGetUUID(h)
                    return u.decode() if isinstance(u, bytes) else str(u)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        pass
    try:
        import cupy

        for i in range(cupy.cuda.runtime.getDeviceCount()):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            if int(props["pciBusID"]) == bus and int(props["pciDeviceID"]) == slot and props.get("uuid"):
                return _format_uuid(props["uuid"])
    except Exception:
        pass
    return ""


def _cuda_devices() -> list[DeviceInfo]:
    try:
        import cupy
    except ImportError:
        return []
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # no driver / no device
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    visible_ids = [v.strip() for v in visible.split(",") if v.strip()]
    out = []
    for i in range(count):
        props = cupy.cuda.runtime.getDeviceProperties(i)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        uuid = ""
        # MIG: CUDA_VISIBLE_DEVICES names the MIG instance; that is the device's id.
        if i < len(visible_ids) and visible_ids[i].startswith("MIG-"):
            uuid = visible_ids[i]
        elif props.get("uuid"):
            uuid = _format_uuid(props["uuid"])
        with cupy.cuda.Device(i):
            _free, total = cupy.cuda.runtime.memGetInfo()
        out.append(
            DeviceInfo(
                spec=f"cuda:{i}",
                kind="gpu",
                backend="cuda",
                name=name,
                uuid=uuid,
                memory_bytes=int(total),
                platform="CUDA",
            )
        )
    return out


def _opencl_devices() -> list[DeviceInfo]:
    try:
        import pyopencl as cl
    except ImportError:
        return []
    try:
        platforms = cl.get_platforms()
    except Exception:  # no ICD
        return []
    out = []
    for ip, plat in enumerate(platforms):
        try:
            devices = plat.get_devices()
        except Exception:
            continue
        for idev, dev in enumerate(devices):
            is_gpu = bool(dev.type & cl.device_type.GPU)
            uuid = ""
            if not is_gpu and dev.type & cl.device_type.CPU:
                uuid = host_id()
            else:
                try:
                    if "cl_khr_device_uuid" in dev.extensions:
                        uuid = _format_uuid(dev.get_info(cl.device_info.UUID_KHR))
                except Exception:
                    uuid = ""
                if not uuid:
                    try:
                        bus = int(dev.get_info(cl.device_info.PCI_BUS_ID_NV))
                        slot = int(dev.get_info(cl.device_info.PCI_SLOT_ID_NV))
                        uuid = _nvidia_uuid_for_pci(bus, slot) or f"pci-{bus:02x}:{slot:02x}"
                    except Exception:
                        uuid = f"opencl-{ip}.{idev}"
            out.append(
                DeviceInfo(
                    spec=f"opencl:{ip}.{idev}",
                    kind="gpu" if is_gpu else "cpu",
                    backend="opencl",
                    name=dev.name.strip(),
                    uuid=uuid,
                    memory_bytes=int(dev.global_mem_size),
                    platform=plat.name.strip(),
                )
            )
    return out


def list_devices() -> list[DeviceInfo]:
    """Every device a run can use here: CUDA GPUs, OpenCL devices, the CPU."""
    return _cuda_devices() + _opencl_devices() + [_cpu_device()]


def check_spec(spec: str) -> str:
    """Validate a device spec's grammar; returns it lowercased and stripped."""
    s = str(spec).strip().lower()
    if not _SPEC_RE.match(s):
        raise UserError(f"bad device {spec!r}: allowed are {ALLOWED_SPECS}")
    return s


def resolve_device(spec: str = "auto") -> DeviceInfo:
    """Turn a device spec into the device it names; UserError if absent."""
    s = check_spec(spec)
    if s == "cpu":
        return _cpu_device()
    if s.startswith("cuda"):
        devs = _cuda_devices()
        idx = int(s.split(":")[1]) if ":" in s else 0
        if not devs:
            raise UserError(f"device {spec!r}: no CUDA GPU found (needs CuPy and an NVIDIA driver); try opencl or cpu")
        if idx >= len(devs):
            raise UserError(f"device {spec!r}: only {len(devs)} CUDA device(s), cuda:0..cuda:{len(devs) - 1}")
        return devs[idx]
    if s.startswith("opencl"):
        devs = _opencl_devices()
        if not devs:
            raise UserError(f"device {spec!r}: no OpenCL platform found (install pocl-binary-distribution or a GPU driver's ICD)")
        if ":" not in s:
            gpus = [d for d in devs if d.kind == "gpu"]
            return (gpus or devs)[0]
        for d in devs:
            if d.spec == s:
                return d
        raise UserError(f"device {spec!r} not found; OpenCL devices here: {', '.join(d.spec for d in devs)}")
    # auto
    cuda = _cuda_devices()
    if cuda:
        return cuda[0]
    gpus = [d for d in _opencl_devices() if d.kind == "gpu"]
    if gpus:
        return gpus[0]
    return _cpu_device()
