"""Devices and contexts: ``cpu``, ``cuda[:N]``, ``opencl[:P.D]``, ``auto``.

``auto`` picks a CUDA GPU, else an OpenCL GPU, else the CPU through the
``cpu`` context (C + OpenMP): on a machine whose only OpenCL device is a CPU
(PoCL), the ``cpu`` context is the one chosen; see docs/readme/kernel.md for the
measured comparison.
"""

from __future__ import annotations

import os
import re
from typing import Any

import psutil

from sharebench.devices import nvml
from sharebench.devices.host import cpu_model, host_id
from sharebench.devices.info import DeviceInfo
from sharebench.errors import UserError

_SPEC_RE = re.compile(r"^(auto|cpu|cuda(?::(\d+))?|opencl(?::(\d+)\.(\d+))?)$")
ALLOWED_SPECS = "auto, cpu, cuda[:N], opencl[:P.D]"


def _cpu_device() -> DeviceInfo:
    return DeviceInfo(
        spec="cpu",
        kind="cpu",
        backend="cpu",
        name=cpu_model(),
        uuid=host_id(),
        memory_bytes=int(psutil.virtual_memory().total),
        platform="cpu",
    )


def _nvidia_uuid_for_pci(bus: int, slot: int) -> str:
    """The GPU UUID of the NVIDIA device at PCI bus/slot (NVML, else CuPy), or ''."""
    uuid = nvml.uuid_at_pci(bus, slot)
    if uuid:
        return uuid
    try:
        import cupy  # noqa: PLC0415 - optional: CUDA through CuPy where it is installed

        for i in range(cupy.cuda.runtime.getDeviceCount()):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            if int(props["pciBusID"]) == bus and int(props["pciDeviceID"]) == slot:
                return cuda_uuid(i, props)
    except Exception:  # noqa: BLE001 - no CUDA runtime here: the UUID stays unknown
        pass
    return ""


def driver_uuid_bytes(ordinal: int) -> bytes | None:
    """The 16 bytes of CUDA device ``ordinal``'s UUID from the driver API (``cuDeviceGetUuid_v2``), or None
    where the driver library does not answer. Read into a 16-byte buffer, never as a C string."""
    import ctypes  # noqa: PLC0415 - only where a CUDA device is listed

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    dev = ctypes.c_int()
    buf = (ctypes.c_ubyte * 16)()
    get = getattr(cuda, "cuDeviceGetUuid_v2", None) or getattr(cuda, "cuDeviceGetUuid", None)
    if get is None or cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(dev), ordinal) != 0:
        return None
    if get(buf, dev) != 0:
        return None
    return bytes(buf)


def cuda_uuid(ordinal: int, props: dict, driver_bytes: bytes | None = None) -> str:
    """CUDA device ``ordinal``'s GPU UUID: from its 16 bytes (the driver API), else from NVML by its PCI
    address, else from CuPy's ``props["uuid"]`` only when that holds all 16 bytes; '' when none does."""
    raw = driver_bytes if driver_bytes is not None else driver_uuid_bytes(ordinal)
    if raw is not None and nvml.format_uuid(raw):
        return nvml.format_uuid(raw)
    try:
        by_pci = nvml.uuid_at_pci(int(props["pciBusID"]), int(props["pciDeviceID"]))
    except (KeyError, TypeError, ValueError):
        by_pci = ""
    return by_pci or nvml.format_uuid(props.get("uuid") or b"")


def _cuda_devices() -> list[DeviceInfo]:
    try:
        import cupy  # noqa: PLC0415 - optional: CUDA through CuPy where it is installed
    except ImportError:
        return []
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # noqa: BLE001 - no driver / no device
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    visible_ids = [v.strip() for v in visible.split(",") if v.strip()]
    out = []
    for i in range(count):
        props = cupy.cuda.runtime.getDeviceProperties(i)
        name = nvml.text(props["name"])
        # MIG: CUDA_VISIBLE_DEVICES names the MIG instance; that is the device's id.
        mig = i < len(visible_ids) and visible_ids[i].startswith("MIG-")
        uuid = visible_ids[i] if mig else cuda_uuid(i, props)
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
        import pyopencl as cl  # noqa: PLC0415 - optional: OpenCL through pyopencl where it is installed
    except ImportError:
        return []
    try:
        platforms = cl.get_platforms()
    except Exception:  # noqa: BLE001 - no ICD
        return []
    out = []
    info: Any = cl.device_info
    for ip, plat in enumerate(platforms):
        try:
            # Any: pyopencl's stubs type get_info as object, and name no UUID_KHR (its module has none
            # either, so the lookup below fails and the PCI address is tried)
            devices: list[Any] = plat.get_devices()
        except Exception:  # noqa: BLE001 - a platform that cannot list its devices offers none
            continue
        for idev, dev in enumerate(devices):
            is_gpu = bool(dev.type & cl.device_type.GPU)
            uuid = ""
            if not is_gpu and dev.type & cl.device_type.CPU:
                uuid = host_id()
            else:
                try:
                    if "cl_khr_device_uuid" in dev.extensions:
                        uuid = nvml.format_uuid(dev.get_info(info.UUID_KHR))
                except Exception:  # noqa: BLE001 - the UUID extension is optional: try the PCI address next
                    uuid = ""
                if not uuid:
                    try:
                        bus = int(dev.get_info(cl.device_info.PCI_BUS_ID_NV))
                        slot = int(dev.get_info(cl.device_info.PCI_SLOT_ID_NV))
                        uuid = _nvidia_uuid_for_pci(bus, slot) or f"pci-{bus:02x}:{slot:02x}"
                    except Exception:  # noqa: BLE001 - no NVIDIA PCI address: named by its OpenCL index
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
            raise UserError(
                f"device {spec!r}: no OpenCL platform found (install pocl-binary-distribution or a GPU driver's ICD)"
            )
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
