"""Why time-slicing costs a workload what it costs: the split of its loss into switch idle and refill.

What the model is: a **transfer**. Two thirds of its prediction is the workload's in-slice rate, measured
while the workload itself is time-sliced beside a probe process; the model carries that time-sliced run
over to N time-sliced replicas of the workload. It does not predict the loss from independent probes. The
part that is independent of the workload's own time-sliced run is set beside it: the loss the probe pair
alone implies, slice and switch with no refill (``independent_pct``: switch / slice of two probe
processes, no workload running).

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

In a results folder (``sharebench run`` on an NVIDIA GPU with a ``timeslice:N`` mode): the sweep's probe
(provenance ``timeslice_probe``) gives the switch, and the last step of the sweep runs, per size, one
replica beside one probe process; its raw records (:func:`beside_record`) are ``timeslice_split.json``
(:func:`read_runs`, :func:`append_runs`). :func:`split_table` sets them beside the timeslice table's
measured loss: ``tables/timeslice_split.csv`` (:data:`SPLIT_COLUMNS`, 95% intervals over repeats), and
:func:`helpful_interval` names the slice length that would halve the loss (predicted, never measured).

What the data cannot identify is said, never printed as a time (:func:`identify`): a refill whose estimate
is negative (an in-slice rate above 1: faster inside a shared slice than alone), an evicted term below
zero (a heavy neighbour that saves time) and a negative implied refill are ``not identified`` (NaN, named
in ``not_identified``); an interval of a term that cannot be negative stops at 0. The switch is one probe
run's median, the same in every repeat: its interval is the order-statistic interval of that median
(``statistics.quantile_ci_from_summary``, from the probe's recorded percentiles), never a zero-width
interval over repeats that reused it, and every interval that depends on the switch (slice, rate, refill,
switch idle, the prediction) is the envelope of the repeats' intervals with the switch at either end of
its own (:func:`summarize`): the probe's spread is carried into the prediction's interval.

Which lengths NVIDIA's settings give is not documented: the DRA driver's ``timeSlicingConfig.interval``
(``Default | Short | Medium | Long``) is passed to ``nvidia-smi compute-policy --set-timeslice`` as 0..3
and nothing more is said (:data:`DRA_INTERVALS_NOTE`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sharebench.analysis.statistics import mean_ci, positive_mean_ci, quantile_ci_from_summary, ratio_loss_ci
from sharebench.probe_settings import DEFAULT_LENGTHS_MS
from sharebench.results import read_json, write_json
from sharebench.telemetry.timeslice_probe import BesideRun

MIN_SLICES = 5  # fewer workload slices than this in the window: the probe's own slice length is used


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
    slice_ms = float(np.median(slices)) if len(slices) >= MIN_SLICES else probe_slice_ms
    run = RunWindow(alone_s, beside_s, len(slices), float(sum(slices)), record.window_ms)
    return compose(run, slice_ms, switch_ms, measured_loss_pct)


@dataclass(frozen=True)
class RunWindow:
    """One run beside the probe: the workload's time alone and beside it (s), its switch-ins, and its
    on-GPU time within its timed window (ms)."""

    alone_s: float
    beside_s: float
    switch_ins: int
    on_gpu_ms: float
    window_ms: float


def compose(run: RunWindow, slice_ms: float, switch_ms: float, measured_loss_pct: float = math.nan) -> Split:
    """The :class:`Split` of a run whose workload had ``on_gpu_ms`` of its ``window_ms`` on the GPU."""
    rate = run.alone_s * 1e3 / run.on_gpu_ms if run.on_gpu_ms > 0 else math.nan
    refill = fitted_refill_ms(slice_ms, rate)
    pred = predicted_loss_pct(slice_ms, switch_ms, refill)
    return Split(
        alone_s=run.alone_s,
        beside_s=run.beside_s,
        switch_ins=run.switch_ins,
        slice_ms=slice_ms,
        switch_ms=switch_ms,
        gpu_share=run.on_gpu_ms / run.window_ms if run.window_ms > 0 else math.nan,
        in_slice_rate=rate,
        switch_idle_pct=switch_idle_pct(slice_ms, switch_ms),
        refill_ms=refill,
        refill_pct=100.0 * refill / (slice_ms + switch_ms),
        predicted_loss_pct=pred,
        measured_loss_pct=measured_loss_pct,
        error_pts=pred - measured_loss_pct,
    )


def resplit(s: Split, switch_ms: float) -> Split:
    """The same run's split had the switch been ``switch_ms``: every gap loses two switches, so the on-GPU
    time moves by 2 x switch-ins x the difference and the median slice by twice it (the probe's slice, used
    below :data:`MIN_SLICES`, stays). Exact unless a gap is shorter than two switches."""
    if not math.isfinite(switch_ms) or switch_ms == s.switch_ms:
        return s
    if not (s.in_slice_rate > 0 and s.gpu_share > 0):
        return replace(s, switch_ms=switch_ms)
    on_gpu = s.alone_s * 1e3 / s.in_slice_rate
    window = on_gpu / s.gpu_share
    moved = 2.0 * (s.switch_ms - switch_ms)
    slice_ms = s.slice_ms + moved if s.switch_ins >= MIN_SLICES else s.slice_ms
    run = RunWindow(s.alone_s, s.beside_s, s.switch_ins, on_gpu + s.switch_ins * moved, window)
    return compose(run, slice_ms, switch_ms, s.measured_loss_pct)


@dataclass(frozen=True)
class ProbePair:
    """Two probe processes alone (no workload): their median slice and switch (ms), each with the
    order-statistic interval of its median (NaN where the probe's percentiles were not recorded)."""

    slice_ms: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    switch_ms: tuple[float, float, float] = (math.nan, math.nan, math.nan)

    @classmethod
    def of(cls, probe: dict[str, Any] | None) -> ProbePair:
        """From a probe's record (``TimesliceProbe.to_dict``: ``slice_ms`` and ``switch_ms`` summaries)."""
        if not probe:
            return cls()
        return cls(*(quantile_ci_from_summary(probe.get(k) or {}) for k in ("slice_ms", "switch_ms")))

    @classmethod
    def medians(cls, slice_ms: float, switch_ms: float) -> ProbePair:
        """Only the medians (a sweep's record before the probe's percentiles were kept): no intervals."""
        return cls((slice_ms, math.nan, math.nan), (switch_ms, math.nan, math.nan))

    def independent(self) -> tuple[float, float, float]:
        """The loss the pair alone implies, switch / slice (%: the switch idle of every slice, no refill),
        with its interval from the two medians' intervals."""
        (sl, sl_lo, sl_hi), (sw, sw_lo, sw_hi) = self.slice_ms, self.switch_ms
        est = predicted_loss_pct(sl, sw, 0.0)
        if not all(math.isfinite(x) and x > 0 for x in (sl_lo, sl_hi)) or not all(
            math.isfinite(x) for x in (sw_lo, sw_hi)
        ):
            return (est, math.nan, math.nan)
        return (est, predicted_loss_pct(sl_hi, sw_lo, 0.0), predicted_loss_pct(sl_lo, sw_hi, 0.0))


def loss_from_rate(rate: float, idle_pct: float) -> float:
    """The loss (%) of a workload that progresses at ``rate`` inside its slices while the GPU idles
    ``idle_pct`` % of the time: 1 / (rate (1 - idle)) - 1; the same as :func:`predicted_loss_pct` with
    refill = slice (1 - rate)."""
    useful = rate * (1.0 - idle_pct / 100.0)
    return 100.0 * (1.0 / useful - 1.0) if useful > 0 else math.inf


def implied_refill_ms(loss_pct: float, slice_ms: float, switch_ms: float) -> float:
    """The refill per switch-in that a measured loss implies at this slice and switch (the inverse of
    :func:`predicted_loss_pct`): (L slice - switch) / (1 + L)."""
    x = loss_pct / 100.0
    return (x * slice_ms - switch_ms) / (1.0 + x)


def half_width(lo: float, hi: float) -> float:
    return (hi - lo) / 2.0 if math.isfinite(lo) and math.isfinite(hi) else math.nan


Bounds = tuple[float, float]
NO_BOUNDS: Bounds = (math.nan, math.nan)


def envelope(center: tuple[float, float, float], *others: tuple[float, float, float]) -> tuple[float, float, float]:
    """``center``'s estimate with the union of its interval and ``others``' (the same figure with an input
    at either end of its own interval); NaN interval when the center has none."""
    est, lo, hi = center
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return center
    for _, o_lo, o_hi in others:
        if math.isfinite(o_lo) and math.isfinite(o_hi):
            lo, hi = min(lo, o_lo), max(hi, o_hi)
    return (est, lo, hi)


def at_switches(splits: Sequence[Split], bounds: Bounds) -> list[list[Split]]:
    """``splits`` as measured, then recomputed with the switch at each end of ``bounds`` (where known)."""
    ends = [b for b in bounds if math.isfinite(b)]
    return [list(splits), *([resplit(x, b) for x in splits] for b in ends)]


def neighbour_terms(
    primary: Sequence[Split],
    light: Sequence[Split],
    measured: tuple[float, float, float] | None,
    predicted: tuple[float, float, float] | None = None,
    switches: tuple[Bounds, Bounds] = (NO_BOUNDS, NO_BOUNDS),
) -> dict[str, Any]:
    """Issue 34's terms of a workload measured beside a heavy neighbour (``primary``) and beside the light
    probe (``light``), each a list of splits over repeats:

    * ``evict_ms``: the progress each switch-in loses because a heavy neighbour ran before it, the heavy
      refill less the light one, paired by repeat (95% interval, the envelope over both switches' ends);
    * ``predicted_light_pct``: the prediction from the light probe alone (the model before issue 34);
    * ``implied_refill_ms``: the refill per switch-in the measured loss implies at the primary slice and
      switch, ``missing_ms`` what of it the fitted refill does not explain (a signed difference);
    * ``unexplained_pts``: measured - predicted loss, its interval sqrt(hw_measured^2 + hw_predicted^2).

    ``predicted``: the primary prediction with its interval (default: over ``primary``'s repeats);
    ``switches``: the primary and light switches' intervals (the probes' medians').
    """
    pm, plo, phi = predicted or mean_ci([s.predicted_loss_pct for s in primary])
    lt = light or primary
    light_switch = switches[1] if light else switches[0]
    rate_l = envelope(*(positive_mean_ci([s.in_slice_rate for s in v]) for v in at_switches(lt, light_switch)))
    evict = (
        envelope(
            *(paired_evict(h, lo) for h in at_switches(primary, switches[0]) for lo in at_switches(light, light_switch))
        )
        if light
        else (math.nan,) * 3
    )
    slice_ms = float(np.mean([s.slice_ms for s in primary]))
    switch = float(np.mean([s.switch_ms for s in primary]))
    refill = float(np.mean([s.refill_ms for s in primary]))
    m = measured or (math.nan, math.nan, math.nan)
    implied = implied_refill_ms(m[0], slice_ms, switch)
    half = math.hypot(half_width(m[1], m[2]), half_width(plo, phi))
    un = m[0] - pm
    return dict(
        switch_light_ms=float(np.mean([s.switch_ms for s in lt])),
        slice_light_ms=float(np.mean([s.slice_ms for s in lt])),
        in_slice_rate_light=rate_l[0],
        in_slice_rate_light_ci_low=rate_l[1],
        in_slice_rate_light_ci_high=rate_l[2],
        refill_light_ms=float(np.mean([s.refill_ms for s in lt])),
        evict_ms=evict[0],
        evict_ms_ci_low=evict[1],
        evict_ms_ci_high=evict[2],
        predicted_light_pct=float(np.mean([s.predicted_loss_pct for s in lt])),
        implied_refill_ms=implied,
        missing_ms=implied - refill,
        unexplained_pts=un,
        unexplained_ci_low=un - half,
        unexplained_ci_high=un + half,
    )


def paired_evict(heavy: Sequence[Split], light: Sequence[Split]) -> tuple[float, float, float]:
    """The heavy refill less the light one, paired by repeat, with its Student-t interval."""
    pairs = [h.refill_ms - lo.refill_ms for h, lo in zip(heavy, light)]
    return mean_ci(pairs) if pairs else (math.nan, math.nan, math.nan)


# what the data cannot identify: (term, its columns, why) -- a term whose estimate is below zero
NOT_IDENTIFIED = (
    ("refill", ("refill_ms", "refill_pct"), "in-slice rate above 1: faster inside a shared slice than alone"),
    ("evict", ("evict_ms",), "the heavy neighbour's refill below the light one's"),
    ("refill light", ("refill_light_ms",), "in-slice rate beside the light probe above 1"),
    ("implied refill", ("implied_refill_ms", "missing_ms"), "the measured loss below the switch idle alone"),
)


def identify(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with the terms the data cannot identify (:data:`NOT_IDENTIFIED`: an estimate below zero, a
    rate above 1 for the refill) set to NaN and named in ``not_identified``; the interval of a term that
    can be identified stops at 0 (a time per switch-in is never negative)."""
    out = dict(row)
    said = []
    for term, cols, why in NOT_IDENTIFIED:
        value = float(out.get(cols[0], math.nan))
        faster = term == "refill" and float(out.get("in_slice_rate", math.nan)) > 1.0
        if value < 0 or faster:
            said.append(f"{term} ({why})")
            for c in cols:
                for k in (c, f"{c}_ci_low", f"{c}_ci_high"):
                    if k in out:
                        out[k] = math.nan
        elif float(out.get(f"{cols[0]}_ci_low", math.nan)) < 0:
            out[f"{cols[0]}_ci_low"] = 0.0
    out["not_identified"] = "; ".join(said)
    return out


def loss_at(s: Split, lengths_ms: Sequence[float] = DEFAULT_LENGTHS_MS) -> list[dict[str, Any]]:
    """The predicted loss at other slice lengths, from the split's switch and fitted refill."""
    return loss_at_parts(s.switch_ms, s.refill_ms, lengths_ms)


def loss_at_parts(
    switch_ms: float, refill_ms: float, lengths_ms: Sequence[float] = DEFAULT_LENGTHS_MS
) -> list[dict[str, Any]]:
    """The predicted loss at each slice length of a workload with this switch and refill (ms)."""
    rows = []
    for length in lengths_ms:
        rows.append(
            dict(
                slice_ms=float(length),
                switch_idle_pct=switch_idle_pct(length, switch_ms),
                refill_pct=100.0 * refill_ms / (length + switch_ms),
                predicted_loss_pct=predicted_loss_pct(length, switch_ms, refill_ms),
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
    "refill_pct",
    "predicted_loss_pct",
)
POSITIVE_FIELDS = frozenset({"slice_ms", "switch_ms", "gpu_share", "in_slice_rate"})  # interval on the log scale


def summarize(
    splits: Sequence[Split],
    measured: tuple[float, float, float] | None = None,
    switch: Bounds = NO_BOUNDS,
) -> dict[str, Any]:
    """Mean and 95% interval over repeats of each part (``<field>``, ``<field>_ci_low/high``), the
    measured loss with its interval (``measured``: mean, low, high) and the error of the prediction.

    ``switch``: the interval of the probe's median switch that every repeat used; each part's interval is
    then the envelope of the repeats' intervals with the switch as measured and at either end (the switch
    reused in every repeat has no interval over them: its own is the probe's)."""
    out: dict[str, Any] = {"repeats": len(splits)}
    variants = at_switches(splits, switch)
    for f in SUMMARY_FIELDS:
        interval = positive_mean_ci if f in POSITIVE_FIELDS else mean_ci
        m, lo, hi = envelope(*(interval([getattr(s, f) for s in v]) for v in variants))
        out.update({f: m, f"{f}_ci_low": lo, f"{f}_ci_high": hi})
    if splits and all(math.isfinite(b) for b in switch):
        out.update(switch_ms_ci_low=switch[0], switch_ms_ci_high=switch[1])
    if measured is not None:
        out.update(loss_pct=measured[0], loss_ci_low=measured[1], loss_ci_high=measured[2])
        out["error_pts"] = out["predicted_loss_pct"] - measured[0]
    return out


# --- in a results folder: the raw records beside the probe and tables/timeslice_split.csv -------------------

SPLIT_JSON = "timeslice_split.json"  # the raw records of the runs beside the probe (document kind below)
SPLIT_KIND = "timeslice_split"
SPLIT_DIR = "timeslice_split"  # each run's replica and probe files, one folder per run
HELP_FRACTION = 0.5  # the interval that would help: the shortest predicted to halve the loss
MIN_LOSS_PCT = 2.0  # below this predicted loss no longer interval is worth naming
DRA_SOURCE = (
    "NVIDIA/k8s-dra-driver-gpu: api/nvidia.com/resource/v1beta1/sharing.go (TimeSliceInterval.Int), "
    "cmd/gpu-kubelet-plugin/sharing.go (SetTimeSlice)"
)
DRA_INTERVALS_NOTE = (
    "NVIDIA's DRA driver offers the time-slice intervals Default, Short, Medium and Long "
    "(`timeSlicingConfig.interval`) and passes them to `nvidia-smi compute-policy --set-timeslice` as 0, 1, 2 "
    f"and 3 ({DRA_SOURCE}); neither it nor nvidia-smi documents their lengths in milliseconds, so no "
    "prediction here is for one of those settings: the lengths are chosen, and every row is predicted, "
    "not measured"
)
NEIGHBOUR_COLUMNS = (
    "switch_light_ms",
    "slice_light_ms",
    "in_slice_rate_light",
    "in_slice_rate_light_ci_low",
    "in_slice_rate_light_ci_high",
    "refill_light_ms",
    "evict_ms",
    "evict_ms_ci_low",
    "evict_ms_ci_high",
    "predicted_light_pct",
    "implied_refill_ms",
    "missing_ms",
    "unexplained_pts",
    "unexplained_ci_low",
    "unexplained_ci_high",
)
SPLIT_FIELDS = ("slice_ms", "switch_ms", "switch_idle_pct", "in_slice_rate", "gpu_share", "refill_ms", "refill_pct")
INDEPENDENT_COLUMNS = (  # the probe pair alone (no workload): its slice and the loss slice and switch imply
    "probe_slice_ms",
    "probe_slice_ms_ci_low",
    "probe_slice_ms_ci_high",
    "independent_pct",
    "independent_ci_low",
    "independent_ci_high",
    "independent_light_pct",
)
SPLIT_COLUMNS = [
    "engine",  # the work keys of sharebench.analysis.tables.WORK_KEYS
    "backend",
    "device_class",
    "lattice",
    "particles",
    "turns",
    "mode",
    "uuid",
    "device_name",
    "repeats",
    *(c for f in SPLIT_FIELDS for c in (f, f"{f}_ci_low", f"{f}_ci_high")),
    "loss_pct",
    "loss_ci_low",
    "loss_ci_high",
    "predicted_loss_pct",  # the transfer's prediction (the in-slice rate of a time-sliced run beside a probe)
    "predicted_ci_low",
    "predicted_ci_high",
    "error_pts",
    "neighbour",  # issue 34: what the primary columns were measured beside (light, stream:MB, heavy:MB)
    *NEIGHBOUR_COLUMNS,
    *INDEPENDENT_COLUMNS,
    "not_identified",  # the terms the data cannot identify, and why (''; :func:`identify`)
]
RECORD_WORK = ("engine", "backend", "device_class", "lattice", "particles", "turns")


def beside_record(
    run: BesideRun, work: dict[str, Any], switch_ms: float, slice_ms: float, probe: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The raw record of one run beside the probe, as ``timeslice_split.json`` keeps it: the work (the
    results' work keys), the replica's timed window, the probe's gaps inside it (ms) and the switch and
    slice the sweep's probes measured alone (``probe``: that probe run's record, whose percentiles give the
    medians' intervals; kept as ``probe_slice`` and ``probe_switch``)."""
    rec = SwitchOut.of(run)
    return {
        **work,
        "status": "ok" if run.covered() else "uncovered",
        "reason": "" if run.covered() else "the probe ended before the workload's timed window did",
        "uuid": run.trace.uuid,
        "device_name": run.trace.device_name,
        "track_s": float(run.record["track_s"]),
        "track_start": float(run.record["track_start"]),
        "track_end": float(run.record["track_end"]),
        "window_ms": rec.window_ms,
        "gaps_ms": [round(g, 6) for g in rec.gaps_ms],
        "probe_switch_ms": switch_ms,
        "probe_slice_ms": slice_ms,
        "probe_switch": dict((probe or {}).get("switch_ms") or {}),
        "probe_slice": dict((probe or {}).get("slice_ms") or {}),
        "offset_err_ns": run.trace.offset_err_ns,
        "overflowed": run.trace.overflowed,
        "neighbour": run.trace.neighbour,
    }


def read_runs(folder: Path | str) -> list[dict[str, Any]]:
    """The raw records of a results folder's runs beside the probe (none when it holds no such file)."""
    path = Path(folder) / SPLIT_JSON
    return list(read_json(path, SPLIT_KIND).get("runs") or []) if path.is_file() else []


def append_runs(folder: Path | str, runs: Sequence[dict[str, Any]]) -> Path:
    """Add ``runs`` to the folder's ``timeslice_split.json`` (written whole or not at all)."""
    return write_json(Path(folder) / SPLIT_JSON, SPLIT_KIND, {"runs": [*read_runs(folder), *runs]})


Work = tuple[str, str, str, str, int, int]


def work_of(rec: Any) -> Work:
    """A record's or a table row's work (a dict or a row), normalised so that CSV-read and JSON values compare."""
    e, b, d, lat, p, t = (rec.get(k) for k in RECORD_WORK)
    return (str(e), str(b), str(d), str(lat), int(float(p)), int(float(t)))


def run_splits(runs: Sequence[dict[str, Any]], alone_s: float) -> list[Split]:
    """The split of each ok run beside the probe, against the workload's time alone."""
    return [
        split(
            alone_s,
            float(r["track_s"]),
            SwitchOut(float(r["window_ms"]), tuple(float(g) for g in r["gaps_ms"])),
            float(r["probe_switch_ms"]),
            float(r.get("probe_slice_ms", math.nan)),
        )
        for r in runs
    ]


def neighbour_of(rec: dict[str, Any]) -> str:
    """The neighbour a run beside the probe was measured beside (records before issue 34: light)."""
    return str(rec.get("neighbour") or "light")


def record_pair(rec: dict[str, Any]) -> ProbePair:
    """The probe pair a sweep's record was split with: the probe's summaries where kept, else its medians."""
    if rec.get("probe_switch") and rec.get("probe_slice"):
        return ProbePair.of({"slice_ms": rec["probe_slice"], "switch_ms": rec["probe_switch"]})
    return ProbePair.medians(float(rec.get("probe_slice_ms", math.nan)), float(rec.get("probe_switch_ms", math.nan)))


def split_row(
    work: Work,
    uuid: str,
    runs: Sequence[dict[str, Any]],
    ts: dict[str, Any] | None,
    light: Sequence[dict[str, Any]] = (),
) -> dict[str, Any] | None:
    """One row of the split table: the parts over the runs' repeats beside one mode's measured loss;
    ``runs`` beside one neighbour, ``light`` beside the light probe when ``runs`` are beside another."""
    alone = float(ts["T1_s"]) if ts is not None else math.nan
    if not math.isfinite(alone) or not runs:
        return None
    measured = (float(ts["loss_pct"]), float(ts["loss_ci_low"]), float(ts["loss_ci_high"])) if ts else None
    row: dict[str, Any] = dict(zip(RECORD_WORK, work), mode=ts["mode"] if ts else "", uuid=uuid)
    row.update(device_name=runs[0].get("device_name", ""))
    pairs = (record_pair(runs[0]), record_pair(light[0]) if light else None)
    splits = (run_splits(runs, alone), run_splits(light, alone))
    return {**row, **model_row(*splits, measured, neighbour_of(runs[0]), pairs)}


def model_row(
    splits: Sequence[Split],
    light: Sequence[Split],
    measured: tuple[float, float, float] | None,
    neighbour: str,
    pairs: tuple[ProbePair | None, ProbePair | None] = (None, None),
) -> dict[str, Any]:
    """The split table's columns after the work keys (:data:`SPLIT_COLUMNS`) from the splits beside one
    neighbour and, when that is not the light probe, those beside the light probe; ``pairs``: the probe
    pairs alone beside that neighbour and light (their slices and switches, with the medians' intervals),
    whose switch intervals every interval carries and whose slice and switch give the independent part."""
    pair = pairs[0] or ProbePair()
    lp = pairs[1] or (pair if not light else ProbePair())
    switch: Bounds = (pair.switch_ms[1], pair.switch_ms[2])
    s = summarize(splits, measured, switch)
    row: dict[str, Any] = dict(repeats=s["repeats"])
    for f in SPLIT_FIELDS:
        row.update({f: s[f], f"{f}_ci_low": s[f"{f}_ci_low"], f"{f}_ci_high": s[f"{f}_ci_high"]})
    predicted = (s["predicted_loss_pct"], s["predicted_loss_pct_ci_low"], s["predicted_loss_pct_ci_high"])
    row.update(
        loss_pct=s.get("loss_pct", math.nan),
        loss_ci_low=s.get("loss_ci_low", math.nan),
        loss_ci_high=s.get("loss_ci_high", math.nan),
        predicted_loss_pct=predicted[0],
        predicted_ci_low=predicted[1],
        predicted_ci_high=predicted[2],
        error_pts=s.get("error_pts", math.nan),
        neighbour=neighbour,
    )
    row.update(neighbour_terms(splits, light, measured, predicted, (switch, (lp.switch_ms[1], lp.switch_ms[2]))))
    ind = pair.independent()
    row.update(
        probe_slice_ms=pair.slice_ms[0],
        probe_slice_ms_ci_low=pair.slice_ms[1],
        probe_slice_ms_ci_high=pair.slice_ms[2],
        independent_pct=ind[0],
        independent_ci_low=ind[1],
        independent_ci_high=ind[2],
        independent_light_pct=lp.independent()[0],
    )
    return identify(row)


def split_table(runs: Sequence[dict[str, Any]], timeslice: pd.DataFrame) -> pd.DataFrame:
    """``tables/timeslice_split.csv``: per work, GPU, measured ``timeslice:N`` mode and heavy neighbour,
    the split of the loss (means and 95% intervals over the runs beside the probe) beside the loss the
    timeslice table measured, with the terms of :func:`neighbour_terms` against the runs beside the light
    probe. Only light runs (folders before issue 34): one row, ``neighbour`` light. Works without a
    measured loss (no exclusive baseline) have no row."""
    ok = [r for r in runs if r.get("status") == "ok"]
    groups: dict[tuple[Work, str], list[dict[str, Any]]] = {}
    for r in ok:
        groups.setdefault((work_of(r), str(r.get("uuid") or "")), []).append(r)
    measured = timeslice.to_dict("records") if len(timeslice) else []
    rows = []
    for (work, uuid), g in sorted(groups.items()):
        light = [r for r in g if neighbour_of(r) == "light"]
        others = sorted({neighbour_of(r) for r in g} - {"light"})
        parts = [([r for r in g if neighbour_of(r) == k], light) for k in others] or [(light, [])]
        for ts in [t for t in measured if work_of(t) == work]:
            for beside, light_runs in parts:
                row = split_row(work, uuid, beside, ts, light_runs)
                if row is not None:
                    rows.append(row)
    return pd.DataFrame(rows, columns=SPLIT_COLUMNS)


def helpful_interval(row: dict[str, Any] | pd.Series, lengths_ms: Sequence[float] = DEFAULT_LENGTHS_MS) -> dict | None:
    """The shortest of ``lengths_ms`` longer than the measured slice whose predicted loss is at most
    :data:`HELP_FRACTION` of the loss predicted at the measured slice (a :func:`loss_at_parts` row with
    ``now_pct``, the loss predicted at the measured slice); None when the loss is under
    :data:`MIN_LOSS_PCT` already, or no length listed would halve it. A refill not identified (an
    in-slice rate above 1) counts as none: the prediction is the switch idle's alone."""
    slice_ms, switch, refill = (float(row[k]) for k in ("slice_ms", "switch_ms", "refill_ms"))
    if math.isnan(refill) and "refill (" in str(row.get("not_identified") or ""):
        refill = 0.0  # a refill the data cannot identify (a rate above 1): the switch idle alone
    now = predicted_loss_pct(slice_ms, switch, refill)
    if not all(math.isfinite(x) for x in (slice_ms, switch, refill, now)) or now < MIN_LOSS_PCT:
        return None
    for r in loss_at_parts(switch, refill, [x for x in lengths_ms if x > 1.05 * slice_ms]):
        if r["predicted_loss_pct"] <= HELP_FRACTION * now:
            return {**r, "now_pct": now, "measured_slice_ms": slice_ms}
    return None


# --- a `sharebench probe split` document (its --out JSON): the same rows from what it recorded --------------

Doc = dict[str, Any]


def doc_splits(doc: Doc) -> dict[str, list[Split]]:
    """The splits per neighbour a ``probe split`` document recorded (older documents: one light list)."""
    raw = doc.get("splits") or []
    by = {"light": raw} if isinstance(raw, list) else dict(raw)
    return {k: [Split(**{f: d[f] for f in Split.__dataclass_fields__}) for d in v] for k, v in by.items()}


def doc_probes(doc: Doc) -> dict[str, dict[str, Any]]:
    """The probe pairs alone a document recorded, per neighbour (older documents: the light one only)."""
    return dict(doc.get("probes") or {"light": doc.get("probe") or {}})


def doc_measured(doc: Doc) -> tuple[float, float, float]:
    """The measured loss of a document's repeats: N time-sliced spans against N x T_1, with its interval."""
    n = int(doc.get("replicas") or 2)
    return ratio_loss_ci(doc.get("timeslice_span_s") or [], doc.get("alone_s") or [], factor=n)


def doc_rows(doc: Doc) -> list[dict[str, Any]]:
    """The split table's model columns (:func:`model_row`) of a ``probe split`` document: one row per
    neighbour other than light, each against the light runs; only light runs: one light row."""
    splits, probes, measured = doc_splits(doc), doc_probes(doc), doc_measured(doc)
    light = splits.get("light") or []
    light_pair = ProbePair.of(probes.get("light"))
    rows = [
        {"neighbour": k, **model_row(v, light, measured, k, (ProbePair.of(probes.get(k)), light_pair))}
        for k, v in splits.items()
        if k != "light"
    ]
    return rows or [model_row(light, [], measured, "light", (light_pair, None))]
