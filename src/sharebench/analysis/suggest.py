"""A "Measure it" command sized to finish in a stated time on the machine that measured the folder (issue 43).

The Answer suggests a command for each pattern a folder did not measure (``analysis.answer.Evidence.command``).
Run at the folder's own size and the pattern's default burst it could take hours (the default CPU sweep's
interactive suggestion: 59 min; the committed H200 report's: 15.9 h), while the campaigns measure one-unit
bursts, 20-30 of them, at sizes that keep a cell short. :func:`sized_command` sizes the command the way they
do, within ``budget_s`` (``sharebench report --suggest-minutes``, default :data:`DEFAULT_SUGGEST_S`):

* the pattern at the workload's own burst size: a kind named without settings gets bursts of one unit of
  the folder's work (one turn of its particles, one call of a program's work function), a thinking kind
  its default think time scaled to that unit (the default pattern's duty cycle), a serving kind requests of
  one unit at 0.3 of the rate one replica serves alone (as measured here; the campaigns' serve:load=0.3); a
  label the folder measured keeps its own settings;
* :data:`BURSTS` bursts a cell (the campaigns' 20), then fewer down to :data:`MIN_BURSTS`;
* the tracker's size halved (two significant digits, not below :data:`MIN_PARTICLES`) until the cells fit:
  a unit's seconds scale with the particles; a program's work size is its own and is kept.

The prediction is the dry run's (``analysis.cost.cell_seconds``, a mode factor of 1) from the folder's
seconds of one unit alone and its gap between cells; the line says it ("about 7 min: 16 cells, predicted as
--dry-run does ...") and whether it fits the time asked. Without a unit's seconds (a program's batch folder)
the folder's pace per cell predicts it and nothing is resized.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sharebench.analysis.cost import cell_seconds
from sharebench.analysis.reproduce import DEFAULT_SUGGEST_S, DEFAULT_WARMUPS, Reproduce, duration, unit_text
from sharebench.analysis.samples import victim_bursts
from sharebench.errors import UserError
from sharebench.modes import parse_mode
from sharebench.patterns import DEFAULT_BURST, DEFAULT_THINK_S, Pattern, parse_pattern
from sharebench.workloads import Workload

BURSTS = 20  # a cell's bursts first tried (the campaigns measure 20-30)
MIN_BURSTS = 10
MIN_PARTICLES = 100  # a tracker's size is not halved below this
SERVE_LOAD = 0.3  # a serving kind named bare: requests at 0.3 of the rate one replica serves alone (the campaigns')
SIZE_OPTIONS = ("--particles", "--work")


@dataclass(frozen=True)
class Sized:
    """What a suggested command runs: the folder's options with its size, the pattern and neighbours as
    written, the bursts a cell, the predicted seconds of its cells (NaN: not predicted) and what it is from."""

    options: tuple[str, ...]
    pattern: str
    neighbours: str
    bursts: int | None  # --bursts (a cap); None: the sweep's own sample rule
    cells: int
    cells_s: float
    basis: str

    def fits(self, budget_s: float) -> bool:
        return math.isfinite(self.cells_s) and self.cells_s <= budget_s


def size_of(options: Sequence[str]) -> tuple[str, int] | None:
    """The size option and its value in a suggested command's options (``--particles 1700``)."""
    for name in SIZE_OPTIONS:
        value = option_value(options, name)
        if value is not None:
            return name, value
    return None


def option_value(options: Sequence[str], name: str) -> int | None:
    """A whole-number option's value in a suggested command's options (None: not there)."""
    for i, opt in enumerate(options[:-1]):
        if opt == name:
            try:
                return int(float(options[i + 1]))
            except ValueError:
                return None
    return None


def with_size(options: Sequence[str], size: int) -> tuple[str, ...]:
    out = list(options)
    for i, opt in enumerate(out[:-1]):
        if opt in SIZE_OPTIONS:
            out[i + 1] = str(size)
    return tuple(out)


def round2(x: float) -> int:
    """Two significant digits: 12,345 -> 12,000."""
    k = 10 ** max(0, int(math.floor(math.log10(max(x, 1.0)))) - 1)
    return int(round(x / k) * k)


def unit_pattern(text: str, unit_s: float) -> str:
    """A pattern kind named bare at the workload's own burst size (module docstring); a label as written."""
    if not text or ":" in text or not (math.isfinite(unit_s) and unit_s > 0):
        return text  # a label the folder measured, or no unit to size by: as written
    try:
        p = parse_pattern(text)
    except UserError:
        return text
    if p.spec.saturated:
        return text
    if p.think_s is not None:  # a burst of one unit, thinking as long per unit as the default pattern
        return dataclasses.replace(p, units=1, think_s=float(f"{DEFAULT_THINK_S / DEFAULT_BURST:.2g}")).label
    if p.rate_per_s is not None or p.load is not None:  # requests of one unit at 0.3 of the rate served alone
        rate = float(f"{SERVE_LOAD / unit_s:.2g}")
        return Pattern(p.kind, units=1, rate_per_s=rate).label
    return text


