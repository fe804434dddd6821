"""The advice: per class the option with the fewest GPUs within the SLO, the next-best layouts, and the files.

A layout gives every class one option (:mod:`sharebench.advise.replay`); classes never share a GPU, so a
layout's GPU count is the sum of its classes' and a class's p95 slowdown does not depend on the others'
choice. The recommendation takes, per class, the feasible option with the fewest GPUs (ties: the lower
p95, then measured before predicted); the next-best layouts are the other feasible combinations with
the fewest GPUs. Today's pool is the GPUs the trace's pods ran on.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: figures are files, never windows
import matplotlib.pyplot as plt

from sharebench.advise.costs import Costs
from sharebench.advise.replay import Outcome, class_options, replay
from sharebench.advise.usage import Usage
from sharebench.files import write_atomic

NEXT_BEST = 3


@dataclass(frozen=True)
class Layout:
    choice: dict[str, Outcome]  # class -> its outcome

    @property
    def gpus(self) -> int:
        return sum(o.gpus for o in self.choice.values())

    def summary(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "classes": {
                c: {
                    "mode": o.option.mode,
                    "gpus": o.gpus,
                    "p95_slowdown": round(o.p95, 4),
                    "source": o.option.source,
                    "predicted": o.option.predicted,
                }
                for c, o in self.choice.items()
            },
        }


@dataclass(frozen=True)
class Advice:
    slo: float
    model: str
    patterns: dict[str, str]
    today_gpus: dict[str, int]  # class -> GPUs its pods ran on today
    today_total: int
    outcomes: dict[str, list[Outcome]]
    left_out: dict[str, list[str]]
    recommended: Layout | None
    next_best: list[Layout]
    work: dict[str, tuple[float, float]]  # class -> (work in, work replayed) under the recommendation
    notes: list[str]


def rank(o: Outcome) -> tuple[int, float, int]:
    return (o.gpus, o.p95, int(o.option.predicted))


def pareto(outs: list[Outcome]) -> list[Outcome]:
    """The feasible outcomes no other beats on both GPUs and p95 (ties: the first in rank order)."""
    kept: list[Outcome] = []
    for o in sorted((o for o in outs if o.feasible), key=rank):
        if not any(k.gpus <= o.gpus and k.p95 <= o.p95 for k in kept):
            kept.append(o)
    return kept


def advise(usage: Usage, costs: Costs, patterns: dict[str, str], slo: float) -> Advice:
    outcomes: dict[str, list[Outcome]] = {}
    left_out: dict[str, list[str]] = {}
    for cls in usage.class_names():
        options, left_out[cls] = class_options(costs, patterns[cls])
        outcomes[cls] = [replay(usage, cls, opt, slo) for opt in options]
    feasible = {c: pareto(outs) for c, outs in outcomes.items()}
    today = {c: len({usage.gpus[i] for i in usage.pods_of(c)}) for c in usage.class_names()}
    recommended = None
    nxt: list[Layout] = []
    if all(feasible.values()):
        recommended = Layout({c: f[0] for c, f in feasible.items()})
        combos = itertools.product(*(f[: NEXT_BEST + 1] for f in feasible.values()))
        layouts = [Layout(dict(zip(feasible, combo))) for combo in combos]
        layouts.sort(key=lambda lay: (lay.gpus, max(o.p95 for o in lay.choice.values())))
        nxt = [lay for lay in layouts if lay.choice != recommended.choice][:NEXT_BEST]
    work = {c: (o.work_in_s, o.work_replayed_s) for c, o in (recommended.choice.items() if recommended else [])}
    return Advice(
        slo,
        costs.model.key,
        patterns,
        today,
        len(set(usage.gpus)),
        outcomes,
        left_out,
        recommended,
        nxt,
        work,
        list(costs.notes),
    )


def node_commands(layout: Layout) -> list[str]:
    """The ``sharebench node apply`` commands that implement a layout (never run by advise)."""
    out = []
    for cls, o in layout.choice.items():
        mode = o.option.mode
        out.append(f"# {cls}: {o.gpus} GPU(s) in {mode}; repeat for each node that holds them")
        out.append(f"sharebench node apply NODE {mode}")
    return out


def to_json(a: Advice) -> dict[str, Any]:
    return {
        "slo": a.slo,
        "gpu_model": a.model,
        "patterns": a.patterns,
        "today": {"gpus": a.today_total, "classes": a.today_gpus},
        "recommended": a.recommended.summary() if a.recommended else None,
        "frees_gpus": a.today_total - a.recommended.gpus if a.recommended else None,
        "next_best": [lay.summary() for lay in a.next_best],
        "options": {
            c: [
                {
                    "mode": o.option.mode,
                    "gpus": o.gpus,
                    "p95_slowdown": None if math.isnan(o.p95) else round(o.p95, 4),
                    "feasible": o.feasible,
                    "reason": o.reason,
                    "source": o.option.source,
                }
                for o in outs
            ]
            for c, outs in a.outcomes.items()
        },
        "left_out": a.left_out,
        "node_commands": node_commands(a.recommended) if a.recommended else [],
        "notes": a.notes,
    }


def markdown(a: Advice, plot_name: str) -> str:
    lines = [f"# GPU pool advice ({a.model}, p95 slowdown target {a.slo:g}x)", ""]
    if a.recommended is None:
        stuck = [c for c, outs in a.outcomes.items() if not any(o.feasible for o in outs)]
        lines += [f"No layout meets the target: class(es) {', '.join(stuck)} exceed it under every option.", ""]
    else:
        r = a.recommended
        lines += [
            f"**Recommended: {r.gpus} GPUs** (today {a.today_total}; frees {a.today_total - r.gpus}).",
            "",
            "| class | pattern | today GPUs | mode | GPUs | p95 slowdown | cost source |",
            "|---|---|---|---|---|---|---|",
        ]
        for c, o in r.choice.items():
            lines.append(
                f"| {c} | {a.patterns[c]} | {a.today_gpus[c]} | {o.option.mode} | {o.gpus} | {o.p95:.2f}x | {o.option.source} |"
            )
        lines += ["", f"![today against the recommendation]({plot_name})", "", "## Next-best layouts", ""]
        for lay in a.next_best:
            parts = ", ".join(f"{c} {o.option.mode} ({o.gpus} GPUs, {o.p95:.2f}x)" for c, o in lay.choice.items())
            lines.append(f"- {lay.gpus} GPUs: {parts}")
        lines += ["", "## Commands that implement it (not applied)", "", "```", *node_commands(r), "```"]
    lines += [
        "",
        "## Every option replayed",
        "",
        "| class | mode | GPUs | p95 slowdown | verdict | source |",
        "|---|---|---|---|---|---|",
    ]
    for c, outs in a.outcomes.items():
        for o in outs:
            p95 = "-" if math.isnan(o.p95) else f"{o.p95:.2f}x"
            lines.append(f"| {c} | {o.option.mode} | {o.gpus or '-'} | {p95} | {o.reason} | {o.option.source} |")
    notes = [f"{c}: {why}" for c, whys in a.left_out.items() for why in whys] + a.notes
    if notes:
        lines += ["", "## Left out", "", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def plot_png(a: Advice) -> bytes:
    classes = list(a.today_gpus)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    x = range(len(classes))
    ax.bar([i - 0.2 for i in x], [a.today_gpus[c] for c in classes], 0.4, label=f"today ({a.today_total} GPUs)")
    if a.recommended:
        rec = a.recommended.choice
        ax.bar(
            [i + 0.2 for i in x], [rec[c].gpus for c in classes], 0.4, label=f"recommended ({a.recommended.gpus} GPUs)"
        )
        for i, c in enumerate(classes):
            ax.annotate(
                f"{rec[c].option.mode}\np95 {rec[c].p95:.2f}x",
                (i + 0.2, rec[c].gpus),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax.set_xticks(list(x), [f"{c}\n({a.patterns[c]})" for c in classes])
    ax.set_ylabel("GPUs")
    ax.set_title(f"{a.model} pool: today against the recommendation (p95 target {a.slo:g}x)")
    ax.legend(loc="upper right", fontsize=8)
    ax.margins(y=0.25)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def write_advice(a: Advice, out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    png = plot_png(a)
    paths = {
        "json": out / "advice.json",
        "md": out / "advice.md",
        "html": out / "advice.html",
        "png": out / "advice.png",
    }
    write_atomic(paths["png"], png)
    write_atomic(paths["json"], json.dumps(to_json(a), indent=2) + "\n")
    md = markdown(a, "advice.png")
    write_atomic(paths["md"], md)
    uri = "data:image/png;base64," + base64.b64encode(png).decode()
    body = html.escape(md).replace(html.escape("](advice.png)"), "](advice.png)")
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>sharebench advice</title></head><body>"
        f"<img alt='today against the recommendation' src='{uri}'><pre>{body}</pre></body></html>\n"
    )
    write_atomic(paths["html"], page)
    return paths
