"""What a budgeted sweep runs next, after each cell, and what its report says about the budget.

The runner runs ``BudgetPlan.cells()`` and, after each cell, asks :func:`next_cells` for the queue:

* the planned cells not yet measured;
* a further repeat of every block (mode x size) whose planned repeats are all measured and whose
  decision (``sharebench.analysis.sequential.should_continue``) says go on: a time-slicing or MPS
  block on its loss (T_N against N·T_1; and its worst-job slowdown when a target is given), every
  other block on the precision of its mean track time relative to itself (% of T_1 for exclusive);
  an exclusive block also repeats while any shared block of its size does, so that each loss is
  judged against T_1 of as many repeats as it has. A block's decision after n repeats reads only
  repeats 1..n (of T_1 too), so a block that stopped never starts again and each block is looked at
  no more than ``max_repeats - min_repeats + 1`` times, which the intervals' correction counts on;
* with a budget and the time spent so far, only what fits the time left (report time kept aside):
  each cell costs its block's measured mean span (or the plan's prediction, scaled by how the
  measured blocks compared with theirs) plus the measured median gap between cells; planned cells
  before further repeats, each in the plan's priority order, the rest left out.

A patterned sweep's baseline is its alone cells (``sweep.plan.alone_cells``, ``BudgetPlan.alone``): once per
size and pattern, first, never repeated (each sharing cell runs until its users' p95 is decided against it);
its sharing blocks then repeat while their own mean track time is imprecise, as a block without T_1 does.

The queue is in the sweep's run order (repeat -> particle count -> mode). :func:`budget_report` gives
the report's lines: budget, plan, time used, the precision each block reached and why it stopped.
:class:`AdaptiveSchedule` is this queue as a schedule (``sweep.schedule``): what the runner asks for
after each cell.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sharebench.analysis import cell_summary
from sharebench.analysis.sequential import Decision, should_continue
from sharebench.results import COLUMNS
from sharebench.sweep.budget import Block, BudgetOptions, BudgetPlan, fmt_duration
from sharebench.sweep.plan import Cell, SweepPlan, plan_header
from sharebench.sweep.schedule import Measured, Stop


@dataclass(frozen=True)
class BlockRepeats:
    """A block's measured repeats, by repeat number: span (NaN: failed or excluded), mean and max track time."""

    span_s: Mapping[int, float]
    mean_track_s: Mapping[int, float]
    max_track_s: Mapping[int, float]

    @property
    def repeats(self) -> int:
        return len(self.span_s)

    def upto(self, values: Mapping[int, float], n: int) -> list[float]:
        return [values[r] for r in sorted(values) if r <= n]


def rows_frame(rows: Iterable[Mapping[str, Any]] | pd.DataFrame) -> pd.DataFrame:
    """The rows measured so far (the runner's ``CellResult.rows``, or a loaded results.csv) in the results
    schema's columns."""
    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    return df.reindex(columns=[c.name for c in COLUMNS])


def measured_cells(df: pd.DataFrame) -> pd.DataFrame:
    """The cells table (``sharebench.analysis.cell_summary``) of ``rows_frame``; the last measurement of
    a cell id kept."""
    return cell_summary(df).drop_duplicates("cell_id", keep="last")


def cell_gaps(df: pd.DataFrame) -> list[float]:
    """The gaps between consecutive cells of each sweep: a cell's first tracking start minus the
    previous cell's last tracking end (``tools/cell_overhead.py``'s definition)."""
    ok = df[(df["status"] == "ok") & df["track_start"].notna() & df["track_end"].notna()]
    gaps: list[float] = []
    for _, g in ok.groupby("sweep_id"):
        w = g.groupby("cell_id").agg(start=("track_start", "min"), end=("track_end", "max")).sort_values("start")
        gaps += [float(x) for x in (w["start"] - w["end"].shift(1)).dropna() if x >= 0]
    return gaps


def block_measurements(plan: BudgetPlan, cells: pd.DataFrame) -> dict[tuple[str, int], BlockRepeats]:
    """Each block's measured (not warm-up) repeats."""
    out: dict[tuple[str, int], BlockRepeats] = {}
    measured = cells[~cells["warmup"].astype(bool)] if len(cells) else cells
    for b in plan.blocks:
        g = measured[(measured["mode"] == b.mode.label) & (measured["particles"].astype(float) == b.particles)]
        bad = g["excluded"].astype(bool)
        reps = [int(r) for r in g["repeat"]]
        out[(b.mode.label, b.particles)] = BlockRepeats(
            dict(zip(reps, np.where(bad, math.nan, g["span_s"].astype(float)))),
            dict(zip(reps, np.where(bad, math.nan, g["mean_track_s"].astype(float)))),
            dict(zip(reps, np.where(bad, math.nan, g["max_track_s"].astype(float)))),
        )
    return out


