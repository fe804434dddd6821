"""The loss each cell should show with no interference, next to the loss it showed.

Predictions (what a perfect device would give; ``excess = measured − predicted``):

* ``exclusive``: 0.
* ``timeslice:N`` and ``mps:N``: 0 extra over N·T_1 (N replicas share the device,
  so the ideal span is N·T_1). ``mps:N@PCT`` with N·PCT < 100 leaves SMs unused:
  each client gets PCT% of the SMs, so an SM-bound span is T_1·100/PCT, a loss
  of 100/(N·PCT) − 1.
* ``mig:LAYOUT``: one replica per instance doing the exclusive replica's work.
  An SM-bound run slows by full SMs / instance SMs (A100-40GB 7g.40gb: 108/98 − 1
  = 10.20%; H100/H200 7g: 132/132 − 1 = 0%); a memory-bound run by full memory /
  instance memory (7g.40gb: 0%). The compute share the layout loses is
  (full SMs − instances × instance SMs) / full SMs (A100-40GB: 10/108 = 9.26%).
* ``partition:N`` (and MIG rows of the partition table): the ideal is already the
  SM (GPU) or core (CPU) fraction, T_full × full/slice, so 0 excess is predicted.

Which bound applies is taken from the telemetry of the exclusive cells (the kernel
alone), see :func:`classify_bound`; without telemetry, SM-bound is assumed and said.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sharebench.analysis.kinds import baseline_mask
from sharebench.analysis.tables import Tables
from sharebench.analysis.telemetry import cell_telemetry
from sharebench.errors import UserError
from sharebench.gpus import GpuModel, gpu_model, models_with_profile, resolve_layout
from sharebench.modes import Mode, parse_mode
from sharebench.parse import number_or_nan
from sharebench.results import load_results, read_provenance

# bound thresholds (percent); a heuristic, stated in the report
DRAM_BOUND_PCT = 60.0  # DRAM bandwidth used vs peak (GPM / DCGM_FI_PROF_DRAM_ACTIVE)
SM_BOUND_PCT = 80.0  # SM activity (GPM SM_UTIL / DCGM_FI_PROF_SM_ACTIVE)
SM_IDLE_PCT = 50.0
NVML_BUSY_PCT = 90.0  # NVML utilization.gpu: time a kernel was running
NVML_MEM_BUSY_PCT = 60.0  # NVML utilization.memory: time the memory controller was busy
CPU_BUSY_FRACTION = 0.9


def telemetry_value(d: dict[str, Any] | None, key: str) -> float | None:
    """A finite number from ``d[key]``; for ``tel_<x>_mean`` the tracking-window mean ``win_<x>``
    (sharebench.analysis.telemetry.window_means) wins when present."""
    if not d:
        return None
    if key.startswith("tel_") and key.endswith("_mean") and d.get(f"win_{key[4:-5]}") is not None:
        win = telemetry_value(d, f"win_{key[4:-5]}")
        if win is not None:
            return win
    raw = d.get(key)
    if raw is None:  # absent or null: no measurement
        return None
    try:
        v = float(raw)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _pct_of_fraction(fraction: float | None) -> float | None:
    """A DCGM ``*_active`` fraction (0..1) in percent; None stays None (not measured)."""
    return None if fraction is None else 100 * fraction


def classify_bound(
    tel: dict[str, Any] | None, device_class: str = "gpu", cores: float | None = None
) -> tuple[str, str]:
    """(bound, evidence) from a cell's telemetry summary (``tel_*`` columns, or ``dcgm_*``
    means in 0..1 from the Prometheus summary). Bounds: ``memory-bound``, ``SM-bound``,
    ``latency-bound`` (SMs mostly idle), ``core-bound`` (CPU), ``unknown``."""
    if device_class == "cpu":
        busy, who = telemetry_value(tel, "tel_proc_busy_cores_mean"), "by the replicas"
        if busy is None:
            busy, who = telemetry_value(tel, "tel_cpu_busy_cores_mean"), "on the host"
        if busy is None or not cores:
            return "unknown", "no CPU telemetry"
        frac = busy / cores
        if frac >= CPU_BUSY_FRACTION:
            return "core-bound", f"{busy:.2f} of {cores:g} cores busy {who}"
        return "unknown", f"only {busy:.2f} of {cores:g} cores busy {who}: not core-saturated"
    sm = telemetry_value(tel, "tel_sm_active_pct_mean")
    dram = telemetry_value(tel, "tel_dram_bw_util_pct_mean")
    fp64 = telemetry_value(tel, "tel_fp64_active_pct_mean")
    src = "GPM"
    dcgm_sm = _pct_of_fraction(telemetry_value(tel, "dcgm_sm_active_mean")) if sm is None else None
    if dcgm_sm is not None:
        sm = dcgm_sm
        dram = _pct_of_fraction(telemetry_value(tel, "dcgm_dram_active_mean"))
        fp64 = _pct_of_fraction(telemetry_value(tel, "dcgm_fp64_active_mean"))
        src = "DCGM"
    if sm is not None:
        ev = (
            f"{src}: SM active {sm:.1f}%"
            + (f", DRAM bandwidth {dram:.1f}%" if dram is not None else "")
            + (f", FP64 pipe {fp64:.1f}%" if fp64 is not None else "")
        )
        if dram is not None and dram >= DRAM_BOUND_PCT:
            return "memory-bound", ev
        if sm >= SM_BOUND_PCT:
            return "SM-bound", ev
        if sm < SM_IDLE_PCT:
            return "latency-bound", ev
        return "unknown", ev + " (between thresholds)"
    gpu = telemetry_value(tel, "tel_gpu_util_pct_mean")
    mem = telemetry_value(tel, "tel_mem_util_pct_mean")
    if gpu is not None:
        ev = (
            f"NVML: kernel active {gpu:.1f}% of the time"
            + (f", memory controller busy {mem:.1f}%" if mem is not None else "")
            + " (no SM-level counters)"
        )
        if gpu < SM_IDLE_PCT:
            return "latency-bound", ev
        if gpu >= NVML_BUSY_PCT and mem is not None and mem >= NVML_MEM_BUSY_PCT:
            return "memory-bound", ev
        if gpu >= NVML_BUSY_PCT:
            return "SM-bound", ev + "; likely, not proven"
        return "unknown", ev
    note = (tel or {}).get("tel_note") if tel else None
    return "unknown", "no GPU telemetry" + (f" ({note})" if note else "")


def _model(gpu: GpuModel | str | None) -> GpuModel | None:
    if gpu is None or isinstance(gpu, GpuModel):
        return gpu
    try:
        return gpu_model(gpu)
    except UserError:
        return None


@dataclass(frozen=True)
class CellOn:
    """What a prediction needs beside the mode: the GPU model, the device class, the MIG profile the
    cells ran on and whether the work is SM- or memory-bound."""

    gpu: GpuModel | str | None = None
    device_class: str = "gpu"
    mig_profile: str | None = None
    bound: str = "SM-bound"


Predictor = Callable[[Mode, CellOn], dict[str, Any]]


def predict_exclusive(m: Mode, on: CellOn) -> dict[str, Any]:
    """The baseline: the reference itself."""
    return {"metric": "T_1", "basis": "the reference itself"}


def predict_timeslice(m: Mode, on: CellOn) -> dict[str, Any]:
    """N replicas taking turns: the ideal span is N·T_1, no extra loss."""
    return {
        "metric": "loss vs N·T_1",
        "basis": f"{m.replicas} replicas share one device: ideal span = {m.replicas}·T_1, 0% extra",
    }


def predict_partition(m: Mode, on: CellOn) -> dict[str, Any]:
    """Disjoint slices: the ideal already holds the slice's share, no excess."""
    unit = "SMs" if on.device_class == "gpu" else "cores"
    return {
        "metric": "T_slice vs ideal",
        "basis": f"ideal = T_full × full {unit} / slice {unit} ({m.replicas} slices): 0% excess",
    }


