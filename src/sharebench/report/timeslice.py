"""The report's section "Why time-slicing costs this workload X%" (issue 29).

From ``tables/timeslice_split.csv`` (``sharebench.analysis.timeslice_split``): one sentence stating the split
of the headline time-slicing loss (the largest size, the fewest replicas): the part the probe pair alone
gives (slice and switch, no workload), then the transfer from the workload's time-sliced run beside a probe
(switch idle and refill; a term the data cannot identify said so), the
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
    "How it is measured: two probe processes alone (kernels reading the GPU's clock, `sharebench probe`) give the "
    "slice and the switch (GPU idle between two slices); their ratio, the *probe pair alone*, is the part of the "
    "loss that owes nothing to the workload. Then one replica runs time-sliced beside one probe: the probe's "
    "record of when it was switched out gives the replica's slices, and its progress inside them against alone "
    "is the in-slice rate (refill = the fixed cost per switch-in that rate implies). The prediction, (switch + "
    "refill) / (slice − refill) in the tables' sense (T_N against N·T_1), is a **transfer**: it carries that "
    "time-sliced run over to N replicas; it does not predict the loss from independent probes. A refill or an "
    "evicted term below zero (an in-slice rate above 1) is *not identified*, never printed as a time. "
    "Intervals: 95%, Student-t over the runs beside the probe (none below 3); the switch is one probe run's "
    "median, with the order-statistic interval of that median, carried into every interval that depends on it."
)


def refill_of(r: pd.Series) -> float:
    """The row's refill for a prediction at other lengths: 0 where it is not identified (switch idle only)."""
    refill = number_or_nan(r.get("refill_ms"))
    return 0.0 if math.isnan(refill) and "refill (" in str(r.get("not_identified") or "") else refill


def term_text(r: pd.Series, col: str, term: str, digits: int = 3) -> str:
    """A term in ms with its interval, or ``not identified`` where the data cannot identify it."""
    v = number_or_nan(r.get(col))
    if math.isfinite(v):
        return f"{v:.{digits}f} ms{ci(r.get(f'{col}_ci_low'), r.get(f'{col}_ci_high'), digits)}"
    return "not identified" if f"{term} (" in str(r.get("not_identified") or "") else "—"


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
    """The split of one row in one sentence: the independent part first, then the transfer."""
    work = f"{r['engine']} ({fmt_particles(r['particles'])} particles, {int(r['turns'])} turns)"
    n = str(r["mode"]).partition(":")[2] or "N"
    ind = number_or_nan(r.get("independent_pct"))
    refill = number_or_nan(r.get("refill_ms"))
    rate = (
        f"inside its own slices it progresses at {r['in_slice_rate']:.2f}×"
        f"{ci(r['in_slice_rate_ci_low'], r['in_slice_rate_ci_high'], 2)} its rate alone"
    )
    rate += (
        f" (a refill of {refill:.3f} ms per switch-in, {r['refill_pct']:.1f}% of the time)"
        if math.isfinite(refill)
        else " (faster than alone: the refill is not identified)"
    )
    pair = (
        f"Two probe processes alone (no workload) switch every {number_or_nan(r.get('probe_slice_ms')):.2f} ms and "
        f"sit idle {r['switch_ms']:.3f} ms at every switch: {ind:.1f}%"
        f"{ci(r.get('independent_ci_low'), r.get('independent_ci_high'))} of loss from slice and switch alone, the part "
        "independent of the workload. "
        if math.isfinite(ind)
        else ""
    )
    return (
        f"{work} under {r['mode']} loses {r['loss_pct']:.1f}%{ci(r['loss_ci_low'], r['loss_ci_high'])}. {pair}"
        f"Time-sliced beside a probe the workload gets {r['slice_ms']:.2f} ms slices ({r['switch_idle_pct']:.1f}% "
        f"of the time idle switching) and {rate}; carried over to {n} replicas (a transfer from that time-sliced "
        f"run, not a prediction from independent probes) these give {r['predicted_loss_pct']:.1f}%"
        f"{ci(r['predicted_ci_low'], r['predicted_ci_high'])}, {r['error_pts']:+.1f} points from the measured loss."
    ) + neighbour_sentence(r)


