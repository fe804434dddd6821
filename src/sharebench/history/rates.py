"""What a history row keeps besides the loss: the cell's rate per unit of work, and whether to trust it.

* **rate** (``rate_pt_per_s``): the device's aggregate throughput in particle-turns per second, the
  ``throughput`` table's figure (the cell's particle-turns over its mean span); ``repeat_rates_pt_per_s``
  the same for each measured repeat. A rate per unit of work is what ``history check`` compares when the
  newest run measured another size than the runs before it (a CPU run sized by calibration).
* **trust** (``trust``): the Answer's verdict on the mode as measured (``analysis.answer.trust_of``:
  ``ok``, or its reasons: too few repeats, spread, disturbed or excluded cells).
* **disturbance** (``disturbed``): what disturbed a cell of the mode or of its exclusive baseline at this
  size (the telemetry's reason, ``analysis.disturbance``), "" when nothing did. A disturbed run is kept
  in the store and shown, but is no baseline for later runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from sharebench.analysis import Tables
from sharebench.analysis.answer import trust_of
from sharebench.modes import BASELINE

# the columns a history row gains from here (schema 2; a schema-1 run reads them as empty)
RATE_COLUMNS = ["rate_pt_per_s", "repeat_rates_pt_per_s", "trust", "disturbed"]


def same_work(frame: pd.DataFrame, work: dict[str, Any]) -> pd.DataFrame:
    out = frame
    for k, v in work.items():
        if k in out.columns:
            out = out[out[k] == v]
    return out


def cell_rates(tables: Tables, good: pd.DataFrame, mode: str, work: dict[str, Any]) -> tuple[float, list[float]]:
    """The cell's rate (particle-turns/s per device) and each measured repeat's, from its good cells."""
    thr = same_work(tables.throughput, work) if len(tables.throughput) else tables.throughput
    thr = thr[thr["mode"] == mode] if len(thr) else thr
    rate = float(thr["throughput_pt_per_s"].iloc[0]) if len(thr) else math.nan
    cells = same_work(good, work) if len(good) else good
    cells = cells[cells["mode"] == mode] if len(cells) else cells
    if cells.empty:
        return rate, []
    pt, span = cells["work_particle_turns"].to_numpy(float), cells["span_s"].to_numpy(float)
    return rate, [float(w / s) for w, s in zip(pt, span) if s > 0 and math.isfinite(w / s)]


def cell_trust(tables: Tables, mode: str, work: dict[str, Any], repeats: int) -> tuple[str, str]:
    """(trust, disturbed): the Answer's trust of the mode at this work, and what disturbed it ("" if nothing)."""
    flags = tables.flags
    trust, _ = trust_of(mode, work, repeats, flags)
    if flags.empty:
        return trust, ""
    f = flags[flags["mode"].isin([mode, BASELINE]) & (flags["particles"] == work["particles"])]
    detail = sorted({str(d) for d in f.loc[f["kind"] == "disturbed", "detail"]})
    return trust, "; ".join(detail)


def row_measures(tables: Tables, good: pd.DataFrame, mode: str, work: dict[str, Any], repeats: int) -> dict[str, Any]:
    """The columns :data:`RATE_COLUMNS` of one history row (a mode at one work)."""
    rate, rates = cell_rates(tables, good, mode, work)
    trust, disturbed = cell_trust(tables, mode, work, repeats)
    return {
        "rate_pt_per_s": rate,
        "repeat_rates_pt_per_s": " ".join(f"{x:.6g}" for x in rates),
        "trust": trust,
        "disturbed": disturbed,
    }


def parse_numbers(text: Any) -> np.ndarray:
    """A row's space-separated numbers (``repeat_losses_pct``, ``repeat_rates_pt_per_s``); empty when none."""
    if not isinstance(text, str) or not text.strip():
        return np.array([], dtype=float)
    return np.array([float(x) for x in text.split()], dtype=float)
