"""One run of a results folder as history rows: a row per cell with a loss (node × work × mode).

A *cell* here is what ``history check`` follows over time: the loss of one sharing mode for one kind
of work on one node. Rows carry what the run's provenance says of the machine (GPU model and UUID,
NVIDIA driver, gpu-operator and device-plugin versions), the loss with its 95% interval as the report
computes it (``sharebench.analysis``: time-slicing and MPS (T_N − N·T_1)/(N·T_1), MIG
(T_mig − T_1)/T_1), and the loss of every measured repeat (each repeat's T_N or T_mig against the run's
mean T_1), which the check's test works on; and (``history.rates``) the cell's rate per unit of work
(particle-turns/s, per repeat too), the Answer's trust of the mode and what disturbed it.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sharebench.analysis import WORK_KEYS, analyse
from sharebench.analysis.kinds import baseline_mask, spec_or_none
from sharebench.analysis.tables import loss_frames
from sharebench.errors import UserError
from sharebench.history.rates import RATE_COLUMNS, row_measures
from sharebench.results import PROVENANCE_JSON, RESULTS_CSV, read_provenance

HISTORY_SCHEMA_VERSION = 2  # 2: the rate per unit of work, trust and disturbance (history.rates)
# what makes two rows of two runs the same cell (the series `history check` compares)
CELL_KEYS = ["node", "engine", "backend", "device_class", "lattice", "particles", "turns", "mode", "pattern"]
# what a run records of its machine; a change between two runs of a node is marked on the plot
PROVENANCE_KEYS = ["gpu_model", "gpu_uuid", "driver", "gpu_operator", "device_plugin"]
HISTORY_COLUMNS = [
    "schema_version",
    "run_id",
    "time_utc",
    *PROVENANCE_KEYS,
    *CELL_KEYS,
    "loss_pct",
    "loss_ci_low",
    "loss_ci_high",
    "repeats",
    "repeat_losses_pct",
    *RATE_COLUMNS,
    "source",
]
DEFAULT_PATTERN = "batch"


@dataclass(frozen=True)
class RunRows:
    """A results folder summarised: its id (a hash of its results.csv and provenance.json), time, node, rows."""

    run_id: str
    time_utc: str
    node: str
    rows: pd.DataFrame  # HISTORY_COLUMNS

    @property
    def file_name(self) -> str:
        """The run's one file in a store: time first (so names sort in time), then node and id."""
        stamp = self.time_utc.replace("-", "").replace(":", "").replace("+0000", "Z")
        node = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.node) or "node"
        return f"{stamp}_{node}_{self.run_id}.csv"


def _text(v: Any) -> str:
    return "" if v is None else str(v)


def machine_facts(prov: dict[str, Any]) -> dict[str, str]:
    """Node and provenance columns from a provenance document (empty where it says nothing)."""
    gpu, dev = prov.get("gpu") or {}, prov.get("device") or {}
    cluster, host, nv = prov.get("cluster") or {}, prov.get("host") or {}, prov.get("nvidia") or {}
    return {
        "node": _text(cluster.get("node") or host.get("hostname")) or "unknown",
        "gpu_model": _text(gpu.get("model_key") or gpu.get("name") or dev.get("name")),
        "gpu_uuid": _text(gpu.get("used_uuid") or dev.get("uuid")),
        "driver": _text(nv.get("driver_version")),
        "gpu_operator": _text(cluster.get("gpu_operator_version")),
        "device_plugin": _text(cluster.get("device_plugin_version")),
    }


def run_time(prov: dict[str, Any], results: Path) -> str:
    """The run's time, ISO 8601 UTC to the second: provenance's ``created_utc``."""
    created = prov.get("created_utc")
    if created:
        try:
            t = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
        except ValueError:
            raise UserError(f"{results}: provenance created_utc {created!r} is not an ISO 8601 time") from None
        return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+0000")
    raise UserError(f"{results} has no provenance.json with created_utc; give a folder written by `sharebench run`")


def _t1_means(cells: pd.DataFrame) -> dict[tuple, float]:
    ex = cells[baseline_mask(cells["mode_kind"])]
    return {
        (k if isinstance(k, tuple) else (k,)): float(g["mean_track_s"].mean())
        for k, g in ex.groupby(WORK_KEYS, dropna=False)
    }


def repeat_losses(cells: pd.DataFrame, work: tuple, mode: str, t1: float) -> list[float]:
    """The loss of each measured repeat of a mode's cells, in %, against the run's mean T_1."""
    sel = cells[cells["mode"] == mode]
    for k, v in zip(WORK_KEYS, work):
        sel = sel[sel[k] == v]
    if sel.empty or not (math.isfinite(t1) and t1 > 0):
        return []
    spec = spec_or_none(sel["mode_kind"].iloc[0])
    if spec is not None and not spec.shared:  # one replica per instance: T_mig against T_full
        return [float(x) for x in (sel["mean_track_s"].to_numpy(float) / t1 - 1) * 100]
    n = sel["replicas"].to_numpy(float)
    return [float(x) for x in (sel["span_s"].to_numpy(float) / (n * t1) - 1) * 100]


def _good_cells(cells: pd.DataFrame) -> pd.DataFrame:
    if cells.empty:
        return cells
    return cells[~cells["warmup"].astype(bool) & ~cells["excluded"].astype(bool)]


def run_rows(results_dir: Path | str) -> RunRows:
    """The history rows of one results folder (UserError when it is not one)."""
    results = Path(results_dir)
    csv = results / RESULTS_CSV
    if not csv.is_file():
        raise UserError(f"results folder {results} has no {RESULTS_CSV}; give a folder written by `sharebench run`")
    digest = hashlib.sha256(csv.read_bytes())
    if (results / PROVENANCE_JSON).is_file():  # two runs with equal rows on two machines are two runs
        digest.update((results / PROVENANCE_JSON).read_bytes())
    run_id = digest.hexdigest()[:16]
    prov = read_provenance(results) or {}
    tables = analyse(results)
    good = _good_cells(tables.cells)
    facts = machine_facts(prov)
    when = run_time(prov, results)
    pattern = DEFAULT_PATTERN
    t1s = _t1_means(good) if len(good) else {}
    rows = []
    for table in loss_frames(tables):
        for _, r in table.iterrows():
            work = tuple(r[k] for k in WORK_KEYS)
            losses = repeat_losses(good, work, str(r["mode"]), t1s.get(work, math.nan))
            rows.append(
                {
                    "schema_version": HISTORY_SCHEMA_VERSION,
                    "run_id": run_id,
                    "time_utc": when,
                    **facts,
                    **{k: r[k] for k in WORK_KEYS},
                    "mode": r["mode"],
                    "pattern": pattern,
                    "loss_pct": float(r["loss_pct"]),
                    "loss_ci_low": float(r["loss_ci_low"]),
                    "loss_ci_high": float(r["loss_ci_high"]),
                    "repeats": len(losses),
                    "repeat_losses_pct": " ".join(f"{x:.6g}" for x in losses),
                    **row_measures(tables, good, str(r["mode"]), {k: r[k] for k in WORK_KEYS}, len(losses)),
                    "source": results.resolve().name,
                }
            )
    frame = pd.DataFrame(rows, columns=HISTORY_COLUMNS)
    return RunRows(run_id=run_id, time_utc=when, node=facts["node"], rows=frame)


def parse_losses(text: Any) -> np.ndarray:
    """A row's ``repeat_losses_pct`` as numbers (empty when none were recorded)."""
    if not isinstance(text, str) or not text.strip():
        return np.array([], dtype=float)
    return np.array([float(x) for x in text.split()], dtype=float)
