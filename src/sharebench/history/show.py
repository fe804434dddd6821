"""``history show``: the series as a table and a plot (loss and its interval over time per node × mode).

The plot has one panel per node × mode, one line per work (particles × turns, engine/backend),
points at each run's time with the 95% interval as error bars. A change of the machine's provenance
between two runs of a node (another GPU, driver, gpu-operator or device-plugin version) is a dashed
vertical line, labelled with what changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import matplotlib
import pandas as pd

from sharebench.errors import UserError
from sharebench.history.records import PROVENANCE_KEYS
from sharebench.modes import mode_sort_key

matplotlib.use("Agg")  # before pyplot: figures are files, never windows
import matplotlib.dates as mdates
import matplotlib.pyplot as plt

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


def parse_since(text: str | None) -> str | None:
    """--since as the store's time format (UserError if it is no ISO date/time)."""
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            f"bad --since {text!r}; allowed: an ISO date or time, e.g. 2026-12-01 or 2026-12-01T12:00"
        ) from None
    return t.strftime("%Y-%m-%dT%H:%M:%S+0000")


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


def plot(runs: pd.DataFrame, out: Path) -> list[Path]:
    """Write the plot as out.png and out.svg; returns the paths."""
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
    paths = [out.with_suffix(".png"), out.with_suffix(".svg")]
    try:
        output_folder(out, "--plot")
        # no dates, fixed ids: the same store gives the same files (as sharebench.report.plots writes them)
        with matplotlib.rc_context({"svg.hashsalt": "sharebench"}):
            fig.savefig(paths[0], dpi=110, bbox_inches="tight", metadata={"Software": None})
            fig.savefig(paths[1], bbox_inches="tight", metadata={"Date": None})
    except OSError as exc:
        raise UserError(f"cannot write --plot {out} ({exc.strerror or exc}); give a writable path") from None
    finally:
        plt.close(fig)
    return paths


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
