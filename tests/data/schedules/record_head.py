"""Records the golden data of tests/sweep/test_schedule_golden.py at the commit before issue 41's schedules
(the runner's own loop, ``sweep.adaptive.Schedule``, ``sweep.capacity.CapacitySchedule``, ``sweep.deadline``).
Kept in the history only: it uses that commit's API. Run from the worktree root:

    PYTHONPATH=tests .venv/bin/python tests/data/schedules/record_head.py

Each scenario replays the runner's loop (``sweep.runner._sweep`` of that commit) without measuring: a cell's
rows come from ``support.schedules``, its time from a fake clock; what is recorded is the cells in the order
chosen and every note the choosing added (plan lines, a refused cell, the stop line, the report lines).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from sharebench.devices import resolve_device
from sharebench.modes import parse_modes
from sharebench.results import append_notes  # noqa: F401 - the runner's
from sharebench.results.bursts import append_bursts
from sharebench.sweep import SweepConfig, adaptive, capacity, validate
from sharebench.sweep.adaptive import Schedule
from sharebench.sweep.budget import REPORT_S, BudgetOptions, Calibration, Overheads, fmt_duration, plan_within
from sharebench.sweep.capacity import CapacityOptions, CapacitySchedule, read_capacity
from sharebench.sweep.deadline import Deadline
from sharebench.workloads import Workload
from support.lattices import tiny_lattice
from support.schedules import GAP_S, PATTERN, SLO, FakeClock, budget_rows, capacity_bursts, capacity_rows

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CAL = Calibration(turns=10, elements=1, rates={1000: 10_000.0, 2000: 10_000.0}, source="test rates")
OVERHEADS = Overheads(per_cell_s=0.5, start_s=2.0, end_s=3.0, source="test")


def replay(schedule, deadline, clock, measure, why):
    """The runner's loop: (cells in order, notes)."""
    order, notes = [], []
    cells = schedule.queue
    while cells:
        c = cells[0]
        refused = deadline.refuses(c, clock())
        if refused is not None:
            notes.append(refused)
            left = schedule.unfinished() if schedule.plan is not None else schedule.queue
            notes.append(f"{why}: {len(left)} of {schedule.ran + len(left)} cell(s) not run; continue with --resume --out OUT")
            break
        clock.advance(GAP_S)
        t0 = clock()
        rows = measure(c)
        deadline.learn(c, clock() - t0)
        order.append(c.id)
        cells = schedule.after(c, rows)
    else:
        if why.startswith("budget") and schedule.unfinished():
            left = schedule.unfinished() if schedule.plan is not None else schedule.queue
            notes.append(f"{why}: {len(left)} of {schedule.ran + len(left)} cell(s) not run; continue with --resume --out OUT")
    notes += schedule.report()
    return order, notes


def budget_scenario(budget_s: float, sizes, max_repeats: int):
    clock = FakeClock()
    adaptive.time = clock  # the module's time.monotonic()
    modes = parse_modes("exclusive,timeslice:2,mps:2")
    bp = plan_within(budget_s, CAL, OVERHEADS, modes, sizes, 3, max_repeats, warmup_repeats=1)
    options = BudgetOptions(budget_s, precision=1.0, max_repeats=max_repeats)
    t_start = clock()
    notes = [f"budget plan: {line.strip()}" for line in bp.describe().splitlines()]
    schedule = Schedule.budgeted(bp, options, [], t_start)
    clock.advance(OVERHEADS.start_s)

    def estimate(c):
        block = bp.block(c.mode.label, c.particles)
        return bp.cost_s(block) if block is not None else None

    deadline = Deadline(t_start + budget_s - bp.overheads.end_s, budget_s, estimate)

    def measure(c):
        rows = budget_rows(c.mode.label, c.particles, c.repeat, clock(), scale=c.particles / 1000)
        clock.advance(max(r["track_end"] for r in rows) - clock())
        return rows

    order, more = replay(schedule, deadline, clock, measure, f"budget {fmt_duration(budget_s)} reached")
    return {"cells": order, "notes": notes + more, "unfinished": [c.id for c in schedule.unfinished()]}


