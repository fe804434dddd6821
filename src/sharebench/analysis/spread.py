"""The between-machine spread of a loss beside its within-run interval, from every run that measured it.

A **run** is one machine's measurement of a cell in one place: the rows of one results folder on one GPU
(``device_uuid``, which every row records), or one ``sharebench probe split`` document (its repeats alone
and time-sliced: the same loss, T_N against N·T_1, with its interval). Each run is analysed on its own
(``build_tables``; :func:`document_run`): two runs of one machine are never pooled into one run of more
repeats. For every (work, mode) of time-slicing and MPS (:func:`spread_table`):

* ``machines``, ``runs``: how many GPUs and runs measured it; ``loss_pct``: the mean over the machines of
  each machine's mean over its runs;
* ``within_ci_pts``: the widest 95% half-width of a single run (NaN when no run has an interval);
* ``spread_pts``: max − min of the machines' losses (NaN with one machine: no spread measured);
* ``intervals``: whether the runs' intervals on different machines overlap (``statistics.agreement``:
  ``overlap``, ``disjoint``: a spread, never agreement, ``no interval``, ``one machine``).

Where a run holds its split (runs beside the time-slice probe in a folder, or a probe split document),
each machine's slice, switch, in-slice rate and refill are set beside its loss (:data:`PART_COLUMNS`, NaN
where not measured; a document's light-probe terms, the ones every document has) and the spread row
names the part whose difference between the extreme machines moves the predicted loss most
(``attributed``: ``scheduler`` for the slice length, ``switch`` for the switch cost, ``refill`` for the
workload's refill; each part put in turn from the lowest-loss machine into the highest one's split).

:func:`machine_facts` reads what each machine's runs recorded of its state (provenance's
``machine_state`` and older fields, nvidia-smi CSV files), and :func:`state_differences` says which of
those facts differ between the machines of a low and a high loss group.

Rows without a GPU UUID are left out (they cannot be placed on a machine).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sharebench.analysis.statistics import agreement
from sharebench.analysis.tables import WORK_KEYS, build_tables
from sharebench.analysis.timeslice_split import doc_measured, doc_rows, predicted_loss_pct, read_runs
from sharebench.devices.nvml import normalise_uuid
from sharebench.errors import UserError
from sharebench.modes import time_sliced
from sharebench.results import RESULTS_CSV, load_results

PART_COLUMNS = ["slice_ms", "switch_ms", "in_slice_rate", "refill_ms", "predicted_loss_pct"]
PARTS = {"scheduler": "slice_ms", "switch": "switch_ms", "refill": "refill_ms"}
LIGHT_PARTS = {  # a probe split document's light-probe terms, as the parts of a light-only split
    "slice_ms": "slice_light_ms",
    "switch_ms": "switch_light_ms",
    "in_slice_rate": "in_slice_rate_light",
    "refill_ms": "refill_light_ms",
    "predicted_loss_pct": "predicted_light_pct",
}
RUN_COLUMNS = [*WORK_KEYS, "mode", "uuid", "run", "repeats", "loss_pct", "loss_ci_low", "loss_ci_high", *PART_COLUMNS]
SPREAD_COLUMNS = [
    *WORK_KEYS,
    "mode",
    "machines",
    "runs",
    "loss_pct",
    "loss_min_pct",
    "loss_max_pct",
    "within_ci_pts",
    "spread_pts",
    "intervals",
    "uuids",
    "per_machine",
    "attributed",
]


# ------------------------------------------------------------------ runs


def with_parts(t: pd.DataFrame, split: pd.DataFrame) -> pd.DataFrame:
    """A machine's loss rows with the split's parts of the same work and mode (NaN where none)."""
    keys = [*WORK_KEYS, "mode"]
    if split.empty:
        return t.assign(**dict.fromkeys(PART_COLUMNS, math.nan))
    parts = split[[*keys, *PART_COLUMNS]].drop_duplicates(keys).astype({"particles": "int64", "turns": "int64"})
    return t.astype({"particles": "int64", "turns": "int64"}).merge(parts, on=keys, how="left")


def frame_runs(df: pd.DataFrame, runs: Sequence[dict[str, Any]] = (), run: str = "") -> pd.DataFrame:
    """One row per (machine, work, mode) of one run's rows (:data:`RUN_COLUMNS`): that machine's loss, its
    interval and repeats, and for time-slicing the parts of its split where ``runs`` (the runs beside the
    probe) hold that machine's. ``df`` holding several ``source`` values (folders): each its own run."""
    uuid = df["device_uuid"].astype("string").fillna("").str.strip()
    sources = df["source"].astype(str) if "source" in df.columns else pd.Series(run, index=df.index)
    out = []
    for (source, machine), g in df.groupby([sources, uuid], sort=True):
        if not machine:
            continue
        mine = [r for r in runs if normalise_uuid(r.get("uuid")) == normalise_uuid(machine)]
        tables = build_tables(g, split_runs=mine)
        for t in (tables.timeslice, tables.mps):
            if t.empty:
                continue
            t = with_parts(
                t[[*WORK_KEYS, "mode", "repeats", "loss_pct", "loss_ci_low", "loss_ci_high"]].copy(),
                tables.timeslice_split,
            )
            out.append(t.assign(uuid=machine, run=source or run))
    return pd.concat(out, ignore_index=True)[RUN_COLUMNS] if out else pd.DataFrame(columns=RUN_COLUMNS)


