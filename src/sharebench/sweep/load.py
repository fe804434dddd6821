"""Serving load relative to capacity (issue 33): ``serve:load=F`` resolved to a plain rate before any
patterned cell runs.

A sweep whose victim or neighbours follow ``serve:load=F[,size=N]`` (``sharebench.patterns``) first
measures the capacity alone: one exclusive cell (id ``capacity_p<P>_r0``, a warm-up row: never in the
tables' verdicts) whose single replica serves requests of the same size arriving all at once
(``serve:rate=1e6``, so it works back to back, the same unit of work as the patterned cells), at least
:data:`MIN_REQUESTS` of them (the sweep's ``--bursts`` when more). Its capacity is the units it served
over its window, first start to last end (:func:`units_per_s`). Each load pattern is then resolved
(``patterns.resolve_load``: ``serve:rate=R,size=N,load=F``, R = F x capacity / N), the replicas see a
plain rate and the tables group the cells by the resolved label. The capacity, the resolved patterns and
how they were found are recorded in ``sweep.json`` (:func:`load_record`) and ``notes.txt``.

``--resume`` reuses the folder's capacity cell (:func:`folder_capacity`): on the same physical GPU only
(another UUID: a one-line UserError naming both), so that a resumed folder's rates are those its first
cells ran at.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from sharebench.errors import UserError
from sharebench.modes import BASELINE, parse_mode
from sharebench.patterns import MAX_RATE_PER_S, Pattern, format_number, parse_pattern, resolve_load
from sharebench.results import RESULTS_CSV, load_results
from sharebench.results.bursts import load_bursts
from sharebench.sweep.plan import Cell, SweepConfig, SweepPlan, plan_mode
from sharebench.workloads.workload import Workload

MIN_REQUESTS = 20  # the capacity cell's requests, at least
CELL_PREFIX = "capacity_p"  # capacity_p<P>_r0

Measure = Callable[[SweepPlan, Cell], Iterable[Mapping[str, Any]]]  # a cell measured -> its bursts.csv rows


def load_patterns(workload: Workload) -> list[Pattern]:
    """The workload's patterns (the victim's, then the neighbours') that wait for the capacity alone."""
    found = [parse_pattern(t) for t in dict.fromkeys((workload.pattern, workload.neighbour_pattern))]
    return [p for p in found if p.needs_capacity]


def needs_capacity(workload: Workload) -> bool:
    return bool(load_patterns(workload))


def capacity_cell(plan: SweepPlan) -> Cell:
    """The exclusive cell that measures the capacity alone, at the sweep's first size (a warm-up row)."""
    p = plan.particles[0]
    return Cell(parse_mode(BASELINE), p, 0, id=f"{CELL_PREFIX}{p}_r0")


def capacity_plan(plan: SweepPlan) -> SweepPlan:
    """``plan`` running one replica that serves the load pattern's requests back to back (all arrive at once)."""
    w = plan.config.workload
    size = int(load_patterns(w)[0].units or 1)
    pattern = f"serve:rate={format_number(MAX_RATE_PER_S)},size={size}"
    full = dataclasses.replace(w, pattern=pattern, neighbours=None, bursts=max(w.bursts or 0, MIN_REQUESTS))
    config = dataclasses.replace(plan.config, workload=full)
    return plan_mode(dataclasses.replace(plan, config=config), parse_mode(BASELINE))


def units_per_s(bursts: Iterable[Mapping[str, Any]]) -> tuple[float, int, float]:
    """(units per second, requests, window s) of the victim's bursts: units over first start to last end."""
    rows = [b for b in bursts if int(b.get("replica") or 0) == 0]
    if not rows:
        return math.nan, 0, math.nan
    span = max(float(b["end"]) for b in rows) - min(float(b["start"]) for b in rows)
    units = sum(int(b.get("units") or 0) for b in rows)
    return (units / span if span > 0 else math.nan), len(rows), span


def resolved_workload(workload: Workload, capacity: float) -> Workload:
    """``workload`` with every ``serve:load=F`` pattern resolved at ``capacity`` units/s."""
    victim = resolve_load(parse_pattern(workload.pattern), capacity).label
    neighbours = (
        None if workload.neighbours is None else resolve_load(parse_pattern(workload.neighbours), capacity).label
    )
    return dataclasses.replace(workload, pattern=victim, neighbours=neighbours)


