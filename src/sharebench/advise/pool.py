"""The pool the advice packs for: its GPU model and the memory each GPU (or MIG instance) offers pods.

A whole GPU holds one pod with all of its memory; GPUs shared by several pods (timeslice, mps) and MIG
instances are packed to their memory less ``headroom`` (the share kept free: a pod's peak in the trace is
not a bound on its next one, and allocators fragment). The headroom is stated in every advice.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharebench.advise.options import DEFAULT_HEADROOM
from sharebench.gpus import GPU_MODELS, GpuModel, MigProfile

GB = 1e9


@dataclass(frozen=True)
class Pool:
    """A pool of GPUs of ``model``, packed to their memory less ``headroom`` where pods share it."""

    model: GpuModel
    headroom: float = DEFAULT_HEADROOM

    @property
    def whole_bytes(self) -> float:
        """The memory of a whole GPU, all of it one pod's."""
        return self.model.mem_gb * GB

    @property
    def shared_bytes(self) -> float:
        """The memory pods sharing one GPU may peak at together."""
        return self.whole_bytes * (1 - self.headroom)

    def instance_bytes(self, profile: MigProfile) -> float:
        """The memory a pod on one instance of ``profile`` may peak at."""
        return profile.mem_gb * GB * (1 - self.headroom)

    def describe(self) -> str:
        usable = self.shared_bytes / GB
        return (
            f"{self.model.key}: {self.model.mem_gb:g} GB a GPU, packed to {usable:.3g} GB where pods share one "
            f"({self.headroom:.0%} headroom; MIG instances likewise)"
        )

    def next_memory(self) -> GpuModel | None:
        """The known model with the next larger memory (the what-if of a memory-bound advice)."""
        larger = [m for m in GPU_MODELS.values() if m.mem_gb > self.model.mem_gb]
        return min(larger, key=lambda m: (m.mem_gb, m.key)) if larger else None
