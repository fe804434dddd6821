"""Values a user types, parsed in one place: whole numbers, lists of counts, numbers that may be
missing. Each parser names the bad value and what is allowed in a one-line :class:`UserError`."""

from __future__ import annotations

import math
from typing import Any

from sharebench.errors import UserError


def whole_number(name: str, value: Any, lo: int = 0) -> int:
    """``value`` (an int, ``"3"``, ``"1e6"`` or a float with no fraction, as KFP passes numbers) as an
    int >= ``lo``; a bool is refused."""
    if isinstance(value, bool):
        raise UserError(f"bad {name} {value!r}; allowed: a whole number >= {lo}")
    try:
        number = float(str(value).strip().replace("_", ""))
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number != int(number) or int(number) < lo:
        raise UserError(f"bad {name} {value!r}; allowed: a whole number >= {lo}")
    return int(number)


def counts(name: str, values: str | list[Any], example: str = "5e6,1e7") -> list[int]:
    """``"5e6,1e7,1.5e7"`` or a list -> [5000000, 10000000, 15000000]: whole numbers > 0, duplicates
    dropped (first kept)."""
    items = values.split(",") if isinstance(values, str) else list(values)
    out = []
    for item in items:
        text = str(item).strip().replace("_", "")
        if not text:
            continue
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number <= 0 or number != int(number):
            raise UserError(f"bad {name} {item!r}; allowed: whole numbers > 0 such as 10000 or 5e6")
        out.append(int(number))
    if not out:
        raise UserError(f"no {name} given; allowed: a comma-separated list such as {example}")
    return list(dict.fromkeys(out))


def number_or_nan(value: Any) -> float:
    """A float, or NaN where the value is missing or not a number (a table cell not measured)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def cpu_set(text: str) -> list[int]:
    """``"0-3,6"`` -> [0, 1, 2, 3, 6]."""
    out: list[int] = []
    try:
        for part in str(text).split(","):
            part = part.strip()
            if "-" in part:
                first, last = part.split("-")
                out += list(range(int(first), int(last) + 1))
            elif part:
                out.append(int(part))
    except ValueError:
        out = []
    if not out or min(out) < 0:
        raise UserError(f"bad cpus {text!r}; allowed: a list of core numbers like 0-3,6")
    return out


def format_cpu_set(cpus: list[int] | tuple[int, ...] | set[int] | None) -> str:
    """[0, 1, 2, 5] -> ``"0-2,5"`` (the inverse of :func:`cpu_set`); empty -> ``""``."""
    if not cpus:
        return ""
    ordered = sorted({int(c) for c in cpus})
    parts, start, prev = [], ordered[0], ordered[0]
    for c in [*ordered[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        if c is not None:
            start = prev = c
    return ",".join(parts)
