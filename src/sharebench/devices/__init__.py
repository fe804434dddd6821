"""The devices a run can use (``cpu``, ``cuda[:N]``, ``opencl[:P.D]``, ``auto``), this host, and NVML.

Shared vocabulary of every layer: a :class:`DeviceInfo` names the device replicas run on, the
sharing executors place them on, the telemetry samples and provenance records.
"""

from sharebench.devices.discovery import ALLOWED_SPECS, check_spec, list_devices, resolve_device
from sharebench.devices.info import DeviceInfo, as_device

__all__ = ["ALLOWED_SPECS", "DeviceInfo", "as_device", "check_spec", "list_devices", "resolve_device"]