def folder_run(folder: Path, label: str = "") -> pd.DataFrame:
    """The runs of one results folder (one per GPU it ran on), with the runs beside the probe it holds."""
    df = load_results(folder)
    return frame_runs(df, read_runs(folder), label or str(folder))


def document_run(path: Path, label: str = "") -> pd.DataFrame:
    """The run of one ``sharebench probe split`` document: its loss (N time-sliced spans against N x T_1
    over its repeats) and its light-probe split parts, keyed by the work it names (:func:`document_work`)."""
    doc = json.loads(path.read_text())
    work = document_work(doc, path)
    if work is None:
        return pd.DataFrame(columns=RUN_COLUMNS)
    loss = doc_measured(doc)
    light = next((r for r in doc_rows(doc)), {})
    parts = {k: float(light.get(v, math.nan)) for k, v in LIGHT_PARTS.items()}
    row = dict(
        work,
        mode=str(doc.get("mode") or f"timeslice:{int(doc.get('replicas') or 2)}"),
        uuid=normalise_uuid(doc.get("uuid")) or "",
        run=label or str(path),
        repeats=len(doc.get("alone_s") or []),
        loss_pct=loss[0],
        loss_ci_low=loss[1],
        loss_ci_high=loss[2],
        **parts,
    )
    return pd.DataFrame([row], columns=RUN_COLUMNS)


def document_work(doc: dict[str, Any], path: Path) -> dict[str, Any] | None:
    """The work keys of a probe split document: its ``work`` (recorded since issue 45), else from the
    command that wrote it (a ``commands.txt`` line beside it naming the document: ``--lattice``,
    ``--particles``, ``--turns``, or a program's ``--exec-name`` and ``--work``); None when neither says."""
    if isinstance(doc.get("work"), dict):
        return dict(doc["work"])
    opts = command_options(path)
    if opts is None:
        return None
    if "--exec" in opts or "--exec-name" in opts:
        engine, size, turns, lattice = opts.get("--exec-name") or "exec", opts.get("--work", "1"), "1", ""
    else:
        engine, size, turns = "simpletrack", opts.get("--particles", "1e6"), opts.get("--turns", "1")
        lattice = Path(opts["--lattice"]).name if opts.get("--lattice") else "generated"
    return dict(
        engine=engine,
        backend="cuda",
        device_class="gpu",
        lattice=lattice,
        particles=int(float(size)),
        turns=int(float(turns)),
    )