def block_decision(
    plan: BudgetPlan, block: Block, measured: Mapping[tuple[str, int], BlockRepeats], options: BudgetOptions
) -> Decision:
    """The decision after the block's measured repeats (n), from repeats 1..n of it and of its T_1."""
    m = measured[(block.mode.label, block.particles)]
    n = m.repeats
    lo, hi = options.min_repeats, options.max_repeats
    exclusive = next((b for b in plan.blocks if b.mode.is_baseline and b.particles == block.particles), None)
    if not is_loss(plan, block) or exclusive is None:
        samples = m.upto(m.mean_track_s, n)
        return should_continue(samples, precision=options.precision, relative=True, min_repeats=lo, max_repeats=hi)
    t1 = measured[(exclusive.mode.label, exclusive.particles)]
    base = t1.upto(t1.mean_track_s, n)
    loss = should_continue(
        m.upto(m.span_s, n),
        precision=options.precision,
        thresholds=options.loss_thresholds,
        baseline=base,
        factor=block.replicas,
        min_repeats=lo,
        max_repeats=hi,
    )
    if not options.slowdown_thresholds or not loss.stop or n >= options.max_repeats:
        return loss
    slow = should_continue(
        m.upto(m.max_track_s, n),
        precision=math.inf,
        thresholds=tuple((s - 1) * 100 for s in options.slowdown_thresholds),
        baseline=base,
        min_repeats=lo,
        max_repeats=hi,
    )
    return loss if slow.stop else Decision(False, "worst-job slowdown: " + slow.reason, loss.interval, n)


def further_repeats(
    plan: BudgetPlan, measured: Mapping[tuple[str, int], BlockRepeats], options: BudgetOptions
) -> tuple[list[Cell], dict[tuple[str, int], Decision]]:
    """The next repeat of each block that goes on (its planned repeats measured), and every decision."""
    decisions = {
        (b.mode.label, b.particles): block_decision(plan, b, measured, options)
        for b in plan.blocks
        if measured[(b.mode.label, b.particles)].repeats > 0
    }
    wants: dict[tuple[str, int], int] = {}
    for b in plan.blocks:
        key = (b.mode.label, b.particles)
        n = measured[key].repeats
        go_on = key in decisions and not decisions[key].stop and not plan.once(b)  # an alone cell runs once
        if go_on and plan.repeats <= n < options.max_repeats:
            wants[key] = n + 1
    for b in plan.blocks:  # exclusive goes on while a shared block of its size at the same count does
        key = (b.mode.label, b.particles)
        n = measured[key].repeats
        shared_on = any(k[1] == b.particles and r == n + 1 for k, r in wants.items())
        baseline = b.mode.is_baseline and not plan.once(b)
        if baseline and key not in wants and plan.repeats <= n < options.max_repeats and shared_on:
            wants[key] = n + 1
    by_label = {m.label: m for m in plan.modes}
    return [Cell(by_label[label], p, r) for (label, p), r in wants.items()], decisions


def run_order(plan: BudgetPlan, cells: Sequence[Cell]) -> list[Cell]:
    """As ``SweepPlan.cells``: a patterned sweep's alone cells first (every slowdown's baseline, measured before
    the cells decided against it), then repeat -> particle count -> mode."""
    labels = [m.label for m in plan.modes]
    alone = {c.id: i for i, c in enumerate(plan.alone)}
    first = sorted((c for c in cells if c.id in alone), key=lambda c: alone[c.id])
    rest = [c for c in cells if c.id not in alone]
    return first + sorted(rest, key=lambda c: (c.repeat, plan.particles.index(c.particles), labels.index(c.mode.label)))


