"""Figures of the latency of bursts and requests (matplotlib, Agg; PNG and SVG each, as ``report.plots``):

* ``latency_by_mode``: the distribution (empirical CDF) of the measured replica's burst or request
  latency per mode, one panel per pattern (and neighbour pattern), its p95 marked on each curve;
* ``users_per_gpu``: the worst user's p95 slowdown against the same pattern alone (every user counted; its
  distribution-free interval as bars, the marker its verdict) against the number of users N, one line per
  mode family, the target as a dashed line and, per family, the users per GPU at the target as the
  verdicts decide them (``analysis.latency.users_at_target``) in the legend. One panel per pattern.
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
from sharebench.analysis.latency import DEFAULT_SLO, UsersAtTarget, burst_frame, users_at_target
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


MARKERS = {"within": "o", "above": "s", "undecided": "x"}


def plot_users_per_gpu(table: pd.DataFrame, out_dir: Path, slo: float = DEFAULT_SLO) -> list[Path]:
    """``users_per_gpu``: the worst user's p95 slowdown (every user counted, its interval as bars; an end with
    no bound drawn to the panel's edge) against N per mode family, the marker the verdict (o within, s above,
    x undecided; hollow: flagged below 1, left out), the target and the users at it (by the verdicts) in the
    legend; nothing (``[]``) when no sharing cell of one pattern alone was measured."""
    if table is None or table.empty:
        return []
    answers = {(u.pattern, u.family): u for u in users_at_target(table, slo)}
    patterns = sorted({p for p, f in answers if f})
    if not patterns:
        return []
    fig, axes = plt.subplots(1, len(patterns), figsize=(6.5 * len(patterns), 4.6), squeeze=False)
    for ax, pattern in zip(axes[0], patterns):
        families = [answers[(p, f)] for p, f in answers if p == pattern and f]
        ns: set[int] = {1}
        top = max(
            [slo * 1.5] + [v for u in families for p in u.points for v in (p.worst, p.worst_hi) if np.isfinite(v)]
        )
        for k, u in enumerate(families):
            users_panel(ax, u, k, len(families), top)
            ns.update(p.n for p in u.points)
        ax.axhline(slo, color="0.3", ls="--", lw=1, label=f"target {slo:g}x")
        ax.set_xticks(sorted(ns))  # measured N only: nothing between them was measured
        ax.set(xlabel="users per GPU (N)", ylabel="worst user's p95 slowdown against alone", title=pattern)
        ax.set_ylim(0.9, top * 1.1)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
        ax.grid(True, alpha=0.3)
    return save_figure(fig, out_dir, USERS_PLOT)


def users_panel(ax: Any, u: UsersAtTarget, k: int, count: int, top: float) -> None:
    """One family's points on a panel: N = 1 (alone, 1 by definition) joined to each N measured."""
    color = f"C{k % 10}"
    shift = 0.04 * (k - (count - 1) / 2)
    points = sorted(u.points, key=lambda p: p.n)
    n = [1.0] + [p.n + shift for p in points]
    y = [1.0] + [p.worst for p in points]
    ax.plot(n, y, color=color, lw=1, label=f"{u.family}: {u.answer} at the target")
    for p, x in zip(points, n[1:]):
        if not np.isfinite(p.worst):
            continue
        lo = p.worst_lo if np.isfinite(p.worst_lo) else 0.9  # no bound: the bar reaches the panel's edge
        hi = p.worst_hi if np.isfinite(p.worst_hi) else top * 1.1
        ax.errorbar([x], [p.worst], yerr=[[max(p.worst - lo, 0)], [max(hi - p.worst, 0)]], color=color, capsize=3)
        face = "none" if p.flag else color
        ax.plot([x], [p.worst], MARKERS.get(p.verdict, "x"), color=color, mfc=face, ms=6)


def make_latency_plots(
    bursts: pd.DataFrame | Iterable[Mapping[str, Any]], table: pd.DataFrame, out_dir: Path, slo: float = DEFAULT_SLO
) -> list[Path]:
    """Both figures (those that have data) in ``out_dir``; their paths, PNG before SVG."""
    return plot_latency_distributions(bursts, out_dir) + plot_users_per_gpu(table, out_dir, slo)
