"""Which schedule runs for which options: the one place that knows every way of choosing cells (issue 41).

``run_sweep(config, out_dir)`` validates everything first (``sweep.plan``), plans a budget before the folder
is made (``sweep.budget.plan_budget``: a budget that holds too little is refused with nothing written), holds
the folder (``sweep.runner.open_folder``), then turns the plan into the one the loop runs and picks its
schedule (:func:`choose`):

* ``serve:load=F`` resolved to a rate first (``sweep.load``: the capacity alone measured in the folder);
* the CPU default sized by a calibration (``sweep.calibrate``), unless a budget plan sized it;
* ``--capacity``: the search (``sweep.capacity.CapacitySchedule``), continued from a resumed folder's probes
  (its options recorded in ``sweep.json``); a budget plan: its cells, then adaptive
  repeats (``sweep.adaptive.AdaptiveSchedule``); else the plan's cells (``sweep.fixed.FixedSchedule``), a
  resumed folder's measured cells left out;
* within ``--budget`` or ``--stop-after``: that schedule wrapped by the deadline (``sweep.deadline``).

The runner (``sweep.runner.run_cells``) then runs whatever schedule it is given. :func:`dry_run` describes
the same choice without running a cell (``--dry-run``). A new way of choosing cells is one module that
implements ``sweep.schedule.Schedule`` and a branch of :func:`choose`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sharebench.analysis.tail import TailRule
from sharebench.errors import UserError
from sharebench.parse import fmt_duration
from sharebench.results import load_results
from sharebench.sweep.adaptive import AdaptiveSchedule
from sharebench.sweep.budget import REPORT_S, BudgetOptions, BudgetPlan, plan_budget
from sharebench.sweep.calibrate import Sized, auto_sized, calibrate, calibrated_size, folder_particles
from sharebench.sweep.capacity import SETUP_S, CapacityOptions, CapacitySchedule
from sharebench.sweep.deadline import Deadline, DeadlineSchedule
from sharebench.sweep.fixed import FixedSchedule
from sharebench.sweep.load import resolve_sweep_load, resume_config
from sharebench.sweep.plan import Cell, SweepConfig, SweepPlan, mode_fits, plan_mode, validate
from sharebench.sweep.resume import resumed_cells
from sharebench.sweep.runner import Folder, Sweep, check_fresh, open_folder, run_cells
from sharebench.sweep.schedule import Schedule


@dataclass(frozen=True)
class Ways:
    """How a sweep chooses its cells: ``budget`` (``sweep.budget``; its ``budget_s`` None: no budget),
    ``capacity`` (``--capacity``), the budget's clock start (``clock()`` at the command's start) and the
    budget plan (:func:`plan_of`, made before the folder)."""

    budget: BudgetOptions | None = None
    capacity: CapacityOptions | None = None
    t_start: float = 0.0
    budget_plan: BudgetPlan | None = None
    clock: Callable[[], float] = time.monotonic

    @property
    def budget_s(self) -> float | None:
        return None if self.budget is None else self.budget.budget_s


def plan_of(
    plan: SweepPlan, out: Path, budget: BudgetOptions | None, capacity: CapacityOptions | None
) -> BudgetPlan | None:
    """The budget plan (its calibration runs here), when a budget is set and no search plans itself."""
    if budget is None or budget.budget_s is None or capacity is not None:
        return None
    resumed = out if plan.config.resume else None
    return plan_budget(plan, budget, folder_particles(resumed) if auto_sized(plan) else ())


def run_sweep(
    config: SweepConfig,
    out_dir: Path | str,
    *,
    on_cell: Callable[[list[dict[str, Any]]], None] | None = None,
    budget: BudgetOptions | None = None,
    t_start: float | None = None,
    capacity: CapacityOptions | None = None,
) -> Path:
    """Run the sweep into out_dir (results.csv, provenance.json, sweep.json, notes.txt, cells/); returns
    out_dir. The report is built from it by ``sharebench.report.build_report``. ``budget``: the budget and
    adaptive repeats (its ``budget_s`` set); ``t_start``: the budget's clock (``time.monotonic()`` at the
    command's start; default now); ``capacity``: users per GPU by search (``sweep.capacity``)."""
    start = time.monotonic() if t_start is None else t_start
    out = Path(out_dir)
    check_fresh(config, out)
    plan = validate(config)
    ways = Ways(budget, capacity, start, plan_of(plan, out, budget, capacity))  # refused before the folder is made
    with open_folder(out, plan, lambda: resume_config(config, out, plan.device.uuid)) as folder:
        notes = [*plan.notes, *folder.notes]
        plan, record = resolve_sweep_load(plan, out, notes, lambda p, c: alone_bursts(folder, p, c))
        if capacity is not None:  # what --resume continues (sweep.capacity.folder_options)
            record = {**record, "capacity": capacity.record(TailRule(plan.config.slo))}
        plan, schedule = choose(plan, out, notes, ways)
        predicted = ways.budget_plan.calibration if ways.budget_plan is not None else None
        return run_cells(folder, Sweep(plan, schedule, notes, record, predicted), on_cell)