def cell_costs(plan: BudgetPlan, cells: pd.DataFrame, gaps: Sequence[float]) -> dict[tuple[str, int], float]:
    """What a further cell of each block costs: its measured mean span (else the plan's prediction, scaled
    by the measured blocks' median ratio to theirs) plus the measured median gap (else the plan's)."""
    ok = cells[~cells["excluded"].astype(bool) & cells["span_s"].notna()]
    spans = {}
    for b in plan.blocks:
        g = ok[(ok["mode"] == b.mode.label) & (ok["particles"].astype(float) == b.particles)]
        if len(g):
            spans[(b.mode.label, b.particles)] = float(g["span_s"].mean())
    ratios = [v / b.cell_s for b in plan.blocks if (v := spans.get((b.mode.label, b.particles))) and b.cell_s > 0]
    scale = float(np.median(ratios)) if ratios else 1.0
    gap = float(np.median(gaps)) if gaps else plan.overheads.per_cell_s
    return {
        (b.mode.label, b.particles): spans.get((b.mode.label, b.particles), b.cell_s * scale) + gap for b in plan.blocks
    }


def fit_budget(
    plan: BudgetPlan, queue: Sequence[Cell], costs: Mapping[tuple[str, int], float], left_s: float
) -> list[Cell]:
    """The cells of ``queue`` that fit ``left_s`` seconds: planned cells first, block by block in the plan's
    priority order, then further repeats, lowest repeat first; each kept when it still fits. A further
    exclusive repeat goes only with a shared repeat of its size and number."""
    rank = {(b.mode.label, b.particles): i for i, b in enumerate(plan.blocks)}

    def keep_order(c: Cell) -> tuple[int, int, int]:
        key = rank[(c.mode.label, c.particles)]
        return (0, key, c.repeat) if c.repeat <= plan.repeats else (1, c.repeat, key)

    kept, used = [], 0.0
    for c in sorted(queue, key=keep_order):
        cost = costs[(c.mode.label, c.particles)]
        if used + cost <= left_s:
            kept.append(c)
            used += cost
    shared = {(c.particles, c.repeat) for c in kept if not c.mode.is_baseline}
    sizes_shared = {b.particles for b in plan.blocks if not b.mode.is_baseline}
    return [  # a further T_1 repeat whose shared repeats did not fit would only spend time
        c
        for c in kept
        if not (
            c.mode.is_baseline
            and c.repeat > plan.repeats
            and c.particles in sizes_shared
            and (c.particles, c.repeat) not in shared
        )
    ]


def next_cells(
    plan: BudgetPlan,
    measured_rows: Iterable[Mapping[str, Any]] | pd.DataFrame,
    options: BudgetOptions,
    *,
    elapsed_s: float | None = None,
) -> list[Cell]:
    """The cells still to run, in run order, after the rows measured so far (module docstring).

    ``elapsed_s``: seconds since the budget's clock started (the command's start); with it and
    ``options.budget_s`` only what fits the time left before the report is kept. An empty list: done.
    """
    df = rows_frame(measured_rows)
    cells = measured_cells(df)
    done = set(cells["cell_id"])
    queue = [c for c in plan.cells() if c.id not in done]
    more, _ = further_repeats(plan, block_measurements(plan, cells), options)
    queue += [c for c in more if c.id not in done]
    if elapsed_s is not None and options.budget_s is not None:
        left = options.budget_s - elapsed_s - plan.overheads.end_s
        queue = fit_budget(plan, queue, cell_costs(plan, cells, cell_gaps(df)), left)
    return run_order(plan, queue)


def is_loss(plan: BudgetPlan, block: Block) -> bool:
    """Whether the block is judged on its loss (time-slicing and MPS with an exclusive block of its size); a
    patterned sweep's blocks are judged on the precision of their own mean (their verdicts are each cell's,
    against the alone cell measured once)."""
    same = any(b.mode.is_baseline and b.particles == block.particles for b in plan.blocks)
    return block.mode.spec.shared and same and not plan.alone


def quantity(plan: BudgetPlan, block: Block, decision: Decision) -> str:
    """The block's figure and its interval as the report states it."""
    iv = decision.interval
    loss = is_loss(plan, block)
    if not iv.known:
        return f"{'loss' if loss else 'mean track time'}: no interval"
    if loss:
        return f"loss {iv.estimate:.3g} [{iv.low:.3g}, {iv.high:.3g}] points (±{iv.half_width:.3g})"
    rel = 100 * iv.half_width / abs(iv.estimate) if iv.estimate else math.nan
    return f"mean track time {iv.estimate:.4g} s [{iv.low:.4g}, {iv.high:.4g}] (±{rel:.3g}%)"


