"""The report's section "Why time-slicing costs this workload X%" (issue 29).

From ``tables/timeslice_split.csv`` (``sharebench.analysis.timeslice_split``): one sentence stating the split
of the headline time-slicing loss (the largest size, the fewest replicas) into switch idle and refill, the
table of every split, the loss predicted at other slice lengths (labelled predicted, with what NVIDIA
documents of its interval settings) and one plot, ``plots/timeslice_split.png``: the measured loss beside
its two predicted parts, and the predicted loss against the slice length. Where nothing was split, one
line saying why (the sweep's probe line from provenance).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd

from sharebench.analysis import Tables, fmt_particles, known_interval
from sharebench.analysis.timeslice_split import (
    DEFAULT_LENGTHS_MS,
    DRA_INTERVALS_NOTE,
    helpful_interval,
    loss_at_parts,
    predicted_loss_pct,
)
from sharebench.parse import number_or_nan
from sharebench.report.plots import save_figure
from sharebench.report.render import Image, Section, Table, Text
from sharebench.telemetry.provenance import probe_line

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

SPLIT_PLOT = "timeslice_split"
SPLIT_HELP = (
    "One replica ran beside one time-slice probe (a kernel reading the GPU's clock, `sharebench probe`): "
    "the probe's record of when it was switched out gives the replica's slices; the switch (GPU idle between "
    "two slices) comes from probes alone at the sweep's start. In-slice rate = progress inside its own slices "
    "against alone; refill = the fixed cost per switch-in that rate implies. Predicted loss = (switch + "
    "refill) / (slice − refill), the loss in the tables' sense (T_N against N·T_1). Intervals: 95%, Student-t "
    "over the runs beside the probe (none below 3)."
)


def headline(split: pd.DataFrame) -> pd.Series:
    """The row the section's title and sentence are about: the largest size, then the fewest replicas."""
    n = split["mode"].astype(str).str.extract(r":(\d+)")[0].astype(float).fillna(0)
    order = split.assign(_n=n).sort_values(["particles", "_n"], ascending=[False, True], kind="stable")
    return split.loc[order.index[0]]


def title_of(split: pd.DataFrame) -> str:
    if split.empty:
        return "Why time-slicing costs what it costs"
    loss = number_or_nan(headline(split)["loss_pct"])
    return f"Why time-slicing costs this workload {loss:.1f}%" if math.isfinite(loss) else title_of(split.iloc[0:0])


def ci(lo: Any, hi: Any, digits: int = 1) -> str:
    a, b = number_or_nan(lo), number_or_nan(hi)
    return f" [{a:.{digits}f}, {b:.{digits}f}]" if known_interval(a, b) else ""


def sentence(r: pd.Series) -> str:
    """The split of one row in one sentence."""
    work = f"{r['engine']} ({fmt_particles(r['particles'])} particles, {int(r['turns'])} turns)"
    return (
        f"{work} under {r['mode']} loses {r['loss_pct']:.1f}%{ci(r['loss_ci_low'], r['loss_ci_high'])}: the GPU "
        f"gives each process {r['slice_ms']:.2f} ms slices and sits idle {r['switch_ms']:.3f} ms at every switch "
        f"({r['switch_idle_pct']:.1f}% of the time), and inside its own slices the workload progresses at "
        f"{r['in_slice_rate']:.2f}×{ci(r['in_slice_rate_ci_low'], r['in_slice_rate_ci_high'], 2)} its rate alone "
        f"(a refill of {r['refill_ms']:.3f} ms per switch-in, {r['refill_pct']:.1f}% of the time); together they "
        f"predict {r['predicted_loss_pct']:.1f}%{ci(r['predicted_ci_low'], r['predicted_ci_high'])}, "
        f"{r['error_pts']:+.1f} points from the measured loss."
    ) + neighbour_sentence(r)


