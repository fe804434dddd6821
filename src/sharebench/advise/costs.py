"""What each sharing mode costs each pattern, from results folders of the pool's GPU model.

Sources, in order of preference, each labelled in :attr:`Cost.source`:

* ``tables/latency.csv`` (``sharebench report`` of a ``--pattern`` run): the victim's p95 slowdown
  against the same pattern alone, per mode, pattern and neighbour pattern (plain ``timeslice:N``,
  ``mps:N`` and ``mig:LAYOUT`` modes; thread-limited and interval variants are other products);
* for batch beside batch, the batch tables ``tables/timeslice.csv`` and ``tables/mps.csv``: a job of a
  cell of N takes T_N where it took T_1 alone, so its slowdown is T_N / T_1 (the median over the
  work sizes measured); ``tables/mig.csv``: T_mig / T_full;
* MIG profiles not measured are **predicted** by the rule the partition tables check (a slice runs
  SM-bound work at its SM share: slowdown = full SMs / slice SMs, ``sharebench.analysis.partitions``),
  and labelled so. Time-slicing and MPS are never predicted: an unmeasured N or pattern is left out,
  with the reason in :attr:`Costs.notes`.

Results of another GPU model than the pool's are refused (one line).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from sharebench.errors import UserError
from sharebench.gpus import GpuModel, MigProfile, gpu_model, resolve_layout
from sharebench.modes import KINDS, kinds_where, parse_mode
from sharebench.patterns import parse_pattern
from sharebench.results import read_provenance

SHARED_FAMILIES = kinds_where(family="shared")  # N replicas on one whole device: timeslice, mps


@dataclass(frozen=True)
class Cost:
    """The p95 slowdown of ``pattern`` with ``n`` sharers in ``family`` beside ``beside`` (pattern kinds)."""

    family: str  # timeslice | mps
    n: int
    pattern: str
    beside: str
    slowdown_p95: float
    source: str


@dataclass
class Costs:
    model: GpuModel
    folders: list[str]
    shared: list[Cost] = field(default_factory=list)
    mig_measured: dict[tuple[str, str], tuple[float, str]] = field(default_factory=dict)  # (profile, pattern)
    notes: list[str] = field(default_factory=list)

    def sharing(self, family: str, pattern: str) -> dict[int, Cost]:
        """n -> cost for ``pattern`` beside its own kind under ``family`` (the packing keeps a GPU to one class)."""
        out: dict[int, Cost] = {}
        for c in self.shared:
            if c.family == family and c.pattern == pattern and c.beside == pattern:
                out.setdefault(c.n, c)
        return dict(sorted(out.items()))

    def mig(self, profile: MigProfile, pattern: str) -> tuple[float, str]:
        """(slowdown, source) of ``pattern`` alone on one instance of ``profile``: measured or predicted."""
        got = self.mig_measured.get((profile.name, pattern))
        if got:
            return got
        slowdown = self.model.sms / profile.sms
        return slowdown, f"predicted: SM share {profile.sms}/{self.model.sms} (slowdown {slowdown:.2f}x)"


def folder_model(folder: Path) -> GpuModel:
    prov = read_provenance(folder)
    if prov is None:
        raise UserError(f"--results {folder}: no provenance.json; give a results folder of `sharebench run`")
    gpu = prov.get("gpu") or {}
    name = gpu.get("model_key") or gpu.get("name") or (prov.get("device") or {}).get("name") or ""
    try:
        return gpu_model(str(name))
    except UserError:
        raise UserError(
            f"--results {folder} was measured on {name or 'no GPU'!r}, not a GPU model advise knows"
        ) from None


def read_costs(folders: list[Path | str], pool_model: str | None) -> Costs:
    """Every cost the folders hold; UserError when they are of another model than ``pool_model``."""
    if not folders:
        raise UserError("no --results folder given; advise needs the measured costs of the pool's GPU model")
    paths = [Path(f) for f in folders]
    for p in paths:
        if not p.is_dir():
            raise UserError(f"--results {p}: no such folder")
    models = [folder_model(p) for p in paths]
    want = gpu_model(pool_model) if pool_model else models[0]
    for p, m in zip(paths, models):
        if m.key != want.key:
            raise UserError(
                f"--results {p} was measured on {m.key}, but the pool's GPUs are {want.key}; give results of {want.key}"
            )
    costs = Costs(want, [str(p) for p in paths])
    for p in paths:
        read_latency(p, costs)
    for p in paths:
        read_batch_tables(p, costs)
    return costs


def kinds(beside: object, pattern: str) -> str:
    text = "" if beside is None or (isinstance(beside, float) and math.isnan(beside)) else str(beside)
    found = sorted({parse_pattern(b).kind for b in text.split("+") if b})
    return "+".join(found) if found else pattern


def read_latency(folder: Path, costs: Costs) -> None:
    path = folder / "tables" / "latency.csv"
    if not path.exists():
        costs.notes.append(f"{folder}: no tables/latency.csv (interactive and serve costs not measured there)")
        return
    t = pd.read_csv(path)
    for row in t[t["role"] == "victim"].itertuples(index=False):
        mode = parse_mode(str(row.mode))
        slowdown = float(row.slowdown_p95)
        if not math.isfinite(slowdown) or mode.is_baseline:
            continue
        pattern = parse_pattern(str(row.pattern)).kind
        source = f"measured: {path} {row.mode}"
        if mode.spec.shared and mode.thread_pct is None and not mode.interval:
            beside = kinds(row.beside, pattern)
            costs.shared.append(Cost(mode.kind, int(row.replicas), pattern, beside, slowdown, source))
        elif mode.spec.device_instances and mode.layout:
            profile = resolve_layout(costs.model, mode.layout)[4:]
            costs.mig_measured.setdefault((profile, pattern), (slowdown, source))


def read_batch_tables(folder: Path, costs: Costs) -> None:
    have = {(c.family, c.n) for c in costs.shared if c.pattern == c.beside == "batch"}
    for family in SHARED_FAMILIES:
        path = folder / "tables" / f"{KINDS[family].table}.csv"
        if not path.exists():
            continue
        t = pd.read_csv(path)
        if t.empty:
            continue
        t = t[[parse_mode(m).thread_pct is None and not parse_mode(m).interval for m in t["mode"]]]
        for n, g in t.groupby("N"):
            ratio = (g["TN_s"].astype(float) / g["T1_s"].astype(float)).median()
            if (family, int(n)) in have or not math.isfinite(ratio):
                continue
            source = f"measured: {path} (T_N/T_1, batch)"
            costs.shared.append(Cost(family, int(n), "batch", "batch", float(ratio), source))
    path = folder / "tables" / "mig.csv"
    if path.exists():
        t = pd.read_csv(path)
        for profile, g in t.groupby("mig_profile"):
            ratio = (g["mig_s"].astype(float) / g["full_s"].astype(float)).median()
            if math.isfinite(ratio):
                costs.mig_measured.setdefault((str(profile), "batch"), (float(ratio), f"measured: {path}"))
