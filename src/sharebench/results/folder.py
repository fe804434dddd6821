"""A results folder: what each file is, and the documents in it.

::

    results.csv        one row per replica run (sharebench.results.schema), appended and flushed per cell
    provenance.json    what ran where: host, GPU, driver, libraries, command, config (one per sweep
                       session: a resumed folder keeps its first and adds provenance-<sweep id>.json)
    sweep.json         the sweeps that wrote into the folder, with their configuration
    notes.txt          what the sweep noted (added modes, resumed cells, absent telemetry, load)
    cells/<cell>/      per cell: replica configs, records, logs, telemetry.csv
    dcgm.csv           DCGM metrics per cell from Prometheus (cluster runs, sharebench telemetry dcgm)
    tables/, plots/, report.md, report.html, prediction.csv, telemetry_summary.csv
                       written by ``sharebench report DIR``

A folder written by the first release holds ``machine.json`` beside ``provenance.json`` (schema 1);
:func:`read_provenance` merges the two into the current provenance document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sharebench.errors import UserError
from sharebench.results.store import read_json, write_json

RESULTS_CSV = "results.csv"
PROVENANCE_JSON = "provenance.json"
SWEEP_JSON = "sweep.json"
NOTES_TXT = "notes.txt"
CELLS_DIR = "cells"
DCGM_CSV = "dcgm.csv"
PREDICTION_CSV = "prediction.csv"
TELEMETRY_SUMMARY_CSV = "telemetry_summary.csv"
LEGACY_MACHINE_JSON = "machine.json"  # first release; now part of provenance.json


def write_provenance(results_dir: Path | str, prov: dict[str, Any], name: str = PROVENANCE_JSON) -> Path:
    return write_json(Path(results_dir) / name, "provenance", prov)


def read_provenance(results_dir: Path | str) -> dict[str, Any] | None:
    """The provenance of a results folder in the current schema (None when the folder has none)."""
    rdir = Path(results_dir)
    path, legacy = rdir / PROVENANCE_JSON, rdir / LEGACY_MACHINE_JSON
    prov = read_json(path, "provenance") if path.exists() else None
    if legacy.exists():
        prov = merge_legacy_machine(prov, _read_legacy_machine(legacy))
    return prov


def _read_legacy_machine(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    return data if isinstance(data, dict) else {}


def merge_legacy_machine(prov: dict[str, Any] | None, machine: dict[str, Any]) -> dict[str, Any]:
    """A first-release ``machine.json`` folded into a provenance document (or made into one)."""
    out = dict(prov or {})
    cpu = machine.get("cpu") or {}
    host = dict(out.get("host") or {})
    host.setdefault("hostname", machine.get("host"))
    host.setdefault("os", machine.get("os"))
    host.setdefault("python", machine.get("python"))
    host.setdefault("cpu_model", cpu.get("model"))
    host.setdefault("cpu_logical", cpu.get("logical_cores"))
    host.setdefault("cpu_physical", cpu.get("physical_cores"))
    host.setdefault("mem_bytes", cpu.get("memory_bytes"))
    if host.get("usable_cores") is None:
        host["usable_cores"] = cpu.get("usable_cores")
    if host.get("load_avg_1m_5m_15m") is None:
        host["load_avg_1m_5m_15m"] = machine.get("load_avg_1m_5m_15m")
    out["host"] = host
    nv = machine.get("nvidia") or {}
    ok = nv.get("nvml") == "ok"
    out["nvidia"] = {
        "available": ok,
        "reason": None if ok else nv.get("nvml"),
        "driver_version": nv.get("driver"),
        "cuda_driver_version": nv.get("cuda_driver"),
        "nvml_version": (out.get("nvidia") or {}).get("nvml_version"),
        "gpus": list(nv.get("gpus") or []),
    }
    if machine.get("cuda_runtime"):
        out["cuda_runtime"] = machine["cuda_runtime"]
    out.setdefault("cuda_runtime", None)
    if machine.get("device"):
        device = dict(machine["device"])
        device.update((k, v) for k, v in (out.get("device") or {}).items() if k not in device)
        out["device"] = device
    out["libraries"] = {
        **(machine.get("libraries") or {}),
        **{k: v for k, v in (out.get("libraries") or {}).items() if k not in (machine.get("libraries") or {})},
    }
    out.setdefault("command", machine.get("command"))
    out.setdefault("created_utc", machine.get("written_utc"))
    return out


def append_sweep(results_dir: Path | str, entry: dict[str, Any]) -> None:
    """Add one sweep's entry to ``sweep.json``."""
    path = Path(results_dir) / SWEEP_JSON
    sweeps = read_sweeps(results_dir) if path.exists() else []
    write_json(path, "sweep", {"sweeps": [*sweeps, entry]})


def read_sweeps(results_dir: Path | str, *, torn_ok: bool = False) -> list[dict[str, Any]]:
    """The sweeps recorded in ``sweep.json`` ([] when there is none). One that cannot be read (torn,
    not JSON, another kind) is a one-line UserError naming it; with ``torn_ok`` (a reader of the
    results: report, compare) it counts as none, and :func:`sweeps_warning` says so."""
    path = Path(results_dir) / SWEEP_JSON
    if not path.exists():
        return []
    try:
        return list(read_json(path, "sweep").get("sweeps") or [])
    except UserError:
        if torn_ok:
            return []
        raise


def sweeps_warning(results_dir: Path | str) -> str | None:
    """One line when ``sweep.json`` is there but unreadable (then the report and compare work from
    results.csv alone, and say so), else None."""
    path = Path(results_dir) / SWEEP_JSON
    if not path.exists():
        return None
    try:
        read_json(path, "sweep")
    except UserError as exc:
        return f"warning: {exc}; working from {RESULTS_CSV} alone (its rows are intact)"
    return None


def append_notes(results_dir: Path | str, sweep_id: str, notes: list[str]) -> None:
    """Add a sweep's notes (each once, in order) to ``notes.txt``."""
    if notes:
        with (Path(results_dir) / NOTES_TXT).open("a") as f:
            f.write("".join(f"{sweep_id}: {n}\n" for n in dict.fromkeys(notes)))


def read_notes(results_dir: Path | str) -> list[str]:
    path = Path(results_dir) / NOTES_TXT
    if not path.exists():
        return []
    return [ln for ln in path.read_text().splitlines() if ln.strip()]
