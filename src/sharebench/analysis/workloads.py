"""The workloads comparison: per workload and mode, the loss, the worst job's slowdown and the
throughput gain over exclusive use, and which mode a site should pick for each workload.

A workload is the ``engine`` column (simpletrack, xtrack, or the exec engine's program name, see
``sharebench.workloads.protocol``). A sweep measures one workload (``--resume`` keeps a folder's own);
:func:`combine_workloads` puts the folders of several into one for the comparison.
"""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import pandas as pd

from sharebench.analysis.answer import NO_ANSWER, gain_verdict, trust_of, worst_job_slowdown
from sharebench.analysis.kinds import baseline_mask, emulation_mask
from sharebench.analysis.tables import WORK_KEYS, Tables
from sharebench.errors import UserError
from sharebench.modes import is_baseline
from sharebench.results import PROVENANCE_JSON, RESULTS_CSV, ResultsWriter

WORKLOAD_COLUMNS = [
    "workload",
    "timing",
    "backend",
    "particles",
    "mode",
    "replicas",
    "loss_pct",
    "loss_ci_low",
    "loss_ci_high",
    "loss_metric",
    "worst_slowdown",
    "gain",
    "gain_ci_low",
    "gain_ci_high",
    "repeats",
    "trust",
]
ANSWER_COLUMNS = [
    "workload",
    "timing",
    "backend",
    "particles",
    "best_mode",
    "gain",
    "worst_slowdown",
    "loss_pct",
    "why",
]


# what each loss table's figure compares, keyed by table name (the partition table: an excess)
LOSS_METRICS = {"timeslice": "T_N vs N·T_1", "mps": "T_N vs N·T_1", "mig": "MIG vs full GPU"}


def _key(row: dict) -> tuple:
    return tuple(row[k] for k in WORK_KEYS) + (row["mode"],)


def _losses(tables: Tables) -> dict[tuple, tuple[float, float, float, str]]:
    """(loss, CI low, CI high, what it compares) per work and mode, from the loss tables."""
    out: dict[tuple, tuple[float, float, float, str]] = {}
    for name, metric in LOSS_METRICS.items():
        for r in getattr(tables, name).to_dict("records"):
            out[_key(r)] = (r["loss_pct"], r["loss_ci_low"], r["loss_ci_high"], metric)
    for r in tables.partition.to_dict("records"):
        out.setdefault(_key(r), (r["excess_pct"], r["excess_ci_low"], r["excess_ci_high"], "slice vs ideal share"))
    return out


def _worst_slowdowns(tables: Tables) -> dict[tuple, float]:
    """The worst job's slowdown per work and mode: the Answer's figure (``answer.worst_job_slowdown``)."""
    out: dict[tuple, float] = {}
    for r in tables.throughput.to_dict("records"):
        out[_key(r)] = worst_job_slowdown(tables.cells, r["mode"], {k: r[k] for k in WORK_KEYS})[0]
    return out


def workload_table(tables: Tables, timings: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per workload x work size x mode (``tables`` from ``build_tables``; ``timings``: the
    exec engine's timing per workload, ``protocol`` or ``process``; the trackers are ``kernel``)."""
    losses, worst = _losses(tables), _worst_slowdowns(tables)
    rows = []
    for r in tables.throughput.to_dict("records"):
        key = _key(r)
        loss = losses.get(key, (math.nan, math.nan, math.nan, "baseline" if is_baseline(r["mode"]) else ""))
        rows.append(
            dict(
                workload=r["engine"],
                timing=(timings or {}).get(r["engine"]) or "kernel",
                backend=r["backend"],
                particles=r["particles"],
                mode=r["mode"],
                replicas=r["replicas"],
                loss_pct=loss[0],
                loss_ci_low=loss[1],
                loss_ci_high=loss[2],
                loss_metric=loss[3],
                worst_slowdown=worst.get(key, math.nan),
                gain=r["gain"],
                gain_ci_low=r["gain_ci_low"],
                gain_ci_high=r["gain_ci_high"],
                repeats=r["repeats"],
                trust=trust_of(str(r["mode"]), {k: r[k] for k in WORK_KEYS}, int(r["repeats"]), tables.flags)[0],
            )
        )
    df = pd.DataFrame(rows, columns=WORKLOAD_COLUMNS)
    return df.sort_values(["workload", "particles", "replicas", "mode"], kind="stable").reset_index(drop=True)


def workload_answers(table: pd.DataFrame) -> pd.DataFrame:
    """Per workload and size, the mode that suits it by the Answer's rules (``answer.gain_verdict``: a gain
    whose interval lies above 1 and that is at least 2%, else exclusive; no trustworthy answer when every
    sharing mode is untrusted; a choice resting on an untrusted mode says so)."""
    rows = []
    for (wl, timing, backend, particles), g in table.groupby(
        ["workload", "timing", "backend", "particles"], dropna=False, sort=True
    ):
        shared = g[~baseline_mask(g["mode"]) & ~emulation_mask(g["mode"]) & g["gain"].notna()]
        if shared.empty:
            continue
        trust = dict(zip(shared["mode"].astype(str), shared["trust"].fillna("ok").astype(str)))
        mode, why = gain_verdict(shared)
        if not any(t == "ok" for t in trust.values()):
            mode = NO_ANSWER
            why = "every sharing mode measured is flagged, so none is chosen: " + "; ".join(
                f"{m}: {t}" for m, t in trust.items()
            )
        elif trust.get(mode, "ok") != "ok":
            why += f"; caution, not trusted as measured: {trust[mode]}"
        chosen = g[g["mode"] == mode]  # exclusive's own row when the choice is exclusive
        best = chosen.iloc[0] if len(chosen) else None
        rows.append(
            dict(
                workload=wl,
                timing=timing,
                backend=backend,
                particles=particles,
                best_mode=mode,
                gain=best["gain"] if best is not None else math.nan,
                worst_slowdown=best["worst_slowdown"] if best is not None else math.nan,
                loss_pct=best["loss_pct"] if best is not None else math.nan,
                why=why,
            )
        )
    return pd.DataFrame(rows, columns=ANSWER_COLUMNS)


def exec_timings(df: pd.DataFrame) -> dict[str, str]:
    """The exec timing of each workload in a results frame (protocol / process), from ``exec_timing``."""
    if "exec_timing" not in df.columns:
        return {}
    out = {}
    for wl, g in df.groupby("engine"):
        vals = sorted({str(v) for v in g["exec_timing"] if str(v)})
        if vals:
            out[str(wl)] = "/".join(vals)
    return out


def combine_workloads(folders: list[Path | str], out: Path | str) -> Path:
    """One results folder holding the rows of several (one workload each: a folder is resumed only
    with its own workload), for the workloads comparison; the first folder's provenance comes along. ``out``
    must not hold results yet. Returns ``out``."""
    dest = Path(out)
    if (dest / RESULTS_CSV).exists():
        raise UserError(f"{dest} already holds {RESULTS_CSV}; give an empty folder to combine into")
    if not folders:
        raise UserError("no results folders to combine")
    writer = ResultsWriter(dest)
    for folder in folders:
        path = Path(folder) / RESULTS_CSV
        if not path.exists():
            raise UserError(f"no results file at {path}; give results folders (each holds results.csv)")
        with path.open(newline="") as fh:
            rows = [{k: v for k, v in r.items() if k != "schema_version"} for r in csv.DictReader(fh)]
        writer.append(rows)
    first = Path(folders[0]) / PROVENANCE_JSON
    if first.exists():
        shutil.copyfile(first, dest / PROVENANCE_JSON)
    return dest
