"""What a suggested command must carry to measure more of a folder's own work, and how long it would take.

The Answer's "Measure it:" commands (``analysis.answer.Evidence.command``) measure a pattern or a mode
this folder did not: they must run the folder's workload, not the default tracker. :func:`reproduce_of`
reads the last sweep of ``sweep.json`` (its ``config.workload``, its device and sizes; a folder of an
older release: the config's ``engine``, ``lattice`` and exec run options) into a :class:`Reproduce`:

* ``options``: ``--device``, ``--engine``, a program's ``--exec``/``--exec-timing``/``--exec-name``,
  a tracker's ``--lattice`` and ``--turns``, and the largest size the folder measured (``--particles``,
  or ``--work`` for a program: the size the Answer judges);
* ``unit``: what a size counts: ``particles`` for a tracker, ``work units`` for a program (its
  SHAREBENCH_WORK, in the program's own unit);
* ``cell_s``: this folder's pace, wall seconds per measured cell (from the first replica's start to
  the last one's end of each sweep, over its cells): a suggested command of C cells takes about
  C × ``cell_s``;
* ``unit_s`` and ``gap_s``: one unit of work alone (the median burst over its units of the victims of
  the exclusive cells; a tracker's batch folder: its exclusive time per turn) and the wall time between
  cells: a suggested patterned command is then predicted as ``--dry-run`` predicts it, cell by cell
  from its bursts, think times, neighbours and queueing (``analysis.cost``), not from the pace of cells
  of another pattern.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sharebench.analysis.cost import patterned_cell
from sharebench.errors import UserError
from sharebench.kernel import ENGINES
from sharebench.modes import BASELINE, parse_mode
from sharebench.patterns import parse_pattern
from sharebench.workloads import Workload

EXEC = "exec"
DEFAULT_WARMUPS = 1  # and the warm-up repeat `sharebench run` adds by default
DEFAULT_SUGGEST_S = 600.0  # a suggested command is sized to finish within this (analysis.suggest; --suggest-minutes)


@dataclass(frozen=True)
class Reproduce:
    """The options that make a suggested command measure this folder's work, its unit and pace."""

    options: tuple[str, ...] = ()
    unit: str = "particles"
    cell_s: float = math.nan
    unit_s: float = math.nan
    gap_s: float = math.nan
    suggest_s: float = DEFAULT_SUGGEST_S  # a suggested command is sized to finish within this (analysis.suggest)


def unit_text(seconds: float) -> str:
    """``10 ms`` below a second, ``1.43 s`` from one."""
    return f"{1e3 * seconds:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def pattern_seconds(modes: Sequence[str], pattern: str, neighbours: str, unit_s: float) -> float:
    """The seconds of one cell of each of ``modes`` under ``pattern`` beside ``neighbours`` (the sample rule's
    expected bursts; a cell of N replicas: its users beside N - 1 neighbours, ``analysis.cost.patterned_cell``
    at a mode factor of 1), summed; NaN for batch (a program's whole run is not a number of units) or without
    ``unit_s``. A label that is not a mode or pattern: NaN (the command itself says what is wrong)."""
    if not (math.isfinite(unit_s) and unit_s > 0):
        return math.nan
    try:
        victim, neighbour = parse_pattern(pattern), parse_pattern(neighbours or pattern)
        replicas = [parse_mode(m).replicas or 1 for m in modes]
    except UserError:
        return math.nan
    if victim.saturated:
        return math.nan
    workload = Workload(pattern=victim.label, neighbours=neighbour.label)
    return sum(patterned_cell(workload, n, unit_s).cell_s for n in replicas)


def work_unit(engine: object) -> str:
    """What a size of this workload (the ``engine`` column: a tracker, or a program's name) counts."""
    return "particles" if str(engine) in ENGINES else "work units"


def work_text(engine: object, size: float) -> str:
    """``1,700 particles`` for a tracker, ``200 work units`` for a program."""
    return f"{float(size):,.0f} {work_unit(engine)}"


def duration(seconds: float) -> str:
    """``45 s``, ``4 min``, ``1.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def workload_of(sweep: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep's workload as a dict (``config.workload``; an older folder's config fields)."""
    config = dict(sweep.get("config") or {})
    wl = config.get("workload")
    if isinstance(wl, Mapping):
        return {k: v for k, v in wl.items() if v not in ("", None)}
    run = dict(config.get("run_options") or {})
    out = {"engine": config.get("engine") or "simpletrack", "lattice": config.get("lattice")}
    out.update(command=run.get("exec_command"), timing=run.get("exec_timing"), name=run.get("exec_name"))
    return {k: v for k, v in out.items() if v not in ("", None)}


