"""The plan's cells, in run order (repeat -> particle count -> mode): a sweep with no budget and no search.

:class:`FixedSchedule` is the simplest schedule (``sweep.schedule``): the cells are known before the first
runs; a resumed folder's measured cells are left out before it starts (``sweep.compose``). Its dry run is
the plan and its cost in exclusive runs (``sweep.plan.describe_plan``), then its predicted seconds with their
basis (``sweep.budget.predicted_line``): the CPU default's own calibration (its rate, kept by
``sweep.calibrate``), else a short calibration on this machine; a patterned cell costs its bursts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sharebench.sweep.budget import predicted_line, rate_calibration
from sharebench.sweep.plan import Cell, SweepPlan, describe_plan
from sharebench.sweep.schedule import Measured, Stop


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
        """Every cell of ``plan`` but those whose ids are in ``skip`` (measured already); ``rate_pt_per_s``:
        the CPU default's calibration, which its dry run predicts from."""
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
        calibration = None
        if self.rate_pt_per_s is not None and not self.plan.config.workload.patterned:
            calibration = rate_calibration(self.plan, self.rate_pt_per_s, self.calibration_s)
        return [describe_plan(self.plan), predicted_line(self.plan, calibration)]

    def report(self) -> list[str]:
        return []
