"""Issue 41 changes no behaviour: the schedules split out of the runner choose the same cells, in the same
order, with the same notes, as the runner's own loop did before (tests/data/schedules/, recorded by
tests/data/schedules/record_head.py in commit 012a5b7, which used that commit's API), the dry runs and the
one-line errors of ``sharebench run`` read the same, and a real tiny CPU sweep gives folders of the same
structure.

Each scenario replays the runner's loop (``sweep.runner.run_cells``) without measuring: a cell's rows come
from ``support.schedules`` (seeded), its time from a fake clock; the schedule is built as
``sweep.compose`` builds it, within the same deadline."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sharebench.cli import main
from sharebench.devices import resolve_device
from sharebench.modes import parse_modes
from sharebench.sweep import SweepConfig, validate
from sharebench.sweep.budget import BudgetOptions, Calibration, Overheads, plan_within
from sharebench.sweep.capacity import CapacityOptions, read_capacity
from sharebench.sweep.compose import Ways, choose, within_limit
from sharebench.sweep.fixed import FixedSchedule
from sharebench.workloads import Workload
from support.lattices import tiny_lattice
from support.paths import ROOT
from support.schedules import FakeClock, budget_rows, replay, replay_capacity

DATA = ROOT / "tests" / "data" / "schedules"
GOLDEN = json.loads((DATA / "schedules.json").read_text())
TEXTS = json.loads((DATA / "texts.json").read_text())
CAL = Calibration(turns=10, elements=1, rates={1000: 10_000.0, 2000: 10_000.0}, source="test rates")
OVERHEADS = Overheads(per_cell_s=0.5, start_s=2.0, end_s=3.0, source="test")


@pytest.fixture(scope="module")
def lattice(tmp_path_factory) -> str:
    return str(tiny_lattice(tmp_path_factory.mktemp("lattice") / "fodo.json"))


def cpu_plan(lattice: str, **kw):
    return validate(SweepConfig(workload=Workload(device="cpu", lattice=lattice), **kw))


def tracked(clock: FakeClock):
    def measure(cell):
        rows = budget_rows(cell.mode.label, cell.particles, cell.repeat, clock(), scale=cell.particles / 1000)
        clock.advance(max(r["track_end"] for r in rows) - clock())
        return rows

    return measure


@pytest.mark.parametrize(("name", "done", "stop_after_s"), [("fixed", 0, None), ("fixed-resumed", 4, None),
                                                             ("fixed-stop-after", 0, 9.0)])  # fmt: skip
def test_the_fixed_plan_runs_the_same_cells(lattice, name, done, stop_after_s):
    clock = FakeClock()
    plan = cpu_plan(
        lattice,
        modes=("exclusive", "timeslice:2", "partition:2"),
        particles=(1000, 2000),
        repeats=2,
        warmup_repeats=1,
        stop_after_s=stop_after_s,
    )
    schedule = within_limit(
        FixedSchedule.of(plan, [c.id for c in plan.cells()[:done]]), plan.config, Ways(t_start=clock(), clock=clock)
    )
    order, notes = replay(schedule, clock, tracked(clock))
    assert order == GOLDEN[name]["cells"]
    assert notes == GOLDEN[name]["notes"]


@pytest.mark.parametrize(("name", "budget_s", "sizes", "max_repeats"), [("budget-settles", 1000.0, [1000], 6),
                         ("budget-cut", 45.0, [1000], 10), ("budget-two-sizes", 120.0, [1000, 2000], 8)])  # fmt: skip
def test_a_budget_repeats_the_same_cells_and_stops_at_the_same_one(
    lattice, tmp_path, name, budget_s, sizes, max_repeats
):
    clock = FakeClock()
    modes = parse_modes("exclusive,timeslice:2,mps:2")
    bp = plan_within(budget_s, CAL, OVERHEADS, modes, sizes, 3, max_repeats, warmup_repeats=1)
    options = BudgetOptions(budget_s, precision=1.0, max_repeats=max_repeats)
    notes: list[str] = []
    ways = Ways(options, None, clock(), bp, clock)
    _, schedule = choose(cpu_plan(lattice, modes=("exclusive",), particles=(1000,)), tmp_path, notes, ways)
    clock.advance(OVERHEADS.start_s)
    order, more = replay(schedule, clock, tracked(clock))
    golden = GOLDEN[name]
    assert order == golden["cells"]
    assert notes + more == golden["notes"]
    assert [c.id for c in schedule.left()] == golden["unfinished"]


@pytest.mark.parametrize(("name", "budget_s", "mem_max"), [("capacity", None, 64), ("capacity-memory", None, 6),
                                                           ("capacity-budget", 300.0, 64)])  # fmt: skip
def test_a_capacity_search_probes_the_same_users(lattice, tmp_path, name, budget_s, mem_max):
    """Changed on purpose by issue 42 (golden data re-recorded): every user counted by the one rule, one cell
    per N while decided, the families in turn, answers that say what was measured."""
    clock = FakeClock()
    options = CapacityOptions(("timeslice", "mps"), (2, 16), 1, 4)
    order, notes, _ = replay_capacity(lattice, tmp_path, clock, options, budget_s, mem_max)
    golden = GOLDEN[name]
    assert order == golden["cells"]
    assert notes == golden["notes"]
    assert [c["line"] for c in read_capacity(tmp_path)] == golden["answers"]
    table = pd.read_csv(tmp_path / "tables" / "capacity.csv").to_dict("records")
    assert no_nan(table) == no_nan(golden["table"])


def no_nan(records: list[dict]) -> list[dict]:
    """Records with NaN as None (NaN is not equal to itself)."""
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in records]


def normalise(text: str, lattice: str) -> str:
    text = re.sub(r"(?m)^device:    cpu \(.*\)$", "device:    cpu (<this machine>)", text)
    text = text.replace(f"cpu ({resolve_device('cpu').name})", "cpu (<this machine>)")
    text = "".join(ln for ln in text.splitlines(keepends=True) if "Loading line" not in ln and "Done loading" not in ln)
    # a sweep's predicted seconds come from a calibration on this machine: the line is there, its figures vary
    text = re.sub(r"(?m)^predicted: \d+ s \(cells .*$", "predicted: <seconds on this machine>", text)
    return text.replace(lattice, "<lattice>").replace(str(ROOT), "<root>")


@pytest.mark.parametrize("case", TEXTS["dry_runs"], ids=lambda c: " ".join(c["argv"][:6]))
def test_a_dry_run_prints_the_same_plan(lattice, case, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # --recorded tests/data/results
    argv = [lattice if a == "LATTICE" else a for a in case["argv"]]
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    assert code == case["code"], err
    assert normalise(out, lattice) == case["out"]
    assert [ln for ln in normalise(err, lattice).splitlines() if ln.startswith("sharebench")] == [
        ln for ln in case["err"].splitlines() if ln.startswith("sharebench")
    ]


@pytest.mark.parametrize("case", TEXTS["errors"], ids=lambda c: " ".join(c["argv"][:4]))
def test_a_bad_option_gives_the_same_one_line_error(lattice, case, capsys):
    code = main(["run", *case["argv"]])
    err = normalise(capsys.readouterr().err, lattice)
    assert (code, err) == (case["code"], case["err"])


SWEEPS = json.loads((DATA / "sweeps.json").read_text())


NOISY = ("flags.csv",)  # its rows are what the machine's noise flagged (a busy host, a disturbed cell)


def structure(out: Path) -> dict:
    """What is compared: cells, modes, columns, row counts (not the measured values, nor what noise flagged)."""
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


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SWEEPS))
def test_a_tiny_cpu_sweep_gives_a_folder_of_the_same_structure(lattice, tmp_path, name):
    golden = SWEEPS[name]
    out = tmp_path / name
    argv = [*golden["argv"], "--lattice", lattice, "--out", str(out), "--no-progress", "--no-telemetry"]
    done = subprocess.run(
        [sys.executable, "-m", "sharebench", "run", *argv], capture_output=True, text=True, cwd=ROOT, timeout=900
    )
    assert done.returncode == 0, done.stderr
    found, expected = structure(out), {k: v for k, v in golden.items() if k != "argv"}
    for table in NOISY:
        found["tables"][table].pop("rows"), expected["tables"][table].pop("rows")
    if excluded_any(out):  # a loaded host's noise excluded cells: what rests on them is absent, not changed
        for both in (found, expected):
            both["files"] = [f for f in both["files"] if f not in ON_KEPT_CELLS]
            for t in both["tables"].values():
                t.pop("rows", None)
    if none_trusted(out):  # every sharing mode flagged by the noise: the Answer's choices are withheld
        for both in (found, expected):
            both["tables"]["choices.csv"].pop("rows", None)  # excluded cells may have dropped them already
    assert found == expected


def none_trusted(out: Path) -> bool:
    """Whether the folder's noise left no sharing mode trusted (``analysis.answer.untrusted``: one line then
    stands for every measured choice)."""
    trust = pd.read_csv(out / "tables" / "trust.csv")
    sharing = trust[trust["sharing"].astype(str).str.lower().eq("true")]
    return bool(len(sharing)) and not sharing["trust"].eq("ok").any()


ON_KEPT_CELLS = ("prediction.csv",)  # written only when a loss row rests on cells no flag excluded


def excluded_any(out: Path) -> bool:
    """Whether the folder's flags excluded a cell (the machine's noise, not the code, decides that)."""
    flags = pd.read_csv(out / "tables" / "flags.csv")
    return bool(len(flags)) and bool(flags["excluded"].astype(str).str.lower().eq("true").any())
