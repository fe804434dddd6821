"""The results CSV: one row per replica run, versioned, written as it comes.

A results folder holds::

    results.csv      one row per replica run (schema below), appended and flushed per cell
    machine.json     what the machine was: GPU model, driver, CUDA, CPU, library versions, command
    sweep.json       the sweep configuration
    provenance.json  (when sharebench.provenance exists) what ran where
    cells/<cell>/    per cell: replica configs, records, logs, telemetry.csv
    tables/, plots/, report.md, report.html   (rebuilt by ``sharebench report DIR``)

"Failed" and "not measured" are different things: a replica that ran and
crashed has a row with ``status = failed`` and its one-line ``error``; its
sibling replicas keep their numbers but carry ``cell_status = failed`` so the
analysis leaves the whole cell out. A number that was never measured (a cell
not reached because the sweep was interrupted, a MIG column on a non-MIG run,
telemetry where no sampler exists) is simply absent: no row, or an empty field.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import socket
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from sharebench.errors import UserError

SCHEMA_VERSION = 1
RESULTS_CSV = "results.csv"
MACHINE_JSON = "machine.json"


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str      # "str", "int", "float", "bool"
    unit: str       # "" when dimensionless or text
    doc: str


# Every column, in file order. Extra columns are only allowed with the prefix
# ``tel_`` (telemetry summaries, see sharebench.telemetry).
COLUMNS: tuple[Column, ...] = (
    Column("schema_version", "int", "", "version of this schema (1); a loader refuses other versions"),
    Column("sweep_id", "str", "", "identifier of the sweep that wrote the row (UTC start time)"),
    Column("cell_id", "str", "", "one cell = one mode x particle count x repeat, e.g. `timeslice:2_p10000_r1`"),
    Column("mode", "str", "", "sharing mode, lowercase: exclusive, timeslice:N, mps:N[@PCT], mig:LAYOUT, partition:N"),
    Column("mode_kind", "str", "", "exclusive, timeslice, mps, mig or partition"),
    Column("replicas", "int", "", "N: replicas that ran concurrently in the cell"),
    Column("replica", "int", "", "index of this replica in the cell, 0..N-1"),
    Column("repeat", "int", "", "repeat index; 0 is the discarded warm-up, 1..R are measured"),
    Column("warmup", "bool", "", "true for warm-up rows (kept on disk, left out of every statistic)"),
    Column("device_class", "str", "", "gpu or cpu: the class of device the replicas shared"),
    Column("backend", "str", "", "cuda, opencl or cpu"),
    Column("device_spec", "str", "", "device as requested, e.g. cuda:0, opencl:0.0, cpu"),
    Column("engine", "str", "", "workload engine: simpletrack or xtrack"),
    Column("context", "str", "", "Xsuite/compute context the replica used"),
    Column("device_name", "str", "", "device name as the replica saw it"),
    Column("device_uuid", "str", "", "device UUID the replica ran on (MIG UUID under MIG; a host id on the CPU)"),
    Column("parent_uuid", "str", "", "physical GPU UUID (the MIG instance's parent; equals device_uuid otherwise)"),
    Column("mig_profile", "str", "", "MIG profile of the instance (e.g. 1g.18gb); empty when not MIG"),
    Column("sms", "int", "SMs", "streaming multiprocessors available to the replica (GPU, when known)"),
    Column("cores", "int", "cores", "CPU cores the replica could run on (CPU device)"),
    Column("cpus", "str", "", "core set the replica was pinned to (partition), e.g. 0-3; empty: all"),
    Column("thread_pct", "int", "%", "MPS active-thread percentage per client; empty: not set"),
    Column("lattice", "str", "", "lattice file name, or `generated` for the built-in LHC-like ring"),
    Column("particles", "int", "particles", "particles tracked by this replica"),
    Column("turns", "int", "turns", "turns tracked"),
    Column("elements", "int", "elements", "elements in the line"),
    Column("setup_s", "float", "s", "build + compile + particle generation time"),
    Column("transfer_s", "float", "s", "host-device transfer time"),
    Column("track_s", "float", "s", "tracking time alone (the timed window, synchronised)"),
    Column("track_start", "float", "s (Unix epoch)", "wall-clock start of the tracking window"),
    Column("track_end", "float", "s (Unix epoch)", "wall-clock end of the tracking window"),
    Column("particle_turns_per_s", "float", "particle-turns/s", "particles x turns / track_s"),
    Column("element_passes_per_s", "float", "element-passes/s", "particles x turns x elements / track_s"),
    Column("survived", "int", "particles", "particles alive at the end"),
    Column("checksum", "str", "", "checksum of the final coordinates"),
    Column("host", "str", "", "host name"),
    Column("pid", "int", "", "process id of the replica"),
    Column("status", "str", "", "ok or failed (this replica)"),
    Column("error", "str", "", "one-line error of a failed replica; empty when ok"),
    Column("cell_status", "str", "", "ok or failed (any replica of the cell failed, or they ran on different devices)"),
    Column("cell_error", "str", "", "why the cell failed; empty when ok"),
)
COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
_DTYPES = {c.name: c.dtype for c in COLUMNS}
EXTRA_PREFIX = "tel_"


def schema_markdown() -> str:
    """The schema as a markdown table (README, report)."""
    lines = ["| column | type | unit | meaning |", "|---|---|---|---|"]
    for c in COLUMNS:
        lines.append(f"| `{c.name}` | {c.dtype} | {c.unit or '-'} | {c.doc} |")
    lines.append(f"| `{EXTRA_PREFIX}*` | float/str | in the name | telemetry summary of the cell "
                 "(sharebench.telemetry), same value on each replica row; absent: not measured |")
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:  # NaN: not measured
            return ""
        return repr(value)
    if isinstance(value, (list, tuple)):
        return format_cpus(value)
    return " ".join(str(value).split()) if isinstance(value, str) else str(value)


def format_cpus(cpus: Iterable[int] | None) -> str:
    """[0, 1, 2, 5] -> "0-2,5"."""
    if not cpus:
        return ""
    s = sorted(set(int(c) for c in cpus))
    parts, start, prev = [], s[0], s[0]
    for c in s[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if c is not None:
            start = prev = c
    return ",".join(parts)


class ResultsWriter:
    """Appends rows to results.csv, flushing and fsyncing after each batch.

    The header is the schema's columns plus any ``tel_*`` columns seen so far.
    A new ``tel_*`` column rewrites the file once with the wider header
    (atomically: temporary file + rename), so nothing written is lost.
    """

    def __init__(self, results_dir: Path | str):
        self.path = Path(results_dir) / RESULTS_CSV
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.header: list[str] = list(COLUMN_NAMES)
        if self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open(newline="") as f:
                existing = next(csv.reader(f), [])
            _check_header(existing, self.path)
            self.header = existing

    def append(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        for row in rows:
            unknown = [k for k in row if k not in _DTYPES and not k.startswith(EXTRA_PREFIX)]
            if unknown:
                raise ValueError(f"results row has columns outside the schema: {unknown}")
        extra = sorted({k for r in rows for k in r if k.startswith(EXTRA_PREFIX)} - set(self.header))
        if extra and self.path.exists() and self.path.stat().st_size > 0:
            self._widen(self.header + extra)
        elif extra:
            self.header = self.header + extra
        new_file = not self.path.exists() or self.path.stat().st_size == 0
        with self.path.open("a", newline="") as f:
            w = csv.writer(f)
            if new_file:
                w.writerow(self.header)
            for row in rows:
                full = {"schema_version": SCHEMA_VERSION, **row}
                w.writerow([_fmt(full.get(k)) for k in self.header])
            f.flush()
            os.fsync(f.fileno())

    def _widen(self, header: list[str]) -> None:
        with self.path.open(newline="") as f:
            old = list(csv.DictReader(f))
        tmp = self.path.with_suffix(".csv.tmp")
        with tmp.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header)
            w.writeheader()
            for r in old:
                w.writerow({k: r.get(k, "") for k in header})
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.header = header


def _check_header(header: list[str], path: Path) -> None:
    if "schema_version" not in header:
        raise UserError(f"{path} is not a sharebench results CSV (no schema_version column)")


def load_results(results: Path | str) -> pd.DataFrame:
    """Load results.csv (a file or a results folder) as typed columns.

    A file written with another schema version fails with a message saying
    what to do; missing optional columns are not an error (older writers of
    the same version never leave any out).
    """
    path = Path(results)
    if path.is_dir():
        path = path / RESULTS_CSV
    if not path.exists():
        raise UserError(f"no results file at {path}; run `sharebench run --out DIR` first")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise UserError(f"{path} is empty; run `sharebench run --out DIR` first") from None
    _check_header(list(df.columns), path)
    versions = sorted(set(df["schema_version"]) - {""})
    bad = [v for v in versions if v != str(SCHEMA_VERSION)]
    if bad:
        v = bad[0]
        try:
            newer = int(v) > SCHEMA_VERSION
        except ValueError:
            newer = False
        what = ("upgrade sharebench to read it" if newer
                else f"re-run the sweep, or convert it to schema {SCHEMA_VERSION} (columns in README)")
        raise UserError(f"{path} has results schema version {v}; this sharebench reads version "
                        f"{SCHEMA_VERSION}: {what}")
    missing = [c for c in ("mode", "particles", "track_s", "replica", "cell_id") if c not in df.columns]
    if missing:
        raise UserError(f"{path} lacks required column(s) {', '.join(missing)}; see the schema in README")
    for c in COLUMN_NAMES:
        if c not in df.columns:
            df[c] = ""
    for c in df.columns:
        kind = _DTYPES.get(c, "float" if c.startswith(EXTRA_PREFIX) else "str")
        if kind in ("int", "float"):
            num = pd.to_numeric(df[c].replace("", None), errors="coerce")
            if c.startswith(EXTRA_PREFIX) and num.isna().all() and (df[c] != "").any():
                continue  # a text telemetry column (tel_source, tel_note)
            df[c] = num.astype("float64") if kind == "float" or num.isna().any() else num.astype("int64")
        elif kind == "bool":
            df[c] = df[c].str.lower().isin(["true", "1", "yes"])
    return df


# ---------------------------------------------------------------- machine.json


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _nvidia() -> dict[str, Any]:
    """GPU models, driver and CUDA version through NVML; a reason when absent."""
    try:
        import pynvml
    except ImportError as exc:
        return {"nvml": f"unavailable: {exc}"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return {"nvml": f"unavailable: {exc}"}
    try:
        out: dict[str, Any] = {"nvml": "ok"}
        out["driver"] = _s(pynvml.nvmlSystemGetDriverVersion())
        try:
            v = pynvml.nvmlSystemGetCudaDriverVersion_v2()
            out["cuda_driver"] = f"{v // 1000}.{(v % 1000) // 10}"
        except pynvml.NVMLError:
            pass
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            g = {"index": i, "name": _s(pynvml.nvmlDeviceGetName(h)), "uuid": _s(pynvml.nvmlDeviceGetUUID(h)),
                 "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total)}
            try:
                g["mig_mode"] = "enabled" if pynvml.nvmlDeviceGetMigMode(h)[0] else "disabled"
            except pynvml.NVMLError:
                g["mig_mode"] = "unsupported"
            gpus.append(g)
        out["gpus"] = gpus
        return out
    finally:
        pynvml.nvmlShutdown()


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def machine_description(device: dict[str, Any] | None = None, command: list[str] | None = None) -> dict[str, Any]:
    """What the machine was, for machine.json."""
    import psutil

    libs = {d: _version(d) for d in ("sharebench", "xsuite", "xtrack", "xobjects", "xpart", "numpy",
                                     "pyopencl", "cupy-cuda13x", "cupy-cuda12x", "scipy", "pandas")}
    return {
        "written_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": list(command if command is not None else sys.argv),
        "host": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu": {"model": _cpu_model(), "logical_cores": os.cpu_count(),
                "physical_cores": psutil.cpu_count(logical=False),
                "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                "memory_bytes": int(psutil.virtual_memory().total)},
        "load_avg_1m_5m_15m": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "device": device or {},
        "nvidia": _nvidia(),
        "cuda_runtime": _cuda_runtime(),
        "libraries": {k: v for k, v in libs.items() if v},
    }


def _cuda_runtime() -> str | None:
    """The CUDA runtime the replicas use (CuPy's), else the toolkit's nvcc, else None."""
    try:
        import cupy

        v = int(cupy.cuda.runtime.runtimeGetVersion())
        return f"CUDA runtime {v // 1000}.{(v % 1000) // 10} (CuPy {cupy.__version__})"
    except Exception:  # no CuPy, or no driver: fall back to the toolkit
        pass
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=10)
        for line in out.stdout.splitlines():
            if "release" in line:
                return line.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return None


def write_machine(results_dir: Path | str, device: dict[str, Any] | None = None,
                  command: list[str] | None = None, name: str = MACHINE_JSON) -> Path:
    path = Path(results_dir) / name
    path.write_text(json.dumps(machine_description(device, command), indent=2, default=str) + "\n")
    return path


def read_machine(results_dir: Path | str) -> dict[str, Any]:
    path = Path(results_dir) / MACHINE_JSON
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