def options_of(sweep: Mapping[str, Any]) -> tuple[tuple[str, ...], str]:
    """The options of one sweep's workload, device and largest size, and the unit of its sizes."""
    wl = workload_of(sweep)
    device = (sweep.get("device") or {}).get("spec") or (sweep.get("config") or {}).get("device")
    opts: list[str] = ["--device", str(device)] if device else []
    engine = str(wl.get("engine") or "simpletrack")
    sizes = [int(p) for p in (sweep.get("particles") or []) if p]
    if engine == EXEC:
        opts += ["--engine", EXEC, "--exec", shlex.quote(str(wl.get("command", "")))]
        if wl.get("timing") and wl["timing"] != "protocol":
            opts += ["--exec-timing", str(wl["timing"])]
        if wl.get("name"):
            opts += ["--exec-name", shlex.quote(str(wl["name"]))]
        return (*opts, *(["--work", str(max(sizes))] if sizes else [])), work_unit(EXEC)
    if engine != "simpletrack":
        opts += ["--engine", engine]
    if wl.get("lattice"):
        opts += ["--lattice", shlex.quote(str(wl["lattice"]))]
    if sweep.get("turns"):
        opts += ["--turns", str(int(sweep["turns"]))]
    return (*opts, *(["--particles", str(max(sizes))] if sizes else [])), work_unit(engine)


def pace(rows: pd.DataFrame) -> float:
    """Wall seconds per measured cell: each sweep's span (first start to last end of its replicas) over
    its cells, summed over sweeps; NaN without timestamps."""
    need = {"sweep_id", "cell_id", "track_start", "track_end"}
    if rows.empty or not need <= set(rows.columns):
        return math.nan
    total, cells = 0.0, 0
    for _, g in rows.groupby("sweep_id"):
        start = pd.to_numeric(g["track_start"], errors="coerce")
        end = pd.to_numeric(g["track_end"], errors="coerce")
        if start.notna().any() and end.notna().any():
            total += float(end.max() - start.min())
            cells += int(g["cell_id"].nunique())
    return total / cells if cells and total > 0 else math.nan


def reproduce_of(
    sweeps: Sequence[Mapping[str, Any]],
    rows: pd.DataFrame | None = None,
    bursts: pd.DataFrame | None = None,
    suggest_s: float = DEFAULT_SUGGEST_S,
) -> Reproduce:
    """The :class:`Reproduce` of a folder: its last sweep's options, unit, the pace of its rows, the unit's
    seconds alone (its bursts; else its rows) and the gap between its cells; ``suggest_s``: the time a
    suggested command is sized to (``sharebench report --suggest-minutes``)."""
    paced = pace(rows) if rows is not None else math.nan
    unit_s, gap_s = unit_seconds(rows, bursts), gap_seconds(rows, paced)
    if not sweeps:
        return Reproduce(cell_s=paced, unit_s=unit_s, gap_s=gap_s, suggest_s=suggest_s)
    opts, unit = options_of(sweeps[-1])
    if unit != "particles" and (bursts is None or bursts.empty):
        unit_s = math.nan  # a program's whole run is not its unit of work
    return Reproduce(opts, unit, paced, unit_s, gap_s, suggest_s)


def unit_seconds(rows: pd.DataFrame | None, bursts: pd.DataFrame | None) -> float:
    """One unit of work alone: the median burst over its units of the exclusive cells' victims (measured,
    not warm-up); without bursts, a tracker's exclusive ``track_s`` per turn; NaN when neither is there."""
    if bursts is not None and not bursts.empty and {"mode", "role", "start", "end", "units"} <= set(bursts.columns):
        alone = bursts[(bursts["mode"] == BASELINE) & (bursts["role"] == "victim")]
        if "warmup" in alone.columns:
            alone = alone[~alone["warmup"].astype(str).str.lower().isin(("true", "1"))]
        units = pd.to_numeric(alone["units"], errors="coerce")
        per = (pd.to_numeric(alone["end"], errors="coerce") - pd.to_numeric(alone["start"], errors="coerce")) / units
        per = per[(units > 0) & per.notna()]
        if len(per):
            return float(per.median())
    if rows is None or rows.empty or not {"mode", "status", "track_s", "turns"} <= set(rows.columns):
        return math.nan
    ok = rows[(rows["mode"] == BASELINE) & (rows["status"] == "ok")]
    if "warmup" in ok.columns:
        ok = ok[~ok["warmup"].astype(bool)]
    per_turn = pd.to_numeric(ok["track_s"], errors="coerce") / pd.to_numeric(ok["turns"], errors="coerce")
    return float(per_turn.median()) if per_turn.notna().any() else math.nan


def gap_seconds(rows: pd.DataFrame | None, paced: float) -> float:
    """The wall time between cells: the pace less the mean cell window; NaN without timestamps."""
    if rows is None or not math.isfinite(paced) or not {"cell_id", "track_start", "track_end"} <= set(rows.columns):
        return math.nan
    start = pd.to_numeric(rows["track_start"], errors="coerce").groupby(rows["cell_id"]).min()
    end = pd.to_numeric(rows["track_end"], errors="coerce").groupby(rows["cell_id"]).max()
    windows = (end - start).dropna()
    return max(0.0, paced - float(windows.mean())) if len(windows) else math.nan
