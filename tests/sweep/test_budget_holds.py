"""A budget that holds (issue 35, item 2): a cell starts only if its predicted length fits the time left,
a patterned cell running past the deadline is stopped there with its bursts kept and marked, and a
campaign's budget keeps time for its reports."""

from __future__ import annotations

import csv
import re
import sys
import time
from pathlib import Path

import pytest

from sharebench.campaign import Context, parse_plan, report_reserve_s, stop_after
from sharebench.cli import main
from sharebench.modes import parse_mode
from sharebench.results import load_results
from sharebench.sweep.budget import REPORT_S
from sharebench.sweep.deadline import Deadline
from sharebench.sweep.plan import Cell
from sharebench.sweep.within import STOP_GRACE_S, StopAt, cut_run_timeout, mark_stopped
from support.lattices import tiny_lattice


def cell(label: str = "exclusive", particles: int = 100, repeat: int = 0) -> Cell:
    return Cell(mode=parse_mode(label), particles=particles, repeat=repeat)


def test_a_cell_predicted_past_the_deadline_is_not_started():
    d = Deadline(ends_at=100.0, limit_s=100.0, estimate=lambda c: 30.0)
    assert d.refuses(cell(), now=60.0) is None  # 30 s predicted, 40 s left
    assert d.refuses(cell(), now=75.0) == "not started: exclusive_p100_r0, predicted 30 s, 25 s left"
    d.learn(cell(), 10.0)
    d.learn(cell(), 12.0)
    d.learn(cell(), 50.0)
    assert d.predicted_s(cell()) == 12.0  # this sweep's median replaces the plan's estimate
    assert d.refuses(cell(), now=75.0) is None
    assert d.refuses(cell(), now=100.0) == "not started: exclusive_p100_r0, no time left"


def test_a_cell_with_no_prediction_needs_a_quarter_of_the_limit():
    d = Deadline(ends_at=100.0, limit_s=100.0)
    assert d.refuses(cell(), now=70.0) is None
    assert "length unknown and 20 s left" in str(d.refuses(cell(), now=80.0))
    assert Deadline(None).refuses(cell(), now=1e9) is None  # no budget: every cell starts


def test_an_unpatterned_cell_may_track_the_time_left_plus_a_grace():
    assert cut_run_timeout(3600.0, ends_at=100.0, now=90.0) == 10.0 + STOP_GRACE_S
    assert cut_run_timeout(3.0, ends_at=100.0, now=90.0) == 3.0
    assert cut_run_timeout(3600.0, ends_at=100.0, now=200.0) == 1.0  # past the deadline: a second to end
    assert cut_run_timeout(3600.0, ends_at=None) == 3600.0


def test_the_stop_file_is_written_at_its_instant_unless_the_cell_ended(tmp_path):
    stop = tmp_path / "stop"
    with StopAt(stop, time.monotonic() + 0.2) as s:
        assert not stop.exists()
        time.sleep(0.6)
    assert s.fired.is_set() and stop.read_text() == "stopped at the budget\n"
    late = tmp_path / "late"
    with StopAt(late, time.monotonic() + 5.0) as s:
        pass
    time.sleep(0.1)
    assert not s.fired.is_set() and not late.exists()


def test_a_stopped_cell_is_marked_and_keeps_its_bursts():
    rows = [{"cell_id": "c", "cell_error": ""}, {"cell_id": "c", "cell_error": ""}]
    bursts = [{"role": "victim"}] * 17 + [{"role": "neighbour"}] * 40
    assert mark_stopped(rows, bursts, 30) == "c: stopped at the budget after 17 of 30 bursts"
    assert [r["cell_error"] for r in rows] == ["stopped at the budget after 17 of 30 bursts"] * 2
    done = [{"cell_id": "c", "cell_error": ""}]
    assert mark_stopped(done, [{"role": "victim"}] * 30, 30) is None and done[0]["cell_error"] == ""


def test_a_campaign_keeps_time_for_its_reports():
    plan = parse_plan(
        {
            "device": "cpu",
            "budget_s": 300,
            "report": True,
            "step": [
                {"name": "a", "modes": ["exclusive"], "particles": [100], "turns": 1, "repeats": 1, "margin_s": 5},
                {"name": "b", "modes": ["exclusive"], "particles": [100], "turns": 1, "repeats": 1},
            ],
        }
    )
    ctx = Context(out=Path("."), plan=plan, dry_run=True)
    assert report_reserve_s(ctx) == REPORT_S * 3  # its own report, then the final report of both folders
    assert stop_after(ctx, plan.steps[0]) == (True, 300 - 5 - 30)
    ctx.report_s = 25.0  # a slower report measured in this campaign
    assert stop_after(ctx, plan.steps[1])[1] == 300 - 75


