"""``advise --check``: fit on the first part of the window, replay the chosen layout on the rest.

The fit is the whole advice on steps ``[0, s)`` (patterns, options, the layout's groups): per class it
predicts its worst pod's p95 slowdown (the upper end). The replay runs each group of the layout on steps
``[s, end)`` with the same measured costs: pods already assigned keep their GPU, pods new in the rest go
first-fit (by presence) into the group's GPUs, and GPUs opened beyond the group's are overflow. Per class:
predicted against replayed worst pod, the pods not within the target, the GPUs and the overflow.

The check **fails** (:attr:`CheckResult.passed`) when, in the replayed part, any pod of a class is not within
the target by its upper end, any group overflows its GPUs, or a class appears that the fit never saw (its
pods have no GPUs in the layout); each failure is said per class.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharebench.advise.advice import AdviseOptions, advise
from sharebench.advise.costs import Costs
from sharebench.advise.layout import Group, Layout
from sharebench.advise.options import check_fraction
from sharebench.advise.replay import Member, Outcome, replay_members, upper_text
from sharebench.advise.usage import Usage, class_patterns
from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.patterns import PatternSpec


@dataclass(frozen=True)
class CheckRow:
    cls: str
    pattern: str
    mode: str
    gpus: int
    predicted_p95: float  # the fit's worst pod (upper end)
    replayed_p95: float  # the replay's worst pod (upper end); NaN: the class is gone in the rest
    overflow_gpus: int
    pods_kept: int
    pods_new: int
    slo: float
    pods_not_within: int = 0
    worst_pod: str = ""

    @property
    def within(self) -> bool:
        return self.pods_not_within == 0 and (math.isnan(self.replayed_p95) or self.replayed_p95 <= self.slo)

    def failures(self) -> list[str]:
        out = []
        if not self.within:
            out.append(
                f"{self.cls}: {self.pods_not_within} pod(s) not within {self.slo:g}x "
                f"(worst {self.worst_pod}: {upper_text(self.replayed_p95)})"
            )
        if self.overflow_gpus:
            out.append(
                f"{self.cls}: its pods need {self.overflow_gpus} GPU(s) beyond the layout's {self.gpus} in {self.mode} "
                f"(+{self.overflow_gpus / max(self.gpus, 1):.0%})"
            )
        return out


@dataclass(frozen=True)
class CheckOptions:
    """How ``advise --check`` fits: the fitted share of the window, and how to advise."""

    fit_fraction: float = 0.5
    allow_other_model: bool = False
    advise: AdviseOptions | None = None


@dataclass(frozen=True)
class WindowSplit:
    """The window cut in two: the part the advice is fitted on, and the rest it is replayed on."""

    fit: Usage
    rest: Usage


@dataclass
class CheckResult:
    fit_window: tuple[str, str]
    replay_window: tuple[str, str]
    slo: float
    rows: list[CheckRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unplanned: list[str] = field(default_factory=list)  # classes only in the replayed part

    def failures(self) -> list[str]:
        out = [f for r in self.rows for f in r.failures()]
        return out + [f"{c}: appears only after the fit; its pods have no GPUs in the layout" for c in self.unplanned]

    @property
    def passed(self) -> bool:
        return bool(self.rows) and not self.failures()

    def lines(self) -> list[str]:
        head = (
            f"check: fit {self.fit_window[0]} to {self.fit_window[1]}, replayed on {self.replay_window[0]} to "
            f"{self.replay_window[1]} (every pod's p95 slowdown within {self.slo:g}x)"
        )
        out = [
            head,
            f"  {'class':<14} {'mode':<18} {'GPUs':>5} {'predicted':>10} {'replayed':>9} {'overflow':>9}  pods",
        ]
        for r in self.rows:
            flag = "" if r.within else f"  {r.pods_not_within} not within"
            replayed = "-" if math.isnan(r.replayed_p95) else upper_text(r.replayed_p95)
            out.append(
                f"  {r.cls:<14} {r.mode:<18} {r.gpus:>5} {upper_text(r.predicted_p95):>10} {replayed:>9} "
                f"{r.overflow_gpus:>9}  {r.pods_kept} kept, {r.pods_new} new{flag}"
            )
        verdict = (
            "check passed" if self.passed else "check FAILED: " + "; ".join(self.failures() or ["nothing to replay"])
        )
        return [*out, *(f"  note: {n}" for n in self.notes), f"  {verdict}"]

    def to_json(self) -> dict[str, Any]:
        return {
            "fit_window": list(self.fit_window),
            "replay_window": list(self.replay_window),
            "slo": self.slo,
            "passed": self.passed,
            "failures": self.failures(),
            "classes": [
                {
                    "class": r.cls,
                    "pattern": r.pattern,
                    "mode": r.mode,
                    "gpus": r.gpus,
                    "predicted_worst_p95": round(r.predicted_p95, 4),
                    "replayed_worst_p95": None if math.isnan(r.replayed_p95) else round(r.replayed_p95, 4),
                    "worst_pod": r.worst_pod,
                    "pods_not_within": r.pods_not_within,
                    "overflow_gpus": r.overflow_gpus,
                    "pods_kept": r.pods_kept,
                    "pods_new": r.pods_new,
                    "within_target": r.within,
                }
                for r in self.rows
            ],
            "notes": self.notes,
        }


def split_window(usage: Usage, fit_fraction: float) -> WindowSplit:
    fraction = check_fraction(fit_fraction, "--check")
    cut = int(round(usage.steps * float(fraction or 0.5)))
    if cut < 1 or cut >= usage.steps:
        raise UserError(f"--check {fit_fraction:g} leaves no step to fit or replay in a window of {usage.steps} steps")
    return WindowSplit(usage.slice(0, cut), usage.slice(cut, usage.steps))


def check(
    usage: Usage, costs: Costs, overrides: dict[str, PatternSpec], slo: float, options: CheckOptions = CheckOptions()
) -> CheckResult:
    """Fit on the first ``options.fit_fraction`` of the window, replay the chosen layout on the rest."""
    split = split_window(usage, options.fit_fraction)
    fit, rest = split.fit, split.rest
    patterns = class_patterns(fit, {c: k for c, k in overrides.items() if c in fit.class_names()})
    how = options.advise or AdviseOptions(allow_other_model=options.allow_other_model)
    advice = advise(fit, costs, patterns, slo, how)
    result = CheckResult((fit.time_at(0), fit.time_at(fit.steps)), (rest.time_at(0), rest.time_at(rest.steps)), slo)
    lay = advice.recommended
    if lay is None:
        result.notes.append("no layout met the target on the fitted part: nothing to replay")
        return result
    fitted = Fitted(lay, patterns, slo)
    for g in lay.groups:
        result.rows += replay_group(split, fitted, g)
    result.unplanned = [c for c in rest.class_names() if c not in patterns]
    return result


@dataclass(frozen=True)
class Fitted:
    """What the fit chose: the layout, each class's pattern kind, and the target."""

    layout: Layout
    patterns: dict[str, PatternSpec]
    slo: float


