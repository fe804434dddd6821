"""Synthetic measurements for the schedules' golden test (tests/sweep/test_schedule_golden.py): what a cell
would have measured, made from a seeded generator and a fake clock, so that a schedule's choices can be
replayed exactly. The golden data under tests/data/schedules/ was recorded with these same generators from
the schedules as they were before issue 41 split them out of the runner.

* :class:`FakeClock`: the time a schedule reads (``time.monotonic`` in its place), moved on by each cell;
* :func:`budget_rows`: the results rows of a cell of a budgeted sweep (replicas tracking side by side);
* :func:`capacity_rows` / :func:`capacity_bursts`: a patterned cell's rows and every user's bursts, whose
  latency grows with N (so that a capacity search finds a knee), enough of them for the rule to decide.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sharebench.analysis.tail import TailRule
from sharebench.results import ResultsWriter
from sharebench.results.bursts import append_bursts
from sharebench.sweep import SweepConfig, validate
from sharebench.sweep.budget import BudgetOptions
from sharebench.sweep.capacity import CapacityOptions, CapacitySchedule
from sharebench.sweep.compose import Ways, within_limit
from sharebench.sweep.runner import say_stopped
from sharebench.sweep.schedule import Measured, Schedule
from sharebench.workloads import Workload
from support.crafted import CPU, cell

GAP_S = 0.5  # between two cells


class FakeClock:
    """A monotonic clock that moves only when told: ``clock()`` the time, ``advance(s)`` moves it."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:  # the ``time`` module's name, for code that calls time.monotonic()
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def rng_of(cell_id: str, salt: int = 0) -> random.Random:
    return random.Random(zlib.crc32(cell_id.encode()) + salt)


# the budgeted sweep's modes: (mean span relative to T_1 = 1 s, relative noise)
BUDGET_SPANS = {"exclusive": (1.0, 0.01), "timeslice:2": (2.2, 0.004), "mps:2": (2.0, 0.05), "partition:2": (2.1, 0.1)}


def budget_rows(mode: str, particles: int, repeat: int, start: float, scale: float = 1.0) -> list[dict[str, Any]]:
    """The rows of one cell of a budgeted sweep: its replicas tracking side by side for a noisy span."""
    mean, noise = BUDGET_SPANS[mode]
    cid = f"{mode}_p{particles}_r{repeat}"
    span = scale * mean * (1 + noise * rng_of(cid).gauss(0, 1))
    n = 1 if mode == "exclusive" else 2
    base = dict(CPU, particles=particles)
    rows = cell(base, mode, repeat, [(start, start + span)] * n, cores=2)
    for r in rows:
        r["sweep_id"] = "golden"
    return rows


SLO = 2.0
PATTERN = "interactive:burst=2,think=0.1"
ALONE_S = 0.05  # a burst's latency alone
THINK_S = 0.1
BURSTS = 240  # bursts of every user of a cell: more than the rule's fewest (153 for 16 users)


def replicas_of(mode_label: str) -> int:
    kind, _, rest = mode_label.partition(":")
    return int(rest.split("@")[0].split("/")[0] or 1) if rest else 1


def stretch(mode_label: str) -> float:
    """How much slower a burst runs beside N-1 neighbours: mps holds more users than timeslice."""
    kind = mode_label.partition(":")[0]
    per_user = {"timeslice": 0.17, "mps": 0.09}.get(kind, 0.0)
    return 1.0 + per_user * (replicas_of(mode_label) - 1)


def capacity_bursts(
    cell_id: str, mode_label: str, repeat: int, start: float, until: float | None = None
) -> list[dict[str, Any]]:
    """Every user's bursts of one cell (bursts.csv rows): each replica's bursts one after the other from
    ``start``, a think time apart, their latency the mode's stretch of :data:`ALONE_S` with seeded noise;
    ``until``: the cell stopped there (a deadline), the bursts ended by then kept."""
    rows = []
    for replica in range(replicas_of(mode_label)):
        rng = rng_of(cell_id, 7 + replica)
        t = start
        for i in range(BURSTS):
            latency = ALONE_S * stretch(mode_label) * math.exp(rng.gauss(0, 0.08))
            if until is not None and t + latency > until:
                break
            rows.append(
                dict(
                    sweep_id="golden",
                    cell_id=cell_id,
                    mode=mode_label,
                    repeat=repeat,
                    warmup=repeat == 0,
                    replica=replica,
                    role="victim" if replica == 0 else "neighbour",
                    pattern=PATTERN,
                    i=i,
                    arrival=t,
                    start=t,
                    end=t + latency,
                    units=2,
                )
            )
            t += latency + THINK_S
    return rows


