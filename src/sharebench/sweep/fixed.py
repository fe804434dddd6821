"""The plan's cells, in run order (repeat -> particle count -> mode): a sweep with no budget and no search.

:class:`FixedSchedule` is the simplest schedule (``sweep.schedule``): the cells are known before the first
runs; a resumed folder's measured cells are left out before it starts (``sweep.compose``). Under a replica
pattern the alone cell comes first, once per size (``sweep.plan.alone_cells``, the one place every schedule
gets it from), and each cell runs until its users' p95 is decided, at most its cap (``analysis.samples``).
Its dry run is the plan and its cost in exclusive runs (``sweep.plan.describe_plan``), then its predicted
seconds with their basis (``sweep.budget.predicted_line``): the CPU default's own calibration (its rate, kept
by ``sweep.calibrate``), else a short calibration on this machine; a sweep of replica patterns adds each
cell's sample rule and seconds, and the most it takes, every cell at its cap (:func:`patterned_lines`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sharebench.analysis.cost import patterned_cell
from sharebench.sweep.budget import PROBE_TURNS, calibrate_sweep, predicted_line, rate_calibration, sweep_overheads
from sharebench.sweep.plan import Cell, SweepPlan, alone_cells, describe_plan, is_awake
from sharebench.sweep.schedule import Measured, Stop

__all__ = ["FixedSchedule", "alone_cells", "patterned_lines"]


@dataclass
class FixedSchedule:
    """``cells`` one after the other; ``plan``: the sweep they are of (its dry run)."""

    plan: SweepPlan
    cells: list[Cell] = field(default_factory=list)
    rate_pt_per_s: float | None = None  # the CPU default's calibration (particle-turns/s): the dry run's basis
    calibration_s: float = 0.0

    @classmethod
    def of(
        cls,
        plan: SweepPlan,
        skip: Sequence[str] = (),
        *,
        rate_pt_per_s: float | None = None,
        calibration_s: float = 0.0,
    ) -> FixedSchedule:
        """Every cell of ``plan`` but those whose ids are in ``skip`` (measured already: a resumed folder's
        alone cell is reused, not measured again); ``rate_pt_per_s``: the CPU default's calibration, which its
        dry run predicts from."""
        done = set(skip)
        return cls(plan, [c for c in plan.cells() if c.id not in done], rate_pt_per_s, calibration_s)

    def next_cell(self) -> Cell | None:
        return self.cells[0] if self.cells else None

    def learn(self, measured: Measured) -> None:
        self.cells = [c for c in self.cells if c.id != measured.cell.id]

    def ahead(self) -> list[Cell]:
        return list(self.cells)

    def left(self) -> list[Cell]:
        return list(self.cells)

    def stopped(self) -> Stop | None:
        return None

    def ends_at(self) -> float | None:
        return None

    def describe(self) -> list[str]:
        if self.plan.config.workload.patterned:  # its seconds are not N exclusive runs (analysis.cost)
            return [describe_plan(self.plan), *patterned_lines(self.plan)]
        calibration = None
        if self.rate_pt_per_s is not None:
            calibration = rate_calibration(self.plan, self.rate_pt_per_s, self.calibration_s)
        return [describe_plan(self.plan), predicted_line(self.plan, calibration)]

    def report(self) -> list[str]:
        return []


def patterned_lines(plan: SweepPlan) -> list[str]:
    """A patterned sweep's dry run: each mode's sample rule per size (the fewest samples per user, the cap)
    and its seconds (at the look the cost model decides it, ``analysis.cost``; at most, at its cap), then ``predicted: N s`` of the plan's
    cells (``sweep.budget.predicted_line``) and the most they take, every cell at its cap; from one short
    exclusive run per size on this machine, the recorded gaps, set-up and report."""
    calibration = calibrate_sweep(plan, plan.particles, probe_turns=PROBE_TURNS)
    o = sweep_overheads(plan, calibration)
    w = plan.config.workload
    lines = [
        f"samples:   each cell until every user's p{plan.rule.percentile} is decided against {plan.config.slo:g}x at "
        f"{plan.rule.confidence:.0%} confidence (looks at n0, 2 n0, 4 n0 ... samples per user), at most its cap:"
    ]
    cells = plan.cells()
    seconds: dict[Cell, tuple[float, float]] = {}
    for c in cells:
        n, unit_s = plan.replicas(c.mode), calibration.exclusive_s(c.particles) / max(1, calibration.turns)
        factor = calibration.factors.get(c.mode.label, 1.0)
        warm = c.warmup and not is_awake(c)
        seconds[c] = (
            patterned_cell(w, n, unit_s, factor, rule=plan.rule, warmup=warm).cell_s,
            patterned_cell(w, n, unit_s, factor, rule=plan.rule, warmup=warm, at_cap=True).cell_s,
        )
    shown: dict[tuple[str, int, bool], list[Cell]] = {}
    for c in cells:
        if not c.warmup or is_awake(c):
            shown.setdefault((c.mode.label, c.particles, is_awake(c)), []).append(c)
    for (label, particles, awake), group in shown.items():
        expected, most = seconds[group[0]]
        what = f"{label} beside a keep-awake process" if awake else label
        many = f", {len(group)} cells" if len(group) > 1 else ""
        lines.append(
            f"  {what} at {particles:,}: {plan.samples(group[0]).describe()}; about {expected:.0f} s a cell "
            f"(at most {most:.0f} s){many}"
        )
    most = sum(m for _, m in seconds.values()) + len(cells) * o.per_cell_s
    fixed = calibration.spent_s + o.start_s + o.end_s
    return [
        *lines,
        predicted_line(plan, calibration),
        f"at most:   {fixed + most:.0f} s if every cell runs to its cap (undecided at every look); the prediction "
        "has each cell decided at the look its expected order statistics decide it (analysis.cost)",
    ]