@pytest.mark.slow
@pytest.mark.parametrize("limit", [["--budget", "40s", "--bursts", "5"], ["--stop-after", "4", "--bursts", "100000"]])
def test_a_patterned_step_ends_within_its_budget(tmp_path, capsys, limit):
    """The step ends within max(5%, 10 s) of its budget; under --stop-after (no plan: the first cell's
    length unknown) far more bursts than fit: the overrun cell stopped at the deadline, its bursts kept
    and marked (a --budget run stops its cells the same way, at the budget less the report). 4 s: the alone
    cell's first look (99 bursts, 50 ms of think time each) cannot end it sooner, whatever its spread (at
    12 s a quiet machine's alone cell was precise at 99 samples, and the next cell was not started)."""
    out = tmp_path / "out"
    lattice = str(tiny_lattice(tmp_path / "fodo.json"))
    argv = ["run", "--device", "cpu", "--lattice", lattice, "--modes", "exclusive,timeslice:2", "--particles", "200"]
    argv += ["--turns", "1", "--pattern", "interactive:burst=1,think=0.05"]
    argv += ["--warmup-repeats", "0", "--no-progress", "--no-telemetry", "--out", str(out), *limit]
    if limit[0] == "--stop-after":
        argv += ["--repeats", "1"]
    t0 = time.monotonic()
    assert main(argv) == 0, capsys.readouterr().err
    wall = time.monotonic() - t0
    budget = float(limit[1].rstrip("s"))
    assert wall <= budget + max(0.05 * budget, 10.0), wall
    df = load_results(out)
    if limit[0] == "--budget":  # the cost model plans what fits (100000 bursts: refused); the stop is below
        assert len(df) and set(df["cell_status"]) == {"ok"}
        return
    stopped = df[df["cell_error"].fillna("").str.startswith("stopped at the budget after ")]
    assert len(stopped) and set(stopped["cell_status"]) == {"ok"}, df[["cell_id", "cell_error"]]
    cell_id = stopped["cell_id"].iloc[0]
    with open(out / "bursts.csv", newline="") as fh:
        victim = [r for r in csv.DictReader(fh) if r["cell_id"] == cell_id and r["role"] == "victim"]
    assert 0 < len(victim) < 100000
    assert f"{cell_id}: stopped at the budget after {len(victim)} of " in (out / "notes.txt").read_text()


def test_a_patterned_dry_run_shows_seconds(tmp_path, capsys):
    """The dry run of a patterned sweep predicts seconds from its bursts (analysis.cost), with and
    without a budget; nothing runs."""
    lattice = str(tiny_lattice(tmp_path / "fodo.json"))
    argv = ["run", "--device", "cpu", "--lattice", lattice, "--modes", "exclusive,timeslice:2", "--particles", "200"]
    argv += ["--turns", "1", "--pattern", "interactive:burst=1,think=0.05", "--neighbours", "batch", "--bursts", "10"]
    argv += ["--dry-run", "--out", str(tmp_path / "out")]
    assert main([*argv, "--repeats", "1", "--warmup-repeats", "0"]) == 0
    text = capsys.readouterr().out
    m = re.search(r"^predicted: (\d+) s \(cells (\d+) s, set-up \d+ s, report \d+ s; calibration", text, re.M)
    assert m and int(m[2]) >= 1, text  # at least the victims' think times: (10 + 10) x 0.05 s (--bursts: the cap)
    assert ">= 99 samples (alone), at most 10;" in text and "the cap is below the 99 a verdict needs" in text
    assert main([*argv, "--budget", "5m"]) == 0
    text = capsys.readouterr().out
    assert "10 bursts beside 0 neighbour(s)" in text and "10 bursts beside 1 neighbour(s)" in text, text
    assert not (tmp_path / "out").exists()


def test_an_exec_programs_dry_run_calibrates_the_program_itself(tmp_path, capsys, monkeypatch):
    """An exec program is calibrated by an exclusive cell of its own (a few bursts, fresh, in a temporary
    folder): a unit's seconds and its set-up; a budget plans from them; a failing program is one line."""
    monkeypatch.setenv("SHAREBENCH_CONTENDED_LOCK", str(tmp_path / "lock"))
    monkeypatch.setenv("SHAREBENCH_CONTENDED_UNIT_S", "0.05")
    program = f"{sys.executable} {Path(__file__).parents[1] / 'support' / 'contended.py'}"
    argv = ["run", "--device", "cpu", "--engine", "exec", "--exec", program, "--work", "1", "--bursts", "40"]
    argv += ["--modes", "exclusive,timeslice:2", "--pattern", "interactive:burst=2,think=0.01"]
    argv += ["--dry-run", "--out", str(tmp_path / "out")]
    assert main([*argv, "--repeats", "1", "--warmup-repeats", "0"]) == 0
    text = capsys.readouterr().out
    m = re.search(r"^predicted: (\d+) s \(cells (\d+) s, set-up (\d+) s, report \d+ s; calibration", text, re.M)
    # --bursts 40, a cap below any verdict's fewest: 40 bursts of 2 units of 0.05 s (+ think) alone and as many
    # shared: at least 8 s of cells, whatever the machine
    assert m and int(m[2]) >= 8, text
    assert main([*argv, "--budget", "5m"]) == 0
    text = capsys.readouterr().out
    assert "one exclusive cell per size: 1: 0.05" in text and "40 bursts beside 0 neighbour(s)" in text, text
    assert not (tmp_path / "out").exists()
    # a service of a load has no rate before its capacity: calibrated on requests back to back
    load = [a if a != "interactive:burst=2,think=0.01" else "serve:load=0.5" for a in argv]
    assert main([*load, "--repeats", "1", "--warmup-repeats", "0"]) == 0
    assert re.search(r"^predicted: \d+ s", capsys.readouterr().out, re.M)
    bad = ["run", "--device", "cpu", "--engine", "exec", "--exec", f"{sys.executable} -c 'import sys; sys.exit(3)'"]
    bad += ["--work", "1", "--pattern", "interactive", "--dry-run", "--out", str(tmp_path / "bad")]
    assert main(bad) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "calibration cell" in err[0] and "exited with status 3" in err[0], err
