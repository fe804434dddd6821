"""The tables as the study prints them: text cells, two-decimal percentages, CIs in brackets.

The formatters are public: the report and the KFP metrics print numbers with them, so that one
number reads the same everywhere. A value not measured prints as ``missing`` ("" in the tables).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from sharebench.analysis.tables import WORK_KEYS, Tables
from sharebench.modes import mode_sort_key
from sharebench.parse import number_or_nan


def fmt_pct(v: Any, missing: str = "") -> str:
    """A percentage with two decimals (the study's precision)."""
    f = number_or_nan(v)
    return missing if not math.isfinite(f) else f"{f:.2f}"


def fmt_sec(v: Any, missing: str = "") -> str:
    """Seconds: three decimals below 100 s, one above."""
    f = number_or_nan(v)
    if not math.isfinite(f):
        return missing
    return f"{f:.3f}" if abs(f) < 100 else f"{f:.1f}"


def fmt_num(v: Any, missing: str = "") -> str:
    """A ratio or a rate: ``1.23e+10`` for large or tiny values, ``1,234.57`` otherwise."""
    f = number_or_nan(v)
    if not math.isfinite(f):
        return missing
    return f"{f:.3g}" if abs(f) >= 1e5 or abs(f) < 1e-2 else f"{f:,.2f}"


def fmt_int(v: Any, missing: str = "") -> str:
    """A count with thousands separators."""
    f = number_or_nan(v)
    return missing if not math.isfinite(f) else f"{int(f):,}"


def fmt_spec(v: Any, spec: str, missing: str = "—") -> str:
    """A number in a format spec of its own (``.1f``, ``.3g``)."""
    f = number_or_nan(v)
    return missing if not math.isfinite(f) else format(f, spec)


def fmt_particles(v: Any) -> str:
    """A particle count, short: ``5M``, ``500k``, ``800``."""
    f = number_or_nan(v)
    if not math.isfinite(f):
        return "?"
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if f >= div:
            return f"{f / div:g}{suffix}"
    return f"{f:g}"


def known_interval(lo: Any, hi: Any) -> bool:
    """Whether ``[lo, hi]`` is an interval to print: both ends finite and ``lo <= hi`` (an inverted one,
    which no statistic here produces, is never printed as if it were an interval)."""
    a, b = number_or_nan(lo), number_or_nan(hi)
    return math.isfinite(a) and math.isfinite(b) and a <= b


def fmt_ci(lo: Any, hi: Any, fmt: Callable[[Any], str]) -> str:
    """A confidence interval ``[lo, hi]`` in the value's own format; "" without one."""
    if not known_interval(lo, hi):
        return ""
    return f"[{fmt(number_or_nan(lo))}, {fmt(number_or_nan(hi))}]"


def fmt_times(v: float) -> str:
    """A ratio as a factor: ``1.25×``; ``?`` when not measured."""
    return f"{v:.2f}×" if math.isfinite(v) else "?"


def fmt_gain_pct(v: float) -> str:
    """A ratio against 1 as a signed change: 1.002 -> ``+0.2%``, 0.74 -> ``-26.0%``; ``?`` when not measured."""
    return f"{(v - 1) * 100:+.1f}%" if math.isfinite(v) else "?"


def fmt_interval(lo: float, hi: float) -> str:
    """A ratio's 95% interval after its value: `` [0.98, 1.10]``, or `` (no interval)``."""
    return f" [{lo:.2f}, {hi:.2f}]" if known_interval(lo, hi) else " (no interval)"


def significant(lo: Any, hi: Any) -> str:
    """'yes' when the 95% CI excludes 0 (the loss is real at that level), 'no' when it holds 0, '' without a CI."""
    if not known_interval(lo, hi):
        return ""
    lo, hi = number_or_nan(lo), number_or_nan(hi)
    return "yes" if lo > 0 or hi < 0 else "no"


def work_label(r: Any) -> str:
    """What work a row measured, when a table mixes several: ``simpletrack on cuda (gpu), generated, 10 turns``."""
    return f"{r.engine} on {r.backend} ({r.device_class}), {r.lattice}, {fmt_int(r.turns)} turns"


# ------------------------------------------------------------------ one row formatter per table


def shared_display(r: Any) -> dict[str, str]:
    return {
        "particles": fmt_int(r.particles),
        "mode": r["mode"],
        "N": fmt_int(r.N),
        "T_1 [s]": fmt_sec(r.T1_s),
        "T_1 95% CI": fmt_ci(r.T1_ci_low, r.T1_ci_high, fmt_sec),
        "N·T_1 [s]": fmt_sec(r.NT1_s),
        "T_N [s]": fmt_sec(r.TN_s),
        "T_N 95% CI": fmt_ci(r.TN_ci_low, r.TN_ci_high, fmt_sec),
        "loss %": fmt_pct(r.loss_pct),
        "loss 95% CI": fmt_ci(r.loss_ci_low, r.loss_ci_high, fmt_pct),
        "≠ 0?": significant(r.loss_ci_low, r.loss_ci_high),
        "CV T_N %": fmt_pct(r.cv_TN_pct),
        "CV T_1 %": fmt_pct(r.cv_T1_pct),
        "fairness": fmt_num(r.fairness),
        "repeats": fmt_int(r.repeats),
    }


def mig_display(r: Any) -> dict[str, str]:
    return {
        "particles": fmt_int(r.particles),
        "full GPU [s]": fmt_sec(r.full_s),
        "full 95% CI": fmt_ci(r.full_ci_low, r.full_ci_high, fmt_sec),
        "MIG layout": f"{r.layout} ({r.mig_profile} x{fmt_int(r.instances)})",
        "T_mig [s]": fmt_sec(r.mig_s),
        "T_mig 95% CI": fmt_ci(r.mig_ci_low, r.mig_ci_high, fmt_sec),
        "loss %": fmt_pct(r.loss_pct),
        "loss 95% CI": fmt_ci(r.loss_ci_low, r.loss_ci_high, fmt_pct),
        "≠ 0?": significant(r.loss_ci_low, r.loss_ci_high),
        "CV T_mig %": fmt_pct(r.cv_mig_pct),
        "repeats": fmt_int(r.repeats),
    }


def partition_display(r: Any) -> dict[str, str]:
    return {
        "particles": fmt_int(r.particles),
        "mode": r["mode"],
        "slice / full": f"{fmt_int(r.slice_units)} / {fmt_int(r.full_units)} {r.unit}",
        "T_full [s]": fmt_sec(r.full_s),
        "ideal [s]": fmt_sec(r.ideal_s),
        "T_slice [s]": fmt_sec(r.slice_s),
        "T_slice 95% CI": fmt_ci(r.slice_ci_low, r.slice_ci_high, fmt_sec),
        "vs ideal %": fmt_pct(r.excess_pct),
        "95% CI": fmt_ci(r.excess_ci_low, r.excess_ci_high, fmt_pct),
        "efficiency %": fmt_pct(r.efficiency_pct),
        "repeats": fmt_int(r.repeats),
    }


def emulated_display(r: Any) -> dict[str, str]:
    """sharebench.analysis.partitions.emulated_table: labelled as the emulation it is."""
    return {
        "particles": fmt_int(r.particles),
        "layout (emulated)": r["mode"],
        "profile": f"{r.mig_profile} (emulated)",
        "instances": fmt_int(r.instances),
        "SMs / full": f"{fmt_int(r.sms)} / {fmt_int(r.full_sms)}",
        "T_full [s]": fmt_sec(r.full_s),
        "ideal [s]": fmt_sec(r.ideal_s),
        "T_emulated [s]": fmt_sec(r.emulated_s),
        "T_emulated 95% CI": fmt_ci(r.emulated_ci_low, r.emulated_ci_high, fmt_sec),
        "vs full GPU %": fmt_pct(r.vs_full_pct),
        "vs ideal %": fmt_pct(r.excess_pct),
        "95% CI": fmt_ci(r.excess_ci_low, r.excess_ci_high, fmt_pct),
        "efficiency %": fmt_pct(r.efficiency_pct),
        "real MIG 7g loss predicted %": f"{fmt_pct(r.mig_7g_loss_pred_pct)} ({fmt_int(r.mig_7g_sms)} SMs in 7g)",
        "repeats": fmt_int(r.repeats),
    }


def throughput_display(r: Any) -> dict[str, str]:
    return {
        "particles": fmt_int(r.particles),
        "mode": r["mode"],
        "throughput [particle-turns/s]": fmt_num(r.throughput_pt_per_s),
        "95% CI": fmt_ci(r.throughput_ci_low, r.throughput_ci_high, fmt_num),
        "gain vs exclusive": fmt_num(r.gain),
        "gain 95% CI": fmt_ci(r.gain_ci_low, r.gain_ci_high, fmt_num),
        "fairness": fmt_num(r.fairness),
        "repeats": fmt_int(r.repeats),
    }


def flags_display(r: Any) -> dict[str, str]:
    return {
        "mode": r["mode"],
        "particles": fmt_int(r.particles),
        "cell": r.cell_id,
        "flag": r.flag,
        "excluded": "yes" if r.excluded else "no",
    }


def cells_display(r: Any) -> dict[str, str]:
    # by key: "repeat" and "flags" are also attributes of a pandas row
    repeat = f"{int(r['repeat'])}" if pd.notna(r["repeat"]) else ""
    return {
        "cell": r["cell_id"],
        "mode": r["mode"],
        "particles": fmt_int(r["particles"]),
        "repeat": repeat + (" (warm-up)" if r["warmup"] else ""),
        "span [s]": fmt_sec(r["span_s"]),
        "overlap %": fmt_pct(r["overlap_pct"]),
        "fairness": fmt_num(r["fairness"]),
        "device(s)": r["devices"],
        "excluded": "yes" if r["excluded"] else "no",
        "flags": r["flags"],
    }


ROW_DISPLAY: dict[str, Callable[[Any], dict[str, str]]] = {
    "timeslice": shared_display,
    "mps": shared_display,
    "mig": mig_display,
    "partition": partition_display,
    "mig_emulated": emulated_display,
    "throughput": throughput_display,
    "flags": flags_display,
    "cells": cells_display,
}


def display_table(name: str, t: pd.DataFrame) -> pd.DataFrame:
    """The table ``name`` (a key of :data:`ROW_DISPLAY`) as the study prints it.

    When the table mixes work of different kinds (engine, backend, device class, lattice, turns),
    a first column says which each row is.
    """
    out = pd.DataFrame([ROW_DISPLAY[name](r) for _, r in t.iterrows()])
    if name not in ("flags", "cells") and not out.empty and all(k in t.columns for k in WORK_KEYS):
        kinds = t.apply(work_label, axis=1)
        if kinds.nunique() > 1:
            out.insert(0, "work", kinds.to_numpy())
    return out


def summary_table(tables: Tables) -> pd.DataFrame:
    """One line per particle count, one column per mode: loss % with its 95% CI (partition modes: % over the
    ideal), the study's "loss % per N" at a glance."""
    cells: dict[tuple, dict[str, str]] = {}
    modes: list[str] = []
    sources = [
        (tables.timeslice, "loss_pct", "loss_ci_low", "loss_ci_high", ""),
        (tables.mps, "loss_pct", "loss_ci_low", "loss_ci_high", ""),
        (tables.mig, "loss_pct", "loss_ci_low", "loss_ci_high", ""),
        (tables.partition, "excess_pct", "excess_ci_low", "excess_ci_high", " vs ideal"),
    ]
    for t, col, lo, hi, suffix in sources:
        for _, r in t.iterrows():
            label = f"{r['mode']}{suffix}"
            if label not in modes:
                modes.append(label)
            key = (r.engine, r.backend, r.device_class, r.lattice, r.turns, r.particles)
            ci = fmt_ci(r[lo], r[hi], fmt_pct)
            cells.setdefault(key, {})[label] = (fmt_pct(r[col]) + (f" {ci}" if ci else "")) or "-"
    modes.sort(key=lambda m: mode_sort_key(m.split(" ")[0]))
    rows = []
    kinds = {k[:5] for k in cells}
    for key in sorted(cells, key=lambda k: (str(k[:5]), k[5])):
        row = {"particles": fmt_int(key[5])}
        if len(kinds) > 1:
            row = {"work": f"{key[0]} on {key[1]} ({key[2]}), {key[3]}, {fmt_int(key[4])} turns", **row}
        row.update({m: cells[key].get(m, "") for m in modes})
        rows.append(row)
    return pd.DataFrame(rows)
