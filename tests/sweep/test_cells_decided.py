"""Patterned cells decided while they run (issue 42), on real processes on the CPU: an exec program whose bursts
sleep (tests/support/uneven.py: its users keep their latency beside each other, unless one is told to be slow).

A cell stops at its first look when its verdict is clear (far within, far above, a user other than replica 0
above), runs to its cap when undecided (and when its program writes no live record, decided afterwards); a
service's cell lasts its duration; the alone cell runs once per sweep and size, and a resumed sweep reuses it;
the keep-awake control's rows; the dry run shows the fewest samples and the seconds."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from sharebench.cli import main
from sharebench.results import load_results
from sharebench.results.bursts import load_bursts
from sharebench.sweep import SweepConfig, run_sweep
from sharebench.workloads import Workload
from support.paths import ROOT

UNEVEN = ROOT / "tests" / "support" / "uneven.py"
USER = "interactive:burst=1,think=0.002"
# the target: a busy 2-core host stretches a 10 ms sleep's tail to 20-30 ms, which a p95's upper bound at 150
# samples reaches; sharing sleeps costs nothing, so 3x is far above any slowdown here, and 8x slower far above it


def sweep(out: Path, *, pattern: str = USER, bursts: int | None = None, repeats: int = 1, warmups: int = 0,
          resume: bool = False, awake: bool = False, modes=("exclusive", "timeslice:2"), slo: float = 3.0) -> Path:  # fmt: skip
    config = SweepConfig(
        workload=Workload(
            engine="exec", command=f"{sys.executable} {UNEVEN}", device="cpu", pattern=pattern, bursts=bursts
        ),
        modes=list(modes),
        particles=[1],
        repeats=repeats,
        warmup_repeats=warmups,
        slo=slo,
        resume=resume,
        awake_control=awake,
        progress=False,
        telemetry_interval_s=None,
        command=["test"],
    )
    return run_sweep(config, out)


def cells(out: Path) -> pd.DataFrame:
    """One row per cell: its verdict columns (replica 0's row) and each replica's bursts."""
    rows = load_results(out)
    assert (rows["cell_status"] == "ok").all(), rows["cell_error"].tolist()
    per = load_bursts(out).groupby(["cell_id", "replica"]).size().unstack("replica")
    first = rows[rows["replica"] == 0].set_index("cell_id")
    return first.join(per.add_prefix("bursts_"))


@pytest.mark.slow
def test_far_within_stops_at_the_first_look(tmp_path):
    c = cells(sweep(tmp_path / "r"))
    shared = c.loc["timeslice:2_p1_r1"]
    assert shared["verdict"] == "within" and shared["stopped_by"] == "decided" and shared["users"] == 2
    assert min(shared["bursts_0"], shared["bursts_1"]) >= 113 and max(shared["bursts_0"], shared["bursts_1"]) < 452
    assert shared["samples"] >= 113 and shared["worst_p95_slowdown_hi"] <= 3.0 and not shared["below_one"]
    alone = c.loc["exclusive_p1_r1"]
    assert alone["users"] == 1 and alone["stopped_by"] in ("precise", "cap") and 99 <= alone["bursts_0"] <= 800
    assert shared["alone_p95_s"] == pytest.approx(alone["alone_p95_s"])  # the sweep's baseline, its interval


@pytest.mark.slow
def test_a_user_other_than_replica_0_that_misses_the_target_fails_the_cell(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAREBENCH_UNEVEN_SLOW", "1:8")  # replica 1 eight times slower when shared
    c = cells(sweep(tmp_path / "r", modes=("exclusive", "timeslice:3")))
    shared = c.loc["timeslice:3_p1_r1"]
    assert shared["verdict"] == "above" and shared["worst_replica"] == "1" and shared["stopped_by"] == "decided"
    assert shared["users"] == 3 and shared["bursts_1"] < 2 * 121  # stopped at its first look (121 for 3 users)


@pytest.mark.slow
def test_an_undecided_cell_runs_to_its_cap_and_a_program_without_a_live_record_to_its_limit(tmp_path, monkeypatch):
    c = cells(sweep(tmp_path / "capped", bursts=60))  # a cap below the 113 a verdict needs
    shared = c.loc["timeslice:2_p1_r1"]
    assert shared["verdict"] == "undecided" and shared["stopped_by"] == "cap"
    # stopped once its fewest user had 60: the harness looks every 20 ms, a user every 10 ms and before each
    # 12 ms burst, and a burst under way ends and is kept
    assert min(shared["bursts_0"], shared["bursts_1"]) >= 60 and max(shared["bursts_0"], shared["bursts_1"]) <= 70
    assert 60 <= c.loc["exclusive_p1_r1", "bursts_0"] <= 70  # the cap is every cell's: the baseline is too short
    alone_n = int(c.loc["exclusive_p1_r1", "bursts_0"])
    assert shared["reason"] == f"the alone p95 has no interval ({alone_n} samples; 99 needed)"
    monkeypatch.setenv("SHAREBENCH_UNEVEN_LIVE", "0")  # the protocol before issue 42: no live record
    c = cells(sweep(tmp_path / "blind", bursts=150))
    shared = c.loc["timeslice:2_p1_r1"]
    # not stopped early, nothing to watch: its victim runs its own limit, 4 caps (a watched cell ends at its
    # fewest user's cap, however much slower than the victim that user is)
    assert shared["bursts_0"] == 4 * 150 and shared["stopped_by"] == "cap"
    assert shared["verdict"] == "within"  # decided afterwards, from the final records


@pytest.mark.slow
def test_a_service_lasts_its_duration(tmp_path):
    c = cells(sweep(tmp_path / "r", pattern="serve:rate=100"))
    shared = c.loc["timeslice:2_p1_r1"]  # decided at 113 requests (about 1.1 s), stopped at the 5 s floor
    assert shared["track_s"] >= 5.0 and shared["verdict"] == "within" and shared["stopped_by"] == "decided"
    assert shared["bursts_0"] > 300 and c.loc["exclusive_p1_r1", "track_s"] >= 5.0


@pytest.mark.slow
def test_the_alone_cell_runs_once_per_sweep_and_a_resumed_sweep_reuses_it(tmp_path):
    out = sweep(tmp_path / "r", repeats=2, warmups=1)
    c = cells(out)
    assert sorted(c.index) == [
        "exclusive_p1_r0",
        "exclusive_p1_r1",
        "timeslice:2_p1_r0",
        "timeslice:2_p1_r1",
        "timeslice:2_p1_r2",
    ]
    assert c.loc["exclusive_p1_r0", "bursts_0"] == 20 and c.loc["timeslice:2_p1_r0", "bursts_0"] == 20  # warm-ups
    baseline = c.loc["exclusive_p1_r1", "alone_p95_s"]
    sweep(out, repeats=3, warmups=1, resume=True)
    again = cells(out)
    assert (load_results(out)["cell_id"] == "exclusive_p1_r1").sum() == 1  # not measured again
    assert again.loc["timeslice:2_p1_r3", "alone_p95_s"] == pytest.approx(baseline)  # decided against it


@pytest.mark.slow
def test_the_keep_awake_control_is_recorded_beside_the_plain_alone_cell(tmp_path):
    out = sweep(tmp_path / "r", awake=True, modes=("exclusive",))
    c = cells(out)
    assert sorted(c.index) == ["exclusive_p1_r1", "exclusive_p1_r1_awake"]
    control = c.loc["exclusive_p1_r1_awake"]
    assert bool(control["warmup"]) and not bool(c.loc["exclusive_p1_r1", "warmup"])  # in no statistic
    assert control["bursts_0"] >= 99 and control["users"] == 1  # run as the alone cell is, to its precision
    notes = (out / "notes.txt").read_text()
    assert "exclusive_p1_r1_awake: the alone cell beside a keep-awake process (keep-awake: spun a core" in notes
    assert (out / "cells" / "exclusive_p1_r1_awake_warmup" / "awake.log").exists()


def test_the_dry_run_shows_the_fewest_samples_and_the_seconds(tmp_path, capsys):
    argv = ["run", "--dry-run", "--engine", "exec", "--exec", f"{sys.executable} {UNEVEN}", "--work", "1"]
    argv += ["--device", "cpu", "--pattern", USER, "--modes", "exclusive,timeslice:2,timeslice:4", "--repeats", "2"]
    assert main([*argv, "--awake-control", "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "exclusive at 1: >= 99 samples (alone), at most 792; stops once its p95 interval's hi/lo <= 1.15" in out
    assert "timeslice:2 at 1: >= 113 samples per user (2 users), at most 452; about " in out
    assert "timeslice:4 at 1: >= 126 samples per user (4 users), at most 504; about " in out
    assert "exclusive beside a keep-awake process at 1: >= 99 samples (alone)" in out
    assert "s a cell (at most " in out and ", 2 cells" in out
    predicted = [ln for ln in out.splitlines() if ln.startswith("predicted: ")]
    assert len(predicted) == 1 and " s (cells " in predicted[0]
    assert any(ln.startswith("at most: ") and "if every cell runs to its cap" in ln for ln in out.splitlines())
    assert not (tmp_path / "r").exists()


def test_the_keep_awake_control_needs_a_pattern(tmp_path, capsys):
    code = main(["run", "--dry-run", "--device", "cpu", "--awake-control", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "--awake-control needs a replica pattern (--pattern): its control is a pattern's alone cell" in err