def predict_emulated(m: Mode, on: CellOn) -> dict[str, Any]:
    """MIG emulated with MPS: its own table holds each profile against the ideal; nothing predicted here."""
    return {}


def predict_mps(m: Mode, on: CellOn) -> dict[str, Any]:
    """``mps:N`` shares the device like time-slicing; ``mps:N@PCT`` with N·PCT < 100 leaves SMs unused."""
    n, pct = m.replicas or 1, m.thread_pct
    if pct is not None and n * pct < 100:
        return {
            "metric": "loss vs N·T_1",
            "predicted_pct": 100.0 * (100.0 / (n * pct) - 1.0),
            "time_factor": 100.0 / (n * pct),
            "basis": f"{n} clients × {pct}% active threads use {n * pct}% of the SMs: "
            f"SM-bound span = T_1·100/{pct} = {100 / pct / n:.2f}·N·T_1",
        }
    return {"metric": "loss vs N·T_1", "basis": f"{n} MPS clients share one device: ideal span = {n}·T_1, 0% extra"}


def predict_mig(m: Mode, on: CellOn) -> dict[str, Any]:
    """One replica per MIG instance: the slow-down by the SMs (or the memory) the instance lacks."""
    gpu, mig_profile, bound = on.gpu, on.mig_profile, on.bound
    model = _model(gpu)
    if model is None:
        return {
            "metric": "T_mig vs T_full",
            "predicted_pct": math.nan,
            "time_factor": math.nan,
            "compute_share_lost_pct": math.nan,
            "basis": f"GPU model {gpu!r} unknown: no SM counts to predict from",
        }
    name = mig_profile if mig_profile and mig_profile != "?" else resolve_layout(model, m.layout or "")[4:]
    if name == "disabled":
        return {"metric": "T_mig vs T_full", "basis": "MIG disabled: the full GPU"}
    p = model.profile(name)
    sm_factor = model.sms / p.sms
    mem_factor = model.mem_gb / p.mem_gb
    lost = 100.0 * (model.sms - p.max_count * p.sms) / model.sms
    sm_pct, mem_pct = 100.0 * (sm_factor - 1.0), 100.0 * max(mem_factor - 1.0, 0.0)
    use_mem = bound == "memory-bound"
    return {
        "metric": "T_mig vs T_full",
        "predicted_pct": mem_pct if use_mem else sm_pct,
        "time_factor": max(mem_factor, 1.0) if use_mem else sm_factor,
        "compute_share_lost_pct": lost,
        "predicted_sm_bound_pct": sm_pct,
        "predicted_memory_bound_pct": mem_pct,
        "basis": (
            f"{model.key} {p.name}: {p.sms} of {model.sms} SMs "
            f"({p.max_count}× → {model.sms - p.max_count * p.sms} SMs unused, {lost:.2f}% compute "
            f"share lost); "
            + (
                f"memory-bound: {model.mem_gb:g}/{p.mem_gb:g} GB − 1 = {mem_pct:.2f}%"
                if use_mem
                else f"SM-bound: {model.sms}/{p.sms} − 1 = {sm_pct:.2f}%"
            )
        ),
    }