def capacity_rows(
    cell_id: str, mode_label: str, repeat: int, bursts: list[dict[str, Any]], fails_at: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """A patterned cell's results rows: each replica tracking over the bursts' window; failed (every row,
    as ``sweep.cell.check_cell`` marks a cell) when its kind fails from this N (``fails_at``: kind -> N)."""
    start = min((b["start"] for b in bursts), default=0.0)
    end = max((b["end"] for b in bursts), default=start)
    kind = mode_label.partition(":")[0]
    n = replicas_of(mode_label)
    rows = cell(dict(CPU, particles=1000), mode_label, repeat, [(start, end)] * n, cores=2)
    failed = n >= (fails_at or {}).get(kind, n + 1)
    for r in rows:
        r["cell_id"], r["sweep_id"], r["mode_kind"] = cell_id, "golden", kind
        if failed:
            r.update(
                status="failed", error="exit status 1", cell_status="failed", cell_error="replica 3: exit status 1"
            )
    return rows


def replay(
    schedule: Schedule, clock: FakeClock, measure: Callable[[Any], list[dict[str, Any]]]
) -> tuple[list[str], list[str]]:
    """The runner's loop over ``schedule`` (``sweep.runner.run_cells``) without measuring: the cells in the
    order chosen, and the notes the choosing added."""
    order: list[str] = []
    notes: list[str] = []
    while (c := schedule.next_cell()) is not None:
        clock.advance(GAP_S)
        t0 = clock()
        rows = measure(c)
        order.append(c.id)
        schedule.learn(Measured(c, rows, clock() - t0, whole=True))
    stop = schedule.stopped()
    if stop is not None:
        say_stopped(notes, Path("OUT"), stop, len(schedule.left()), len(order))
    return order, notes + schedule.report()


def replay_capacity(
    lattice: str,
    out: Path,
    clock: FakeClock,
    options: CapacityOptions,
    budget_s: float | None,
    mem_max: int = 64,
    fails_at: dict[str, int] | None = None,
) -> tuple[list[str], list[str], Schedule]:
    """A capacity search replayed as the runner runs it (``sweep.compose``'s schedule within its deadline),
    each cell's rows and bursts kept in ``out`` as the runner keeps them (a cell running past the deadline
    stopped there, its bursts kept): the cells in order, the notes, the schedule. ``mem_max``: the most
    replicas the planner fits; ``fails_at``: kind -> the N from which its cells fail."""
    config = SweepConfig(workload=Workload(device="cpu", lattice=lattice), modes=("exclusive",), particles=(1000,),
                         repeats=2, warmup_repeats=1)  # fmt: skip
    fixed = validate(config).cells()
    rule = TailRule(SLO)
    notes = [f"capacity plan: {line.strip()}" for line in options.describe(rule)]

    def fits(mode: Any) -> str | None:
        return None if (mode.replicas or 1) <= mem_max else f"{mode.label}: memory"

    search = CapacitySchedule(out, options.searches(SLO, PATTERN), fixed, 1000, options, fits, rule)
    schedule = within_limit(search, SweepConfig(), Ways(BudgetOptions(budget_s), options, clock(), None, clock))
    clock.advance(5.0)
    writer = ResultsWriter(out)

    def measure(c: Any) -> list[dict[str, Any]]:
        bursts = capacity_bursts(c.id, c.mode.label, c.repeat, clock(), until=schedule.ends_at())
        rows = capacity_rows(c.id, c.mode.label, c.repeat, bursts, fails_at)
        writer.append(rows)
        append_bursts(out, bursts)
        clock.advance(max((b["end"] for b in bursts), default=clock()) - clock())
        return rows

    order, more = replay(schedule, clock, measure)
    return order, notes + more, schedule