def replay_group(split: WindowSplit, fitted: Fitted, g: Group) -> list[CheckRow]:
    """One group of the fitted layout replayed on ``split.rest``: a row per class."""
    fit, rest, lay = split.fit, split.rest, fitted.layout
    index = {name: i for i, name in enumerate(rest.pods)}
    pinned = [[index[fit.pods[p]] for p in b if fit.pods[p] in index] for b in g.bins]
    here = [c for c in g.classes if c in rest.class_names()]
    members = [Member(c, rest.pods_of(c), lay.choice[c].option) for c in here]
    bins, got = replay_members(rest, members, fitted.slo, pinned) if members else ([], {})
    rows = []
    for c in g.classes:
        o = lay.choice[c]
        kept = sum(1 for b in pinned for p in b if rest.classes[p] == c)
        pattern = fitted.patterns[c].name
        if c not in got:
            rows.append(CheckRow(c, pattern, g.mode, g.gpus, o.p95_hi, math.nan, 0, kept, 0, fitted.slo))
            continue
        rows.append(class_row((o, got[c]), (g, bins), (kept, len(rest.pods_of(c)) - kept), fitted))
    return rows


def class_row(
    outs: tuple[Outcome, Outcome], where: tuple[Group, list[list[int]]], pods: tuple[int, int], fitted: Fitted
) -> CheckRow:
    """A class's row: its fitted worst pod against the replayed one, its pods not within, its overflow GPUs."""
    fitted_o, got = outs
    g, bins = where
    mine = set(map(int, got.pods.pods))
    beyond = sum(1 for b in bins[g.gpus :] if any(p in mine for p in b))
    return CheckRow(
        got.cls,
        fitted.patterns[got.cls].name,
        g.mode,
        g.gpus,
        fitted_o.p95_hi,
        got.p95_hi if got.bins else math.nan,
        beyond,
        pods[0],
        pods[1],
        fitted.slo,
        got.pods.over(fitted.slo),
        got.worst_pod,
    )


def write_check(result: CheckResult, out: Path) -> Path:
    path = out / "check.json"
    write_atomic(path, json.dumps(result.to_json(), indent=2) + "\n")
    return path
