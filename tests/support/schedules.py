"""Synthetic measurements for the schedules' golden test (tests/sweep/test_schedule_golden.py): what a cell
would have measured, made from a seeded generator and a fake clock, so that a schedule's choices can be
replayed exactly. The golden data under tests/data/schedules/ was recorded with these same generators from
the schedules as they were before issue 41 split them out of the runner.

* :class:`FakeClock`: the time a schedule reads (``time.monotonic`` in its place), moved on by each cell;
* :func:`budget_rows`: the results rows of a cell of a budgeted sweep (replicas tracking side by side);
* :func:`capacity_rows` / :func:`capacity_bursts`: a patterned cell's rows and its victim's bursts, whose
  latency grows with N (so that a capacity search finds a knee).
"""

from __future__ import annotations

import math
import random
import zlib
from typing import Any

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
BURSTS = 20


def stretch(mode_label: str) -> float:
    """How much slower a burst runs beside N-1 neighbours: mps holds more users than timeslice."""
    kind, _, rest = mode_label.partition(":")
    n = int(rest.split("@")[0].split("/")[0] or 1) if rest else 1
    per_user = {"timeslice": 0.17, "mps": 0.09}.get(kind, 0.0)
    return 1.0 + per_user * (n - 1)


def capacity_bursts(cell_id: str, mode_label: str, repeat: int, start: float) -> list[dict[str, Any]]:
    """The victim's bursts of one cell (bursts.csv rows), one after the other from ``start``."""
    rng = rng_of(cell_id, 7)
    rows, t = [], start
    for i in range(BURSTS):
        latency = ALONE_S * stretch(mode_label) * math.exp(rng.gauss(0, 0.08))
        rows.append(
            dict(
                sweep_id="golden",
                cell_id=cell_id,
                mode=mode_label,
                repeat=repeat,
                warmup=repeat == 0,
                replica=0,
                role="victim",
                pattern=PATTERN,
                i=i,
                arrival=t,
                start=t,
                end=t + latency,
                units=2,
            )
        )
        t += latency + 0.1
    return rows


def capacity_rows(cell_id: str, mode_label: str, repeat: int, bursts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A patterned cell's results rows: each replica tracking over the victim's bursts' window."""
    start, end = bursts[0]["start"], bursts[-1]["end"]
    kind, _, rest = mode_label.partition(":")
    n = int(rest.split("@")[0].split("/")[0]) if rest else 1
    rows = cell(dict(CPU, particles=1000), mode_label, repeat, [(start, end)] * n, cores=2)
    for r in rows:
        r["cell_id"], r["sweep_id"], r["mode_kind"] = cell_id, "golden", kind
    return rows
