"""Reading the costs: results folders (searched recursively) into :class:`sharebench.advise.costs.Costs`.

Sources, labelled in each point's ``source``: ``tables/latency.csv`` (``sharebench report`` of a
``--pattern`` run): victim rows of ``timeslice:N``, ``mps:N``, ``mig:LAYOUT`` and ``mig-emulated:LAYOUT``
(one-profile layouts; "emulated with MPS"), each decided by interval from the folder's bursts
(:mod:`sharebench.advise.decided`); the batch tables ``tables/timeslice.csv`` and ``tables/mps.csv``
(T_N / T_1, the median over the work sizes, with its interval) and ``tables/mig.csv`` (T_mig / T_full).

The pool's GPU model: folders of another model are refused unless allowed; then their slowdowns are
another GPU's (a warning), and their MIG profiles are mapped to the pool model's profile of the nearest
compute share (SMs of the instance over the GPU's; the memory share breaks a tie) when it lies within
:data:`SHARE_TOLERANCE`, else left out, said in a note.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from sharebench.advise.costs import BATCH_LABEL, MIG, SHARED_FAMILIES, Cost, Costs
from sharebench.advise.decided import folder_decisions, latency_decisions
from sharebench.analysis.reproduce import workload_of
from sharebench.analysis.tail import Decision, TailRule
from sharebench.errors import UserError
from sharebench.gpus import GPU_MODELS, GpuModel, MigProfile, emulated_layout, gpu_model, resolve_layout
from sharebench.modes import KINDS, parse_mode
from sharebench.patterns import BATCH, DEFAULT_SLO, parse_pattern, saturated
from sharebench.results import read_provenance
from sharebench.results.folder import read_sweeps

SHARE_TOLERANCE = 0.2  # a MIG profile of another model maps to the pool's nearest compute share within 20 %


@dataclass(frozen=True)
class Folder:
    """A results folder as the costs see it: its GPU model, its GPU's UUID (short) and its workload."""

    path: Path
    model: GpuModel
    uuid: str
    workload: str


def folder_model(folder: Path) -> tuple[GpuModel, str]:
    """The folder's GPU model and the UUID of its GPU (short)."""
    prov = read_provenance(folder)
    if prov is None:
        raise UserError(f"--results {folder}: no provenance.json; give a results folder of `sharebench run`")
    gpu = prov.get("gpu") or {}
    name = gpu.get("model_key") or gpu.get("name") or (prov.get("device") or {}).get("name") or ""
    uuid = str(gpu.get("uuid") or (prov.get("device") or {}).get("uuid") or "")
    try:
        return gpu_model(str(name)), uuid[:12]
    except UserError:
        raise UserError(
            f"--results {folder} was measured on {str(name) or 'no GPU'!r}, not a GPU model advise knows "
            f"({', '.join(GPU_MODELS)}); give results measured on the pool's GPUs (`sharebench run --device cuda:0` "
            "on one of them)"
        ) from None


def folder_workload(folder: Path) -> str:
    """The workload the folder measured: the program's name (or command), or the tracker and its lattice."""
    sweeps = read_sweeps(folder, torn_ok=True)
    wl = workload_of(sweeps[-1]) if sweeps else {}
    engine = str(wl.get("engine") or "")
    if engine == "exec":
        return str(wl.get("name") or wl.get("command") or "a program")
    if not engine:
        return f"unknown ({folder.name})"
    lattice = Path(str(wl.get("lattice") or "")).name
    return f"{engine} ({lattice})" if lattice else f"{engine} (generated ring)"


def results_folders(paths: list[Path]) -> list[Path]:
    """Each path, or the results folders (``tables/`` beside ``provenance.json``) found under it."""
    out: list[Path] = []
    for p in paths:
        if not p.is_dir():
            raise UserError(f"--results {p}: no such folder")
        if (p / "provenance.json").exists():
            out.append(p)
            continue
        found = sorted(t.parent for t in p.rglob("tables") if (t.parent / "provenance.json").exists())
        if not found:
            raise UserError(f"--results {p}: no results folder (tables/ beside provenance.json) in it")
        out.extend(found)
    return list(dict.fromkeys(out))


