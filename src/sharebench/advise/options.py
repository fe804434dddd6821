"""What a site says to ``advise``, checked before anything is read or written: light (no numpy, pandas).

``--class NAME=[PATTERN][,results=DIR][,isolation=required]`` (:func:`parse_classes`): a class's pattern
kind (and settings) instead of the inferred one, the results folder of its own workload (its costs
then come from that folder's points only), and whether it needs isolation (then only a mode that
isolates memory and faults is offered: whole GPUs or MIG). Keys are advise's own (``results``,
``isolation``); every other item belongs to the pattern, as ``--pattern`` spells it.

``--out`` (:func:`check_out`): a new or empty folder, or a previous advice (its own files only)
with ``--force``; anything else there is refused without ``--force``, and a file is refused in one line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from sharebench.errors import UserError
from sharebench.patterns import PATTERNS, PatternSpec, parse_pattern

CLASS_KEYS = ("results", "isolation")
ISOLATION_WORDS = ("required", "none")
CLASS_GRAMMAR = "NAME=[PATTERN][,results=DIR][,isolation=required]"
DEFAULT_HEADROOM = 0.1  # the share of each GPU's (or instance's) memory left free when pods are packed
MAX_HEADROOM = 0.9
# what an advice writes into --out: a folder holding only these (advice.json among them) is a previous advice
ADVICE_FILES = ("advice.json", "advice.md", "advice.html", "advice.png", "assignment.csv", "check.json")


@dataclass(frozen=True)
class ClassChoice:
    """What ``--class`` says of one class: its pattern kind (None: inferred from its usage) and the
    pattern as written (``label``, '' none), its own results folder, whether it needs isolation."""

    name: str
    pattern: PatternSpec | None = None
    label: str = ""
    results: Path | None = None
    isolation: bool = False


def parse_class(item: str) -> ClassChoice:
    """One ``--class`` value; a one-line UserError naming what is wrong and the grammar."""
    name, eq, rest = item.partition("=")
    bad = f"bad --class {item!r}; allowed: {CLASS_GRAMMAR} with PATTERN one of {', '.join(PATTERNS)}"
    if not eq or not name.strip() or not rest.strip():
        raise UserError(bad)
    own: dict[str, str] = {}
    pattern: list[str] = []
    for part in rest.split(","):
        key, is_key, value = part.partition("=")
        if is_key and key.strip() in CLASS_KEYS:
            if key.strip() in own or not value.strip():
                raise UserError(f"{bad} ({key.strip()}= given twice or empty)")
            own[key.strip()] = value.strip()
        else:
            pattern.append(part)
    text = ",".join(pattern).strip()
    spec = parse_pattern(text).spec if text else None
    isolation = own.get("isolation", "none")
    if isolation not in ISOLATION_WORDS:
        raise UserError(f"bad isolation={isolation!r} in --class {item!r}; allowed: {', '.join(ISOLATION_WORDS)}")
    results = Path(own["results"]) if "results" in own else None
    if results is not None and not results.is_dir():
        raise UserError(f"--class {item!r}: results={results} is no folder; give the results folder of its workload")
    return ClassChoice(name.strip(), spec, text, results, isolation == "required")


def parse_classes(items: list[str] | None) -> dict[str, ClassChoice]:
    """Every ``--class`` value by class name; a class named twice is a one-line UserError."""
    out: dict[str, ClassChoice] = {}
    for item in items or []:
        choice = parse_class(item)
        if choice.name in out:
            raise UserError(f"--class {choice.name} given twice; give each class once ({CLASS_GRAMMAR})")
        out[choice.name] = choice
    return out


def parse_class_overrides(items: list[str] | None) -> dict[str, PatternSpec]:
    """The pattern kinds the ``--class`` values set (a class without one is inferred, so absent here)."""
    return {n: c.pattern for n, c in parse_classes(items).items() if c.pattern is not None}


def check_fraction(value: float | None, what: str) -> float | None:
    """``--check``'s fitted share of the window: 0 < F < 1 (None: no check)."""
    if value is None:
        return None
    if not (math.isfinite(value) and 0 < value < 1):
        raise UserError(f"bad {what} {value!r}; allowed: the fitted share of the window, 0 < F < 1 (e.g. 0.5)")
    return float(value)


def check_headroom(value: float) -> float:
    """``--memory-headroom``: the share of memory kept free, 0..0.9."""
    if not (math.isfinite(value) and 0 <= value <= MAX_HEADROOM):
        raise UserError(
            f"bad --memory-headroom {value!r}; allowed: the share of each GPU's memory kept free, 0..{MAX_HEADROOM:g}"
        )
    return float(value)


def check_out(out: Path, force: bool) -> None:
    """``--out`` may be written: new, empty, or (with ``force``) anything; a previous advice or other
    files there without ``force``, or a file, are one-line UserErrors."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder for the advice (it is created when new)")
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UserError(f"--out {out}: {parent} is a file, not a folder")
    if not out.exists() or force:
        return
    names = sorted(p.name for p in out.iterdir())
    if not names:
        return
    others = [n for n in names if n not in ADVICE_FILES]
    if others:
        shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
        raise UserError(f"--out {out} holds files that are not an advice ({shown}); choose another folder or --force")
    raise UserError(f"--out {out} already holds an advice ({', '.join(names)}); choose another folder or --force")
