"""``history show``: the series as a table and a plot (loss and its interval over time per node × mode).

The plot has one panel per node × mode, one line per work (particles × turns, engine/backend),
points at each run's time with the 95% interval as error bars. A change of the machine's provenance
between two runs of a node (another GPU, driver, gpu-operator or device-plugin version) is a dashed
vertical line, labelled with what changed.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sharebench.errors import UserError
from sharebench.history.records import PROVENANCE_KEYS
from sharebench.history.store import Store
from sharebench.history_settings import parse_since
from sharebench.modes import mode_sort_key

TABLE_COLUMNS = [
    "time_utc",
    "node",
    "gpu_model",
    "gpu_uuid",
    "mode",
    "pattern",
    "particles",
    "turns",
    "backend",
    "loss_pct",
    "loss_ci_low",
    "loss_ci_high",
    "repeats",
    "rate_pt_per_s",
    "trust",
    "disturbed",
    "run_id",
    "source",
]


@dataclass(frozen=True)
class ShowFilter:
    node: str | None = None
    mode: str | None = None
    since: str | None = None  # ISO date or time, UTC


def select(runs: pd.DataFrame, f: ShowFilter) -> pd.DataFrame:
    out = runs
    if f.node:
        out = out[out["node"] == f.node]
    if f.mode:
        out = out[out["mode"] == f.mode]
    since = parse_since(f.since)
    if since:
        out = out[out["time_utc"] >= since]
    return out


def provenance_changes(runs: pd.DataFrame) -> list[tuple[str, str, str]]:
    """(node, time, what changed) for each run whose machine differs from the node's previous run."""
    out = []
    per_run = runs.drop_duplicates("run_id").sort_values(["time_utc", "run_id"], kind="stable")
    for node, g in per_run.groupby("node", sort=True):
        prev = None
        for _, r in g.iterrows():
            if prev is not None:
                what = [f"{k} {_short(prev[k])}→{_short(r[k])}" for k in PROVENANCE_KEYS if prev[k] != r[k]]
                if what:
                    out.append((str(node), str(r["time_utc"]), ", ".join(what)))
            prev = r
    return out


def _short(v: object) -> str:
    s = str(v) or "?"
    return s[:12] if s.startswith(("GPU-", "MIG-")) else s


def table(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[TABLE_COLUMNS].reset_index(drop=True)


def _time(s: pd.Series) -> pd.Series:
    return pd.to_datetime(s, format="%Y-%m-%dT%H:%M:%S%z", utc=True)


PLOTS = "plots"  # the store's folder of ``history show``'s plot (with no --plot)
PLOT_NAME = "history"


def figure(runs: pd.DataFrame) -> Any:
    """The plot of ``runs``: a panel per node x mode (matplotlib imported here: the other verbs never need it)."""
    import matplotlib  # noqa: PLC0415 - only ``history show`` draws

    matplotlib.use("Agg")  # before pyplot: figures are files, never windows
    import matplotlib.dates as mdates  # noqa: PLC0415
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if runs.empty:
        raise UserError("nothing to plot: no run in the store matches the filters")
    panels = sorted(
        {(str(n), str(m)) for n, m in zip(runs["node"], runs["mode"])}, key=lambda nm: (nm[0], mode_sort_key(nm[1]))
    )
    cols = min(3, len(panels))
    rows_n = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.2 * cols, 3.6 * rows_n), squeeze=False, sharex=True)
    changes = provenance_changes(runs)
    for ax, (node, mode) in zip(axes.ravel(), panels):
        g = runs[(runs["node"] == node) & (runs["mode"] == mode)]
        for work, w in g.groupby(["particles", "turns", "engine", "backend", "pattern"], sort=True):
            w = w.sort_values("time_utc")
            t = _time(w["time_utc"])
            lo = (w["loss_pct"] - w["loss_ci_low"]).clip(lower=0).fillna(0)
            hi = (w["loss_ci_high"] - w["loss_pct"]).clip(lower=0).fillna(0)
            label = f"{int(work[0]):,} x {work[1]} ({work[2]}/{work[3]}, {work[4]})"
            ax.errorbar(t, w["loss_pct"], yerr=[lo, hi], marker="o", ms=4, capsize=3, lw=1, label=label)
        for n, when, what in changes:
            if n == node:
                x = _time(pd.Series([when])).iloc[0]
                ax.axvline(x, color="grey", ls="--", lw=0.8)
                ax.annotate(
                    what,
                    (x, 1.0),
                    xycoords=("data", "axes fraction"),
                    rotation=90,
                    fontsize=6,
                    va="top",
                    ha="right",
                    color="dimgrey",
                )
        ax.set_title(f"{node}: {mode}", fontsize=9)
        ax.set_ylabel("loss [%]")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="lower left")
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    for ax in axes.ravel()[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle("sharebench history: loss per node and mode (95% intervals; dashed: the machine changed)", fontsize=10)
    fig.tight_layout()
    return fig


def rendered(runs: pd.DataFrame) -> dict[str, bytes]:
    """The plot as PNG and SVG bytes (``{".png": ..., ".svg": ...}``): no dates, fixed ids, so that the same
    store gives the same files (as ``sharebench.report.plots`` writes them)."""
    import matplotlib  # noqa: PLC0415
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig = figure(runs)
    out: dict[str, bytes] = {}
    try:
        with matplotlib.rc_context({"svg.hashsalt": "sharebench"}):
            for suffix, kw in (
                (".png", {"dpi": 110, "metadata": {"Software": None}}),
                (".svg", {"metadata": {"Date": None}}),
            ):
                buf = io.BytesIO()
                fig.savefig(buf, format=suffix[1:], bbox_inches="tight", **kw)
                out[suffix] = buf.getvalue()
    finally:
        plt.close(fig)
    return out


def plot(runs: pd.DataFrame, out: Path) -> list[Path]:
    """``--plot PATH``: write the plot as PATH.png and PATH.svg; returns the paths."""
    images = rendered(runs)
    paths = [out.with_suffix(suffix) for suffix in images]
    output_folder(out, "--plot")
    try:
        for path, data in zip(paths, images.values()):
            path.write_bytes(data)
    except OSError as exc:
        raise UserError(f"cannot write --plot {out} ({exc.strerror or exc}); give a writable path") from None
    return paths


def plot_into(runs: pd.DataFrame, store: Store) -> list[str]:
    """With no ``--plot``: the plot into the store itself (``plots/history.png`` and ``.svg``), never the current
    folder; returns where it went."""
    images = rendered(runs)
    for suffix, data in images.items():
        store.put(PLOTS, PLOT_NAME + suffix, data)
    return [f"{store.url}/{PLOTS}/{PLOT_NAME}{suffix}" for suffix in images]


def output_folder(path: Path, option: str) -> None:
    """Create the folder ``path`` is written into; UserError (one line) when it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(
            f"cannot create the folder of {option} {path} ({exc.strerror or exc}); give a writable path"
        ) from None


def write_csv(t: pd.DataFrame, path: Path) -> None:
    """``--csv PATH``: the table, its folder created; UserError (one line) when it cannot be written."""
    output_folder(path, "--csv")
    try:
        t.to_csv(path, index=False)
    except OSError as exc:
        raise UserError(f"cannot write --csv {path} ({exc.strerror or exc}); give a writable path") from None
