"""Figures of a results folder (matplotlib, Agg): PNG and SVG each.

* ``loss_vs_particles``: loss % per sharing mode against the particle count, 95% CIs as bars;
* ``time_vs_particles``: T_1, T_N, T_mig, T_slice against the particle count, per mode;
* ``throughput``: aggregate particle-turns/s per physical device, per mode and particle count;
* ``prediction_vs_measured``: measured loss (95% CI) against the no-interference prediction, and the excess;
* ``energy_per_mpt``: energy per 10⁶ particle-turns per mode and particle count.

With a comparison folder, its lines are overlaid (dashed) on the first two and
the throughput bars are drawn side by side, one panel per folder.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")  # before pyplot: figures are files, never windows
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from sharebench.analysis import Tables, fmt_particles, positive_mean_ci
from sharebench.analysis.kinds import baseline_mask, table_of
from sharebench.analysis.prediction import COMPARED
from sharebench.analysis.tables import ALSO_IN, loss_frames
from sharebench.modes import BASELINE, mode_sort_key

FORMATS = ("png", "svg")
PREDICTION_PLOT = "prediction_vs_measured"
ENERGY_PLOT = "energy_per_mpt"


def save_figure(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    """Write ``fig`` as ``name``.png and ``name``.svg in ``out_dir`` (PNG first) and close it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in FORMATS:
        p = out_dir / f"{name}.{ext}"
        # no dates, fixed ids: rebuilding a report from the same results gives the same files
        meta = {"Date": None} if ext == "svg" else {"Software": None}
        with matplotlib.rc_context({"svg.hashsalt": "sharebench"}):
            fig.savefig(p, dpi=120, bbox_inches="tight", metadata=meta)
        paths.append(p)
    plt.close(fig)
    return paths


def _device_label(tables: Tables) -> str:
    cells = tables.cells
    if cells.empty:
        return ""
    parts = sorted({f"{r.engine}/{r.backend} ({r.device_class})" for r in cells.itertuples()})
    return ", ".join(parts)


def _log_if_wide(ax: Axes, decades: float = 2.0, x_axis: bool = True) -> None:
    """Logarithmic axes when the data spans more than `decades` decades (e.g. two folders compared); the x
    axis only when ``x_axis`` (not a categorical one)."""
    xs, ys = [], []
    for line in ax.get_lines():
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        xs += list(x[np.isfinite(x) & (x > 0)])
        ys += list(y[np.isfinite(y) & (y > 0)])
    if ys and max(ys) / min(ys) > 10**decades:
        ax.set_yscale("log")
    if x_axis and xs and max(xs) / min(xs) > 10**decades:
        ax.set_xscale("log")


def _dodge(x: np.ndarray, k: int, n: int) -> np.ndarray:
    """Shift series k of n a little sideways (0.6% of x each) so that error bars do not hide each other."""
    return x * (1 + 0.006 * (k - (n - 1) / 2))


def _err(lo: np.ndarray, hi: np.ndarray, mid: np.ndarray) -> np.ndarray:
    lo = np.where(np.isfinite(lo), lo, mid)
    hi = np.where(np.isfinite(hi), hi, mid)
    return np.vstack([np.clip(mid - lo, 0, None), np.clip(hi - mid, 0, None)])


Series = tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # name, x, y, CI low, CI high


def _series(name: str, g: pd.DataFrame, col: str, lo: str, hi: str) -> Series:
    g = g.sort_values("particles")
    return (name, g["particles"].to_numpy(float), g[col].to_numpy(float), g[lo].to_numpy(float), g[hi].to_numpy(float))


def _loss_series(tables: Tables) -> list[Series]:
    out = []
    for t in loss_frames(tables):
        if t.empty:
            continue
        for mode, g in _by_mode(t):
            out.append(_series(mode, g, "loss_pct", "loss_ci_low", "loss_ci_high"))
    part = tables.partition
    if not part.empty:
        for mode, g in _by_mode(part):
            if table_of(str(mode).split(" ")[0]) not in ALSO_IN:  # MIG: its loss series above
                out.append(_series(f"{mode} vs ideal", g, "excess_pct", "excess_ci_low", "excess_ci_high"))
    out.sort(key=lambda s: mode_sort_key(s[0]))
    return out


