"""A "Measure it" command sized to finish in a stated time on the machine that measured the folder, and to
decide what it measures (issues 42, 43).

The Answer suggests a command for each pattern a folder did not measure (``analysis.answer.Evidence.command``).
A patterned cell runs until every user's p95 is decided (``analysis.samples``: 113 samples a user for 2 users,
99 alone), so a suggestion never caps its cells (no ``--bursts``): a cap below the rule's fewest would leave
every cell undecided. :func:`sized_command` writes, within ``budget_s`` (``sharebench report
--suggest-minutes``, default :data:`DEFAULT_SUGGEST_S`):

* users or a service of the pattern's own replicas (no other neighbours): a **capacity search** of the
  folder's searchable families (``--capacity --modes timeslice,mps --budget 10m``), which answers how many
  per GPU; predicted as its dry run predicts it (``analysis.cost.search_cost``: the N it would measure if each
  verdict were the cost model's, a cell each, decided at its first look) and bounded by its ``--budget``;
* a user beside other neighbours, or a folder with no searchable family: the **fixed modes** with one repeat
  (``--repeats 1``; the alone cell once, its warm-up, every mode's warm-up), predicted as the fixed dry run
  predicts it (``analysis.cost.patterned_cell`` per cell at its expected samples);
* batch: the fixed modes with the repeats asked (an interval of a loss needs them), N x turns units a cell;

each at the workload's own burst size: a kind named without settings gets bursts of one unit of the folder's
work (one turn of its particles, one call of a program's work function), a thinking kind its default think
time per unit (the default pattern's), a serving kind requests of one unit at 0.3 of the rate one replica
serves alone (as measured here; the campaigns' serve:load=0.3); a label the folder measured keeps its own
settings. The tracker's size is halved (two significant digits, not below :data:`MIN_PARTICLES`) until the
prediction fits the time asked: a unit's seconds scale with the particles; a program's work size is its own
and is kept.

The prediction is the dry run's ``predicted: N s``: the cells from the folder's seconds of one unit alone and
its gap between cells, the recorded set-up (``analysis.cost.DEFAULT_OVERHEADS``), the report
(``analysis.cost.report_seconds``) and a calibration of one unit; the line says it ("about 7 min: 16 cells,
predicted as --dry-run does ...") and whether it fits the time asked. Without a unit's seconds (a program's
batch folder) the folder's pace per cell predicts it and nothing is resized.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from sharebench.analysis.cost import (
    DEFAULT_OVERHEADS,
    PROBE_SETUP_S,
    SearchAsk,
    patterned_cell,
    report_seconds,
    search_cost,
)
from sharebench.analysis.kinds import is_emulation
from sharebench.analysis.reproduce import DEFAULT_SUGGEST_S, DEFAULT_WARMUPS, Reproduce, duration, unit_text
from sharebench.analysis.tail import TailRule
from sharebench.errors import UserError
from sharebench.modes import DEFAULT_USERS, family_max, is_baseline, parse_family, parse_mode
from sharebench.parse import fmt_duration
from sharebench.patterns import DEFAULT_BURST, DEFAULT_SLO, DEFAULT_THINK_S, Pattern, parse_pattern
from sharebench.workloads import Workload

MIN_PARTICLES = 100  # a tracker's size is not halved below this
SERVE_LOAD = 0.3  # a serving kind named bare: requests at 0.3 of the rate one replica serves alone (the campaigns')
SIZE_OPTIONS = ("--particles", "--work")
PATTERNED_REPEATS = 1  # a patterned cell runs until decided: one repeat of each mode


@dataclass(frozen=True)
class Ask:
    """What a suggested command measures: the modes, their repeats (batch; a patterned cell runs until
    decided, once), the pattern as asked (a kind, or a label the folder measured) and the neighbours'
    pattern ('' the same)."""

    modes: tuple[str, ...]
    repeats: int
    pattern: str
    neighbours: str = ""
    slo: float = DEFAULT_SLO  # the p95 slowdown target a search decides by

    def families(self) -> tuple[str, ...]:
        """The searchable families of the modes (``timeslice:2`` -> ``timeslice``; emulations left out)."""
        out: list[str] = []
        for m in self.modes:
            if is_baseline(m) or is_emulation(m):
                continue
            try:
                mode = parse_mode(m)
            except UserError:
                continue
            family = parse_family(mode.kind)
            if family is not None and mode.interval is None and mode.thread_pct is None and family not in out:
                out.append(family)
        return tuple(out)


@dataclass(frozen=True)
class Sized:
    """What a suggested command runs: its arguments after the prefix, its cells, the predicted seconds of
    the whole run as its dry run predicts them (NaN: not predicted; a search: not bounded by its budget),
    what the prediction is from, and the budget that bounds it (a search; None: none)."""

    arguments: tuple[str, ...]
    cells: int
    total_s: float
    basis: str
    bound_s: float | None = None

    def fits(self, budget_s: float) -> bool:
        return math.isfinite(self.total_s) and self.total_s <= budget_s

    @property
    def predicted_s(self) -> float:
        """What the run is predicted to take: its total, at most its budget."""
        return min(self.total_s, self.bound_s) if self.bound_s is not None else self.total_s


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


def overheads_of(options: Sequence[str]) -> tuple[float, float]:
    """The recorded gap between cells and set-up of the device the command runs on (``--device cpu``: the
    CPU's, else a GPU's)."""
    words = " ".join(options).split()
    cpu = any(a == "--device" and b == "cpu" for a, b in zip(words, words[1:]))
    o = DEFAULT_OVERHEADS["cpu" if cpu else "gpu"]
    return o.per_cell_s, o.start_s


@dataclass(frozen=True)
class Basis:
    """One size of a suggestion: its options, one unit's seconds there, the gap between cells and the
    set-up, and the words of the prediction's basis."""

    options: tuple[str, ...]
    unit_s: float
    gap_s: float
    start_s: float
    text: str
    probe_setup_s: float = PROBE_SETUP_S["warm"]  # a search's probe: its new replicas set up

    def total_s(self, cells: int, cells_s: float) -> float:
        """The dry run's total: a calibration of one unit, the set-up, ``cells`` cells (``cells_s`` with
        their gaps) and the report."""
        return self.unit_s + self.start_s + cells_s + report_seconds(cells)