def neighbour_sentence(r: pd.Series) -> str:
    """Issue 34's terms: the rate beside a heavy neighbour against the light probe, the evicted term (or that
    it is not identified), the prediction from the light probe alone and what stays unexplained (with its
    interval); only what is unexplained for rows measured beside the light probe only."""
    un = number_or_nan(r.get("unexplained_pts"))
    unexplained = f" Unexplained: {un:+.1f} points{ci(r.get('unexplained_ci_low'), r.get('unexplained_ci_high'))}"
    if str(r.get("neighbour") or "light") == "light":
        return unexplained + "." if math.isfinite(un) else ""
    evict = term_text(r, "evict_ms", "evict")
    evicted = (
        f"the neighbour evicts {evict} of progress per switch-in on top of a refill of "
        f"{term_text(r, 'refill_light_ms', 'refill light')}"
        if evict != "not identified"
        else "the evicted term (heavy refill less the light one) is not identified: it comes out below zero"
    )
    missing = number_or_nan(r.get("missing_ms"))
    return (
        f" These parts were measured beside a heavy neighbour ({r['neighbour']}: it streams over more than the "
        f"L2 and fills the register file); beside the light probe the rate is {r['in_slice_rate_light']:.2f}×, so "
        f"{evicted}; the light probe alone predicts {r['predicted_light_pct']:.1f}%.{unexplained}"
        + (f" ({missing:+.3f} ms per switch-in)." if math.isfinite(missing) else ".")
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
                "refill ms": term_text(r, "refill_ms", "refill").replace(" ms", ""),
                "pair alone %": f"{number_or_nan(r.get('independent_pct')):.2f}"
                f"{ci(r.get('independent_ci_low'), r.get('independent_ci_high'), 2)}",
                "loss %": f"{r['loss_pct']:.2f}{ci(r['loss_ci_low'], r['loss_ci_high'], 2)}",
                "transfer %": f"{r['predicted_loss_pct']:.2f}{ci(r['predicted_ci_low'], r['predicted_ci_high'], 2)}",
                "error pts": f"{r['error_pts']:+.2f}",
                "beside": str(r.get("neighbour") or "light"),
                "evict ms": term_text(r, "evict_ms", "evict").replace(" ms", ""),
                "predicted light %": f"{number_or_nan(r.get('predicted_light_pct')):.2f}",
                "unexplained pts": f"{number_or_nan(r.get('unexplained_pts')):+.2f}"
                f"{ci(r.get('unexplained_ci_low'), r.get('unexplained_ci_high'), 2)}",
            }
        )
    return pd.DataFrame(rows)


def lengths_display(r: pd.Series, lengths: tuple[float, ...] = DEFAULT_LENGTHS_MS) -> pd.DataFrame:
    """The loss predicted at other slice lengths for one row (every row labelled predicted)."""
    refill = refill_of(r)
    rows = [{**x, "label": "measured slice"} for x in loss_at_parts(r["switch_ms"], refill, [r["slice_ms"]])]
    rows += loss_at_parts(r["switch_ms"], refill, lengths)
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
    refills = pd.Series([refill_of(r) for _, r in split.iterrows()], index=split.index, dtype=float)
    useful = split["slice_ms"] - refills
    switch_part = 100 * split["switch_ms"] / useful
    refill_part = 100 * refills / useful
    ax.bar([i - 0.2 for i in x], switch_part, 0.4, color="C0", label="switch idle (transfer)")
    ax.bar([i - 0.2 for i in x], refill_part, 0.4, bottom=switch_part, color="C1", label="refill (transfer)")
    lo = (split["loss_pct"] - split["loss_ci_low"]).fillna(0).clip(lower=0)
    hi = (split["loss_ci_high"] - split["loss_pct"]).fillna(0).clip(lower=0)
    ax.bar([i + 0.2 for i in x], split["loss_pct"], 0.4, color="0.5", yerr=[lo, hi], capsize=3, label="measured")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel("loss % (T_N against N·T_1)")
    ax.set_title("The loss and its two parts", fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    grid = [0.5 * 2 ** (k / 4) for k in range(25)]
    for k, r in enumerate(split.itertuples()):
        ys = [predicted_loss_pct(g, r.switch_ms, refills.iloc[k]) for g in grid]
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