def _by_mode(t: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    """(series name, rows) per mode; per mode and workload when the table holds several workloads."""
    if "engine" not in t.columns or t["engine"].nunique() <= 1:
        yield from t.groupby("mode", sort=False)
        return
    for (mode, engine), g in t.groupby(["mode", "engine"], sort=False):
        yield f"{mode} {engine}", g


class _Colors:
    """One colour per series name, the same in both folders of a comparison."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        return self.names.setdefault(name, f"C{len(self.names) % 10}")


STYLES = (("o", "-", "full"), ("s", "--", "none"))  # marker, line, fill: this folder, comparison
CATEGORY_DODGE = 0.04  # series k of n at (k - (n-1)/2) x this on a categorical size axis


def _draw(
    ax: Axes,
    tables: Tables,
    compare: Tables | None,
    labels: tuple[str, str],
    series_of: Callable[[Tables], list[Series]],
) -> tuple[int, list[float]]:
    """Each folder's series as error-bar lines (the comparison dashed, open markers); returns how many, and
    the particle counts drawn. One count only: a categorical axis (the series side by side at position 0)."""
    drawn = 0
    color = _Colors()
    folders = [(t, style, lab) for t, style, lab in zip((tables, compare), STYLES, labels) if t is not None]
    all_series = [(series_of(t), style, lab) for t, style, lab in folders]
    sizes = sorted({float(v) for series, _, _ in all_series for s in series for v in s[1] if math.isfinite(v)})
    one = len(sizes) == 1
    for series, (marker, line, fill), lab in all_series:
        for k, (name, x, y, lo, hi) in enumerate(series):
            offset = CATEGORY_DODGE * (k - (len(series) - 1) / 2)
            ax.errorbar(
                np.zeros_like(x) + offset if one else _dodge(x, k, len(series)),
                y,
                yerr=_err(lo, hi, y),
                marker=marker,
                linestyle=line,
                fillstyle=fill,
                capsize=3,
                color=color(name),
                label=name + (f" ({lab})" if compare is not None else ""),
            )
            drawn += 1
    return drawn, sizes


def _size_axis(ax: Axes, sizes: list[float]) -> None:
    """The particle-count axis: one count is a category (one tick, its count: no ``994 … 1.006k`` ticks around
    it); several are numbers printed as 500, 2k, 5M (no 1e7 offset to read off the corner)."""
    if len(sizes) == 1:
        ax.set_xscale("linear")
        ax.set_xticks([0.0], [fmt_particles(sizes[0])])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(-0.5, 0.5)
        return
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: fmt_particles(v) if v > 0 else "0"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_loss(
    tables: Tables, out_dir: Path, compare: Tables | None = None, labels: tuple[str, str] = ("this", "compare")
) -> list[Path]:
    return save_figure(loss_figure(tables, compare, labels), out_dir, "loss_vs_particles")


def loss_figure(tables: Tables, compare: Tables | None = None, labels: tuple[str, str] = ("this", "compare")) -> Figure:
    """``loss_vs_particles``: loss % per sharing mode against the particle count, 95% CIs as bars."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    drawn, sizes = _draw(ax, tables, compare, labels, _loss_series)
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set_xlabel("particles per replica")
    ax.set_ylabel("loss [%]  (0 = no cost of sharing)")
    ax.set_title("Cost of sharing against exclusive use (mean, 95% CI)")
    _size_axis(ax, sizes)
    if drawn:
        _legend_outside(ax)
    else:
        ax.text(0.5, 0.5, "no shared-mode cells measured", transform=ax.transAxes, ha="center")
    ax.grid(alpha=0.3)
    _subtitle(fig, tables)
    return fig


def _time_series(tables: Tables) -> list[Series]:
    out = []
    for t in (tables.timeslice, tables.mps):
        if t.empty:
            continue
        for mode, g in _by_mode(t):
            out.append(_series(f"{mode}: T_N", g, "TN_s", "TN_ci_low", "TN_ci_high"))
    part = tables.partition
    if not part.empty:
        for mode, g in _by_mode(part):
            out.append(_series(f"{mode}: T_slice", g, "slice_s", "slice_ci_low", "slice_ci_high"))
    # exclusive T_1 per particle count, from the measured cells
    cells = tables.cells
    if not cells.empty:
        ex = cells[baseline_mask(cells["mode_kind"]) & ~cells["warmup"].astype(bool) & ~cells["excluded"].astype(bool)]
        if not ex.empty:
            rows = [(p, *positive_mean_ci(g["mean_track_s"])) for p, g in ex.groupby("particles")]
            a = np.array(rows, dtype=float)
            out.append((f"{BASELINE}: T_1", a[:, 0], a[:, 1], a[:, 2], a[:, 3]))
    out.sort(key=lambda s: mode_sort_key(s[0].rsplit(":", 1)[0]))
    return out


def plot_time(
    tables: Tables, out_dir: Path, compare: Tables | None = None, labels: tuple[str, str] = ("this", "compare")
) -> list[Path]:
    return save_figure(time_figure(tables, compare, labels), out_dir, "time_vs_particles")


def time_figure(tables: Tables, compare: Tables | None = None, labels: tuple[str, str] = ("this", "compare")) -> Figure:
    """``time_vs_particles``: T_1, T_N, T_slice against the particle count, per mode."""
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    drawn, sizes = _draw(ax, tables, compare, labels, _time_series)
    _log_if_wide(ax, x_axis=len(sizes) > 1)
    ax.set_xlabel("particles per replica")
    ax.set_ylabel("time [s]")
    ax.set_title("Tracking time per mode (T_N: span of the N concurrent replicas)")
    _size_axis(ax, sizes)
    if drawn:
        _legend_outside(ax)
    ax.grid(alpha=0.3)
    _subtitle(fig, tables)
    return fig


def plot_throughput(
    tables: Tables, out_dir: Path, compare: Tables | None = None, labels: tuple[str, str] = ("this", "compare")
) -> list[Path]:
    sets = [(tables, labels[0])] + ([(compare, labels[1])] if compare is not None else [])
    fig, axes = plt.subplots(1, len(sets), figsize=(7.5 * len(sets), 4.8), sharey=True, squeeze=False)
    for ax, (tabs, lab) in zip(axes[0], sets):
        t = tabs.throughput
        if t.empty:
            ax.text(0.5, 0.5, "nothing measured", transform=ax.transAxes, ha="center")
            continue
        modes = sorted(t["mode"].unique(), key=mode_sort_key)
        # one bar per workload and size (a folder may hold several workloads: sharebench.analysis.workloads)
        parts = sorted(set(zip(t["engine"].astype(str), t["particles"])))
        several = len({e for e, _ in parts}) > 1
        width = 0.8 / max(1, len(parts))
        for j, (e, p) in enumerate(parts):
            g = t[(t["engine"].astype(str) == e) & (t["particles"] == p)].set_index("mode").reindex(modes)
            y = g["throughput_pt_per_s"].to_numpy(float)
            ax.bar(
                np.arange(len(modes)) + (j - (len(parts) - 1) / 2) * width,
                y,
                width,
                yerr=_err(g["throughput_ci_low"].to_numpy(float), g["throughput_ci_high"].to_numpy(float), y),
                capsize=2,
                label=(f"{e} " if several else "") + f"{fmt_particles(p)} particles",
                color=f"C{j % 10}",
            )
        ax.set_xticks(np.arange(len(modes)), modes, rotation=30, ha="right")
        ax.set_xlabel("sharing mode")
        ax.set_title(
            f"Aggregate throughput per device ({lab})"
            if compare is not None
            else "Aggregate throughput per physical device"
        )
        _legend_outside(ax)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("particle-turns / s (all replicas)")
    _subtitle(fig, tables)
    return save_figure(fig, out_dir, "throughput")


def _legend_outside(ax: Axes) -> None:
    """The legend right of the axes, never over the data."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def _subtitle(fig: Figure, tables: Tables) -> None:
    label = _device_label(tables)
    if label:
        fig.text(0.01, -0.03, label, fontsize=7, color="0.4")


def make_plots(
    tables: Tables,
    out_dir: Path | str,
    compare: Tables | None = None,
    labels: tuple[str, str] = ("this", "compare"),
) -> list[Path]:
    """All figures into out_dir; returns the written paths (PNG and SVG)."""
    out = Path(out_dir)
    paths = []
    paths += plot_loss(tables, out, compare, labels)
    paths += plot_time(tables, out, compare, labels)
    paths += plot_throughput(tables, out, compare, labels)
    paths += plot_partitions(tables, out)
    return paths


def plot_partitions(tables: Tables, out_dir: Path) -> list[Path]:
    """Partition scaling in the study's form: each slice's efficiency (ideal time / measured time, the ideal
    being T_full x full SMs / slice SMs) against its share of the SMs, for the emulated MIG profiles (alone,
    and in full layouts run concurrently) and the MPS thread shares; nothing when none was measured."""
    emu = tables.mig_emulated
    part = tables.partition
    series = []  # (label, share %, efficiency %, marker)
    if not emu.empty:
        alone = emu["instances"] == 1
        alone &= ~emu["mode"].astype(str).str.contains(r"\+", regex=True)
        for n, g in emu[alone].groupby("particles"):
            series.append((f"emulated profile alone, {n / 1e6:g} M", g, "o"))
        for n, g in emu[~alone].groupby("particles"):
            series.append((f"emulated full layout (concurrent), {n / 1e6:g} M", g, "s"))
    if not part.empty:
        sm = part[part["unit"] == "SMs"]
        for n, g in sm.groupby("particles"):
            series.append(
                (
                    f"MPS thread share (mps:1@PCT), {n / 1e6:g} M",
                    g.rename(columns={"slice_units": "sms", "full_units": "full_sms"}),
                    "^",
                )
            )
    if not series:
        return []
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for label, g, marker in series:
        g = g.sort_values("sms")
        ax.plot(100 * g["sms"] / g["full_sms"], g["efficiency_pct"], marker=marker, ls="", ms=6, label=label)
    ax.axhline(100, color="0.4", lw=0.9, ls="--", label="ideal (time scales with 1 / SMs)")
    ax.set_xlabel("share of the GPU's SMs [%]")
    ax.set_ylabel("efficiency [%]  (ideal time / measured time)")
    ax.set_title("Partition scaling against the ideal (emulated MIG is MPS: no memory/L2 isolation)")
    ax.set_xlim(0, 105)
    ax.grid(alpha=0.3)
    _legend_outside(ax)
    _subtitle(fig, tables)
    return save_figure(fig, out_dir, "partition_scaling")


def plot_predicted_vs_measured(df: pd.DataFrame, out_dir: Path | str, title: str = "") -> list[Path]:
    """Measured (with 95% CI) and predicted loss per cell, and the excess: PNG + SVG."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    d = df[np.isfinite(df["measured_pct"].astype(float))].reset_index(drop=True)
    if d.empty:
        return []
    dup = d["mode"].duplicated(keep=False) & d["table"].isin([n for n, c in COMPARED.items() if c.ideal])
    labels = [
        f"{r.mode} @ {fmt_particles(r.particles)}" + (" (vs SM ideal)" if dup.iloc[i] else "")
        for i, r in enumerate(d.itertuples())
    ]
    y = np.arange(len(d))
    h = max(2.5, 0.42 * len(d) + 1.2)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, h), sharey=True, gridspec_kw={"width_ratios": [3, 2]})
    meas = d["measured_pct"].astype(float).to_numpy()
    lo = d["measured_ci_low"].astype(float).to_numpy()
    hi = d["measured_ci_high"].astype(float).to_numpy()
    err = np.vstack([np.where(np.isfinite(lo), meas - lo, 0), np.where(np.isfinite(hi), hi - meas, 0)])
    ax1.barh(y, meas, height=0.5, xerr=np.clip(err, 0, None), capsize=3, color="#4477aa", label="measured (95% CI)")
    ax1.plot(
        d["predicted_pct"].astype(float),
        y,
        linestyle="none",
        marker="D",
        color="#222222",
        markersize=6,
        label="predicted (no interference)",
    )
    ax1.axvline(0, color="black", lw=0.8)
    ax1.set_yticks(y, labels)
    ax1.invert_yaxis()
    ax1.set_xlabel("loss / excess over the ideal (%)")
    pred = d["predicted_pct"].astype(float).to_numpy()
    ends = np.concatenate([[0.0], meas - np.nan_to_num(err[0]), meas + np.nan_to_num(err[1]), pred])
    ends = ends[np.isfinite(ends)]
    pad = 0.06 * max(ends.max() - ends.min(), 1.0)
    ax1.set_xlim(ends.min() - pad, ends.max() + pad)
    ax1.set_title("predicted vs measured")
    exc = d["excess_pct"].astype(float).to_numpy()
    ax2.barh(y, exc, height=0.5, color=np.where(exc > 0, "#cc6677", "#117733"))
    ax2.axvline(0, color="black", lw=0.8)
    ax2.set_xlabel("excess = measured − predicted (percentage points)")
    ax2.set_title("excess loss")
    exc_f = exc[np.isfinite(exc)]
    lo2, hi2 = min(0.0, exc_f.min(initial=0.0)), max(0.0, exc_f.max(initial=0.0))
    pad2 = 0.06 * max(hi2 - lo2, 1.0)
    ax2.set_xlim(lo2 - pad2, hi2 + pad2)
    if title:
        fig.suptitle(title)
    handles, leg_labels = ax1.get_legend_handles_labels()
    fig.legend(handles, leg_labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.35 / h, 1, 1))
    return save_figure(fig, out_dir, PREDICTION_PLOT)  # PNG first, the SVG beside it


def plot_energy(table: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Energy per 10⁶ particle-turns, one bar per mode and particle count (PNG + SVG)."""
    d = table[np.isfinite(table["energy_j_per_mpt"].astype(float))]
    if d.empty:
        return []
    modes = list(dict.fromkeys(d["mode"]))
    sizes = sorted(d["particles"].astype(float).unique())
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(modes) + 2), 3.8))
    width = 0.8 / max(1, len(sizes))
    for k, p in enumerate(sizes):
        s = d[d["particles"].astype(float) == p].set_index("mode")
        vals = [float(s["energy_j_per_mpt"].get(m, math.nan)) for m in modes]
        ax.bar(np.arange(len(modes)) + (k - (len(sizes) - 1) / 2) * width, vals, width, label=f"{p:,.0f} particles")
    ax.set_xticks(np.arange(len(modes)), modes, rotation=20)
    ax.set_ylabel("energy per 10⁶ particle-turns (J)")
    ax.set_title("Energy per unit of work, per sharing mode")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, out_dir, ENERGY_PLOT)
