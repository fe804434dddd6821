"""The advice's files: advice.json, advice.md, advice.html (with its plot), advice.png and assignment.csv.

Written only after every option was checked and everything was read; ``--out`` is checked again here
(:func:`sharebench.advise.options.check_out`) so a library caller gets the same refusals. The PNG
carries no software version, so the same advice writes the same bytes (the worked examples are
regenerated and compared byte for byte).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: figures are files, never windows
import matplotlib.pyplot as plt

from sharebench.advise.advice import Advice, headline
from sharebench.advise.isolation import ISOLATION, isolation_of
from sharebench.advise.layout import Layout
from sharebench.advise.options import check_out
from sharebench.advise.replay import Outcome, upper_text
from sharebench.errors import UserError
from sharebench.files import write_atomic

ASSIGNMENT_COLUMNS = ("pod", "class", "gpu", "mode", "instance", "present_from", "present_to")


def node_commands(layout: Layout) -> list[str]:
    """The ``sharebench node apply`` commands that implement a layout (never run by advise)."""
    out = []
    for g in layout.groups:
        out.append(f"# {' + '.join(g.classes)}: {g.gpus} GPU(s) in {g.mode}; repeat for each node that holds them")
        out.append(f"sharebench node apply NODE {g.mode}")
    return out


def rounded(x: float) -> float | None:
    return None if not math.isfinite(x) else round(x, 4)


def option_json(o: Outcome, slo: float) -> dict[str, Any]:
    worst = o.pods.worst()
    return {
        "mode": o.option.mode,
        "gpus": o.gpus,
        "verdict": o.verdict,
        "worst_pod": o.worst_pod,
        "worst_p95_slowdown": rounded(o.p95),
        "worst_p95_slowdown_lo": rounded(float(o.pods.lo[worst])) if worst is not None else None,
        "worst_p95_slowdown_hi": rounded(o.p95_hi),
        "pods_p95": {k: round(v, 4) for k, v in o.pods.quantiles().items()},
        "pods_not_within": o.pods.over(slo) if o.bins else None,
        "feasible": o.feasible,
        "reason": o.reason,
        "source": o.option.source,
        "neighbours_above_measured": round(o.clamped, 4),
    }


def to_json(a: Advice) -> dict[str, Any]:
    rec = a.recommended
    return {
        "slo": a.slo,
        "gpu_model": a.model,
        "read": a.read,
        "warnings": a.warnings,
        "patterns": {c: p.name for c, p in a.patterns.items()},
        "today": {"gpus": a.today_total, "classes": a.today_gpus},
        "recommended": rec.summary() if rec else None,
        "frees_gpus": a.today_total - rec.gpus if rec else None,
        "more_than_today": a.beyond_today or None,
        "memory_bound": a.memory.line(rec.gpus, a.pool) if a.memory and rec else None,
        "next_options": a.next_options,
        "isolation": {c: isolation_of(o.option.mode).line() for c, o in (rec.choice.items() if rec else [])},
        "costing": {
            c: {"workload": k.workload, "own": k.own, "why": k.why, "measure": k.command or None}
            for c, k in a.costing.items()
        },
        "not_measured": a.unmeasured,
        "next_best": [lay.summary() for lay in a.next_best],
        "options": {c: [option_json(o, a.slo) for o in outs] for c, outs in a.outcomes.items()},
        "left_out": a.left_out,
        "cells_left": a.cells_left,
        "assignment": a.assignment,
        "node_commands": node_commands(rec) if rec else [],
        "notes": a.notes,
    }


def recommended_table(a: Advice, r: Layout) -> list[str]:
    lines = [
        "| class | pattern | today GPUs | mode | GPUs | worst pod | its p95 [interval] | pods' p95 median / p90 "
        "| isolation | costed from |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c, o in r.choice.items():
        k = a.costing.get(c)
        costed = (
            "not measured"
            if c in a.unmeasured
            else (f"own: {k.workload}" if k and k.own else f"{k.workload if k else ''}")
        )
        q = o.pods.quantiles()
        worst = o.pods.worst()
        lo = f"{o.pods.lo[worst]:.2f}x" if worst is not None and math.isfinite(o.pods.lo[worst]) else "-"
        p95 = f"{o.p95:.2f}x [{lo}, {upper_text(o.p95_hi)}]" if o.worst_pod else "-"
        spread = f"{q['median']:.2f}x / {q['p90']:.2f}x" if q else "-"
        iso = isolation_of(o.option.mode)
        lines.append(
            f"| {c} | {a.patterns[c].name} | {a.today_gpus[c]} | {o.option.mode} | {o.gpus} | {o.worst_pod or '-'} "
            f"| {p95} | {spread} | {'isolated' if iso.isolates else 'none (memory, faults)'} | {costed} |"
        )
    return lines


def options_table(a: Advice) -> list[str]:
    lines = [
        "| class | mode | GPUs | worst pod p95 | interval | verdict | source |",
        "|---|---|---|---|---|---|---|",
    ]
    for c, outs in a.outcomes.items():
        for o in outs:
            worst = o.pods.worst()
            p95 = "-" if math.isnan(o.p95) else f"{o.p95:.2f}x"
            interval = (
                f"{o.pods.lo[worst]:.2f}x-{upper_text(o.p95_hi)}"
                if worst is not None and math.isfinite(o.pods.lo[worst])
                else "-"
            )
            lines.append(
                f"| {c} | {o.option.mode} | {o.gpus or '-'} | {p95} | {interval} | {o.reason} | {o.option.source} |"
            )
    return lines


def markdown(a: Advice, plot_name: str) -> str:
    lines = [f"# GPU pool advice ({a.model}, every pod's p95 slowdown within {a.slo:g}x)", ""]
    lines += [
        f"Read: {a.read.get('usage', '')}; costs: {a.read.get('costs', '')}.",
        "",
    ]
    lines += [f"Pool: {a.pool.describe()}.", ""]
    lines += [f"- {w}" for w in a.warnings] + ([""] if a.warnings else [])
    r = a.recommended
    if r is None:
        lines += [*headline(a), ""]
    else:
        lines += [f"**Recommended: {r.gpus} GPUs** (today {a.today_total}; frees {a.today_total - r.gpus}).", ""]
        lines += ["```", *headline(a), "```", "", *recommended_table(a, r), ""]
        lines += ["Pod-to-GPU assignment: assignment.csv (and `assignment` in advice.json).", ""]
        lines += [f"![today against the recommendation]({plot_name})", "", "## Isolation", ""]
        lines += [f"- {m}: {ISOLATION[m].line()}" for m in sorted({o.option.kind for o in r.choice.values()})]
        lines += ["", "## How each class is costed", ""]
        lines += [
            f"- {c}: {k.why}" + (f"; measure its own: `{k.command}`" if k.command else "") for c, k in a.costing.items()
        ]
        lines += ["", "## Next-best layouts", ""]
        for lay in a.next_best:
            parts = ", ".join(f"{c} {o.option.mode} (worst pod {upper_text(o.p95_hi)})" for c, o in lay.choice.items())
            lines.append(f"- {lay.gpus} GPUs: {parts}")
        lines += ["", "## Commands that implement it (not applied)", "", "```", *node_commands(r), "```"]
    lines += ["", "## Every option replayed (each class alone)", "", *options_table(a)]
    left = [f"{c}: {why}" for c, whys in a.left_out.items() for why in whys] + a.notes
    if left:
        lines += ["", "## Left out, and notes", "", *(f"- {n}" for n in left)]
    if a.cells_left:
        lines += [
            "",
            "## Measured cells that give no cost (decided by interval)",
            "",
            *(f"- {n}" for n in a.cells_left),
        ]
    return "\n".join(lines) + "\n"


def class_gpus(a: Advice) -> dict[str, int]:
    rec = a.recommended
    return {c: rec.choice[c].gpus for c in a.today_gpus} if rec else {}


def plot_png(a: Advice) -> bytes:
    classes = list(a.today_gpus)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    x = range(len(classes))
    ax.bar([i - 0.2 for i in x], [a.today_gpus[c] for c in classes], 0.4, label=f"today ({a.today_total} GPUs)")
    if a.recommended:
        rec, gpus = a.recommended.choice, class_gpus(a)
        ax.bar([i + 0.2 for i in x], [gpus[c] for c in classes], 0.4, label=f"recommended ({a.recommended.gpus} GPUs)")
        for i, c in enumerate(classes):
            ax.annotate(
                f"{rec[c].option.mode}\nworst pod {rec[c].p95:.2f}x",
                (i + 0.2, gpus[c]),
                ha="center",
                va="bottom",
                fontsize=8,
            )
    ax.set_xticks(list(x), [f"{c}\n({a.patterns[c].name})" for c in classes])
    ax.set_ylabel("GPUs (holding the class's pods)")
    ax.set_title(f"{a.model} pool: today against the recommendation (every pod within {a.slo:g}x)")
    ax.legend(loc="upper right", fontsize=8)
    ax.margins(y=0.25)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def write_advice(a: Advice, out: Path, force: bool = False) -> dict[str, Path]:
    """advice.md/html/json/png and assignment.csv in ``out`` (checked first: a folder holding anything but
    nothing, or a previous advice with ``force``)."""
    check_out(out, force)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out {out}: cannot create it ({exc.strerror or exc})") from None
    png = plot_png(a)
    paths = {
        "json": out / "advice.json",
        "md": out / "advice.md",
        "html": out / "advice.html",
        "png": out / "advice.png",
        "csv": out / "assignment.csv",
    }
    write_atomic(paths["png"], png)
    write_atomic(paths["json"], json.dumps(to_json(a), indent=2) + "\n")
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(ASSIGNMENT_COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows(a.assignment)
    write_atomic(paths["csv"], buf.getvalue())
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
