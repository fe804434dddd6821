"""``advise --check``: fit the advice on the first part of the window, replay its choice on the rest.

The fit is the whole advice on steps ``[0, s)`` (patterns, options, packing): per class it predicts a
p95 slowdown on its GPUs. The replay runs the chosen option and assignment on steps ``[s, end)`` with the
same measured costs: pods already assigned keep their GPU, pods new in the rest go first-fit (by
presence) into the layout's GPUs, and GPUs opened beyond the layout's are counted as overflow. Per class:
predicted against replayed p95, the GPUs and the overflow, side by side.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharebench.advise.advice import advise
from sharebench.advise.costs import Costs
from sharebench.advise.replay import Outcome, replay
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
    predicted_p95: float
    replayed_p95: float
    overflow_gpus: int
    pods_kept: int
    pods_new: int
    slo: float

    @property
    def within(self) -> bool:
        return self.replayed_p95 <= self.slo


@dataclass(frozen=True)
class CheckOptions:
    """How ``advise --check`` fits: the fitted share of the window, and costs of another GPU model allowed."""

    fit_fraction: float = 0.5
    allow_other_model: bool = False


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
    seconds: float = 0.0

    def lines(self) -> list[str]:
        head = (
            f"check: fit {self.fit_window[0]} to {self.fit_window[1]}, replayed on {self.replay_window[0]} to "
            f"{self.replay_window[1]} (p95 slowdown target {self.slo:g}x)"
        )
        out = [
            head,
            f"  {'class':<14} {'mode':<18} {'GPUs':>5} {'predicted':>10} {'replayed':>9} {'overflow':>9}  pods",
        ]
        for r in self.rows:
            flag = "" if r.within else "  above the target"
            out.append(
                f"  {r.cls:<14} {r.mode:<18} {r.gpus:>5} {r.predicted_p95:>9.2f}x {r.replayed_p95:>8.2f}x "
                f"{r.overflow_gpus:>9}  {r.pods_kept} kept, {r.pods_new} new{flag}"
            )
        return out + [f"  note: {n}" for n in self.notes]

    def to_json(self) -> dict[str, Any]:
        return {
            "fit_window": list(self.fit_window),
            "replay_window": list(self.replay_window),
            "slo": self.slo,
            "seconds": round(self.seconds, 3),
            "classes": [
                {
                    "class": r.cls,
                    "pattern": r.pattern,
                    "mode": r.mode,
                    "gpus": r.gpus,
                    "predicted_p95": round(r.predicted_p95, 4),
                    "replayed_p95": None if math.isnan(r.replayed_p95) else round(r.replayed_p95, 4),
                    "overflow_gpus": r.overflow_gpus,
                    "pods_kept": r.pods_kept,
                    "pods_new": r.pods_new,
                    "within_target": r.within,
                }
                for r in self.rows
            ],
            "notes": self.notes,
        }


def check(
    usage: Usage, costs: Costs, overrides: dict[str, PatternSpec], slo: float, options: CheckOptions = CheckOptions()
) -> CheckResult:
    """Fit on the first ``options.fit_fraction`` of the window, replay the chosen layout on the rest."""
    t0 = time.perf_counter()
    fit_fraction = options.fit_fraction
    if not (0 < fit_fraction < 1) or not math.isfinite(fit_fraction):
        raise UserError(f"bad --check {float(fit_fraction)!r}; allowed: the fitted share of the window, 0 < F < 1")
    cut = int(round(usage.steps * fit_fraction))
    if cut < 1 or cut >= usage.steps:
        raise UserError(f"--check {fit_fraction:g} leaves no step to fit or replay in a window of {usage.steps} steps")
    split = WindowSplit(usage.slice(0, cut), usage.slice(cut, usage.steps))
    fit, rest = split.fit, split.rest
    patterns = class_patterns(fit, {c: k for c, k in overrides.items() if c in fit.class_names()})
    advice = advise(fit, costs, patterns, slo, options.allow_other_model)
    result = CheckResult((fit.time_at(0), fit.time_at(fit.steps)), (rest.time_at(0), rest.time_at(rest.steps)), slo)
    if advice.recommended is None:
        result.notes.append("no layout met the target on the fitted part: nothing to replay")
    else:
        for cls, o in advice.recommended.choice.items():
            result.rows.append(replay_class(split, cls, patterns[cls], o, slo))
    result.notes += [
        f"class {c} appears only after the fit: not advised" for c in rest.class_names() if c not in patterns
    ]
    result.seconds = time.perf_counter() - t0
    return result


def replay_class(split: WindowSplit, cls: str, spec: PatternSpec, o: Outcome, slo: float) -> CheckRow:
    """The fitted option and assignment of one class (of pattern kind ``spec``) replayed on ``split.rest``."""
    pattern = spec.name
    fit, rest = split.fit, split.rest
    index = {name: i for i, name in enumerate(rest.pods)}
    pinned = [[index[fit.pods[p]] for p in b if fit.pods[p] in index] for b in o.bins]
    kept = sum(len(b) for b in pinned)
    new = len(rest.pods_of(cls)) - kept if cls in rest.class_names() else 0
    if cls not in rest.class_names():
        return CheckRow(cls, pattern, o.option.mode, o.gpus, o.p95, math.nan, 0, 0, 0, slo)
    got = replay(rest, cls, o.option, slo, pinned)
    overflow = max(0, got.gpus - o.gpus) if got.bins else 0
    return CheckRow(cls, pattern, o.option.mode, o.gpus, o.p95, got.p95, overflow, kept, new, slo)


def write_check(result: CheckResult, out: Path) -> Path:
    path = out / "check.json"
    write_atomic(path, json.dumps(result.to_json(), indent=2) + "\n")
    return path
