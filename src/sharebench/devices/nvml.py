"""NVML (the ``pynvml`` module of nvidia-ml-py), started and asked in one place.

Every part that reads the NVIDIA driver goes through here: device discovery (a GPU's UUID),
the MIG instances the sharing executors pin replicas to, the telemetry sampler, provenance.
NVML may be missing (no driver, no nvidia-ml-py): :func:`start` then raises
:class:`NvmlUnavailable` whose message is the stated reason, which callers record.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from typing import Any

from sharebench.devices.info import DeviceInfo
from sharebench.errors import one_line


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used here; the message is the stated reason (recorded, not raised to users)."""


def text(value: Any) -> str:
    """An NVML string (bytes in older nvidia-ml-py releases, str in newer ones) as str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def start() -> Any:
    """Import pynvml and initialise NVML; the module. NvmlUnavailable with the reason otherwise.
    Pair with :func:`shutdown`, or use :func:`session`."""
    try:
        import pynvml  # noqa: PLC0415 - optional: only where an NVIDIA driver may answer
    except ImportError as exc:
        raise NvmlUnavailable(f"NVML unavailable: nvidia-ml-py not installed ({exc})") from exc
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML unavailable: {one_line(exc)}") from exc
    return pynvml


def shutdown(nv: Any) -> None:
    """Shut NVML down; never raises (a library on its way out)."""
    with contextlib.suppress(Exception):
        nv.nvmlShutdown()


@contextlib.contextmanager
def session() -> Iterator[Any]:
    """NVML for the duration of a block: ``with session() as nv: nv.nvmlDeviceGetCount()``."""
    nv = start()
    try:
        yield nv
    finally:
        shutdown(nv)


def status() -> tuple[bool, str]:
    """(True, driver version) when NVML answers here, else (False, the reason)."""
    try:
        with session() as nv:
            try:
                return True, f"NVML driver {text(nv.nvmlSystemGetDriverVersion())}"
            except nv.NVMLError as exc:
                return True, f"NVML initialised; driver version not reported ({one_line(exc)})"
    except NvmlUnavailable as exc:
        return False, str(exc)


def cuda_version(version: int | None) -> str | None:
    """A CUDA version as NVML and the CUDA runtime give it (12040) as ``12.4``."""
    if not version:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


def format_uuid(raw: bytes | bytearray | list[int]) -> str:
    """A device UUID given as its 16 raw bytes (the CUDA driver's ``CUuuid``, OpenCL's UUID_KHR) in NVML's
    spelling; '' for anything but 16 bytes. A UUID is never read as a C string: one holding a zero byte
    (``GPU-ad3a316f-400c-01e1-b1d0-88a21f6400df``) came back cut at it, 14 bytes, from CuPy's device
    properties; such a value is refused here rather than spelled as a wrong id."""
    data = bytes(raw)
    if len(data) != 16:
        return ""
    return normalise_uuid(data.hex()) or ""


def normalise_uuid(uuid: Any) -> str | None:
    """``GPU-…`` / ``MIG-…`` as NVML spells it; bare hex UUIDs get the ``GPU-`` prefix."""
    if uuid is None:
        return None
    s = text(uuid).strip()
    if not s:
        return None
    if s.upper().startswith(("GPU-", "MIG-")):
        return s[:3].upper() + s[3:]
    hexpart = s.replace("-", "")
    if re.fullmatch(r"[0-9a-fA-F]{32}", hexpart):
        h = hexpart.lower()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return s


def uuid_at_pci(bus: int, slot: int) -> str:
    """The UUID of the NVIDIA GPU at PCI ``bus``/``slot``, or '' when NVML does not know it."""
    try:
        with session() as nv:
            for i in range(nv.nvmlDeviceGetCount()):
                handle = nv.nvmlDeviceGetHandleByIndex(i)
                pci = nv.nvmlDeviceGetPciInfo(handle)
                if int(pci.bus) == bus and int(pci.device) == slot:
                    return text(nv.nvmlDeviceGetUUID(handle))
    except (NvmlUnavailable, Exception):  # noqa: BLE001 - an optional lookup: '' says "not known"
        pass
    return ""


def find_handle(nv: Any, device: DeviceInfo) -> tuple[Any, list[str]]:
    """The NVML handle of the device the replicas use (a MIG handle for a MIG UUID).

    By UUID when the kernel recorded one; else a UUID in CUDA_VISIBLE_DEVICES; else the
    only GPU; else a unique name match; else the CUDA index (with a note that NVML and
    CUDA may order GPUs differently).
    """
    notes: list[str] = []
    uuid = normalise_uuid(device.uuid)
    if uuid and uuid.startswith(("GPU-", "MIG-")):
        # CUDA reports a MIG instance's UUID in the GPU- spelling when it enumerates MIG devices
        other = ("MIG-" if uuid.startswith("GPU-") else "GPU-") + uuid[4:]
        for cand in (uuid, other):
            try:
                return nv.nvmlDeviceGetHandleByUUID(cand), notes
            except nv.NVMLError as exc:
                last = exc
        notes.append(f"uuid {uuid} not found by NVML ({one_line(last)})")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    if visible.startswith(("GPU-", "MIG-")):
        try:
            return nv.nvmlDeviceGetHandleByUUID(visible), notes
        except nv.NVMLError as exc:
            notes.append(f"CUDA_VISIBLE_DEVICES={visible} not found by NVML ({one_line(exc)})")
    count = nv.nvmlDeviceGetCount()
    if count == 0:
        raise NvmlUnavailable("NVML sees no GPU")
    if count == 1:
        return nv.nvmlDeviceGetHandleByIndex(0), notes
    name = device.name
    if name:
        names = [text(nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(i))) for i in range(count)]
        matches = [i for i, n in enumerate(names) if n in name or name in n]
        if len(matches) == 1:
            return nv.nvmlDeviceGetHandleByIndex(matches[0]), notes
    m = re.fullmatch(r"cuda:(\d+)", device.spec or "")
    index = int(m.group(1)) if m else 0
    if index >= count:
        raise NvmlUnavailable(f"device {device.spec!r} has no NVML index (NVML sees {count} GPUs)")
    notes.append(f"GPU chosen by index {index} (no UUID recorded; NVML and CUDA may order GPUs differently)")
    return nv.nvmlDeviceGetHandleByIndex(index), notes


def mig_devices(nv: Any, parent: Any) -> list[dict[str, Any]]:
    """The MIG devices that exist on ``parent``: handle, index, name, uuid, GPU and compute instance
    ids, SMs, memory (None where NVML refuses a field); [] when MIG is off."""
    out: list[dict[str, Any]] = []
    try:
        current, _pending = nv.nvmlDeviceGetMigMode(parent)
    except nv.NVMLError:
        return out
    if current != nv.NVML_DEVICE_MIG_ENABLE:
        return out
    for i in range(nv.nvmlDeviceGetMaxMigDeviceCount(parent)):
        try:
            h = nv.nvmlDeviceGetMigDeviceHandleByIndex(parent, i)
        except nv.NVMLError:  # NotFound for unused slots
            continue
        inst: dict[str, Any] = {"handle": h, "index": i}
        for key, fn in (
            ("name", lambda h=h: text(nv.nvmlDeviceGetName(h))),
            ("uuid", lambda h=h: text(nv.nvmlDeviceGetUUID(h))),
            ("gpu_instance_id", lambda h=h: int(nv.nvmlDeviceGetGpuInstanceId(h))),
            ("compute_instance_id", lambda h=h: int(nv.nvmlDeviceGetComputeInstanceId(h))),
            ("sms", lambda h=h: int(nv.nvmlDeviceGetAttributes(h).multiprocessorCount)),
            ("memory_bytes", lambda h=h: int(nv.nvmlDeviceGetMemoryInfo(h).total)),
        ):
            try:
                inst[key] = fn()
            except (nv.NVMLError, AttributeError):
                inst[key] = None
        out.append(inst)
    return out


# The GPU's state that can move a measured loss between machines of one model (issue 45), as NVML reports
# it: the power limits (W), the VBIOS, the application clocks the GPU runs kernels at and the maximum
# clocks (MHz), its memory, its PCIe link (the current generation and width drop at idle on some
# machines: the maximum is the link's) and the persistence mode.
GPU_STATE_FIELDS = (
    "power_limit_w",
    "enforced_power_limit_w",
    "default_power_limit_w",
    "vbios",
    "app_clock_sm_mhz",
    "app_clock_mem_mhz",
    "max_clock_sm_mhz",
    "max_clock_mem_mhz",
    "memory_bytes",
    "pcie_gen",
    "pcie_width",
    "pcie_max_gen",
    "pcie_max_width",
    "persistence_mode",
)


def gpu_state(nv: Any, handle: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The :data:`GPU_STATE_FIELDS` of one GPU: (values, reasons): a field NVML refuses (not supported on
    this GPU, no permission, a call this nvidia-ml-py lacks) is None in the values and its reason kept."""
    readers: dict[str, Any] = {
        "power_limit_w": lambda: nv.nvmlDeviceGetPowerManagementLimit(handle) / 1000.0,
        "enforced_power_limit_w": lambda: nv.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
        "default_power_limit_w": lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(handle) / 1000.0,
        "vbios": lambda: text(nv.nvmlDeviceGetVbiosVersion(handle)),
        "app_clock_sm_mhz": lambda: int(nv.nvmlDeviceGetApplicationsClock(handle, nv.NVML_CLOCK_SM)),
        "app_clock_mem_mhz": lambda: int(nv.nvmlDeviceGetApplicationsClock(handle, nv.NVML_CLOCK_MEM)),
        "max_clock_sm_mhz": lambda: int(nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_SM)),
        "max_clock_mem_mhz": lambda: int(nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_MEM)),
        "memory_bytes": lambda: int(nv.nvmlDeviceGetMemoryInfo(handle).total),
        "pcie_gen": lambda: int(nv.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
        "pcie_width": lambda: int(nv.nvmlDeviceGetCurrPcieLinkWidth(handle)),
        "pcie_max_gen": lambda: int(nv.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
        "pcie_max_width": lambda: int(nv.nvmlDeviceGetMaxPcieLinkWidth(handle)),
        "persistence_mode": lambda: "enabled" if nv.nvmlDeviceGetPersistenceMode(handle) else "disabled",
    }
    values: dict[str, Any] = {}
    reasons: dict[str, str] = {}
    for name in GPU_STATE_FIELDS:
        try:
            values[name] = readers[name]()
        except (nv.NVMLError, AttributeError, TypeError) as exc:  # refused, or not in this nvidia-ml-py
            values[name] = None
            reasons[name] = f"NVML: {one_line(exc) or type(exc).__name__}"
    return values, reasons