def neighbour_sentence(r: pd.Series) -> str:
    """Issue 34's terms: the rate beside a heavy neighbour against the light probe, the evicted term, the
    prediction from the light probe alone and what stays unexplained (with its interval); '' for rows
    measured beside the light probe only."""
    if str(r.get("neighbour") or "light") == "light":
        un = number_or_nan(r.get("unexplained_pts"))
        if not math.isfinite(un):
            return ""
        return f" Unexplained: {un:+.1f} points{ci(r.get('unexplained_ci_low'), r.get('unexplained_ci_high'))}."
    return (
        f" These parts were measured beside a heavy neighbour ({r['neighbour']}: it streams over more than the "
        f"L2 and fills the register file); beside the light probe the rate is {r['in_slice_rate_light']:.2f}×, "
        f"so the neighbour evicts {r['evict_ms']:.3f} ms{ci(r['evict_ms_ci_low'], r['evict_ms_ci_high'], 3)} of "
        f"progress per switch-in on top of a refill of {r['refill_light_ms']:.3f} ms; the light probe alone "
        f"predicts {r['predicted_light_pct']:.1f}%. Unexplained: {r['unexplained_pts']:+.1f} points"
        f"{ci(r['unexplained_ci_low'], r['unexplained_ci_high'])} ({r['missing_ms']:+.3f} ms per switch-in)."
    )


def split_display(split: pd.DataFrame) -> pd.DataFrame:
    """tables/timeslice_split.csv as the report prints it."""
    rows = []
    for _, r in split.iterrows():
        rows.append(
            {
                "workload": r["engine"],
                "particles": fmt_particles(r["particles"]),
                "turns": int(r["turns"]),
                "mode": r["mode"],
                "GPU": r["uuid"],
                "runs": int(r["repeats"]),
                "slice ms": f"{r['slice_ms']:.3f}",
                "switch ms": f"{r['switch_ms']:.3f}",
                "switch idle %": f"{r['switch_idle_pct']:.2f}",
                "in-slice rate": f"{r['in_slice_rate']:.3f}{ci(r['in_slice_rate_ci_low'], r['in_slice_rate_ci_high'], 3)}",
                "refill ms": f"{r['refill_ms']:.3f}",
                "loss %": f"{r['loss_pct']:.2f}{ci(r['loss_ci_low'], r['loss_ci_high'], 2)}",
                "predicted %": f"{r['predicted_loss_pct']:.2f}{ci(r['predicted_ci_low'], r['predicted_ci_high'], 2)}",
                "error pts": f"{r['error_pts']:+.2f}",
                "beside": str(r.get("neighbour") or "light"),
                "evict ms": f"{number_or_nan(r.get('evict_ms')):.3f}",
                "predicted light %": f"{number_or_nan(r.get('predicted_light_pct')):.2f}",
                "unexplained pts": f"{number_or_nan(r.get('unexplained_pts')):+.2f}"
                f"{ci(r.get('unexplained_ci_low'), r.get('unexplained_ci_high'), 2)}",
            }
        )
    return pd.DataFrame(rows)


def lengths_display(r: pd.Series, lengths: tuple[float, ...] = DEFAULT_LENGTHS_MS) -> pd.DataFrame:
    """The loss predicted at other slice lengths for one row (every row labelled predicted)."""
    rows = [{**x, "label": "measured slice"} for x in loss_at_parts(r["switch_ms"], r["refill_ms"], [r["slice_ms"]])]
    rows += loss_at_parts(r["switch_ms"], r["refill_ms"], lengths)
    out = []
    for x in sorted(rows, key=lambda x: x["slice_ms"]):
        loss = x["predicted_loss_pct"]
        out.append(
            {
                "slice ms": f"{x['slice_ms']:g}" if x["label"] == "predicted" else f"{x['slice_ms']:.3f} (measured)",
                "switch idle %": f"{x['switch_idle_pct']:.2f}",
                "refill %": f"{x['refill_pct']:.2f}",
                "loss %": f"{loss:.2f}" if math.isfinite(loss) else "no progress",
                "": "predicted",
            }
        )
    return pd.DataFrame(out)