@dataclass(frozen=True)
class Ask:
    """What a suggested command measures: the modes, their repeats, the pattern as asked (a kind, or a label
    the folder measured) and the neighbours' pattern ('' the same)."""

    modes: tuple[str, ...]
    repeats: int
    pattern: str
    neighbours: str = ""


def cells_seconds(
    modes: Sequence[str], patterns: tuple[str, str], bursts: int, unit_s: float, turns: int | None = None
) -> float:
    """One cell of each of ``modes`` under ``patterns`` (the victim's, the neighbours'; '' the victim's) with
    ``bursts`` bursts a victim (its alone cell: its kind's alone sample), the dry run's model at a mode factor
    of 1; a batch cell of N replicas N x ``turns`` units (a tracker's run). NaN without ``unit_s``, for a batch
    cell without ``turns`` or for a label that does not parse."""
    if not (math.isfinite(unit_s) and unit_s > 0):
        return math.nan
    try:
        victim, neighbour = parse_pattern(patterns[0]), parse_pattern(patterns[1] or patterns[0])
        replicas = [parse_mode(m).replicas or 1 for m in modes]
    except UserError:
        return math.nan
    if victim.spec.saturated:
        return sum(n * turns * unit_s for n in replicas) if turns else math.nan
    workload = Workload(pattern=victim.label, neighbours=neighbour.label, bursts=bursts)
    return sum(cell_seconds((victim, neighbour), n, victim_bursts(workload, n), unit_s).cell_s for n in replicas)


def predict(reproduce: Reproduce, ask: Ask, size: int | None, bursts: int) -> Sized:
    """The command's cells at ``size`` (None: the folder's) with ``bursts`` bursts, and their seconds."""
    rounds = ask.repeats + DEFAULT_WARMUPS
    cells = len(ask.modes) * rounds
    base = size_of(reproduce.options)
    scale = size / base[1] if base is not None and size is not None and reproduce.unit == "particles" else 1.0
    unit_s = reproduce.unit_s * scale
    options = with_size(reproduce.options, size) if size is not None else reproduce.options
    shown = unit_pattern(ask.pattern, unit_s)
    turns = option_value(reproduce.options, "--turns")
    model = cells_seconds(ask.modes, (shown, ask.neighbours), bursts, unit_s, turns) if ask.pattern else math.nan
    if math.isfinite(model):
        gap = reproduce.gap_s if math.isfinite(reproduce.gap_s) else 0.0
        basis = f", predicted as --dry-run does from this folder's {unit_text(reproduce.unit_s)} per unit alone"
        if scale != 1.0 and base is not None:
            basis += f" at {base[1]:,} {reproduce.unit}, {unit_text(unit_s)} at {size:,}"
        return Sized(options, shown, ask.neighbours, bursts, cells, rounds * (model + len(ask.modes) * gap), basis)
    if math.isfinite(reproduce.cell_s) and reproduce.cell_s > 0:
        basis = f" at this folder's {reproduce.cell_s:.0f} s per cell"  # its bursts: the default's, as it measured
        return Sized(reproduce.options, shown, ask.neighbours, None, cells, cells * reproduce.cell_s, basis)
    return Sized(reproduce.options, shown, ask.neighbours, None, cells, math.nan, "")


def sizes_to_try(reproduce: Reproduce) -> list[int | None]:
    """The folder's size, then halved (two significant digits) down to :data:`MIN_PARTICLES`; a program's
    work size (or none) is its own: only the folder's."""
    base = size_of(reproduce.options)
    if base is None or reproduce.unit != "particles":
        return [None]
    out: list[int | None] = [base[1]]
    size = base[1]
    while size / 2 >= MIN_PARTICLES:
        size = round2(size / 2)
        out.append(size)
    return out


def sized(reproduce: Reproduce, ask: Ask, budget_s: float) -> Sized:
    """The largest size, and the most bursts of :data:`BURSTS` then :data:`MIN_BURSTS`, whose cells fit
    ``budget_s``; the smallest of them when none does (its line says so)."""
    tries = [predict(reproduce, ask, s, b) for b in (BURSTS, MIN_BURSTS) for s in sizes_to_try(reproduce)]
    return next((t for t in tries if t.fits(budget_s)), tries[-1])


def sized_command(reproduce: Reproduce, prefix: Sequence[str], ask: Ask, budget_s: float = DEFAULT_SUGGEST_S) -> str:
    """The suggested command, sized (:func:`sized`), and its predicted time: ```sharebench run ...`` (about
    7 min: 16 cells, ...)``. ``prefix``: what comes before the folder's options (``sharebench run``, a device)."""
    s = sized(reproduce, ask, budget_s)
    parts = [*prefix, *s.options, f"--pattern {s.pattern}"]
    if ask.neighbours:
        parts.append(f"--neighbours {ask.neighbours}")
    if s.bursts is not None and not parse_pattern(s.pattern).spec.saturated:
        parts.append(f"--bursts {s.bursts}")
    run = " ".join([*parts, f"--modes {','.join(ask.modes)}", f"--repeats {ask.repeats}"])
    if not math.isfinite(s.cells_s):
        return f"`{run}`"
    within = "" if s.fits(budget_s) else f", more than the {duration(budget_s)} asked"
    return f"`{run}` (about {duration(s.cells_s)}: {s.cells} cells{s.basis}{within})"
