"""Which workload's measured costs cost each class, and the command that measures the site's own.

A class's costs come from **one workload** (a program, or the tracker and its lattice): points are
interpolated within it, never across workloads (:mod:`sharebench.advise.costs`). The workload is

* the class's own, where ``--class NAME=…,results=DIR`` names its results folder: that folder's points
  only (a folder holding no cost of the class's pattern kind is a one-line error);
* else a **borrowed** one, said with why: of the workloads measured for the class's pattern kind, the one
  whose measured load (the victims' busy alone) is nearest the class's (log ratio; ties: the one with
  more sharing counts measured). A borrowed cost holds for another program's kernel mix only as far as
  the two are alike, so every borrowed class gets the ``sharebench run --engine exec …`` command that
  measures the site's own program at the class's pattern and load (:func:`measure_command`), and the
  ``--class`` option that then feeds it in;
* none where no workload measured the kind: the class is kept whole, with the same command.

The command's pattern is the borrowed workload's, set to the class's load through the pattern's own
fields: an open-loop pattern with a load relative to capacity takes the class's mean busy as that load;
a closed-loop one keeps its burst and takes the think time that gives the class's busy with the
borrowed program's burst time (busy = burst time / (burst time + think)).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

from sharebench.advise.costs import SHARED_FAMILIES, Cost, Costs
from sharebench.advise.options import ClassChoice
from sharebench.errors import UserError
from sharebench.gpus import GpuModel
from sharebench.patterns import PatternSpec, format_number, parse_pattern

LOAD_SLACK = 1.1  # a class within 10 % of a workload's measured loads counts as inside them
LIGHTEST = 1e-3  # a class never busy is compared as this busy


@dataclass(frozen=True)
class ClassCost:
    """How one class is costed: its pattern kind, the workload whose points cost it (None: no workload
    measured its kind), its own or borrowed and why, the command that measures its own ('' when own),
    and whether it needs isolation."""

    cls: str
    pattern: PatternSpec
    workload: str | None
    own: bool
    why: str
    command: str = ""
    isolation: bool = False


def under(folder: str, root: Path) -> bool:
    try:
        return Path(folder).resolve().is_relative_to(root.resolve())
    except OSError:
        return False


def candidates(costs: Costs, pattern: PatternSpec, root: Path | None) -> dict[str, list[Cost]]:
    """Workload -> its points of ``pattern``'s kind (only those under ``root`` where given)."""
    out: dict[str, list[Cost]] = defaultdict(list)
    for c in costs.points:
        if c.pattern == pattern.name and (root is None or under(c.folder, root)):
            out[c.workload].append(c)
    return dict(out)


def distance(level: float, pts: list[Cost]) -> float:
    """How far ``level`` lies from the workload's measured loads (0 inside them; else the log ratio)."""
    busy = [c.busy_victim for c in pts if math.isfinite(c.busy_victim)] or [1.0]
    a, b, x = max(min(busy), LIGHTEST), max(max(busy), LIGHTEST), max(level, LIGHTEST)
    if a / LOAD_SLACK <= x <= b * LOAD_SLACK:
        return 0.0
    return abs(math.log(x / (a if x < a else b)))


def load_range(pts: list[Cost]) -> str:
    busy = sorted(c.busy_victim for c in pts if math.isfinite(c.busy_victim))
    if not busy:
        return "its load not measured"
    return f"busy {busy[0]:.2f}" if busy[-1] - busy[0] < 0.005 else f"busy {busy[0]:.2f}-{busy[-1]:.2f}"


def pick(found: dict[str, list[Cost]], level: float) -> str:
    """The workload whose loads are nearest ``level`` (ties: more sharing counts measured, then by name)."""
    return min(found, key=lambda w: (distance(level, found[w]), -len({(c.family, c.n) for c in found[w]}), w))


@dataclass(frozen=True)
class Site:
    """What every class's costing needs: the costs, the pool's GPU model and the target."""

    costs: Costs
    model: GpuModel
    slo: float


def class_cost(site: Site, pattern: PatternSpec, level: float, choice: ClassChoice) -> ClassCost:
    """How the class ``choice.name`` of ``pattern``, at mean busy ``level``, is costed."""
    name = choice.name
    if choice.results is not None:
        mine = candidates(site.costs, pattern, choice.results)
        if not mine:
            raise UserError(
                f"--class {name}=…,results={choice.results}: that folder holds no {pattern.name} cost read for a "
                f"{site.model.key} pool; give the results folder of a `sharebench run --pattern {pattern.name}` of its "
                "workload"
            )
        w = pick(mine, level)
        return ClassCost(name, pattern, w, True, f"its own results ({choice.results}: {w})", "", choice.isolation)
    found = candidates(site.costs, pattern, None)
    if not found:
        command = measure_command(name, pattern.name, site)
        tried = sum(c.pattern == pattern.name for c in site.costs.cells)
        why = (
            f"none of the {tried} measured {pattern.name} cell(s) gives a cost at {site.slo:g}x (see the cells left)"
            if tried
            else f"no workload measured {pattern.name}"
        )
        return ClassCost(name, pattern, None, False, why, command, choice.isolation)
    w = pick(found, level)
    others = sorted(set(found) - {w})
    why = f"borrowed from {w} ({load_range(found[w])}; the class: busy {level:.2f})"
    why += (
        f": of {len(found)} workloads measured for {pattern.name}, the one whose load is nearest the class's "
        f"(the others: {', '.join(f'{o} ({load_range(found[o])})' for o in others)})"
        if others
        else f": the only workload measured for {pattern.name}"
    )
    command = measure_command(name, at_load(found[w], level), site)
    return ClassCost(name, pattern, w, False, why, command, choice.isolation)


def at_load(pts: list[Cost], level: float) -> str:
    """The borrowed workload's pattern (its point of the nearest load) set to the class's ``level``."""
    near = min(pts, key=lambda c: abs(c.busy_victim - level) if math.isfinite(c.busy_victim) else math.inf)
    p = parse_pattern(near.label)
    x = min(max(level, 0.01), 0.95)
    if "load" in p.spec.keys:
        shaped = replace(p, load=float(f"{x:.2g}"), rate_per_s=None)
    elif p.think_s is not None and 0 < near.busy_victim < 1:
        burst_s = p.think_s * near.busy_victim / (1 - near.busy_victim)
        shaped = replace(p, think_s=float(f"{burst_s * (1 - x) / x:.2g}"))
    else:
        shaped = p
    try:
        return parse_pattern(shaped.label).label
    except UserError:
        return p.label


def measure_command(cls: str, pattern: str, site: Site) -> str:
    """The sweep that measures the site's own program at the class's pattern and load on the pool's model,
    and the ``--class`` option that then feeds its results to advise."""
    smallest = min(site.model.profiles, key=lambda p: (p.slices, p.mem_gb))
    shared = [f"{family}:{n}" for family in SHARED_FAMILIES for n in (2, 4, 8)]
    modes = ",".join(["exclusive", *shared, f"mig-emulated:all-{smallest.name}"])
    out = f"results/{site.model.key.lower()}/{cls}-own"
    kind = pattern.partition(":")[0]
    return (
        f"sharebench run --device cuda:0 --engine exec --exec 'YOUR-PROGRAM' --exec-name {cls} --pattern {pattern} "
        f"--modes {modes} --slo {format_number(site.slo)} --out {out} (on a {site.model.key}), then advise with "
        f"--class {cls}={kind},results={out}"
    )