def command_options(path: Path) -> dict[str, str] | None:
    """The options of the recorded ``probe split`` command whose ``--out`` is ``path`` (``commands.txt`` in
    its folder or the one above); None when no such line is recorded."""
    for commands in (path.parent / "commands.txt", path.parent.parent / "commands.txt"):
        lines = commands.read_text().splitlines() if commands.is_file() else []
        for line in lines:
            if "probe split" in line and f"/{path.name}" in line.replace(" --out ", " --out /"):
                words = line.split("probe split", 1)[1].split()
                return {w: v for w, v in zip(words, [*words[1:], ""]) if w.startswith("--")}
    return None


def is_split_document(path: Path) -> bool:
    """A JSON file written by ``sharebench probe split --out`` (its measured repeats and splits)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and {"alone_s", "timeslice_span_s", "splits"} <= set(doc)


def run_sources(paths: Iterable[Path | str]) -> list[Path]:
    """The results folders (a ``results.csv``) and probe split documents under ``paths``, each once."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_file() and p.name == RESULTS_CSV:
            found.add(p.parent)
        elif p.is_file() and p.suffix == ".json" and is_split_document(p):
            found.add(p)
        elif p.is_dir():
            found |= {c.parent for c in p.rglob(RESULTS_CSV)}
            found |= {j for j in p.rglob("*.json") if j.parent.name != "cells" and is_split_document(j)}
    return sorted(found)