def alone_bursts(folder: Folder, plan: SweepPlan, cell: Cell) -> list[dict[str, Any]]:
    """The capacity alone of a ``serve:load=F`` sweep (``sweep.load``): its cell measured and kept in the
    folder (a warm-up row); its bursts. A failed cell: a one-line UserError (its rows stay on disk)."""
    result = folder.measure(plan, cell)
    for row in result.rows:  # its work (requests back to back) is not the sweep's: resume checks its GPU instead
        row["work_key"] = ""
    folder.keep(result)
    if not result.ok:
        errors = (
            "; ".join(dict.fromkeys(str(r.get("cell_error") or r.get("error")) for r in result.rows)) or "no replica"
        )
        raise UserError(f"the capacity cell {cell.id} failed: {errors}")
    return result.bursts


def choose(
    plan: SweepPlan, out: Path, notes: list[str], ways: Ways, *, dry_run: bool = False
) -> tuple[SweepPlan, Schedule]:
    """The plan at its sizes and the schedule of its cells, within the sweep's time limit. ``notes``: what the
    choice says (notes.txt). ``dry_run``: nothing measured in the folder, a calibration's notes on the plan."""
    schedule: Schedule
    if ways.capacity is not None:
        plan, schedule = capacity_search(plan, out, notes, ways, dry_run)
    elif ways.budget_plan is not None:
        plan, schedule = budgeted(plan, out, notes, ways, dry_run)
    else:
        plan, schedule = fixed(plan, out, notes, dry_run)
    return plan, within_limit(schedule, plan.config, ways)


def calibrated(plan: SweepPlan, out: Path, notes: list[str], dry_run: bool) -> Sized:
    """The CPU default at its calibrated size, with the calibration's rate (``sweep.calibrate``); ``plan``
    itself when its sizes are given."""
    if not auto_sized(plan):
        return Sized(plan, "")
    resumed = out if plan.config.resume else None
    sized = calibrated_size(plan, resumed)
    if not dry_run:
        notes.append(sized.note)
        return sized
    plan = sized.plan.with_notes(sized.note)
    if resumed is None or not folder_particles(resumed):
        plan = plan.with_notes(
            "the run calibrates again at its start, the same way (the machine's noise may move the size)"
        )
    return dataclasses.replace(sized, plan=plan)


def fixed(plan: SweepPlan, out: Path, notes: list[str], dry_run: bool) -> tuple[SweepPlan, FixedSchedule]:
    sized = calibrated(plan, out, notes, dry_run)
    plan = sized.plan
    done = resumed_cells(out, plan, notes) if plan.config.resume and not dry_run else set()
    if done:
        notes.append(f"resumed: {len(done)} cell(s) already on disk were kept and not re-run")
    return plan, FixedSchedule.of(plan, sorted(done), rate_pt_per_s=sized.rate_pt_per_s, calibration_s=sized.spent_s)


def budgeted(
    plan: SweepPlan, out: Path, notes: list[str], ways: Ways, dry_run: bool
) -> tuple[SweepPlan, AdaptiveSchedule]:
    """The budget plan's cells, then adaptive repeats, seeded with a resumed folder's measured rows."""
    bp, budget = ways.budget_plan, ways.budget
    assert bp is not None and budget is not None  # a budget plan is made from a budget (plan_of)
    plan = plan.with_particles(bp.particles)
    notes += [f"budget plan: {line.strip()}" for line in bp.describe().splitlines()]
    done = resumed_cells(out, plan, notes) if plan.config.resume and not dry_run else set()
    rows: list[Mapping[str, Any]] = []
    if done:
        notes.append(f"resumed: {len(done)} cell(s) already on disk were kept and not re-run")
        df = load_results(out)
        rows = df[df["cell_id"].isin(done) & (df["engine"] == plan.workload)].to_dict("records")
    return plan, AdaptiveSchedule(bp, budget, plan, rows, ways.t_start, ways.clock)


