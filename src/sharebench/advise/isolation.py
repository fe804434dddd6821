"""What each mode advise can recommend isolates per pod: memory, faults, telemetry (one row per mode kind).

From the vendors' own notes: the gpu-operator's time-slicing page ("unlike MIG, there is no memory or
fault-isolation between replicas"), its MPS page (dcgm-exporter cannot associate metrics with containers
when MPS is enabled by the device plugin) and the CUDA MPS documentation (a fatal GPU fault in one client
is reported to every client of the server); MIG instances have their own memory, fault containment and
per-instance metrics (NVIDIA's MIG user guide). Local-only kinds (the CPU's partitions, MIG emulated with
MPS) are never recommended and have no row. ``tests/advise`` fails when a recommendable kind has none.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharebench.modes import KINDS


@dataclass(frozen=True)
class Isolation:
    """Per pod: what happens to its memory, a fault, its telemetry, and where that is said."""

    memory: str
    faults: str
    telemetry: str
    source: str

    @property
    def isolates(self) -> bool:
        """Memory and faults kept per pod."""
        return self.memory.startswith("own") and self.faults.startswith("own")

    def line(self) -> str:
        return f"memory: {self.memory}; faults: {self.faults}; telemetry: {self.telemetry} ({self.source})"


ISOLATION: dict[str, Isolation] = {
    "exclusive": Isolation("own (the whole GPU)", "own (the whole GPU)", "per pod (one pod a GPU)", "no sharing"),
    "timeslice": Isolation(
        "shared: any pod can take the GPU's memory",
        "shared: no fault isolation between replicas",
        "per GPU only: every pod sees the whole GPU's counters",
        "gpu-operator, time-slicing: no memory or fault isolation between replicas",
    ),
    "mps": Isolation(
        "shared: per-client limits only where MPS sets them",
        "shared: a fatal fault in one client reaches every client on the GPU",
        "not per pod: dcgm-exporter cannot associate metrics with containers under MPS",
        "gpu-operator, MPS limitations; CUDA MPS documentation",
    ),
    "mig": Isolation(
        "own (the instance's)",
        "own (the instance's)",
        "per instance (per pod)",
        "NVIDIA MIG user guide: hardware partitions",
    ),
}


def recommendable() -> list[str]:
    """The mode kinds advise may recommend (a node can run them): every one needs a row above."""
    return [
        k for k, spec in KINDS.items() if not spec.local_only and spec.family in ("baseline", "shared", "instances")
    ]


def isolation_of(mode: str) -> Isolation:
    return ISOLATION[mode.partition(":")[0]]


def shares_without_isolation(mode: str) -> bool:
    return not isolation_of(mode).isolates