def runs_of(paths: Iterable[Path | str]) -> pd.DataFrame:
    """Every run (:data:`RUN_COLUMNS`) of the folders and documents found under ``paths``."""
    frames = [document_run(p) if p.suffix == ".json" else folder_run(p) for p in run_sources(paths)]
    frames = [f for f in frames if not f.empty]
    if not frames:
        return pd.DataFrame(columns=RUN_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    return out.astype({"particles": "int64", "turns": "int64"})


# ------------------------------------------------------------------ the spread


def attribute(low: pd.Series, high: pd.Series) -> str:
    """Which part of the split explains most of the difference between the machines with the lowest and the
    highest loss: each part in turn taken from ``low`` into ``high``'s split, the one that moves the predicted
    loss most (:data:`PARTS`); '' where either machine has no split."""
    base = {v: float(high[v]) for v in PARTS.values()}
    if not all(math.isfinite(float(x[v])) for x in (low, high) for v in PARTS.values()):
        return ""
    now = predicted_loss_pct(base["slice_ms"], base["switch_ms"], base["refill_ms"])
    moved = {}
    for name, col in PARTS.items():
        b = {**base, col: float(low[col])}
        moved[name] = abs(now - predicted_loss_pct(b["slice_ms"], b["switch_ms"], b["refill_ms"]))
    return max(moved, key=lambda k: moved[k])


def machine_text(uuid: str, g: pd.DataFrame) -> str:
    """One machine's loss (each run's, when more than one) and split parts, for the ``per_machine`` column."""
    loss = g["loss_pct"].astype(float)
    text = f"{uuid}: loss {loss.mean():.2f}%"
    if len(g) > 1:
        text += f" ({len(g)} runs: {', '.join(f'{x:.2f}' for x in loss)})"
    parts = g[np.isfinite(g["slice_ms"].astype(float))]
    if len(parts):
        r = parts.iloc[0]
        text += (
            f", slice {float(r['slice_ms']):.3f} ms, switch {float(r['switch_ms']):.3f} ms, in-slice rate "
            f"{float(r['in_slice_rate']):.3f}, refill {float(r['refill_ms']):.3f} ms"
        )
    return text


def machine_means(g: pd.DataFrame) -> pd.DataFrame:
    """Per machine: its mean loss over its runs and its split parts (the first run that has them)."""
    rows = []
    for uuid, m in g.groupby("uuid", sort=True):
        parted = m[np.isfinite(m["slice_ms"].astype(float))]
        pick = parted.iloc[0] if len(parted) else m.iloc[0]
        rows.append(
            {**{p: pick[p] for p in PART_COLUMNS}, "uuid": uuid, "loss_pct": m["loss_pct"].astype(float).mean()}
        )
    return pd.DataFrame(rows)


def across_machines(g: pd.DataFrame) -> str:
    """Whether the intervals of runs on different machines overlap (``statistics.agreement`` over each pair
    of runs of two machines): ``disjoint`` as soon as two machines' runs do not."""
    if g["uuid"].nunique() < 2:
        return "one machine"
    rows = list(g.itertuples())
    verdicts = [
        agreement([(float(a.loss_ci_low), float(a.loss_ci_high)), (float(b.loss_ci_low), float(b.loss_ci_high))])
        for i, a in enumerate(rows)
        for b in rows[i + 1 :]
        if a.uuid != b.uuid
    ]
    if "disjoint" in verdicts:
        return "disjoint"
    return "overlap" if "overlap" in verdicts else "no interval"


def spread_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (work, mode): machines, runs, mean loss, the widest single-run half-width, the between-machine
    spread, whether the machines' intervals overlap, each machine's loss and parts and what the spread is
    attributed to (:data:`SPREAD_COLUMNS`)."""
    runs = runs[np.isfinite(runs["loss_pct"].astype(float))]
    rows = []
    for key, g in runs.groupby([*WORK_KEYS, "mode"], sort=True, dropna=False):
        per = machine_means(g)
        loss = per["loss_pct"].astype(float)
        half = ((g["loss_ci_high"].astype(float) - g["loss_ci_low"].astype(float)) / 2).max()
        many = len(per) > 1
        rows.append(
            dict(
                zip([*WORK_KEYS, "mode"], key),
                machines=len(per),
                runs=len(g),
                loss_pct=loss.mean(),
                loss_min_pct=loss.min(),
                loss_max_pct=loss.max(),
                within_ci_pts=half,
                spread_pts=loss.max() - loss.min() if many else math.nan,
                intervals=across_machines(g),
                uuids=" ".join(per["uuid"]),
                per_machine="; ".join(machine_text(u, g[g["uuid"] == u]) for u in per.sort_values("loss_pct")["uuid"]),
                attributed=attribute(per.loc[loss.idxmin()], per.loc[loss.idxmax()]) if many else "",
            )
        )
    return pd.DataFrame(rows, columns=SPREAD_COLUMNS)


def machine_spread(df: pd.DataFrame, runs: Sequence[dict[str, Any]] = ()) -> pd.DataFrame:
    """:func:`spread_table` of loaded rows (each ``source`` value, when the frame has one, a run of its own)
    with the runs beside the probe ``runs``."""
    return spread_table(frame_runs(df, runs))


def folder_spread(paths: Sequence[Path | str]) -> pd.DataFrame:
    """:func:`spread_table` of every run under ``paths`` (results folders, probe split documents, or folders
    holding them)."""
    runs = runs_of(paths)
    if runs.empty and not run_sources(paths):
        raise UserError(f"no results folder or probe split document under {' '.join(map(str, paths))}")
    return spread_table(runs)


# ------------------------------------------------------------------ what each machine recorded of its state

# the facts compared between machines: (fact, where provenance keeps it before machine_state)
FACTS = (
    "driver_version",
    "vbios",
    "power_limit_w",
    "enforced_power_limit_w",
    "app_clock_sm_mhz",
    "app_clock_mem_mhz",
    "max_clock_sm_mhz",
    "max_clock_mem_mhz",
    "memory_bytes",
    "pcie_gen",
    "pcie_width",
    "pcie_max_gen",
    "pcie_max_width",
    "persistence_mode",
    "cpu_model",
    "cpu_logical",
    "host_mem_bytes",
    "load_avg_1m",
    "os",
    "cuda_runtime",
    "sm_clock_min_mhz",
    "power_max_w",
)
# facts that vary from run to run on one machine: compared as ranges (disjoint ranges differ)
RANGE_FACTS = frozenset({"load_avg_1m", "sm_clock_min_mhz", "power_max_w", "host_mem_bytes"})
TELEMETRY_FACTS = {"sm_clock_min_mhz": ("tel_sm_clock_mhz_min", "min"), "power_max_w": ("tel_power_w_max", "max")}
SMI_FACTS = {"driver_version": "driver_version", "clocks.max.sm [MHz]": "max_clock_sm_mhz"}


def provenance_facts(prov: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(the GPU's UUID, the facts of :data:`FACTS` a provenance document recorded): its ``machine_state``
    where it has one, else what older documents kept (driver, GPU memory, host CPU, memory, load, OS)."""
    gpu = prov.get("gpu") or {}
    host = prov.get("host") or {}
    load = host.get("load_avg_1m_5m_15m")
    facts: dict[str, Any] = {
        "driver_version": (prov.get("nvidia") or {}).get("driver_version"),
        "memory_bytes": gpu.get("memory_bytes"),
        "cpu_model": host.get("cpu_model"),
        "cpu_logical": host.get("cpu_logical"),
        "host_mem_bytes": host.get("mem_bytes"),
        "load_avg_1m": float(load[0]) if load else None,
        "os": host.get("os"),
        "cuda_runtime": prov.get("cuda_runtime"),
    }
    facts |= {k: v for k, v in (prov.get("machine_state") or {}).items() if k in FACTS and v is not None}
    uuid = normalise_uuid(gpu.get("uuid") or (prov.get("device") or {}).get("uuid")) or ""
    return uuid, {k: v for k, v in facts.items() if v is not None}


def smi_facts(path: Path) -> tuple[str, dict[str, Any]]:
    """(UUID, facts) of an ``nvidia-smi --query-gpu ... --format=csv`` file (``gpu.csv``, ``machine.txt``):
    its header line (one with a ``uuid`` column) and the line after it."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines[:-1]):
        names = [c.strip() for c in line.split(",")]
        if "uuid" in names:
            row = dict(zip(names, (c.strip() for c in next(csv.reader([lines[i + 1]])))))
            facts: dict[str, Any] = {SMI_FACTS[k]: row[k] for k in SMI_FACTS if row.get(k)}
            if "max_clock_sm_mhz" in facts:
                facts["max_clock_sm_mhz"] = int(float(str(facts["max_clock_sm_mhz"]).removesuffix("MHz")))
            return normalise_uuid(row.get("uuid")) or "", facts
    return "", {}


def telemetry_facts(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """(UUID, facts) of a results folder's time-sliced cells under load, from its telemetry columns: the
    lowest SM clock any of them sampled (``tel_sm_clock_mhz_min``) and the highest power (``tel_power_w_max``)."""
    df = load_results(folder)
    ts = df[[time_sliced(str(m)) for m in df["mode"]]]
    out = []
    for uuid, g in ts.groupby(ts["device_uuid"].astype(str)):
        facts = {}
        for fact, (col, how) in TELEMETRY_FACTS.items():
            v = pd.to_numeric(g[col], errors="coerce") if col in g else pd.Series(dtype=float)
            if v.notna().any():
                facts[fact] = float(v.min() if how == "min" else v.max())
        out.append((normalise_uuid(uuid) or "", facts))
    return out


def source_facts(src: Path) -> list[tuple[str, dict[str, Any]]]:
    """(UUID, facts) of what one run source recorded: a results folder's provenance documents and telemetry
    under load, a probe split document's provenance, the nvidia-smi files beside either (or one level up)."""
    folder = src if src.is_dir() else src.parent
    out: list[tuple[str, dict[str, Any]]] = []
    if src.is_dir():
        out += [provenance_facts(json.loads(p.read_text())) for p in sorted(folder.glob("provenance*.json"))]
        out += telemetry_facts(folder)
    else:
        doc = json.loads(src.read_text())
        if isinstance(doc.get("provenance"), dict):
            out.append(provenance_facts(doc["provenance"]))
    smi = [f for name in ("gpu.csv", "machine.txt") for f in (folder / name, folder.parent / name) if f.is_file()]
    return out + [smi_facts(f) for f in smi]


def machine_facts(paths: Iterable[Path | str]) -> dict[str, dict[str, set[Any]]]:
    """Per GPU UUID, every value each fact took in what the runs under ``paths`` recorded (:func:`source_facts`)."""
    out: dict[str, dict[str, set[Any]]] = {}
    for src in run_sources(paths):
        for uuid, facts in source_facts(src):
            for k, v in facts.items() if uuid else ():
                out.setdefault(uuid, {}).setdefault(k, set()).add(round(v, 2) if isinstance(v, float) else v)
    return out


def loss_groups(runs: pd.DataFrame, gap_pts: float = 1.0) -> tuple[list[str], list[str], pd.Series] | None:
    """The machines of the time-slicing loss split at its largest gap: each machine's mean ``timeslice:2``
    loss over the CUDA runs at one turn (any size), sorted; (low machines, high machines, the losses), or
    None when fewer than two machines or no gap of ``gap_pts`` separates them."""
    ts = runs[(runs["mode"] == "timeslice:2") & (runs["backend"] == "cuda") & (runs["turns"].astype(int) == 1)]
    ts = ts[ts["engine"] == "simpletrack"]
    per = ts.groupby("uuid")["loss_pct"].mean().astype(float).sort_values()
    if len(per) < 2:
        return None
    gaps = per.diff().iloc[1:]
    if gaps.max() < gap_pts:
        return None
    cut = per.index.get_loc(gaps.idxmax())
    return list(per.index[:cut]), list(per.index[cut:]), per


def state_differences(
    facts: dict[str, dict[str, set[Any]]], low: Sequence[str], high: Sequence[str]
) -> list[tuple[str, str, str, str]]:
    """Per fact of :data:`FACTS`: (fact, the low machines' values, the high machines' values, verdict):
    ``differs`` when both groups recorded it and no value is shared, ``same`` when all recorded values are
    one, ``mixed`` otherwise, ``not recorded`` where neither group recorded it; each side says on how many
    of its machines the fact was recorded."""
    out = []
    for fact in FACTS:
        sides = []
        for group in (low, high):
            seen = [facts.get(u, {}).get(fact) for u in group]
            values = set().union(*(s for s in seen if s))
            sides.append((values, sum(1 for s in seen if s), len(group)))
        (lv, ln, lt), (hv, hn, ht) = sides
        ranged = fact in RANGE_FACTS
        if not ln and not hn:
            verdict = "not recorded"
        elif not ln or not hn:
            verdict = "recorded on one side only"
        elif len(lv | hv) == 1:
            verdict = "same"
        elif ranged:
            verdict = "differs" if max(lv) < min(hv) or max(hv) < min(lv) else "ranges overlap"
        elif not lv & hv:
            verdict = "differs"
        else:
            verdict = "mixed"
        out.append((fact, values_text(lv, ln, lt, ranged), values_text(hv, hn, ht, ranged), verdict))
    return out


def values_text(values: set[Any], recorded: int, machines: int, ranged: bool = False) -> str:
    """The values a group recorded (a range for a fact that varies by run) and on how many machines."""

    def text(v: Any) -> str:
        return f"{v:g}" if isinstance(v, float) else str(v)

    if not values:
        shown = "—"
    elif ranged and len(values) > 1:
        shown = f"{text(min(values))}–{text(max(values))}"
    else:
        shown = ", ".join(sorted(map(text, values)))
    return f"{shown} ({recorded} of {machines} machines)"