# each kind's prediction, keyed by KindSpec.name (tests/vocabulary/test_kinds.py checks every kind has one)
PREDICTORS: dict[str, Predictor] = {
    "exclusive": predict_exclusive,
    "timeslice": predict_timeslice,
    "mps": predict_mps,
    "mig": predict_mig,
    "mig-emulated": predict_emulated,
    "partition": predict_partition,
}


def predict_cell(
    mode: str | Mode,
    *,
    gpu: GpuModel | str | None = None,
    device_class: str = "gpu",
    mig_profile: str | None = None,
    bound: str = "SM-bound",
) -> dict[str, Any]:
    """The loss expected with no interference for one cell.

    Returns ``metric`` (what is compared: ``loss vs N·T_1``, ``T_mig vs T_full``,
    ``T_slice vs ideal``), ``predicted_pct``, ``time_factor`` (predicted time / reference),
    ``compute_share_lost_pct`` (MIG), ``predicted_sm_bound_pct`` / ``predicted_memory_bound_pct``
    (MIG) and ``basis`` (the arithmetic, in words). Unknown GPU model for a MIG cell: the
    prediction is NaN and the basis says why.
    """
    m = parse_mode(mode) if isinstance(mode, str) else mode
    out: dict[str, Any] = {
        "mode": m.label,
        "metric": "",
        "predicted_pct": 0.0,
        "time_factor": 1.0,
        "compute_share_lost_pct": 0.0,
        "predicted_sm_bound_pct": math.nan,
        "predicted_memory_bound_pct": math.nan,
        "basis": "",
    }
    predictor = PREDICTORS.get(m.kind)
    if predictor is None:
        raise UserError(f"no prediction for sharing mode {m.label!r}; predicted kinds: {', '.join(PREDICTORS)}")
    out.update(predictor(m, CellOn(gpu, device_class, mig_profile, bound)))
    return out