def capacity_search(
    plan: SweepPlan, out: Path, notes: list[str], ways: Ways, dry_run: bool
) -> tuple[SweepPlan, CapacitySchedule]:
    """The schedule of a capacity search (``sweep.capacity``): the alone cells and any mode given with its N
    first (those a resumed folder holds left out), then the families' probes in turn, continued from the
    probes the folder holds; a budget bounds it through the deadline (:func:`within_limit`)."""
    options = ways.capacity
    assert options is not None
    resumed = plan.config.resume and not dry_run
    if auto_sized(plan) and not dry_run:
        plan, note = calibrate(plan, out if resumed else None)
        notes.append(note)
    done = resumed_cells(out, plan, notes) if resumed else set()
    starts = {m.label for m in options.start_modes()}
    fixed_cells = [c for c in plan.cells() if c.mode.label not in starts and c.id not in done]
    rule = TailRule(plan.config.slo)
    notes += [f"capacity plan: {line.strip()}" for line in options.describe(rule)]
    if done:
        notes.append(f"resumed: {len(done)} cell(s) already on disk were kept and the search continues from them")
    sized = plan
    schedule = CapacitySchedule(
        out,
        options.searches(rule.slo, plan.config.workload.pattern),
        fixed_cells,
        plan.particles[0],
        options,
        lambda m: mode_fits(sized, m),
        rule,
        sweep=plan,
        read=not dry_run,
        setup_s=SETUP_S["exec" if plan.config.workload.is_program else "warm"],
        budget_s=ways.budget_s,
    )
    for cell in schedule.ahead():  # a resumed search's next probes: planned before the runner sets them up
        plan = plan_mode(plan, cell.mode)
    return plan, schedule


def search_done(config: SweepConfig, out: Path, capacity: CapacityOptions) -> list[str] | None:
    """A resumed capacity search that has its every answer already: the answers' lines (nothing is run);
    None when it has cells left."""
    plan = validate(config)
    notes: list[str] = []
    done = resumed_cells(out, plan, notes)
    starts = {m.label for m in capacity.start_modes()}
    if any(c.id not in done for c in plan.cells() if c.mode.label not in starts):
        return None
    rule = TailRule(plan.config.slo)
    searches = capacity.searches(rule.slo, plan.config.workload.pattern)
    schedule = CapacitySchedule(out, searches, [], plan.particles[0], capacity, lambda m: mode_fits(plan, m), rule)
    return None if schedule.left() else [c.line() for c in schedule.answers()]


def within_limit(schedule: Schedule, config: SweepConfig, ways: Ways) -> Schedule:
    """``schedule`` within the sweep's deadline (``sweep.deadline``): the budget's end less the report's
    time (``--budget``), else ``--stop-after`` seconds from the first cell, else none. A cell not measured
    yet is predicted by the budget plan's cost of its block."""
    bp = ways.budget_plan

    def estimate(cell: Cell) -> float | None:
        block = bp.block(cell.mode.label, cell.particles) if bp is not None else None
        return bp.cost_s(block) if bp is not None and block is not None else None

    if ways.budget_s is not None:
        end_s = bp.overheads.end_s if bp is not None else REPORT_S
        deadline = Deadline(ways.t_start + ways.budget_s - end_s, ways.budget_s, estimate)
        return DeadlineSchedule(schedule, deadline, f"budget {fmt_duration(ways.budget_s)} reached", ways.clock)
    if config.stop_after_s is not None:
        deadline = Deadline(None, config.stop_after_s, estimate)
        why = f"stopped after {config.stop_after_s:g} s (--stop-after)"
        return DeadlineSchedule(schedule, deadline, why, ways.clock, from_first=True)
    return schedule


def dry_run(
    plan: SweepPlan, out: Path, budget: BudgetOptions | None = None, capacity: CapacityOptions | None = None
) -> str:
    """What the run would run (``--dry-run``), chosen as :func:`run_sweep` chooses: a budget's plan and the
    CPU default's calibration run, so that the sizes shown are the ones the run picks; nothing is written."""
    ways = Ways(budget, capacity, time.monotonic(), plan_of(plan, out, budget, capacity))
    _, schedule = choose(plan, out, [], ways, dry_run=True)
    return "\n".join(schedule.describe())
