"""DeviceInfo: one device a run can use, as every layer names it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DeviceInfo:
        """A DeviceInfo from its dict form; missing fields are empty (0 bytes), other keys are ignored."""
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls)}
        filled: dict[str, Any] = {
            k: (v if v is not None else (0 if k == "memory_bytes" else "")) for k, v in values.items()
        }
        return cls(**filled)

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"


def as_device(device: DeviceInfo | dict[str, Any] | None) -> DeviceInfo:
    """The device as a DeviceInfo, whether given as one or as its dict form (a results document,
    a KFP parameter); None is the host CPU as far as what is known (an empty DeviceInfo of kind cpu)."""
    if isinstance(device, DeviceInfo):
        return device
    if device is None:
        return DeviceInfo(spec="", kind="cpu", backend="cpu", name="", uuid="", memory_bytes=0, platform="")
    return DeviceInfo.from_dict(device)