def _bound_for(bounds: dict[tuple, tuple[str, str]] | None, row: dict[str, Any]) -> tuple[str, str]:
    if not bounds:
        return "unknown", "no telemetry"
    key = (str(row.get("device_class", "")), number_or_nan(row.get("particles")))
    if key in bounds:
        return bounds[key]
    same_class = [v for k, v in bounds.items() if k[0] == key[0] and v[0] != "unknown"]
    return same_class[0] if same_class else next(iter(bounds.values()))


def partition_prediction(r: dict[str, Any]) -> dict[str, Any]:
    """A partition row's prediction: 0% excess over the ideal, which already holds the slice's share."""
    unit = r.get("unit") or "units"
    full, part = number_or_nan(r.get("full_units")), number_or_nan(r.get("slice_units"))
    return {
        "metric": "T_slice vs ideal",
        "predicted_pct": 0.0,
        "compute_share_lost_pct": 0.0,
        "basis": (
            f"ideal = T_full × {full:g}/{part:g} {unit}: 0% excess"
            if math.isfinite(full) and math.isfinite(part)
            else f"ideal = T_full × full/slice {unit}: 0% excess"
        ),
    }


@dataclass(frozen=True)
class Compared:
    """How a loss table is set against the prediction: its figure's column prefix (``loss``,
    ``excess``), the metric a failed prediction names, and whether the table's reference is an
    ideal that already holds the slice's share (0% predicted)."""

    prefix: str
    failed_metric: str = ""
    ideal: bool = False


# the loss tables set against the predictions, keyed by table name (Tables' attributes)
COMPARED: dict[str, Compared] = {
    "timeslice": Compared("loss"),
    "mps": Compared("loss"),
    "mig": Compared("loss", failed_metric="T_mig vs T_full"),
    "partition": Compared("excess", ideal=True),
}


def table_prediction(how: Compared, r: dict[str, Any], gpu: GpuModel | str | None, bound: str) -> dict[str, Any]:
    """The prediction of one table row (a failed one: NaN and the reason)."""
    if how.ideal:  # the ideal already holds the SM/core fraction: 0 excess predicted
        return partition_prediction(r)
    profile = r.get("mig_profile")
    try:
        return predict_cell(
            str(r["mode"]),
            gpu=gpu,
            device_class=str(r.get("device_class") or "gpu"),
            mig_profile=profile if isinstance(profile, str) else None,
            bound=bound,
        )
    except UserError as exc:  # e.g. a mixed layout ("1g.18gb, 3g.71gb"): no single prediction
        return {
            "metric": how.failed_metric,
            "predicted_pct": math.nan,
            "compute_share_lost_pct": math.nan,
            "basis": f"no prediction: {exc}",
        }


