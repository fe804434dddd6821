"""Synthetic time-sliced workloads whose causes are known (tests of sharebench.analysis.timeslice_split):
a workload beside the time-slice probe, the loss of a time-sliced pair, and a results folder of both."""

from __future__ import annotations

import math

from sharebench.analysis.timeslice_split import SwitchOut
from sharebench.results import ResultsWriter
from support.crafted import GPU, cell


def beside_probe(work_ms: float, slice_ms: float, switch_ms: float, refill_ms: float) -> tuple[float, SwitchOut]:
    """A workload that needs ``work_ms`` of progress, beside a probe with the same slices: every slice of
    the workload makes progress only after ``refill_ms``. Its time beside the probe and the probe's record."""
    n = math.ceil(work_ms / (slice_ms - refill_ms) - 1e-9)
    gap = slice_ms + 2 * switch_ms  # the probe sees the workload's slice and the switches around it
    window = n * (gap + slice_ms)  # workload slice, switches, probe slice
    return window / 1e3, SwitchOut(window, (gap,) * n)


def pair_loss_pct(work_ms: float, slice_ms: float, switch_ms: float, refill_ms: float, n: int = 2) -> float:
    """The measured loss of N such replicas time-sliced: T_N against N x T_1 (the tables' definition)."""
    slices = math.ceil(work_ms / (slice_ms - refill_ms) - 1e-9)
    t_n = n * slices * (slice_ms + switch_ms)
    return 100.0 * (t_n - n * work_ms) / (n * work_ms)


def gpu_folder(folder, refills=(0.45, 0.5, 0.55), uuid="GPU-a", loss_refill=0.5):
    """A GPU sweep (2,000 particles x 10 turns) whose exclusive replica takes 1.05 s and whose timeslice:2
    cells last as two replicas with 2 ms slices, 0.2 ms switches and a ``loss_refill`` ms refill would; and
    runs beside the probe of the same workload with the given refills. Returns the beside records."""
    base = dict(GPU, device_uuid=uuid, parent_uuid=uuid)
    loss = pair_loss_pct(1050.0, 2.0, 0.2, loss_refill)
    rows = []
    for r, t in zip((1, 2, 3), (1.04, 1.05, 1.06)):
        rows += cell(base, "exclusive", r, [(10 * r, 10 * r + t)])
    for r, d in zip((1, 2, 3), (-0.01, 0.0, 0.01)):
        span = 2 * 1.05 * (1 + loss / 100) + d
        rows += cell(base, "timeslice:2", r, [(100 * r, 100 * r + span), (100 * r, 100 * r + span - 0.01)])
    ResultsWriter(folder).append(rows)
    runs = []
    for i, refill in enumerate(refills):
        beside, rec = beside_probe(1050.0, 2.0, 0.2, refill)
        runs.append(
            dict(
                engine="simpletrack",
                backend="cuda",
                device_class="gpu",
                lattice="generated",
                particles=2000,
                turns=10,
                repeat=i + 1,
                status="ok",
                uuid=uuid,
                device_name="NVIDIA H200",
                track_s=beside,
                window_ms=rec.window_ms,
                gaps_ms=list(rec.gaps_ms),
                probe_switch_ms=0.2,
                probe_slice_ms=2.0,
            )
        )
    return runs
