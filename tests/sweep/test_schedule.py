"""One protocol for every way of choosing cells (sharebench.sweep.schedule, issue 41): the runner runs any
schedule it is given, a deadline wraps any other, and a new way of choosing cells is one module."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

import sharebench.sweep.runner
from sharebench.modes import parse_mode
from sharebench.sweep import SweepConfig, validate
from sharebench.sweep.deadline import Deadline, DeadlineSchedule
from sharebench.sweep.fixed import FixedSchedule
from sharebench.sweep.plan import Cell, SweepPlan
from sharebench.sweep.runner import Sweep, open_folder, run_cells
from sharebench.sweep.schedule import Measured, Schedule, Stop
from sharebench.workloads import Workload
from support.schedules import FakeClock


def cells(*ids: tuple[str, int, int]) -> list[Cell]:
    return [Cell(parse_mode(m), p, r) for m, p, r in ids]


@dataclass
class Listed:
    """A schedule of a fixed list, for the deadline's tests."""

    queue: list[Cell]
    learnt: list[Measured] = field(default_factory=list)

    def next_cell(self) -> Cell | None:
        return self.queue[0] if self.queue else None

    def learn(self, measured: Measured) -> None:
        self.learnt.append(measured)
        self.queue = self.queue[1:]

    def ahead(self) -> list[Cell]:
        return list(self.queue)

    def left(self) -> list[Cell]:
        return list(self.queue)

    def stopped(self) -> Stop | None:
        return None

    def ends_at(self) -> float | None:
        return None

    def describe(self) -> list[str]:
        return ["listed"]

    def report(self) -> list[str]:
        return [f"listed: {len(self.learnt)} learnt"]


def test_stop_after_counts_from_the_first_cell_and_refuses_what_does_not_fit():
    clock = FakeClock(100.0)
    inner = Listed(cells(("exclusive", 10, 1), ("exclusive", 10, 2), ("exclusive", 10, 3)))
    schedule: Schedule = DeadlineSchedule(inner, Deadline(None, 10.0), "stopped after 10 s", clock, from_first=True)
    assert schedule.ends_at() is None  # not started yet
    clock.advance(50.0)  # provenance, warm replicas: the limit has not begun
    first = schedule.next_cell()
    assert first is not None and schedule.ends_at() == 160.0
    clock.advance(4.0)
    schedule.learn(Measured(first, [], 4.0, whole=True))
    second = schedule.next_cell()
    assert second is not None
    clock.advance(4.0)
    schedule.learn(Measured(second, [], 9.0, whole=False))  # stopped at the limit: says nothing of its length
    assert schedule.next_cell() is None  # 2 s left, 4 s predicted
    assert schedule.stopped() == Stop("stopped after 10 s", "not started: exclusive_p10_r3, predicted 4 s, 2 s left")
    assert [c.id for c in schedule.left()] == ["exclusive_p10_r3"]
    assert len(inner.learnt) == 2 and schedule.describe() == ["listed"] and schedule.report() == ["listed: 2 learnt"]


def test_no_deadline_passes_every_cell_on():
    inner = Listed(cells(("exclusive", 10, 1)))
    schedule = DeadlineSchedule(inner, Deadline(None), "never", FakeClock())
    assert schedule.next_cell() == inner.queue[0] and schedule.ends_at() is None and schedule.stopped() is None


@dataclass
class LargestFirst:
    """A way of choosing cells the library does not have: the plan's cells, the largest particle count
    first, at most ``most`` of them. A module of its own is all it takes; the runner is not changed."""

    plan: SweepPlan
    most: int
    queue: list[Cell] = field(default_factory=list)
    ran: int = 0

    def __post_init__(self) -> None:
        self.queue = sorted(self.plan.cells(), key=lambda c: (-c.particles, c.repeat))

    def next_cell(self) -> Cell | None:
        return self.queue[0] if self.queue and self.ran < self.most else None

    def learn(self, measured: Measured) -> None:
        self.ran += 1
        self.queue = [c for c in self.queue if c.id != measured.cell.id]

    def ahead(self) -> list[Cell]:
        return self.queue[: self.most - self.ran]

    def left(self) -> list[Cell]:
        return list(self.queue)

    def stopped(self) -> Stop | None:
        return Stop(f"the first {self.most} cells") if self.queue else None

    def ends_at(self) -> float | None:
        return None

    def describe(self) -> list[str]:
        return [f"largest first: {', '.join(c.id for c in self.queue[: self.most])}"]

    def report(self) -> list[str]:
        return [f"largest first: ran {self.ran}"]


@pytest.mark.slow  # a real sweep of three tiny cells on the CPU
def test_the_runner_runs_a_schedule_it_does_not_know(lattice, tmp_path):
    config = SweepConfig(
        modes=("exclusive",),
        particles=(200, 400),
        turns=2,
        repeats=2,
        warmup_repeats=0,
        workload=Workload(device="cpu", lattice=str(lattice)),
        telemetry_interval_s=None,
        progress=False,
    )
    plan = validate(config)
    out = tmp_path / "r"
    with open_folder(out, plan, lambda: config) as folder:
        run_cells(folder, Sweep(plan, LargestFirst(plan, 3)))
    rows = pd.read_csv(out / "results.csv")
    assert rows["cell_id"].tolist() == ["exclusive_p400_r1", "exclusive_p400_r2", "exclusive_p200_r1"]
    assert set(rows["cell_status"]) == {"ok"}
    notes = (out / "notes.txt").read_text()
    assert f"the first 3 cells: 1 of 4 cell(s) not run; continue with --resume --out {out}" in notes
    assert "largest first: ran 3" in notes
    assert FixedSchedule.of(plan, rows["cell_id"].tolist()).left() == [Cell(parse_mode("exclusive"), 200, 2)]


def test_the_runner_knows_no_way_of_choosing_cells():
    """runner.py imports none of the schedules, nor what they are made from, and stays under 400 lines."""
    path = Path(sharebench.sweep.runner.__file__)
    tree = ast.parse(path.read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    ways = ("budget", "capacity", "adaptive", "calibrate", "load", "fixed", "deadline", "compose")
    assert not imported & {f"sharebench.sweep.{w}" for w in ways}, imported
    assert "sharebench.sweep.schedule" in imported  # the protocol alone
    assert len(path.read_text().splitlines()) < 400