def predicted_vs_measured(
    tables: Tables, gpu: GpuModel | str | None = None, bounds: dict[tuple, tuple[str, str]] | None = None
) -> pd.DataFrame:
    """Predicted vs measured loss and the excess (measured − predicted), one row per table row.

    ``tables``: sharebench.analysis tables (``timeslice``, ``mps``: ``loss_pct``; ``mig``:
    ``loss_pct``; ``partition``: ``excess_pct``, each with ``*_ci_low/high``). ``bounds``:
    (device_class, particles) → (bound, evidence), from :func:`bounds_from_telemetry`.
    """
    rows = []
    for name, how in COMPARED.items():
        for r in getattr(tables, name).to_dict("records"):
            bound, evidence = _bound_for(bounds, r)
            pred = table_prediction(how, r, gpu, bound)
            prefix = how.prefix
            measured = number_or_nan(r.get(f"{prefix}_pct"))
            lo, hi = number_or_nan(r.get(f"{prefix}_ci_low")), number_or_nan(r.get(f"{prefix}_ci_high"))
            predicted = number_or_nan(pred["predicted_pct"])
            rows.append(
                {
                    "table": name,
                    "mode": r["mode"],
                    "device_class": r.get("device_class"),
                    "particles": r.get("particles"),
                    "metric": pred["metric"],
                    "measured_pct": measured,
                    "measured_ci_low": lo,
                    "measured_ci_high": hi,
                    "predicted_pct": predicted,
                    "excess_pct": measured - predicted,
                    "predicted_in_ci": bool(lo <= predicted <= hi)
                    if math.isfinite(lo) and math.isfinite(hi) and math.isfinite(predicted)
                    else None,
                    "compute_share_lost_pct": pred["compute_share_lost_pct"],
                    "bound": bound,
                    "bound_evidence": evidence,
                    "basis": pred["basis"],
                }
            )
    cols = [
        "table",
        "mode",
        "device_class",
        "particles",
        "metric",
        "measured_pct",
        "measured_ci_low",
        "measured_ci_high",
        "predicted_pct",
        "excess_pct",
        "predicted_in_ci",
        "compute_share_lost_pct",
        "bound",
        "bound_evidence",
        "basis",
    ]
    return pd.DataFrame(rows, columns=cols)


def bounds_from_telemetry(cell_tel: pd.DataFrame | None) -> dict[tuple, tuple[str, str]]:
    """(device_class, particles) → (bound, evidence) from the exclusive cells' telemetry
    (``cell_tel``: one row per cell with ``mode``, ``device_class``, ``particles``, ``cores``,
    ``warmup`` and ``tel_*`` columns, e.g. sharebench.analysis.telemetry.cell_telemetry)."""
    out: dict[tuple, tuple[str, str]] = {}
    if cell_tel is None or len(cell_tel) == 0 or "mode" not in cell_tel:
        return out
    ex = cell_tel[baseline_mask(cell_tel["mode"])]
    if "warmup" in ex:
        ex = ex[~ex["warmup"].astype(bool)]
    for (dc, particles), g in ex.groupby(["device_class", "particles"], dropna=False):
        num = g.select_dtypes("number").median(numeric_only=True).to_dict()
        num["tel_note"] = next((n for n in g.get("tel_note", []) if isinstance(n, str) and n), "")
        cores = number_or_nan(num.get("cores"))
        out[(str(dc), number_or_nan(particles))] = classify_bound(num, str(dc), cores if math.isfinite(cores) else None)
    return out


def gpu_of(results_dir: Path | str, tables: Tables) -> str | None:
    """The GPU model of a results folder: provenance.json, else the replicas' device names, else a
    MIG profile name that exists on one model only (``1g.18gb``: H200)."""
    try:
        prov = read_provenance(results_dir)
    except UserError:
        prov = None
    gpu = (prov or {}).get("gpu") or {}
    if gpu.get("model_key"):
        return gpu["model_key"]
    if gpu.get("name"):
        return gpu["name"]
    dev = ((prov or {}).get("device") or {}).get("name")
    model = _model(dev) if dev else None
    if model is not None:
        return model.key
    names: list[str] = []
    try:
        names = [n for n in load_results(results_dir)["device_name"].unique() if isinstance(n, str) and n]
    except (UserError, KeyError):
        pass
    for name in names:
        model = _model(name)
        if model is not None:  # a device name no GPU model knows (a CPU, another vendor): the next one
            return model.key
    for prof in tables.mig["mig_profile"]:
        models = models_with_profile(prof)
        if len(models) == 1:
            return models[0].key
    return None


def predicted_vs_measured_of(results_dir: Path | str, tables: Tables) -> tuple[pd.DataFrame, str | None]:
    """The prediction table of a results folder and the GPU model it was made for: the bound of each
    work taken from the exclusive cells' telemetry (``sharebench.analysis.telemetry.cell_telemetry``)."""
    gpu = gpu_of(results_dir, tables)
    try:
        tel = cell_telemetry(results_dir)
    except UserError:
        tel = None
    return predicted_vs_measured(tables, gpu=gpu, bounds=bounds_from_telemetry(tel)), gpu