def basis_at(reproduce: Reproduce, prefix: Sequence[str], size: int | None) -> Basis:
    """The folder's options at ``size`` (None: its own) and one unit's seconds there (a tracker's scale with
    its particles)."""
    base = size_of(reproduce.options)
    scale = size / base[1] if base is not None and size is not None and reproduce.unit == "particles" else 1.0
    unit_s = reproduce.unit_s * scale
    options = with_size(reproduce.options, size) if size is not None else reproduce.options
    gap, start = overheads_of([*prefix, *options])
    gap = reproduce.gap_s if math.isfinite(reproduce.gap_s) else gap
    text = f", predicted as --dry-run does from this folder's {unit_text(reproduce.unit_s)} per unit alone"
    if scale != 1.0 and base is not None:
        text += f" at {base[1]:,} {reproduce.unit}, {unit_text(unit_s)} at {size:,}"
    setup = PROBE_SETUP_S["warm" if reproduce.unit == "particles" else "exec"]  # a program starts in each probe
    return Basis(tuple(options), unit_s, gap, start, text, setup)


def workload_of(reproduce: Reproduce, pattern: str, neighbours: str = "") -> Workload:
    """The workload a suggested command runs, for its cost: a program's (``--exec``: its latencies spread as a
    program's, ``analysis.cost.SPREAD``) or a tracker's, under ``pattern`` beside ``neighbours``."""
    words = list(reproduce.options)
    command = words[words.index("--exec") + 1] if "--exec" in words[:-1] else None
    engine = "exec" if command else "simpletrack"
    return Workload(engine=engine, command=command, pattern=pattern, neighbours=neighbours or None)


def replicas_of(modes: Sequence[str]) -> list[int] | None:
    try:
        return [parse_mode(m).replicas or 1 for m in modes]
    except UserError:
        return None


def fixed_patterned(b: Basis, ask: Ask, pattern: str, reproduce: Reproduce) -> Sized:
    """The fixed modes under a pattern, one repeat and its warm-up (``sweep.plan``'s cells: the alone cell
    once after its warm-up, then every other mode's warm-up and repeat), as the fixed dry run predicts."""
    workload = workload_of(reproduce, pattern, ask.neighbours)
    replicas = replicas_of([m for m in ask.modes if not is_baseline(m)])
    if replicas is None:
        return Sized((), 0, math.nan, "")
    cells = [patterned_cell(workload, 1, b.unit_s, warmup=True), patterned_cell(workload, 1, b.unit_s)]
    for warm in [True] * DEFAULT_WARMUPS + [False] * PATTERNED_REPEATS:
        cells += [patterned_cell(workload, n, b.unit_s, warmup=warm) for n in replicas]
    cells_s = sum(c.cell_s + b.gap_s for c in cells)
    args = [*b.options, f"--pattern {pattern}"]
    if ask.neighbours:
        args.append(f"--neighbours {ask.neighbours}")
    args += [f"--modes {','.join(ask.modes)}", f"--repeats {PATTERNED_REPEATS}"]
    if not (math.isfinite(b.unit_s) and b.unit_s > 0):
        return paced(tuple(args), len(cells), reproduce)
    return Sized(tuple(args), len(cells), b.total_s(len(cells), cells_s), b.text)


