"""The advice: per class the option with the fewest GPUs within the SLO, the next-best layouts, and the files.

A layout gives every class one option (:mod:`sharebench.advise.replay`); classes never share a GPU, so a
layout's GPU count is the sum of its classes' and a class's p95 slowdown does not depend on the others'
choice. The recommendation takes, per class, the feasible option with the fewest GPUs (ties: the lower
p95, then measured before predicted); the next-best layouts are the other feasible combinations with
the fewest GPUs. Today's pool is the GPUs the trace's pods ran on.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # before pyplot: figures are files, never windows
import matplotlib.pyplot as plt

from sharebench.advise.costs import Costs
from sharebench.advise.replay import Outcome, class_options, replay
from sharebench.advise.usage import Usage, sanity
from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.modes import BASELINE
from sharebench.patterns import PatternSpec

NEXT_BEST = 3
ASSIGNMENT_COLUMNS = ("pod", "class", "gpu", "mode", "instance", "present_from", "present_to")


@dataclass(frozen=True)
class Layout:
    choice: dict[str, Outcome]  # class -> its outcome
    unmeasured: frozenset[str] = frozenset()  # classes kept whole because their pattern has no measured cost

    @property
    def gpus(self) -> int:
        return sum(o.gpus for o in self.choice.values())

    def summary(self) -> dict[str, Any]:
        return {
            "gpus": self.gpus,
            "classes": {
                c: {
                    "mode": "not measured" if c in self.unmeasured else o.option.mode,
                    "gpus": o.gpus,
                    "p95_slowdown": round(o.p95, 4),
                    "source": o.option.source,
                    "predicted": o.option.predicted,
                    "measured": c not in self.unmeasured,
                }
                for c, o in self.choice.items()
            },
        }


@dataclass(frozen=True)
class Advice:
    slo: float
    model: str
    patterns: dict[str, PatternSpec]  # class -> its pattern kind
    today_gpus: dict[str, int]  # class -> peak GPUs holding its present pods today
    today_total: int
    outcomes: dict[str, list[Outcome]]
    left_out: dict[str, list[str]]
    recommended: Layout | None
    next_best: list[Layout]
    work: dict[str, tuple[float, float]]  # class -> (work in, work replayed) under the recommendation
    notes: list[str]
    read: dict[str, Any] = field(default_factory=dict)  # what advise read: usage, costs, models
    warnings: list[str] = field(default_factory=list)
    unmeasured: dict[str, str] = field(default_factory=dict)  # class -> the command that measures it
    assignment: list[dict[str, Any]] = field(default_factory=list)


def rank(o: Outcome) -> tuple[int, float, int]:
    return (o.gpus, o.p95, int(o.option.predicted))


def pareto(outs: list[Outcome]) -> list[Outcome]:
    """The feasible outcomes no other beats on both GPUs and p95 (ties: the first in rank order)."""
    kept: list[Outcome] = []
    for o in sorted((o for o in outs if o.feasible), key=rank):
        if not any(k.gpus <= o.gpus and k.p95 <= o.p95 for k in kept):
            kept.append(o)
    return kept


def check_models(usage: Usage, costs: Costs, allow_other_model: bool) -> list[str]:
    """UserError when the usage's GPU model is not the costs' (unless allowed: then a warning)."""
    if usage.gpu_model is None:
        return [f"the usage names no GPU model: the costs' {costs.model.key} assumed (--usage-gpu-model to say)"]
    if usage.gpu_model == costs.model.key:
        return []
    text = f"the usage ran on {usage.gpu_model} ({usage.model_from}), the costs were measured on {costs.model.key}"
    if not allow_other_model:
        raise UserError(f"{text}; give results of {usage.gpu_model} or --allow-other-model")
    return [f"warning: {text} (--allow-other-model): the slowdowns are another GPU's"]


def measure_command(pattern: PatternSpec, model: str, slo: float) -> str:
    """The sweep that measures a pattern's sharing costs on the pool's GPU model."""
    modes = "exclusive,timeslice:2,timeslice:4,timeslice:8,mps:2,mps:4,mps:8,mig-emulated:7x1g.18gb"
    return (
        f"sharebench run --device cuda:0 --pattern {pattern.name} --modes {modes} --slo {slo:g} "
        f"--out results/{model.lower()}/{pattern.name}-users (on a {model}, then sharebench report)"
    )


def read_summary(usage: Usage, costs: Costs, patterns: dict[str, PatternSpec]) -> dict[str, Any]:
    return {
        "usage": usage.describe(),
        "pods": len(usage.pods),
        "peak_pods_present": usage.peak_pods(),
        "classes": {c: patterns[c].name for c in usage.class_names()},
        "steps": usage.steps,
        "step_s": usage.step_s,
        "window": [usage.time_at(0), usage.time_at(usage.steps)],
        "usage_gpu_model": usage.gpu_model,
        "costs_gpu_model": costs.model.key,
        "costs": f"{len(costs.points)} measured points from {len(costs.folders)} results folder(s)",
        "results_folders": list(costs.folders),
    }


def advise(
    usage: Usage, costs: Costs, patterns: dict[str, PatternSpec], slo: float, allow_other_model: bool = False
) -> Advice:
    warnings = check_models(usage, costs, allow_other_model) + sanity(usage, costs.model)
    warnings += [n for n in costs.notes if "allow-other-model" in n]
    outcomes: dict[str, list[Outcome]] = {}
    left_out: dict[str, list[str]] = {}
    notes = [n for n in costs.notes if "allow-other-model" not in n]
    measured = costs.kinds()
    for cls in usage.class_names():
        co = class_options(costs, patterns[cls], usage.level(usage.pods_of(cls)))
        if patterns[cls].name not in measured:  # kept whole: the batch costs are shown, never applied
            co.notes = [n.removeprefix("warning: ") for n in co.notes]
        left_out[cls] = co.left_out
        notes += [f"{cls}: {n}" for n in co.notes if not n.startswith("warning")]
        warnings += [f"warning: {cls}: {n.removeprefix('warning: ')}" for n in co.notes if n.startswith("warning")]
        outcomes[cls] = [replay(usage, cls, opt, slo) for opt in co.options]
    unmeasured = {c: measure_command(p, costs.model.key, slo) for c, p in patterns.items() if p.name not in measured}
    recommended, nxt = choose(outcomes, unmeasured)
    work = {c: (o.work_in_s, o.work_replayed_s) for c, o in (recommended.choice.items() if recommended else [])}
    today = {c: usage.gpus_present(usage.pods_of(c)) for c in usage.class_names()}
    result = Advice(
        slo,
        costs.model.key,
        patterns,
        today,
        usage.gpus_present(),
        outcomes,
        left_out,
        recommended,
        nxt,
        work,
        notes,
        read_summary(usage, costs, patterns),
        warnings,
        unmeasured,
    )
    if recommended:
        result.assignment.extend(assignment(usage, recommended))
    return result


def choose(outcomes: dict[str, list[Outcome]], unmeasured: dict[str, str]) -> tuple[Layout | None, list[Layout]]:
    """The recommended layout (per class its feasible option with the fewest GPUs; a class not measured
    kept whole) and the next-best combinations."""
    feasible = {
        c: [o for o in outs if o.option.mode == BASELINE and o.feasible][:1] if c in unmeasured else pareto(outs)
        for c, outs in outcomes.items()
    }
    if not all(feasible.values()):
        return None, []
    keep = frozenset(unmeasured)
    recommended = Layout({c: f[0] for c, f in feasible.items()}, keep)
    combos = itertools.product(*(f[: NEXT_BEST + 1] for f in feasible.values()))
    layouts = [Layout(dict(zip(feasible, combo)), keep) for combo in combos]
    layouts.sort(key=lambda lay: (lay.gpus, max(o.p95 for o in lay.choice.values())))
    return recommended, [lay for lay in layouts if lay.choice != recommended.choice][:NEXT_BEST]


def assignment(usage: Usage, layout: Layout) -> list[dict[str, Any]]:
    """Pod to GPU (``pool-gpu-NNN``) and instance (or slot): pods of a GPU take, in order of arrival,
    the lowest instance free over their presence."""
    rows: list[dict[str, Any]] = []
    gpu = 0
    for cls, o in layout.choice.items():
        for pods in o.bins:
            free_at: list[int] = []  # per instance: the step it is free again
            for p in sorted(pods, key=lambda q: (int(usage.first[q]), usage.pods[q])):
                inst = next((i for i, t in enumerate(free_at) if t <= usage.first[p]), len(free_at))
                if inst == len(free_at):
                    free_at.append(0)
                free_at[inst] = int(usage.last[p])
                rows.append(
                    {
                        "pod": usage.pods[p],
                        "class": cls,
                        "gpu": f"pool-gpu-{gpu + 1:03d}",
                        "mode": o.option.mode,
                        "instance": inst,
                        "present_from": usage.time_at(int(usage.first[p])),
                        "present_to": usage.time_at(int(usage.last[p])),
                    }
                )
            gpu += 1
    return rows


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
        "read": a.read,
        "warnings": a.warnings,
        "patterns": {c: p.name for c, p in a.patterns.items()},
        "today": {"gpus": a.today_total, "classes": a.today_gpus},
        "recommended": a.recommended.summary() if a.recommended else None,
        "frees_gpus": a.today_total - a.recommended.gpus if a.recommended else None,
        "not_measured": a.unmeasured,
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
                    "neighbours_above_measured": round(o.clamped, 4),
                }
                for o in outs
            ]
            for c, outs in a.outcomes.items()
        },
        "left_out": a.left_out,
        "assignment": a.assignment,
        "node_commands": node_commands(a.recommended) if a.recommended else [],
        "notes": a.notes,
    }


def markdown(a: Advice, plot_name: str) -> str:
    lines = [f"# GPU pool advice ({a.model}, p95 slowdown target {a.slo:g}x)", ""]
    lines += [
        f"Read: {a.read.get('usage', '')}; costs: {a.read.get('costs', '')} ({a.read.get('costs_gpu_model')}).",
        "",
    ]
    lines += [f"- {w}" for w in a.warnings] + ([""] if a.warnings else [])
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
            if c in a.unmeasured:
                lines.append(
                    f"| {c} | {a.patterns[c].name} | {a.today_gpus[c]} | not measured (kept whole) | {o.gpus} | - | "
                    f"measure it: `{a.unmeasured[c]}` |"
                )
                continue
            lines.append(
                f"| {c} | {a.patterns[c].name} | {a.today_gpus[c]} | {o.option.mode} | {o.gpus} | {o.p95:.2f}x | {o.option.source} |"
            )
        lines += ["", "Pod-to-GPU assignment: assignment.csv (and `assignment` in advice.json)."]
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
    ax.set_xticks(list(x), [f"{c}\n({a.patterns[c].name})" for c in classes])
    ax.set_ylabel("GPUs")
    ax.set_title(f"{a.model} pool: today against the recommendation (p95 target {a.slo:g}x)")
    ax.legend(loc="upper right", fontsize=8)
    ax.margins(y=0.25)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def write_advice(a: Advice, out: Path, force: bool = False) -> dict[str, Path]:
    """advice.md/html/json/png and assignment.csv in ``out``; an existing advice there is a UserError
    unless ``force``."""
    if (out / "advice.json").exists() and not force:
        raise UserError(f"--out {out} already holds an advice (advice.json); choose another folder or --force")
    out.mkdir(parents=True, exist_ok=True)
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