def map_profile(src: GpuModel, name: str, pool: GpuModel) -> tuple[MigProfile | None, str]:
    """The pool model's MIG profile for ``src``'s profile ``name``: itself on the same model, else the
    nearest compute share within :data:`SHARE_TOLERANCE` (None, with why, where none is)."""
    if src.key == pool.key:
        return pool.profile(name), ""
    p = src.profile(name)
    share, mem = p.sms / src.sms, p.mem_gb / src.mem_gb

    def gap(q: MigProfile) -> float:
        return abs(q.sms / pool.sms - share)

    near = [q for q in pool.profiles if gap(q) <= SHARE_TOLERANCE * share]
    if not near:
        best = min(pool.profiles, key=gap)
        return None, (
            f"{name} of the {src.key} ({p.sms}/{src.sms} SMs) has no {pool.key} profile within "
            f"{SHARE_TOLERANCE:.0%} of its compute share (nearest {best.name}, {best.sms}/{pool.sms}): left out"
        )
    best = min(near, key=lambda q: (q.slices != p.slices, gap(q), abs(q.mem_gb / pool.mem_gb - mem)))
    return best, (
        f"{name} of the {src.key} mapped to {best.name} of the {pool.key} by compute share "
        f"({p.sms}/{src.sms} against {best.sms}/{pool.sms} SMs)"
    )


def read_costs(
    folders: list[Path | str], pool_model: str | None, allow_other_model: bool = False, slo: float = DEFAULT_SLO
) -> Costs:
    """Every cost the folders hold for a pool of ``pool_model`` (the first folder's where not given),
    decided at ``slo``; UserError when a folder is of another model unless ``allow_other_model``."""
    if not folders:
        raise UserError("no --results folder given; advise needs the measured costs of the pool's GPU model")
    paths = results_folders([Path(f) for f in folders])
    infos = [Folder(p, *folder_model(p), folder_workload(p)) for p in paths]
    want = gpu_model(pool_model) if pool_model else infos[0].model
    costs = Costs(want, [str(p) for p in paths])
    for f in infos:
        costs.models_read[str(f.path)] = f.model.key
        costs.workloads[str(f.path)] = f.workload
        if f.model.key != want.key and not allow_other_model:
            raise UserError(
                f"--results {f.path} was measured on {f.model.key}, but the pool's GPUs are {want.key}; give "
                f"results of {want.key}, or --allow-other-model to use another GPU's slowdowns"
            )
    for model in sorted({f.model.key for f in infos} - {want.key}):
        n = sum(f.model.key == model for f in infos)
        costs.notes.append(
            f"{n} results folder(s) measured on {model}, used for a {want.key} pool (--allow-other-model): "
            "their slowdowns are another GPU's"
        )
    rule = TailRule(slo)
    for f in infos:
        read_latency(f, costs, rule)
        read_batch_tables(f, costs)
    return costs.at(slo)


def kinds(beside: object, pattern: str) -> str:
    text = "" if beside is None or (isinstance(beside, float) and math.isnan(beside)) else str(beside)
    found = sorted({parse_pattern(b).kind for b in text.split("+") if b})
    return "+".join(found) if found else pattern


def alone_busy(t: pd.DataFrame) -> dict[str, float]:
    """Pattern label -> its busy fraction alone (the exclusive victim rows)."""
    base = t[(t["role"] == "victim") & t["mode"].map(lambda m: parse_mode(str(m)).is_baseline)]
    return {parse_pattern(str(r.pattern)).label: float(r.busy_fraction) for r in base.itertuples(index=False)}


def neighbour_busy(t: pd.DataFrame, mode: str, label: str, beside: str, alone: dict[str, float]) -> float:
    if beside == label or not beside:
        return alone.get(label, math.nan)
    rows = t[(t["mode"] == mode) & (t["role"] == "neighbour")]
    if "busy_fraction" in t and len(rows):
        return float(rows["busy_fraction"].astype(float).mean())
    return alone.get(beside, 1.0 if saturated(beside) else math.nan)


def beside_label(beside: object) -> str:
    return (
        ""
        if not isinstance(beside, str)
        else "+".join(sorted({parse_pattern(b).label for b in beside.split("+") if b}))
    )


def read_latency(f: Folder, costs: Costs, rule: TailRule) -> None:
    path = f.path / "tables" / "latency.csv"
    if not path.exists():
        costs.notes.append(f"{f.path}: no tables/latency.csv (interactive and serve costs not measured there)")
        return
    t = pd.read_csv(path)
    if "busy_fraction" not in t:
        costs.notes.append(f"{path}: no busy_fraction column (rebuild it with `sharebench report {f.path}`)")
        return
    found = folder_decisions(f.path, rule) or latency_decisions(t, rule)
    alone = alone_busy(t)
    for row in t[t["role"] == "victim"].to_dict("records"):
        mode = parse_mode(str(row["mode"]))
        pattern = parse_pattern(str(row["pattern"]))
        if mode.is_baseline or pattern.label not in alone:
            continue
        beside = row["beside"] if isinstance(row["beside"], str) else ""
        point = latency_point(f, row, found.get((str(row["mode"]), str(row["pattern"]), beside)))
        point = replace(
            point,
            busy_victim=alone[pattern.label],
            busy_neighbours=neighbour_busy(t, str(row["mode"]), pattern.label, beside_label(beside), alone),
        )
        add_point(f, costs, point, str(row["mode"]))


