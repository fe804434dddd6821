"""Why time-slicing costs a workload what it costs: the split of its loss into switch idle and refill.

Inputs (pure numbers, so synthetic records test it): the workload's time alone ``alone_s``; one replica's
timed window beside one time-slice probe (``beside_s``) and the probe's gaps inside that window (each gap
is one slice of the workload plus two switches); the switch time ``switch_ms`` measured by probes alone
(``sharebench.telemetry.timeslice_probe``). From them:

* ``gpu_share``: the workload's on-GPU time in its window, sum(gap - 2 switch) / window;
* ``in_slice_rate``: its progress inside its own slices against alone, alone_s / on-GPU time;
* ``switch_idle_pct``: the GPU idle between slices, switch / (slice + switch);
* ``refill_ms``: a fixed cost per switch-in fitted from the in-slice rate, slice x (1 - rate);
* ``predicted_loss_pct``: in the tables' sense (T_N against N x T_1, ``analysis.tables.shared_row``):
  of every slice + switch only slice - refill makes progress, so T_N / (N T_1) = (slice + switch) /
  (slice - refill) and the loss is (switch + refill) / (slice - refill); beside the measured loss.
  ``switch_idle_pct`` + ``refill_pct`` is the share of wall time without progress.

:func:`loss_at` predicts the loss at other slice lengths (switch idle scales as switch / (slice +
switch), the refill, being fixed per switch-in, as 1 / slice); its rows are labelled ``predicted``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from sharebench.analysis.statistics import mean_ci
from sharebench.telemetry.timeslice_probe import BesideRun

MIN_SLICES = 5  # fewer workload slices than this in the window: the probe's own slice length is used
DEFAULT_LENGTHS_MS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


@dataclass(frozen=True)
class SwitchOut:
    """The probe's switch-out record inside a workload's timed window: the window and the gaps (ms)."""

    window_ms: float
    gaps_ms: tuple[float, ...]

    @classmethod
    def of(cls, run: BesideRun) -> SwitchOut:
        lo, hi = run.window_ns()
        gaps = tuple((b - a) / 1e6 for a, b in run.trace.gaps_within(lo, hi))
        return cls((hi - lo) / 1e6, gaps)


@dataclass(frozen=True)
class Split:
    """One workload's time-slicing loss split into its parts (see the module's docstring)."""

    alone_s: float
    beside_s: float
    switch_ins: int
    slice_ms: float
    switch_ms: float
    gpu_share: float
    in_slice_rate: float
    switch_idle_pct: float
    refill_ms: float
    refill_pct: float
    predicted_loss_pct: float
    measured_loss_pct: float
    error_pts: float  # predicted - measured

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def workload_slices_ms(gaps_ms: Sequence[float], switch_ms: float) -> list[float]:
    """The workload's slices inside the probe's gaps: each gap less the two switches around it."""
    return [max(g - 2.0 * switch_ms, 0.0) for g in gaps_ms]


def switch_idle_pct(slice_ms: float, switch_ms: float) -> float:
    """Share of wall time the GPU sits idle switching, when every slice is followed by one switch."""
    return 100.0 * switch_ms / (slice_ms + switch_ms)


def fitted_refill_ms(slice_ms: float, in_slice_rate: float) -> float:
    """The fixed cost per switch-in that slows a slice of ``slice_ms`` to ``in_slice_rate``."""
    return slice_ms * (1.0 - in_slice_rate)


def predicted_loss_pct(slice_ms: float, switch_ms: float, refill_ms: float) -> float:
    """The loss of N time-sliced replicas, T_N against N x T_1 (%): of every slice + switch only
    slice - refill makes progress; infinite once the refill fills the slice."""
    if not slice_ms > 0:
        return math.nan
    useful = slice_ms - refill_ms
    return 100.0 * (switch_ms + refill_ms) / useful if useful > 0 else math.inf


def split(
    alone_s: float,
    beside_s: float,
    record: SwitchOut,
    switch_ms: float,
    probe_slice_ms: float = math.nan,
    measured_loss_pct: float = math.nan,
) -> Split:
    """The split of one workload's loss from one run beside the probe (see the module's docstring).

    ``slice_ms`` is the workload's median slice in the window; with fewer than :data:`MIN_SLICES` of them,
    ``probe_slice_ms`` (the probes' own slice) stands in.
    """
    slices = workload_slices_ms(record.gaps_ms, switch_ms)
    on_gpu_ms = float(sum(slices))
    slice_ms = float(np.median(slices)) if len(slices) >= MIN_SLICES else probe_slice_ms
    rate = alone_s * 1e3 / on_gpu_ms if on_gpu_ms > 0 else math.nan
    refill = fitted_refill_ms(slice_ms, rate)
    pred = predicted_loss_pct(slice_ms, switch_ms, refill)
    return Split(
        alone_s=alone_s,
        beside_s=beside_s,
        switch_ins=len(slices),
        slice_ms=slice_ms,
        switch_ms=switch_ms,
        gpu_share=on_gpu_ms / record.window_ms if record.window_ms > 0 else math.nan,
        in_slice_rate=rate,
        switch_idle_pct=switch_idle_pct(slice_ms, switch_ms),
        refill_ms=refill,
        refill_pct=100.0 * refill / (slice_ms + switch_ms),
        predicted_loss_pct=pred,
        measured_loss_pct=measured_loss_pct,
        error_pts=pred - measured_loss_pct,
    )


def loss_at(s: Split, lengths_ms: Sequence[float] = DEFAULT_LENGTHS_MS) -> list[dict[str, Any]]:
    """The predicted loss at other slice lengths, from the split's switch and fitted refill."""
    rows = []
    for length in lengths_ms:
        rows.append(
            dict(
                slice_ms=float(length),
                switch_idle_pct=switch_idle_pct(length, s.switch_ms),
                refill_pct=100.0 * s.refill_ms / (length + s.switch_ms),
                predicted_loss_pct=predicted_loss_pct(length, s.switch_ms, s.refill_ms),
                label="predicted",
            )
        )
    return rows


SUMMARY_FIELDS = (
    "slice_ms",
    "switch_ms",
    "gpu_share",
    "in_slice_rate",
    "switch_idle_pct",
    "refill_ms",
    "predicted_loss_pct",
)


def summarize(splits: Sequence[Split], measured: tuple[float, float, float] | None = None) -> dict[str, Any]:
    """Mean and 95% interval over repeats of each part (``<field>``, ``<field>_ci_low/high``), the
    measured loss with its interval (``measured``: mean, low, high) and the error of the prediction."""
    out: dict[str, Any] = {"repeats": len(splits)}
    for f in SUMMARY_FIELDS:
        m, lo, hi = mean_ci([getattr(s, f) for s in splits])
        out.update({f: m, f"{f}_ci_low": lo, f"{f}_ci_high": hi})
    if measured is not None:
        out.update(loss_pct=measured[0], loss_ci_low=measured[1], loss_ci_high=measured[2])
        out["error_pts"] = out["predicted_loss_pct"] - measured[0]
    return out
