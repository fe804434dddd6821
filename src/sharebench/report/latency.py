"""Figures of the latency of bursts and requests (matplotlib, Agg; PNG and SVG each, as ``report.plots``):

* ``latency_by_mode``: the distribution (empirical CDF) of the measured replica's burst or request
  latency per mode, one panel per pattern (and neighbour pattern), its p95 marked on each curve;
* ``users_per_gpu``: the p95 slowdown against the same pattern alone (95% interval as bars) against the
  number of users N, one line per mode family, the target as a dashed line and, per family, the users
  per GPU at the target (``analysis.latency.users_at_target``) in the legend. One panel per pattern.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")  # before pyplot: figures are files, never windows
import matplotlib.pyplot as plt

from sharebench.analysis.kinds import baseline_mask
from sharebench.analysis.latency import DEFAULT_SLO, burst_frame, mode_family, users_at_target
from sharebench.modes import mode_sort_key
from sharebench.report.plots import save_figure

LATENCY_PLOT = "latency_by_mode"
USERS_PLOT = "users_per_gpu"


def panel_title(pattern: str, beside: str) -> str:
    return pattern if not beside or beside == pattern else f"{pattern} beside {beside}"


def plot_latency_distributions(bursts: pd.DataFrame | Iterable[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """``latency_by_mode``: the victim's latency ECDF per mode, a panel per (pattern, neighbour pattern);
    nothing (``[]``) without bursts."""
    df = burst_frame(bursts)
    df = df[df["role"] == "victim"]
    if df.empty:
        return []
    df = df.assign(beside=np.where(df["beside"] == df["pattern"], "", df["beside"]))  # users of one pattern
    shared = df[~baseline_mask(df["mode"])]
    panels = sorted(set(zip(shared["pattern"], shared["beside"]))) or sorted(set(zip(df["pattern"], df["beside"])))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.6), squeeze=False)
    for ax, (pattern, beside) in zip(axes[0], panels):
        # the pattern alone (exclusive) is the reference in every panel of it
        sel = df[(df["pattern"] == pattern) & ((df["beside"] == beside) | baseline_mask(df["mode"]))]
        for k, mode in enumerate(sorted(set(sel["mode"]), key=mode_sort_key)):
            ms = np.sort(sel.loc[sel["mode"] == mode, "latency_s"].to_numpy(float)) * 1e3
            if not ms.size:
                continue
            ecdf = np.arange(1, ms.size + 1) / ms.size
            color = f"C{k % 10}"
            ax.step(ms, ecdf, where="post", color=color, label=f"{mode} (p95 {np.percentile(ms, 95):.3g} ms)")
            ax.plot([np.percentile(ms, 95)], [0.95], "o", color=color, ms=4)
        ax.set_xscale("log")
        ax.axhline(0.95, color="0.6", lw=0.8, ls=":")
        ax.set(xlabel="latency (ms, log scale)", ylabel="fraction of bursts", title=panel_title(pattern, beside))
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(True, which="both", alpha=0.3)
    return save_figure(fig, out_dir, LATENCY_PLOT)


def plot_users_per_gpu(table: pd.DataFrame, out_dir: Path, slo: float = DEFAULT_SLO) -> list[Path]:
    """``users_per_gpu``: p95 slowdown against N per mode family, the target and the users at it;
    nothing (``[]``) when no sharing cell of one pattern alone was measured."""
    if table is None or table.empty:
        return []
    rows = table[
        (table["role"] == "victim")
        & ~baseline_mask(table["mode"])
        & ((table["beside"].fillna("") == "") | (table["beside"] == table["pattern"]))
    ]
    if rows.empty:
        return []
    answers = {(u.pattern, u.family): u for u in users_at_target(table, slo)}
    patterns = sorted(set(rows["pattern"]))
    fig, axes = plt.subplots(1, len(patterns), figsize=(6.5 * len(patterns), 4.6), squeeze=False)
    for ax, pattern in zip(axes[0], patterns):
        sel = rows[rows["pattern"] == pattern]
        families = sorted({mode_family(m) for m in sel["mode"]}, key=mode_sort_key)
        ns: set[int] = {1}
        for k, family in enumerate(families):
            fam = sel[[mode_family(m) == family for m in sel["mode"]]].sort_values("replicas")
            n = np.concatenate([[1], fam["replicas"].to_numpy(float)])  # N = 1: alone, slowdown 1 by definition
            y = np.concatenate([[1.0], fam["slowdown_p95"].to_numpy(float)])
            lo = np.concatenate([[1.0], fam["slowdown_p95_lo"].to_numpy(float)])
            hi = np.concatenate([[1.0], fam["slowdown_p95_hi"].to_numpy(float)])
            lo, hi = np.where(np.isfinite(lo), lo, y), np.where(np.isfinite(hi), hi, y)
            users = answers.get((pattern, family))
            at = "none" if users is None or users.users is None else str(users.users)
            ax.errorbar(
                n + 0.04 * (k - (len(families) - 1) / 2),
                y,
                yerr=np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)]),
                marker="o",
                capsize=3,
                color=f"C{k % 10}",
                label=f"{family}: {at} users at {slo:g}x",
            )
            ns.update(int(v) for v in n)
        ax.axhline(slo, color="0.3", ls="--", lw=1, label=f"target {slo:g}x")
        ax.set_xticks(sorted(ns))  # measured N only: nothing between them was measured
        ax.set(xlabel="users per GPU (N)", ylabel="p95 slowdown against alone", title=pattern)
        ax.set_ylim(bottom=0.9)
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(True, alpha=0.3)
    return save_figure(fig, out_dir, USERS_PLOT)


def make_latency_plots(
    bursts: pd.DataFrame | Iterable[Mapping[str, Any]], table: pd.DataFrame, out_dir: Path, slo: float = DEFAULT_SLO
) -> list[Path]:
    """Both figures (those that have data) in ``out_dir``; their paths, PNG before SVG."""
    return plot_latency_distributions(bursts, out_dir) + plot_users_per_gpu(table, out_dir, slo)