def latency_point(f: Folder, row: dict[str, Any], decision: Decision | None) -> Cost:
    """The cell of a victim row, before its loads are known; without a decision it gives no cost."""
    mode = parse_mode(str(row["mode"]))
    pattern = parse_pattern(str(row["pattern"]))
    where = f"{f.path / 'tables' / 'latency.csv'} {mode.label}" + (f" ({f.uuid})" if f.uuid else "")
    why = "" if decision else "not decided: no bursts.csv and no verdict columns (rebuild with `sharebench report`)"
    return Cost(
        mode.kind,
        int(row["replicas"]),
        pattern.kind,
        kinds(row["beside"], pattern.kind),
        math.nan,
        f"measured: {where}",
        pattern.label,
        workload=f.workload,
        folder=str(f.path),
        decision=decision,
        why_not=why,
    )


def add_point(f: Folder, costs: Costs, point: Cost, mode_text: str) -> None:
    """The cell as a shared-mode cost, or as the cost of one MIG profile (mapped to the pool's model)."""
    mode = parse_mode(mode_text)
    if mode.spec.shared and mode.thread_pct is None and not mode.interval:
        costs.cells.append(point)
        return
    if not (mode.layout and (mode.spec.device_instances or mode.spec.emulates)):
        return
    name = one_profile(f.model, mode.layout, mode.spec.emulates)
    if not name:
        return
    profile, note = map_profile(f.model, name, costs.model)
    if note and note not in costs.notes:
        costs.notes.append(note)
    if profile is None:
        return
    how = "measured (emulated with MPS)" if mode.spec.emulates else "measured"
    src = point.source.replace("measured", how, 1) + (f", {name} as {profile.name}" if profile.name != name else "")
    costs.cells.append(replace(point, family=MIG, source=src, profile=profile.name, emulated=bool(mode.spec.emulates)))


def one_profile(model: GpuModel, layout: str, emulated: str) -> str:
    """The profile of a one-profile layout ("" for mixed layouts: not a per-profile cost)."""
    if emulated:
        names = {p.name for p in emulated_layout(model, layout)}
        return names.pop() if len(names) == 1 else ""
    resolved = resolve_layout(model, layout)
    return resolved[4:] if resolved.startswith("all-") else ""


def ratio(g: pd.DataFrame, top: str, bottom: str) -> float:
    return float((g[top].astype(float) / g[bottom].astype(float)).median())


def read_batch_tables(f: Folder, costs: Costs) -> None:
    have = {(c.family, c.n) for c in costs.cells if c.folder == str(f.path) and saturated(c.pattern)}
    tag = f" ({f.uuid})" if f.uuid else ""
    base = Cost("", 0, BATCH.kind, BATCH.kind, math.nan, "", BATCH_LABEL, workload=f.workload, folder=str(f.path))
    for family in SHARED_FAMILIES:
        path = f.path / "tables" / f"{KINDS[family].table}.csv"
        t = pd.read_csv(path) if path.exists() else pd.DataFrame()
        if t.empty:
            continue
        t = t[[parse_mode(m).thread_pct is None and not parse_mode(m).interval for m in t["mode"]]]
        for n, g in t.groupby("N"):
            point = ratio(g, "TN_s", "T1_s")
            if (family, int(str(n))) in have or not math.isfinite(point):
                continue
            lo, hi = ratio(g, "TN_ci_low", "T1_ci_high"), ratio(g, "TN_ci_high", "T1_ci_low")
            source = f"measured: {path} (T_N/T_1, batch){tag}"
            costs.cells.append(
                replace(base, family=family, n=int(str(n)), slowdown_p95=point, source=source, lo=lo, hi=hi)
            )
    read_mig_table(f, costs, base)


def read_mig_table(f: Folder, costs: Costs, base: Cost) -> None:
    path = f.path / "tables" / "mig.csv"
    if not path.exists():
        return
    t = pd.read_csv(path)
    for name, g in t.groupby("mig_profile"):
        point = ratio(g, "mig_s", "full_s")
        profile, note = map_profile(f.model, str(name), costs.model)
        if note and note not in costs.notes:
            costs.notes.append(note)
        if profile is None or not math.isfinite(point):
            continue
        lo, hi = ratio(g, "mig_ci_low", "full_ci_high"), ratio(g, "mig_ci_high", "full_ci_low")
        src = f"measured: {path}" + (f" ({f.uuid})" if f.uuid else "")
        costs.cells.append(
            replace(
                base,
                family=MIG,
                n=profile.max_count,
                slowdown_p95=point,
                source=src,
                lo=lo,
                hi=hi,
                profile=profile.name,
            )
        )