def capacity_scenario(budget_s, mem_max: int):
    clock = FakeClock()
    capacity.time = clock
    options = CapacityOptions(("timeslice", "mps"), (2, 16), 2, 4)
    out = Path(tempfile.mkdtemp())
    fixed = [c for c in plan_cells("exclusive", [1000], 2, 1)]
    notes = [f"capacity plan: {line.strip()}" for line in options.describe(SLO)]
    t_start = clock()

    def fits(mode):
        return None if (mode.replicas or 1) <= mem_max else f"{mode.label}: memory"

    schedule = CapacitySchedule(
        out, options.searches(SLO, PATTERN), fixed, 1000, options, fits, budget_s=budget_s, t_start=t_start, end_s=10.0
    )
    clock.advance(5.0)
    if budget_s is not None:
        deadline = Deadline(t_start + budget_s - REPORT_S, budget_s, lambda _c: None)
    else:
        deadline = Deadline(None)

    def measure(c):
        bursts = capacity_bursts(c.id, c.mode.label, c.repeat, clock())
        append_bursts(out, bursts)
        clock.advance(bursts[-1]["end"] - clock())
        return capacity_rows(c.id, c.mode.label, c.repeat, bursts)

    why = f"budget {fmt_duration(budget_s)} reached" if budget_s is not None else "unused"
    order, more = replay(schedule, deadline, clock, measure, why)
    answers = [c["line"] for c in read_capacity(out)]
    table = pd.read_csv(out / "tables" / "capacity.csv").to_dict("records")
    return {"cells": order, "notes": notes + more, "answers": answers, "table": table}


def plan_cells(modes: str, particles, repeats: int, warmup: int):
    lattice = tiny_lattice(Path(tempfile.mkdtemp()) / "fodo.json")
    config = SweepConfig(
        modes=modes.split(","),
        particles=particles,
        repeats=repeats,
        warmup_repeats=warmup,
        workload=Workload(device="cpu", lattice=str(lattice)),
    )
    return validate(config).cells()


def fixed_scenario(done: int, stop_after_s: float | None):
    clock = FakeClock()
    cells = plan_cells("exclusive,timeslice:2,partition:2", [1000, 2000], 2, 1)
    ids = {c.id for c in cells[:done]}
    schedule = Schedule([c for c in cells if c.id not in ids])
    deadline = Deadline(clock() + stop_after_s, stop_after_s) if stop_after_s is not None else Deadline(None)

    def measure(c):
        rows = budget_rows(c.mode.label, c.particles, c.repeat, clock(), scale=c.particles / 1000)
        clock.advance(max(r["track_end"] for r in rows) - clock())
        return rows

    why = f"stopped after {stop_after_s:g} s (--stop-after)" if stop_after_s is not None else "unused"
    order, notes = replay(schedule, deadline, clock, measure, why)
    return {"cells": order, "notes": notes}


def normalise(text: str, lattice: str) -> str:
    text = re.sub(r"(?m)^device:    cpu \(.*\)$", "device:    cpu (<this machine>)", text)
    text = text.replace(f"cpu ({resolve_device('cpu').name})", "cpu (<this machine>)")
    text = "".join(ln for ln in text.splitlines(keepends=True) if "Loading line" not in ln and "Done loading" not in ln)
    return text.replace(lattice, "<lattice>").replace(str(ROOT), "<root>")