def budget_report(
    plan: BudgetPlan,
    measured_rows: Iterable[Mapping[str, Any]] | pd.DataFrame,
    options: BudgetOptions,
    *,
    elapsed_s: float,
) -> list[str]:
    """The report's lines: budget, plan, time used, the precision each block reached and why it stopped
    (settled, max repeats, or the budget: it would have gone on), and the planned cells not run."""
    df = rows_frame(measured_rows)
    cells = measured_cells(df)
    measured = block_measurements(plan, cells)
    _, decisions = further_repeats(plan, measured, options)
    run = set(cells["cell_id"])
    budget = options.budget_s if options.budget_s is not None else plan.budget_s
    lines = [
        f"budget: {fmt_duration(budget)} ({budget:g} s); used {elapsed_s:.1f} s ({100 * elapsed_s / budget:.0f}%) before the report",
        f"plan: {plan.calibration.source}; predicted {plan.predicted_s:.0f} s for {len(plan.cells())} planned "
        f"cells ({plan.repeats} repeat(s) + {plan.warmup_repeats} warm-up of {len(plan.blocks)} block(s))",
        f"ran: {len(run)} cells; repeats while wider than ±{options.precision:g} or straddling "
        f"{', '.join(f'{t:.3g}' for t in options.loss_thresholds) or 'no threshold'}, {options.min_repeats} to "
        f"{options.max_repeats}; intervals at {decisions_confidence(decisions)} per look, 95% as stated",
    ]
    for b in plan.blocks:
        d = decisions.get((b.mode.label, b.particles))
        if d is None:
            lines.append(f"  {b.mode.label} at {b.particles:,}: not run (budget)")
            continue
        if plan.once(b):
            lines.append(f"  {b.mode.label} at {b.particles:,}: the alone cell, once (its p95 until precise)")
            continue
        why = d.reason if d.stop else f"budget (would go on: {d.reason})"
        lines.append(
            f"  {b.mode.label} at {b.particles:,}: {d.repeats} repeat(s), {quantity(plan, b, d)}; stopped: {why}"
        )
    missing = [c.id for c in plan.cells() if c.id not in run]
    if missing:
        lines.append(f"planned cells not run (budget): {len(missing)}: {', '.join(missing)}")
    if plan.left_out:
        lines.append(f"not planned (budget): {', '.join(plan.left_out)}")
    return lines


def decisions_confidence(decisions: Mapping[tuple[str, int], Decision]) -> str:
    levels = sorted({d.interval.confidence for d in decisions.values()})
    return ", ".join(f"{100 * c:.3g}%" for c in levels) or "-"


@dataclass
class AdaptiveSchedule:
    """A budgeted sweep's cells (``sweep.schedule``), decided after each cell: the queue of
    :func:`next_cells` from the rows measured so far (a resumed folder's first) and the seconds since
    ``t_start`` (``clock()`` at the command's start: the budget's clock). ``sweep``: the sweep at the
    plan's sizes (its dry run)."""

    plan: BudgetPlan
    options: BudgetOptions
    sweep: SweepPlan
    rows: list[Mapping[str, Any]] = field(default_factory=list)
    t_start: float | None = None
    clock: Callable[[], float] = time.monotonic
    queue: list[Cell] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.t_start is None:
            self.t_start = self.clock()
        self.queue = self.decide()

    def elapsed_s(self) -> float:
        return self.clock() - (self.t_start or 0.0)

    def decide(self) -> list[Cell]:
        return next_cells(self.plan, self.rows, self.options, elapsed_s=self.elapsed_s())

    def next_cell(self) -> Cell | None:
        return self.queue[0] if self.queue else None

    def learn(self, measured: Measured) -> None:
        self.rows += list(measured.rows)
        self.queue = self.decide()

    def ahead(self) -> list[Cell]:
        return list(self.queue)

    def left(self) -> list[Cell]:
        """What it would still run with no time limit (planned cells and further repeats)."""
        return next_cells(self.plan, self.rows, self.options)

    def stopped(self) -> Stop | None:
        """The budget spent: nothing fits the time left, but cells are left."""
        budget_s = self.options.budget_s
        if budget_s is None or self.queue or not self.left():
            return None
        return Stop(f"budget {fmt_duration(budget_s)} reached")

    def ends_at(self) -> float | None:
        return None  # the budget's deadline wraps it (sweep.deadline)

    def describe(self) -> list[str]:
        return [*plan_header(self.sweep), self.plan.describe(), *(f"note: {n}" for n in self.sweep.notes)]

    def report(self) -> list[str]:
        """The report's budget lines (:func:`budget_report`)."""
        return budget_report(self.plan, self.rows, self.options, elapsed_s=self.elapsed_s())