def resolved_config(config: SweepConfig, capacity: float) -> SweepConfig:
    return dataclasses.replace(config, workload=resolved_workload(config.workload, capacity))


def folder_capacity(out: Path, device_uuid: str | None) -> tuple[float, int, float] | None:
    """The capacity a folder's capacity cell measured (:func:`units_per_s`), None when it has none; a
    UserError when it was measured on another physical GPU than ``device_uuid``."""
    if not (Path(out) / RESULTS_CSV).exists():
        return None
    bursts = load_bursts(out)
    if bursts.empty:
        return None
    mine = bursts[bursts["cell_id"].astype(str).str.startswith(CELL_PREFIX)]
    if mine.empty:
        return None
    last = sorted(mine["sweep_id"].astype(str).unique())[-1]
    mine = mine[mine["sweep_id"].astype(str) == last]
    rows = load_results(out)
    cell = rows[rows["cell_id"].astype(str) == str(mine["cell_id"].iloc[0])]
    before = {
        str(u) for col in ("parent_uuid", "device_uuid") if col in cell for u in cell[col] if isinstance(u, str) and u
    }
    if device_uuid and before and device_uuid not in before:
        raise UserError(
            f"--resume: {out} measured its capacity alone on {', '.join(sorted(before))}, this run's GPU is "
            f"{device_uuid}: serve:load=F is relative to one GPU; give another --out"
        )
    found = units_per_s(mine.to_dict("records"))
    return found if math.isfinite(found[0]) else None


def resume_config(config: SweepConfig, out: Path, device_uuid: str | None) -> SweepConfig:
    """A resumed folder's config with its load patterns resolved at the folder's capacity (its identity is
    the resolved one); ``config`` as it is otherwise."""
    if not config.resume or not needs_capacity(config.workload):
        return config
    found = folder_capacity(out, device_uuid)
    return config if found is None else resolved_config(config, found[0])


def resolve_sweep_load(
    plan: SweepPlan, out: Path, notes: list[str], measure: Measure
) -> tuple[SweepPlan, dict[str, Any]]:
    """``plan`` with its load patterns resolved (the capacity measured by ``measure``, or a resumed
    folder's), the notes added; and what ``sweep.json`` records (:func:`load_record`). ``plan`` and {}
    when no pattern needs it."""
    w = plan.config.workload
    if not needs_capacity(w):
        return plan, {}
    found = folder_capacity(out, plan.device.uuid) if plan.config.resume else None
    how = "reused from the resumed folder's capacity cell"
    if found is None:
        cplan = capacity_plan(plan)
        found = units_per_s(measure(cplan, capacity_cell(plan)))
        how = f"measured by cell {capacity_cell(plan).id}, one replica alone ({cplan.config.workload.pattern})"
    capacity, requests, span = found
    if not math.isfinite(capacity):
        raise UserError(f"the capacity cell {capacity_cell(plan).id} served no request: see its folder under cells/")
    resolved = dataclasses.replace(plan, config=resolved_config(plan.config, capacity))
    rw = resolved.config.workload
    notes.append(
        f"capacity alone: {capacity:.4g} units/s ({requests} requests in {span:.3g} s; {how}); "
        f"{w.pattern} -> {rw.pattern}"
        + (f", neighbours {w.neighbour_pattern} -> {rw.neighbour_pattern}" if w.neighbours else "")
    )
    if len(plan.particles) > 1:
        notes.append(
            f"capacity alone: measured at the first size {plan.particles[0]} only; the other sizes run at the same "
            "rate (their load differs): give one size (--particles/--work) for a load relative to capacity"
        )
    return resolved, load_record(w, rw, capacity, requests, span)


def load_record(given: Workload, resolved: Workload, capacity: float, requests: int, span: float) -> dict[str, Any]:
    """``sweep.json``'s keys of a resolved load: the capacity alone and the patterns, given and resolved."""
    return {
        "capacity_units_per_s": capacity,
        "capacity_requests": requests,
        "capacity_window_s": span,
        "load_pattern": given.pattern,
        "resolved_pattern": resolved.pattern,
        "load_neighbours": given.neighbour_pattern,
        "resolved_neighbours": resolved.neighbour_pattern,
    }
