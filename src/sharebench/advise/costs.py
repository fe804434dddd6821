"""What each sharing mode costs a pod, by its load and its neighbours', from results folders of one GPU model.

Each measured point (:class:`Cost`) is a victim's p95 slowdown with ``n`` sharers of a family (timeslice,
mps) or on an instance of a MIG profile, with the victim's busy fraction alone (``busy_victim``: the
exclusive cell of its pattern) and its neighbours' (``busy_neighbours``: the same for neighbours of its own
pattern, the neighbour rows' busy for a different one, 1 for batch). Sources, labelled in ``source``:

* ``tables/latency.csv`` (``sharebench report`` of a ``--pattern`` run): victim rows of ``timeslice:N``,
  ``mps:N``, ``mig:LAYOUT`` and ``mig-emulated:LAYOUT`` (one-profile layouts; "emulated with MPS");
* the batch tables ``tables/timeslice.csv`` and ``tables/mps.csv``: T_N / T_1 (the median over the work
  sizes), and ``tables/mig.csv``: T_mig / T_full — points at busy 1 beside busy 1.

A folder given is searched recursively for results folders (``tables/`` beside ``provenance.json``); each
keeps its GPU's UUID in the sources. Folders of another model than the pool's are refused unless allowed.

The surface (:meth:`Costs.surface`): per family and n, one curve per measured workload pattern (its level:
the victim's busy alone), each a function of the neighbours' busy with knots at 0 (no neighbour work: the
measured alone cell, slowdown 1) and at each measured neighbour busy; slowdowns below 1 (a baseline
artefact) count as 1 and curves never fall as neighbours get busier. A pod's slowdown is the curve
interpolated at its neighbours' busy, then between the curves at its own level. Outside the measured
levels: a lighter pod takes the lightest curve (an upper bound for a shared GPU, said in a note); a pod
busier than every curve is not costed at all (the option is left out), never extrapolated. MIG profiles
not measured are **predicted** from the slice's SM share (``sharebench.analysis.partitions``) and
labelled so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from sharebench.errors import UserError
from sharebench.gpus import GpuModel, MigProfile, emulated_layout, gpu_model, resolve_layout
from sharebench.modes import KINDS, kinds_where, parse_mode
from sharebench.patterns import BATCH, PatternSpec, parse_pattern, saturated
from sharebench.results import read_provenance

# the kind of a GPU cut into instances (MIG): the cost family its measured and emulated layouts go to
MIG = next(k for k, spec in KINDS.items() if spec.device_instances)

SHARED_FAMILIES = kinds_where(family="shared")  # N replicas on one whole device: timeslice, mps
BATCH_LABEL = BATCH.label  # the batch tables' points: the saturated pattern beside itself
LEVEL_SLACK = 1.1  # a pod up to 10 % busier than the heaviest measured curve still takes it


@dataclass(frozen=True)
class Cost:
    """One measured p95 slowdown of a victim of ``pattern`` (its kind's name, as measured; ``label`` the full
    pattern; ``beside`` the neighbours' kinds, joined by ``+``)."""

    family: str  # timeslice | mps | mig
    n: int  # sharers (mig: instances)
    pattern: str
    beside: str
    slowdown_p95: float
    source: str
    label: str = ""
    busy_victim: float = 1.0
    busy_neighbours: float = 1.0
    lo: float = math.nan
    hi: float = math.nan
    profile: str = ""  # mig only
    emulated: bool = False


@dataclass(frozen=True)
class Curve:
    """Slowdown against the neighbours' busy for a victim of one pattern at busy ``level``."""

    label: str
    level: float
    x: np.ndarray  # neighbours' mean busy (knots, ascending, from 0)
    y: np.ndarray  # slowdown at the knots (>= 1, non-decreasing)
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Surface:
    """Per measured n, the curves (ascending level) of one family for one pattern kind (``pattern``: its name)."""

    family: str
    pattern: str
    curves: dict[int, tuple[Curve, ...]]

    def ns(self) -> list[int]:
        return sorted(self.curves)

    def n_for(self, k: int) -> int | None:
        """The smallest measured n >= k (a cost for more sharers bounds fewer)."""
        return next((n for n in self.ns() if n >= k), None)

    def top_level(self, n: int) -> float:
        return max(c.level for c in self.curves[n])

    def lookup(self, n: int, level: float, bn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slowdown, clamped) at neighbours' busy ``bn`` for a victim at ``level``; ``clamped`` marks
        samples whose neighbours were busier than any measured at this n (the last knot used)."""
        curves = self.curves[n]
        ys = np.stack([np.interp(bn, c.x, c.y) for c in curves])
        clamped = bn > min(float(c.x[-1]) for c in curves) + 1e-9
        levels = np.array([c.level for c in curves])
        if len(curves) == 1 or level <= levels[0]:
            return ys[0], clamped
        j = int(np.clip(np.searchsorted(levels, level) - 1, 0, len(curves) - 2))
        w = float(np.clip((level - levels[j]) / max(levels[j + 1] - levels[j], 1e-12), 0.0, 1.0))
        return ys[j] * (1 - w) + ys[j + 1] * w, clamped


@dataclass
class Costs:
    model: GpuModel
    folders: list[str]
    points: list[Cost] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    models_read: dict[str, str] = field(default_factory=dict)  # folder -> its model key

    @property
    def shared(self) -> list[Cost]:
        return [c for c in self.points if c.family in SHARED_FAMILIES]

    def kinds(self) -> set[str]:
        """The pattern kinds with at least one measured sharing cost."""
        return {c.pattern for c in self.points}

    def usable(self, pattern: PatternSpec) -> list[Cost]:
        """Points that can cost a class of ``pattern``: its own kind's, and a saturated kind's (batch: the
        saturated level)."""
        return [c for c in self.points if c.pattern == pattern.name or saturated(c.pattern)]

    def surface(self, family: str, pattern: PatternSpec) -> Surface:
        by_n: dict[int, dict[str, list[Cost]]] = defaultdict(lambda: defaultdict(list))
        for c in self.usable(pattern):
            if c.family == family and c.n >= 2:
                by_n[c.n][c.label].append(c)
        return Surface(family, pattern.name, {n: curves_of(labels) for n, labels in sorted(by_n.items())})

    def mig(self, profile: MigProfile, pattern: PatternSpec, level: float) -> tuple[float, str]:
        """(slowdown, source) of a pod at busy ``level`` alone on an instance of ``profile``: interpolated
        between measured levels; above them the SM-share prediction at busy 1; none measured: predicted."""
        pts = sorted(
            (c for c in self.usable(pattern) if c.family == MIG and c.profile == profile.name),
            key=lambda c: c.busy_victim,
        )
        predicted = self.model.sms / profile.sms
        if not pts:
            return predicted, f"predicted: SM share {profile.sms}/{self.model.sms} (slowdown {predicted:.2f}x)"
        x = [c.busy_victim for c in pts]
        y = list(np.maximum.accumulate([max(1.0, c.slowdown_p95) for c in pts]))
        source = "; ".join(dict.fromkeys(c.source for c in pts))
        if level < x[0] / LEVEL_SLACK:
            source += f"; busy {level:.2f} below the lightest measured {x[0]:.2f}: its cost used"
        if x[-1] < 1.0 - 1e-9 and level > x[-1]:
            x, y = [*x, 1.0], [*y, max(y[-1], predicted)]
            source += f"; above busy {pts[-1].busy_victim:.2f} predicted (SM share)"
        return float(np.interp(level, x, y)), f"measured: {source}"


def curves_of(labels: dict[str, list[Cost]]) -> tuple[Curve, ...]:
    out = []
    for label, pts in labels.items():
        knots: dict[float, float] = {0.0: 1.0}
        for c in pts:
            b = round(c.busy_neighbours, 4)
            knots[b] = max(knots.get(b, 1.0), c.slowdown_p95, 1.0)
        x = np.array(sorted(knots))
        y = np.maximum.accumulate(np.array([knots[b] for b in x]))
        level = float(np.mean([c.busy_victim for c in pts]))
        out.append(Curve(label, level, x, y, tuple(dict.fromkeys(c.source for c in pts))))
    return tuple(sorted(out, key=lambda c: c.level))


# ------------------------------------------------------------------------------------------ reading


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
            f"--results {folder} was measured on {str(name) or 'no GPU'!r}, not a GPU model advise knows"
        ) from None


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


def read_costs(folders: list[Path | str], pool_model: str | None, allow_other_model: bool = False) -> Costs:
    """Every cost the folders hold; UserError when one is of another model than ``pool_model`` (the first
    folder's where not given) unless ``allow_other_model`` (then a note)."""
    if not folders:
        raise UserError("no --results folder given; advise needs the measured costs of the pool's GPU model")
    paths = results_folders([Path(f) for f in folders])
    models = [folder_model(p) for p in paths]
    want = gpu_model(pool_model) if pool_model else models[0][0]
    costs = Costs(want, [str(p) for p in paths])
    for p, (m, _) in zip(paths, models):
        costs.models_read[str(p)] = m.key
        if m.key != want.key:
            if not allow_other_model:
                raise UserError(
                    f"--results {p} was measured on {m.key}, but the pool's GPUs are {want.key}; give results of "
                    f"{want.key} or --allow-other-model"
                )
            costs.notes.append(f"{p}: measured on {m.key}, used for a {want.key} pool (--allow-other-model)")
    for p, (_, uuid) in zip(paths, models):
        read_latency(p, costs, uuid)
        read_batch_tables(p, costs, uuid)
    return costs


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


def read_latency(folder: Path, costs: Costs, uuid: str) -> None:
    path = folder / "tables" / "latency.csv"
    if not path.exists():
        costs.notes.append(f"{folder}: no tables/latency.csv (interactive and serve costs not measured there)")
        return
    t = pd.read_csv(path)
    if "busy_fraction" not in t:
        costs.notes.append(f"{path}: no busy_fraction column (rebuild it with `sharebench report {folder}`)")
        return
    alone = alone_busy(t)
    for row in t[t["role"] == "victim"].itertuples(index=False):
        mode = parse_mode(str(row.mode))
        slowdown = float(row.slowdown_p95)
        pattern = parse_pattern(str(row.pattern))
        if not math.isfinite(slowdown) or mode.is_baseline or pattern.label not in alone:
            continue
        beside_text = (
            ""
            if not isinstance(row.beside, str)
            else "+".join(sorted({parse_pattern(b).label for b in row.beside.split("+") if b}))
        )
        where = f"{path} {row.mode} ({uuid})" if uuid else f"{path} {row.mode}"
        point = Cost(
            mode.kind,
            int(row.replicas),
            pattern.kind,
            kinds(row.beside, pattern.kind),
            slowdown,
            f"measured: {where}",
            pattern.label,
            alone[pattern.label],
            neighbour_busy(t, str(row.mode), pattern.label, beside_text, alone),
            float(getattr(row, "slowdown_p95_lo", math.nan)),
            float(getattr(row, "slowdown_p95_hi", math.nan)),
        )
        if mode.spec.shared and mode.thread_pct is None and not mode.interval:
            costs.points.append(point)
        elif mode.layout and (mode.spec.device_instances or mode.spec.emulates):
            profile = one_profile(costs.model, mode.layout, mode.spec.emulates)
            if profile:
                how = "measured (emulated with MPS)" if mode.spec.emulates else "measured"
                emulated = bool(mode.spec.emulates)
                src = f"{how}: {where}"
                costs.points.append(replace(point, family=MIG, source=src, profile=profile, emulated=emulated))


def one_profile(model: GpuModel, layout: str, emulated: str) -> str:
    """The profile of a one-profile layout ("" for mixed layouts: not a per-profile cost)."""
    if emulated:
        names = {p.name for p in emulated_layout(model, layout)}
        return names.pop() if len(names) == 1 else ""
    resolved = resolve_layout(model, layout)
    return resolved[4:] if resolved.startswith("all-") else ""


def read_batch_tables(folder: Path, costs: Costs, uuid: str) -> None:
    have = {(c.family, c.n) for c in costs.points if saturated(c.pattern) and saturated(c.beside)}
    tag = f" ({uuid})" if uuid else ""
    for family in SHARED_FAMILIES:
        path = folder / "tables" / f"{KINDS[family].table}.csv"
        if not path.exists():
            continue
        t = pd.read_csv(path)
        if t.empty:
            continue
        t = t[[parse_mode(m).thread_pct is None and not parse_mode(m).interval for m in t["mode"]]]
        for n, g in t.groupby("N"):
            ratio = float((g["TN_s"].astype(float) / g["T1_s"].astype(float)).median())
            if (family, int(str(n))) in have or not math.isfinite(ratio):
                continue
            source = f"measured: {path} (T_N/T_1, batch){tag}"
            costs.points.append(Cost(family, int(str(n)), BATCH.kind, BATCH.kind, ratio, source, BATCH_LABEL))
    path = folder / "tables" / "mig.csv"
    if path.exists():
        t = pd.read_csv(path)
        for profile, g in t.groupby("mig_profile"):
            ratio = float((g["mig_s"].astype(float) / g["full_s"].astype(float)).median())
            name = str(profile)
            count = next((p.max_count for p in costs.model.profiles if p.name == name), 1)
            if math.isfinite(ratio):
                src = f"measured: {path}{tag}"
                costs.points.append(Cost(MIG, count, BATCH.kind, BATCH.kind, ratio, src, BATCH_LABEL, profile=name))