def command(argv, lattice):
    done = subprocess.run(
        [sys.executable, "-m", "sharebench", "run", *argv], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    return {"argv": argv, "code": done.returncode, "out": normalise(done.stdout, lattice), "err": normalise(done.stderr, lattice)}


DRY_RUNS = [
    ["--dry-run", "--device", "cpu", "--particles", "1000,2000", "--modes", "exclusive,timeslice:2", "--repeats", "2",
     "--lattice", "LATTICE"],
    ["--dry-run", "--device", "cpu", "--capacity", "--modes", "timeslice", "--pattern", PATTERN, "--particles", "1000",
     "--users", "2..16", "--lattice", "LATTICE"],
    ["--dry-run", "--device", "cpu", "--modes", "timeslice", "--pattern", "serve:load=0.5", "--particles", "1000",
     "--repeats", "1", "--max-repeats", "3", "--lattice", "LATTICE"],
    ["--dry-run", "--budget", "1h", "--gpu-model", "H200", "--recorded", "tests/data/results", "--modes",
     "exclusive,timeslice:2,mps:2"],
    ["--dry-run", "--budget", "10m", "--gpu-model", "H200", "--recorded", "tests/data/results", "--particles", "5e6",
     "--precision", "0.5", "--max-repeats", "5"],
]  # fmt: skip
ERRORS = [
    ["--modes", "bogus"],
    ["--modes", "exclusive,timeslice:0"],
    ["--turns", "0"],
    ["--repeats", "x"],
    ["--particles", "1e4,lots"],
    ["--users", "2..8"],
    ["--capacity"],
    ["--capacity", "--modes", "timeslice", "--users", "9..3"],
    ["--precision", "1"],
    ["--max-repeats", "5", "--gpu-model", "H200"],
    ["--budget", "10m", "--repeats", "3"],
    ["--budget", "soon"],
    ["--budget", "10m", "--precision", "0"],
    ["--budget", "10m", "--max-repeats", "2"],
    ["--budget", "10m", "--gpu-model", "H200"],
    ["--device", "tpu"],
    ["--stop-after", "-1"],
    ["--run-timeout", "nan"],
    ["--bursts", "0"],
    ["--slo", "0.5"],
    ["--pattern", "sometimes"],
    ["--neighbours", "serve:rate=-1"],
    ["--exec", "true"],
    ["--engine", "exec"],
    ["--engine", "warp"],
    ["--exec-timing", "wall", "--engine", "exec", "--exec", "true"],
    ["--modes", "mps"],
    ["--modes", "timeslice/huge"],
]


def sweep_structure(out: Path) -> dict:
    """What the golden sweep test compares: cells, modes, columns, row counts (not the measured values)."""
    rows = pd.read_csv(out / "results.csv")
    tables = {}
    for path in sorted((out / "tables").glob("*.csv")):
        t = pd.read_csv(path)
        tables[path.name] = {"columns": list(t.columns), "rows": len(t)}
    return {
        "cells": sorted(rows["cell_id"].unique().tolist()),
        "modes": sorted(rows["mode"].unique().tolist()),
        "columns": list(rows.columns),
        "rows": len(rows),
        "tables": tables,
        "files": sorted(p.name for p in out.iterdir() if not p.name.startswith("provenance-")),
    }


SWEEPS = {
    "plain": ["--device", "cpu", "--modes", "exclusive,timeslice:2", "--particles", "500", "--turns", "2",
              "--repeats", "2", "--warmup-repeats", "1"],
    "patterned": ["--device", "cpu", "--modes", "exclusive,timeslice:2", "--particles", "500", "--turns", "2",
                  "--repeats", "1", "--warmup-repeats", "0", "--pattern", "interactive:burst=1,think=0.01",
                  "--bursts", "5"],
}  # fmt: skip


def main() -> None:
    lattice = str(tiny_lattice(Path(tempfile.mkdtemp()) / "fodo.json"))
    golden = {
        "fixed": fixed_scenario(0, None),
        "fixed-resumed": fixed_scenario(4, None),
        "fixed-stop-after": fixed_scenario(0, 9.0),
        "budget-settles": budget_scenario(1000.0, [1000], 6),
        "budget-cut": budget_scenario(45.0, [1000], 10),
        "budget-two-sizes": budget_scenario(120.0, [1000, 2000], 8),
        "capacity": capacity_scenario(None, 64),
        "capacity-memory": capacity_scenario(None, 6),
        "capacity-budget": capacity_scenario(60.0, 64),
    }
    (HERE / "schedules.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    texts = {
        "dry_runs": [command([lattice if a == "LATTICE" else a for a in argv], lattice) for argv in DRY_RUNS],
        "errors": [command([*argv, "--out", "/nonexistent/out", "--no-progress"], lattice) for argv in ERRORS],
    }
    for t in texts["dry_runs"] + texts["errors"]:
        t["argv"] = ["LATTICE" if a == lattice else a for a in t["argv"]]
    (HERE / "texts.json").write_text(json.dumps(texts, indent=1, ensure_ascii=False) + "\n")
    if "--sweeps" in sys.argv:
        found = {}
        for name, argv in SWEEPS.items():
            out = Path(tempfile.mkdtemp()) / name
            done = subprocess.run(
                [sys.executable, "-m", "sharebench", "run", *argv, "--lattice", lattice, "--out", str(out),
                 "--no-progress", "--no-telemetry"],
                capture_output=True, text=True, cwd=ROOT, timeout=900,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            found[name] = {"argv": argv, **sweep_structure(out)}
        (HERE / "sweeps.json").write_text(json.dumps(found, indent=1) + "\n")


if __name__ == "__main__":
    dataclasses  # noqa: B018
    main()