def help_text(r: pd.Series) -> str:
    """What a longer interval would do for the headline row, predicted."""
    h = helpful_interval(r)
    if h is None:
        return "No slice length listed would halve the predicted loss (or it is under 2% already)."
    return (
        f"A {h['slice_ms']:g} ms time slice would cut the loss to {h['predicted_loss_pct']:.1f}% (predicted, not "
        f"measured; {h['now_pct']:.1f}% predicted at the {h['measured_slice_ms']:.2f} ms slice measured)."
    )


def split_figure(split: pd.DataFrame) -> Figure:
    """Left: per row, the measured loss (with its interval) beside the predicted loss split into switch idle
    and refill. Right: the loss predicted against the slice length, the measured loss at the measured slice."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    labels = [f"{r.mode}\n{fmt_particles(r.particles)}" for r in split.itertuples()]
    x = list(range(len(split)))
    useful = split["slice_ms"] - split["refill_ms"]
    switch_part = 100 * split["switch_ms"] / useful
    refill_part = 100 * split["refill_ms"] / useful
    ax.bar([i - 0.2 for i in x], switch_part, 0.4, color="C0", label="switch idle (predicted)")
    ax.bar([i - 0.2 for i in x], refill_part, 0.4, bottom=switch_part, color="C1", label="refill (predicted)")
    lo = (split["loss_pct"] - split["loss_ci_low"]).fillna(0).clip(lower=0)
    hi = (split["loss_ci_high"] - split["loss_pct"]).fillna(0).clip(lower=0)
    ax.bar([i + 0.2 for i in x], split["loss_pct"], 0.4, color="0.5", yerr=[lo, hi], capsize=3, label="measured")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("loss % (T_N against N·T_1)")
    ax.set_title("The loss and its two parts", fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    grid = [0.5 * 2 ** (k / 4) for k in range(25)]
    for k, r in enumerate(split.itertuples()):
        ys = [predicted_loss_pct(g, r.switch_ms, r.refill_ms) for g in grid]
        bx.plot(grid, ys, color=f"C{k % 10}", lw=1, label=f"{r.mode} {fmt_particles(r.particles)} (predicted)")
        bx.plot([r.slice_ms], [r.loss_pct], "o", color=f"C{k % 10}", ms=4)
    bx.set_xscale("log", base=2)
    bx.set_ylim(0, max(5.0, 1.5 * float(split["loss_pct"].max() if len(split) else 0)))
    bx.set_xlabel("time slice (ms, log scale); dot: measured loss at the measured slice")
    bx.set_ylabel("loss %")
    bx.set_title("Other slice lengths (predicted)", fontsize=10)
    bx.legend(fontsize=7, frameon=False)
    bx.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def not_split(prov: dict[str, Any] | None) -> str:
    """Why a folder with time-slicing cells has no split, in one line."""
    line = probe_line((prov or {}).get("timeslice_probe"))
    if line:
        return f"No loss was split here: {line}."
    return (
        "No loss was split here: this folder holds no runs beside the time-slice probe (a sweep off an NVIDIA GPU, "
        "with --no-probe, stopped before its last step, or from a sharebench before the probe)."
    )


def timeslice_split_section(results_dir: Path, tables: Tables, prov: dict[str, Any] | None) -> Section:
    """The section; writes plots/timeslice_split.png/svg when there is a split."""
    split = tables.timeslice_split
    split = split[pd.to_numeric(split["loss_pct"], errors="coerce").notna()] if len(split) else split
    section = Section(title_of(split))
    if split.empty:
        section.blocks.append(Text(not_split(prov)))
        return section
    r = headline(split)
    images = save_figure(split_figure(split), results_dir / "plots", SPLIT_PLOT)
    section.blocks += [
        Text(sentence(r)),
        Text(SPLIT_HELP),
        Table(split_display(split)),
        Text(f"What another interval would do for {r['mode']} at {fmt_particles(r['particles'])} particles:"),
        Table(lengths_display(r)),
        Text(help_text(r) + " " + DRA_INTERVALS_NOTE + "."),
        *(Image(p) for p in images if p.suffix == ".png"),
    ]
    return section
