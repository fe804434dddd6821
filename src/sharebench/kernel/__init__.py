"""The Simpletrack workload: engines, contexts, lattice, one run, replica entry.

See docs/architecture.md (Kernel) for the contract. Heavy imports (xtrack,
pyopencl, cupy) happen only when a run or a lattice needs them.
"""

from sharebench.kernel.config import RunConfig, RunRecord
from sharebench.kernel.devices import DeviceInfo, list_devices, resolve_device
from sharebench.kernel.memory import bytes_per_particle, check_fits
from sharebench.kernel.run import run_replica

__all__ = [
    "DeviceInfo",
    "RunConfig",
    "RunRecord",
    "bytes_per_particle",
    "check_fits",
    "list_devices",
    "resolve_device",
    "run_replica",
]