def paced(args: tuple[str, ...], cells: int, reproduce: Reproduce) -> Sized:
    """Without a unit's seconds: ``cells`` at the folder's pace per cell (its cells' own lengths), else
    not predicted."""
    if math.isfinite(reproduce.cell_s) and reproduce.cell_s > 0:
        return Sized(args, cells, cells * reproduce.cell_s, f" at this folder's {reproduce.cell_s:.0f} s per cell")
    return Sized(args, cells, math.nan, "")


def search(b: Basis, ask: Ask, pattern: str, budget_s: float, reproduce: Reproduce) -> Sized:
    """A capacity search of the modes' families (``--capacity --budget``), as its dry run predicts it."""
    workload = workload_of(reproduce, pattern)
    lo, hi = DEFAULT_USERS
    families = ask.families()
    search_ask = SearchAsk(
        tuple((f, family_max(f, hi)) for f in families), lo, TailRule(ask.slo), 1, b.gap_s, b.probe_setup_s
    )
    cost = search_cost(workload, search_ask, b.unit_s)
    alone = [patterned_cell(workload, 1, b.unit_s, warmup=True), patterned_cell(workload, 1, b.unit_s)]
    cells = len(alone) + cost.cells
    cells_s = sum(c.cell_s + b.gap_s for c in alone) + cost.cells_s
    slo = [] if ask.slo == DEFAULT_SLO else [f"--slo {ask.slo:g}"]
    args = (
        *b.options,
        f"--pattern {pattern}",
        f"--capacity --modes {','.join(families)}",
        *slo,
        f"--budget {fmt_duration(budget_s)}",
    )
    if not (math.isfinite(b.unit_s) and b.unit_s > 0):
        return Sized(args, cells, math.nan, "", budget_s)
    text = f"{b.text}; the search as the model predicts it: {cost.describe()}"
    return Sized(args, cells, b.total_s(cells, cells_s), text, budget_s)


def batch(b: Basis, ask: Ask, reproduce: Reproduce) -> Sized:
    """The fixed modes under batch: each mode's cell N x turns units, the repeats asked and the warm-up."""
    rounds = ask.repeats + DEFAULT_WARMUPS
    replicas = replicas_of(ask.modes)
    turns = option_value(b.options, "--turns")
    args = (*b.options, f"--pattern {ask.pattern}", f"--modes {','.join(ask.modes)}", f"--repeats {ask.repeats}")
    cells = len(ask.modes) * rounds
    if replicas is not None and turns and math.isfinite(b.unit_s) and b.unit_s > 0:
        cells_s = rounds * sum(n * turns * b.unit_s + b.gap_s for n in replicas)
        return Sized(args, cells, b.total_s(cells, cells_s), b.text)
    return paced(args, cells, reproduce)


def predict(reproduce: Reproduce, prefix: Sequence[str], ask: Ask, size: int | None, budget_s: float) -> Sized:
    """The suggested command at ``size`` (None: the folder's) and its prediction (module docstring)."""
    b = basis_at(reproduce, prefix, size)
    pattern = unit_pattern(ask.pattern, b.unit_s)
    try:
        saturated = parse_pattern(pattern).spec.saturated
    except UserError:
        saturated = False
    if saturated:
        return batch(b, dataclasses.replace(ask, pattern=pattern), reproduce)
    same = not ask.neighbours or ask.neighbours == ask.pattern
    if same and ask.families():
        return search(b, ask, pattern, budget_s, reproduce)
    return fixed_patterned(b, ask, pattern, reproduce)


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


def sized(reproduce: Reproduce, ask: Ask, budget_s: float, prefix: Sequence[str] = ()) -> Sized:
    """The largest size whose run is predicted to fit ``budget_s`` (a search: to end before its budget);
    the smallest when none does (its line says so)."""
    tries = [predict(reproduce, prefix, ask, s, budget_s) for s in sizes_to_try(reproduce)]
    return next((t for t in tries if t.fits(budget_s)), tries[-1])


def sized_command(reproduce: Reproduce, prefix: Sequence[str], ask: Ask, budget_s: float = DEFAULT_SUGGEST_S) -> str:
    """The suggested command, sized (:func:`sized`), and its predicted time: ```sharebench run ...`` (about
    7 min: 16 cells, ...)``. ``prefix``: what comes before the folder's options (``sharebench run``, a device)."""
    s = sized(reproduce, ask, budget_s, prefix)
    run = " ".join([*prefix, *s.arguments])
    if not math.isfinite(s.total_s):
        if s.bound_s is None:
            return f"`{run}`"
        return (
            f"`{run}` (at most {duration(s.bound_s)}: its --budget; no unit of work alone here to predict its path by)"
        )
    if s.bound_s is not None and not s.fits(budget_s):
        over = (
            f"; its --budget stops it first (the model's path takes about {duration(s.total_s)}): a bracket, "
            "or not measured"
        )
    else:
        over = "" if s.fits(budget_s) else f", more than the {duration(budget_s)} asked"
    return f"`{run}` (about {duration(s.predicted_s)}: {s.cells} cells{s.basis}{over})"
