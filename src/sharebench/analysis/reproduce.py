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
  C × ``cell_s``.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sharebench.kernel import ENGINES

EXEC = "exec"
DEFAULT_REPEATS = 3  # what a suggested command asks for
DEFAULT_WARMUPS = 1  # and the warm-up repeat `sharebench run` adds by default


@dataclass(frozen=True)
class Reproduce:
    """The options that make a suggested command measure this folder's work, its unit and pace."""

    options: tuple[str, ...] = ()
    unit: str = "particles"
    cell_s: float = math.nan

    def predicted(self, modes: int, repeats: int = DEFAULT_REPEATS) -> str:
        """`` (about 4 min at this folder's 12 s per cell)`` for ``modes`` modes of ``repeats`` repeats; ''
        without a pace."""
        if not (math.isfinite(self.cell_s) and self.cell_s > 0):
            return ""
        total = modes * (repeats + DEFAULT_WARMUPS) * self.cell_s
        return f" (about {duration(total)}: {modes * (repeats + DEFAULT_WARMUPS)} cells at this folder's {self.cell_s:.0f} s per cell)"


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


def reproduce_of(sweeps: Sequence[Mapping[str, Any]], rows: pd.DataFrame | None = None) -> Reproduce:
    """The :class:`Reproduce` of a folder: its last sweep's options, unit, and the pace of its rows."""
    if not sweeps:
        return Reproduce(cell_s=pace(rows) if rows is not None else math.nan)
    opts, unit = options_of(sweeps[-1])
    return Reproduce(opts, unit, pace(rows) if rows is not None else math.nan)
