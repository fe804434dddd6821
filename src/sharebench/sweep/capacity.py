"""Capacity by search (issues 33, 42, 46): the most users (replicas of a pattern) per GPU whose p95 slowdown
stays within the target, found by measuring, decided by the one rule, and said as measured.

Per mode family (``timeslice``, ``mps``, ``timeslice/long``, ``mps@25``) one search
(``sweep.capacity_answer``: :class:`CapacitySearch`, :func:`next_n`, :func:`answer`): N doubles from
``--users LO`` while within the target, then bisects between the largest N within and the smallest N above.
Each N is decided by ``analysis.tail.decide`` on the folder's bursts: every user of the pattern counted,
the alone baseline's interval carried (``sweep.capacity_folder``). An N still undecided after its cell gets
another cell (its users' samples pooled) up to ``--max-repeats`` cells; a failed N is never measured
again.

:class:`CapacitySchedule` runs the searches through the runner (``sweep.schedule``): the alone cells first,
then the families **side by side, in turn** (round robin: each cell measured, the next family's probe comes
next), so that a search stopped early leaves every family with a bracket. Within a deadline
(``sweep.deadline``) it is a ``Yielding`` schedule: the deadline asks it how short a probe can be (the
fewest samples per user that can decide it, at the bursts' measured pace, :meth:`CapacitySchedule.shortest_s`)
and refuses a probe only when even that does not fit; the family refused stops there ("between", budget)
and the other families' probes are tried. An interrupted search says so ("interrupt") and ``--resume``
continues it from its probes (:func:`folder_options`: its families, users and repeats from ``sweep.json``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharebench.analysis.cost import (
    PROBE_SETUP_S,
    SearchAsk,
    at_rate,
    cell_seconds,
    patterned_cell,
    report_seconds,
    search_cost,
)
from sharebench.analysis.samples import cell_samples
from sharebench.analysis.tail import TailRule
from sharebench.errors import UserError
from sharebench.modes import BASELINE, Mode, family_max, parse_mode

# the families' and --users' grammar, kept light in modes (the CLI checks --modes and --users with it)
from sharebench.modes import DEFAULT_USERS as DEFAULT_USERS
from sharebench.modes import families_of as families_of
from sharebench.modes import family_kind as family_kind
from sharebench.modes import family_mode as family_mode
from sharebench.modes import parse_family as parse_family
from sharebench.modes import parse_users as parse_users
from sharebench.parse import fmt_duration
from sharebench.patterns import parse_pattern
from sharebench.results import read_sweeps
from sharebench.sweep.budget import PROBE_TURNS, Calibration, calibrate_sweep, sweep_overheads
from sharebench.sweep.capacity_answer import Capacity as Capacity
from sharebench.sweep.capacity_answer import CapacitySearch, answer, next_n
from sharebench.sweep.capacity_answer import Probe as Probe
from sharebench.sweep.capacity_folder import CAPACITY_CSV as CAPACITY_CSV
from sharebench.sweep.capacity_folder import CAPACITY_JSON as CAPACITY_JSON
from sharebench.sweep.capacity_folder import FolderState, populate, read_folder, write_capacity
from sharebench.sweep.capacity_folder import capacity_lines as capacity_lines
from sharebench.sweep.capacity_folder import read_capacity as read_capacity
from sharebench.sweep.capacity_folder import write_capacity_table as write_capacity_table
from sharebench.sweep.load import MIN_REQUESTS, capacity_cell, needs_capacity
from sharebench.sweep.plan import Cell, SweepPlan, is_awake, plan_header
from sharebench.sweep.schedule import Measured, Stop

DEFAULT_MIN_REPEATS = 1  # cells of each N at least: a cell runs until decided (or its cap)
DEFAULT_MAX_REPEATS = 4  # cells of an N at most, while it stays undecided (its users' samples pooled)
MEMORY_HEADROOM = 0.95  # of the GPU's memory the replicas may hold together
SETUP_S = PROBE_SETUP_S  # a cell's set-up before one is measured: a fresh program, a warm replica (analysis.cost)
SHORTEST_MARGIN = 1.1  # a probe's shortest length, predicted, times this
ALONE_MORE = 3  # alone cells a run adds at most while the baseline has too few samples


def memory_max(device_memory_bytes: float | None, per_replica_bytes: float | None) -> int | None:
    """Replicas of ``per_replica_bytes`` peak each that the GPU's memory holds (None: unknown)."""
    if not device_memory_bytes or not per_replica_bytes or per_replica_bytes <= 0:
        return None
    return max(1, int(MEMORY_HEADROOM * device_memory_bytes // per_replica_bytes))


def probe_bounds(lo: int, max_n: int) -> tuple[int, int]:
    """The fewest and most probes (distinct N) of one family: doubling to ``max_n``, then bisection."""
    doublings = max(0, math.ceil(math.log2(max(max_n, 1) / max(lo, 1))))
    return doublings + 1, doublings + 1 + max(0, math.ceil(math.log2(max(max_n, 2) / 2)))


def seconds(x: float) -> str:
    return f"{x:.0f} s" if x >= 10 else f"{x:.1f} s"


def doubling(lo: int, max_n: int) -> list[int]:
    out = [min(lo, max_n)]
    while out[-1] < max_n:
        out.append(min(2 * out[-1], max_n))
    return out


def users_of(pattern: str, neighbours: str | None, n: int) -> int:
    """The users the rule counts in a cell of ``n`` replicas: every replica of the victim's pattern."""
    return n if not neighbours or neighbours == pattern else 1


@dataclass(frozen=True)
class CapacityOptions:
    """``--capacity``: the families searched, ``--users LO..HI``, the cells of each N (``--repeats`` at
    least, ``--max-repeats`` at most while undecided)."""

    families: tuple[str, ...]
    users: tuple[int, int] = DEFAULT_USERS
    min_repeats: int = DEFAULT_MIN_REPEATS
    max_repeats: int = DEFAULT_MAX_REPEATS

    def __post_init__(self) -> None:
        if not self.families:
            raise UserError("--capacity needs a mode family to search: --modes timeslice,mps (no N)")
        if not 1 <= self.min_repeats <= self.max_repeats:
            raise UserError(
                f"bad capacity repeats {self.min_repeats}..{self.max_repeats}; allowed: 1 <= --repeats <= --max-repeats"
            )

    def start_modes(self) -> tuple[Mode, ...]:
        """Each family at the smallest N: what the sweep plans (and checks) before anything runs."""
        return tuple(family_mode(f, self.users[0]) for f in self.families)

    def searches(self, slo: float, pattern: str) -> list[CapacitySearch]:
        """One search per family, in the order given (the order they take turns in)."""
        lo, hi = self.users
        return [
            CapacitySearch(f, slo, lo, hi, self.max_repeats, self.min_repeats, pattern=pattern) for f in self.families
        ]

    def record(self, rule: TailRule) -> dict[str, Any]:
        """What ``sweep.json`` keeps of the search (``--resume`` continues it from there)."""
        return dict(
            families=list(self.families),
            users=list(self.users),
            min_cells=self.min_repeats,
            max_cells=self.max_repeats,
            slo=rule.slo,
            q=rule.q,
            confidence=rule.confidence,
        )

    def describe(
        self, rule: TailRule, cell_s: Callable[[int], float] | None = None, users: Callable[[int], int] | None = None
    ) -> list[str]:
        """The dry run's lines: the rule, per family its probes (distinct N) and, with ``cell_s`` (N -> a
        cell's seconds at the fewest samples), each probe's samples per user and seconds; then the total.
        ``users``: N -> the users the rule counts in a cell of N (default N)."""

        def samples(n: int) -> int:
            return rule.first_look(users(n) if users is not None else n)

        lo, hi = self.users
        lines = [
            f"capacity search: N from {lo} doubling to at most {hi}, then bisection; families side by side (one "
            f"probe of each in turn); p{rule.percentile} slowdown ≤ {rule.slo:g}× decided at {rule.confidence:.0%} "
            f"confidence, every user counted; {self.min_repeats}..{self.max_repeats} cell(s) per N (another "
            "while undecided)"
        ]
        total = [0.0, 0.0]
        for f in self.families:
            max_n = family_max(f, hi)
            best, worst = probe_bounds(lo, max_n)
            text = f"  {f}: {best}–{worst} N probed ({best * self.min_repeats}–{worst * self.max_repeats} cells)"
            if cell_s is not None:
                ns = doubling(lo, max_n)
                t_best = sum(cell_s(n) for n in ns[:best]) * self.min_repeats
                t_worst = (sum(cell_s(n) for n in ns) + (worst - len(ns)) * cell_s(max_n)) * self.max_repeats
                total[0] += t_best
                total[1] += t_worst
                text += f", {t_best / 60:.1f}–{t_worst / 60:.1f} min"
                each = "; ".join(f"N={n}: {samples(n)} samples per user, ≥ {seconds(cell_s(n))}" for n in ns)
                text += f"\n    {each}; then bisection below the first N above"
            lines.append(text)
        if cell_s is not None:
            lines.append(
                f"  total: {total[0] / 60:.1f}–{total[1] / 60:.1f} min of probes at their fewest samples (a cell "
                "runs on until decided, at most its cap; a --budget bounds it)"
            )
        return lines


def folder_options(out: Path) -> CapacityOptions | None:
    """The search a folder ran (``--resume`` continues it): its last sweep's ``capacity`` record, else (a
    folder of before this round) the families of its ``capacity.json`` from N = its first mode's; None
    when the folder ran no search."""
    for sweep in reversed(read_sweeps(out, torn_ok=True)):
        rec = sweep.get("capacity")
        if isinstance(rec, dict) and rec.get("families"):
            lo, hi = rec.get("users") or DEFAULT_USERS
            return CapacityOptions(
                tuple(rec["families"]),
                (int(lo), int(hi)),
                int(rec.get("min_cells") or 1),
                int(rec.get("max_cells") or 4),
            )
    entries = read_capacity(out)
    if not entries:
        return None
    ns = [int(p["n"]) for e in entries for p in e.get("probes") or []]
    return CapacityOptions(tuple(str(e["family"]) for e in entries), (min(ns, default=2), DEFAULT_USERS[1]))


# ----------------------------------------------------------------- running the search (the runner's schedule)


@dataclass
class CapacitySchedule:
    """The cells of a capacity search (a ``sweep.schedule.Schedule``, and ``Yielding`` to a deadline): the
    fixed cells first (the alone cells, any mode given with its N), then one probe of each family in turn,
    decided from the folder after each cell. ``fits(mode)``: the planner's check of a new N (None: fits;
    else the one-line reason: a memory limit). ``read``: the folder is read (False: a dry run)."""

    out: Path
    searches: list[CapacitySearch]
    fixed: list[Cell]
    particles: int
    options: CapacityOptions
    fits: Callable[[Mode], str | None]
    rule: TailRule
    sweep: SweepPlan | None = None
    read: bool = True
    setup_s: float = SETUP_S["warm"]
    turn: int = 0
    queue: list[Cell] = field(default_factory=list)
    refusals: list[str] = field(default_factory=list)
    ended: bool = False
    state: FolderState = field(default_factory=FolderState)
    setups: list[float] = field(default_factory=list)
    alone_more: int = 0  # alone cells added by this run (:meth:`alone_cell`)
    budget_s: float | None = None  # --budget: what bounds the dry run's prediction

    def __post_init__(self) -> None:
        self.refresh()
        self.queue = self.decide()

    # the Schedule protocol

    def next_cell(self) -> Cell | None:
        if not self.queue:
            self.ended = True
            return None
        return self.queue[0]

    def learn(self, measured: Measured) -> None:
        """A cell measured: the searches re-read from the folder, the next family's turn, capacity.json."""
        cell = measured.cell
        if not self.fixed and cell.mode.label == BASELINE:
            self.alone_more += 1
        self.fixed = [c for c in self.fixed if c.id != cell.id]
        self.refresh()
        timing = self.state.timing.get(cell.mode.label)
        if measured.whole and timing is not None and measured.wall_s > timing.span_s:
            self.setups.append(measured.wall_s - timing.span_s)
        search = self.family_of(cell)
        if search is not None:
            self.turn = self.searches.index(search) + 1
        self.queue = self.decide()
        self.write()

    def ahead(self) -> list[Cell]:
        return list(self.queue)

    def left(self) -> list[Cell]:
        """What the searches would still measure with no time limit (one cell per family unfinished)."""
        if self.fixed:
            return list(self.fixed)
        return [c for s in self.searches if (c := self.probe_cell(s)) is not None]

    def stopped(self) -> Stop | None:
        return None  # what stops a search early is its deadline's, which says so (sweep.deadline)

    def ends_at(self) -> float | None:
        return None  # the deadline wraps it (sweep.deadline)

    def describe(self) -> list[str]:
        if self.sweep is None:
            return []
        return [capacity_dry_run(self.sweep, self.options, self.rule, self.budget_s)]

    def report(self) -> list[str]:
        """The notes' lines: each family's answer. Called before its cells ended (an interrupt): the
        families unfinished say so."""
        self.refresh()  # a cell kept since the last learn (an interrupt between the two)
        if not self.ended:
            for s in self.searches:
                if s.stopped is None and next_n(s) is not None:
                    s.stopped = "interrupt"
        self.write()
        return [f"capacity: {c.line()}" for c in self.answers()]

    # Yielding: what a deadline asks

    def shortest_s(self, cell: Cell) -> float | None:
        """The shortest a probe can be and still decide: its set-up and the samples per user its next look
        needs, at the pace of the bursts measured so far (None: a fixed cell, or nothing measured yet)."""
        search = self.family_of(cell)
        n = search.n_of(cell.mode.label) if search is not None else None
        cycle = self.cycle_s(search, n) if search is not None and n is not None else None
        if search is None or n is None or cycle is None:
            return None
        setup = statistics.median(self.setups) if self.setups else self.setup_s
        return SHORTEST_MARGIN * (setup + self.samples_needed(search, n) * cycle)

    def refused(self, cell: Cell, why: str) -> None:
        """The deadline refused ``cell``: its family stops there (an alone cell refused: every family)."""
        self.refusals.append(why)
        search = self.family_of(cell)
        for s in [search] if search is not None else self.searches:
            s.stopped = "budget"
        if search is None:
            self.fixed = []
        self.queue = self.decide()
        self.write()

    # the searches

    def refresh(self) -> None:
        """Each search's probes from the folder's measured cells (``sweep.capacity_folder``)."""
        if not self.read:
            return
        self.state = read_folder(self.out, self.rule)
        for s in self.searches:
            populate(s, self.state)

    def family_of(self, cell: Cell) -> CapacitySearch | None:
        return next((s for s in self.searches if s.n_of(cell.mode.label) is not None), None)

    def probe_cell(self, search: CapacitySearch) -> Cell | None:
        """The search's next cell, or None (done: its answer says why). An N the planner refuses (memory)
        lowers the search's limit."""
        while (n := next_n(search)) is not None:
            mode = search.mode(n)
            if self.fits(mode) is None:
                repeat = self.state.cells[mode.label].last_repeat if mode.label in self.state.cells else 0
                return Cell(mode, self.particles, repeat + 1)
            search.mem_max = n - 1 if search.mem_max is None else min(search.mem_max, n - 1)
        return None

    def decide(self) -> list[Cell]:
        """The fixed cells; another alone cell while the alone baseline has too few samples for an interval
        (a cell cut short, or ``--bursts`` below the fewest: its repeats pool); else one probe per family
        still searching, from the family whose turn it is."""
        if self.fixed:
            return list(self.fixed)
        alone = self.alone_cell()
        if alone is not None:
            return [alone]
        k = len(self.searches)
        turns = [self.searches[(self.turn + i) % k] for i in range(k)]
        return [c for s in turns if s.stopped is None and (c := self.probe_cell(s)) is not None]

    def alone_cell(self) -> Cell | None:
        """Another alone cell (at most :data:`ALONE_MORE` a run) when the folder's alone samples of the
        pattern cannot bound its percentile; None otherwise (or a dry run)."""
        if not self.read or self.alone_more >= ALONE_MORE or not self.searches:
            return None
        pattern = self.searches[0].pattern
        have = self.state.alone.get(pattern, sum(self.state.alone.values()) if len(self.state.alone) == 1 else 0)
        if have >= self.rule.alone_first_look():
            return None
        last = self.state.cells[BASELINE].last_repeat if BASELINE in self.state.cells else 0
        return Cell(parse_mode(BASELINE), self.particles, last + 1)

    def answers(self) -> list[Capacity]:
        """Each family's answer from its probes (``sweep.capacity_answer``)."""
        return [answer(s) for s in self.searches]

    def write(self) -> None:
        if not self.read:
            return
        write_capacity(self.out, self.answers(), self.options.record(self.rule))
        write_capacity_table(self.out)

    def cycle_s(self, search: CapacitySearch, n: int) -> float | None:
        """Seconds from one of the victim's bursts to the next in a cell of ``n``: measured at that N, else
        the nearest N of the family measured (its latency stretched by n / N when n is larger), else the
        alone cell's (its latency stretched by min(n, the target)); an open loop's arrivals do not wait."""
        timing = self.state.timing
        alone = next((t for k, t in timing.items() if ":" not in k), None)
        here = timing.get(search.mode(n).label)
        if here is not None:
            return here.cycle_s
        if alone is None:
            return None
        if parse_pattern(search.pattern or "batch").spec.loop == "open":
            return alone.cycle_s
        think = max(0.0, alone.cycle_s - alone.latency_s)
        family = [t for k, t in timing.items() if search.mode(t.replicas).label == k]
        near = min(family, key=lambda t: abs(t.replicas - n), default=None)
        if near is None:
            return think + alone.latency_s * min(n, search.slo)
        return think + near.latency_s * max(1.0, n / near.replicas)

    def samples_needed(self, search: CapacitySearch, n: int) -> int:
        """Samples per user a cell of ``n`` needs to reach its next look (``analysis.tail``: looks at n₀·2ʲ,
        its earlier cells' samples pooled)."""
        w = self.sweep.config.workload if self.sweep is not None else None
        users = users_of(search.pattern, w.neighbour_pattern if w is not None else None, n)
        n0 = self.rule.first_look(users)
        have = search.probes[n].samples if n in search.probes else 0
        target = n0
        while target <= have:
            target *= 2
        return target - have


# ----------------------------------------------------------------- the dry run


def cell_estimate(plan: SweepPlan, rule: TailRule) -> Callable[[int], float]:
    """N -> the fewest seconds a probe of N replicas takes before anything is measured: its set-up and the
    fewest samples per user (``rule.first_look``) at the pattern's own pace (``analysis.cost.cell_seconds``
    with no work counted: think times, arrivals); the run predicts each probe from the bursts measured."""
    w = plan.config.workload
    setup = SETUP_S["exec" if w.is_program else "warm"]
    victim, neighbour = parse_pattern(w.pattern), parse_pattern(w.pattern_of(1))

    def seconds(n: int) -> float:
        samples = rule.first_look(users_of(w.pattern, w.neighbour_pattern, n))
        return setup + cell_seconds((victim, neighbour), n, samples, 0.0).cell_s

    return seconds


def capacity_dry_run(plan: SweepPlan, options: CapacityOptions, rule: TailRule, budget_s: float | None = None) -> str:
    """``--capacity --dry-run``: the device, the pattern, the alone cells and each family's search with its
    probes, their fewest samples per user and seconds before anything is measured (the range of the total),
    then ``predicted: N s``: one unit of work calibrated on this machine, the search as the cost model predicts
    it (``analysis.cost.search_cost``), the set-up and the report; ``budget_s`` bounds it."""
    fixed = fixed_cells(plan, options)
    est = cell_estimate(plan, rule)
    w = plan.config.workload
    alone_s = sum(est(1) for _ in fixed)
    calibration = calibrate_sweep(plan, plan.particles[:1], probe_turns=PROBE_TURNS)
    lines = [
        *plan_header(plan),
        f"pattern:   {w.pattern} ({cell_samples(w, 2, rule).describe()})",
        f"fixed:     {len(fixed)} cell(s) first ({', '.join(c.id for c in fixed)}), at least {alone_s:.0f} s "
        f"({rule.alone_first_look()} samples alone)",
        *load_lines(plan),
        *options.describe(rule, est, lambda n: users_of(w.pattern, w.neighbour_pattern, n)),
        "estimate:  set-up, think times and arrivals at the fewest samples, before any burst is measured; the "
        "run predicts each probe from the bursts measured",
        predicted_search(plan, options, rule, calibration, budget_s),
    ]
    return "\n".join([*lines, *(f"note: {n}" for n in plan.notes)])


def fixed_cells(plan: SweepPlan, options: CapacityOptions) -> list[Cell]:
    """The cells a search runs before its probes: the alone cells (``sweep.plan.alone_cells``) and any mode
    given with its N."""
    starts = {m.label for m in options.start_modes()}
    return [c for c in plan.cells() if c.mode.label not in starts]


def probe_setup_s(plan: SweepPlan, calibration: Calibration) -> float:
    """A probe's set-up: a program's own, as calibrated (its new replicas start it), else a warm replica's."""
    return calibration.setup_s if plan.config.workload.is_program else PROBE_SETUP_S["warm"]


def predicted_search(
    plan: SweepPlan, options: CapacityOptions, rule: TailRule, calibration: Calibration, budget_s: float | None
) -> str:
    """The dry run's ``predicted: N s`` of a search (:func:`capacity_dry_run`), with its basis."""
    w = plan.config.workload
    unit_s = calibration.exclusive_s(plan.particles[0]) / max(1, calibration.turns)
    served = at_rate(w, unit_s)
    o = sweep_overheads(plan, calibration)
    lo, hi = options.users
    families = tuple((f, family_max(f, hi)) for f in options.families)
    setup = probe_setup_s(plan, calibration)
    ask = SearchAsk(families, lo, rule, options.min_repeats, o.per_cell_s, setup, options.max_repeats)
    search = search_cost(w, ask, unit_s)
    fixed = fixed_cells(plan, options)
    fixed_s = sum(
        patterned_cell(served, plan.replicas(c.mode), unit_s, rule=rule, warmup=c.warmup and not is_awake(c)).cell_s
        + o.per_cell_s
        for c in fixed
    )
    if needs_capacity(w):  # the capacity alone first: requests back to back
        fixed_s += MIN_REQUESTS * unit_s + o.per_cell_s
    cells_s = fixed_s + search.cells_s
    report_s = report_seconds(len(fixed) + search.cells)
    total = calibration.spent_s + o.start_s + cells_s + report_s
    bound = ""
    if budget_s is not None and total > budget_s:
        total, bound = budget_s, f"; the --budget {fmt_duration(budget_s)} stops it before that"
    return (
        f"predicted: {total:.0f} s (cells {cells_s:.0f} s, set-up {o.start_s:.0f} s, report {report_s:.0f} s; "
        f"calibration {calibration.spent_s:.1f} s on this machine); basis: {calibration.source}; the search as the "
        f"model predicts it (slowdown 1 + (N - 1) x busy against {rule.slo:g}x, each probe's cells until its "
        f"verdict is decided: analysis.cost): {search.describe()}; {o.per_cell_s:.2f} s between cells "
        f"({o.source}){bound}"
    )


def load_lines(plan: SweepPlan) -> list[str]:
    """The dry run's line of a ``serve:load=F`` sweep: the capacity cell measured first (``sweep.load``)."""
    if not needs_capacity(plan.config.workload):
        return []
    cell = capacity_cell(plan)
    return [
        f"load:      {plan.config.workload.pattern}: the capacity alone is measured first (cell {cell.id}, one "
        f"replica serving at least {MIN_REQUESTS} requests back to back), then the rate set to F x it; the "
        "serving cells' times below are not known before it (set-up only)"
    ]
