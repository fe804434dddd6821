"""Every wait is bounded by default (issue 27): with no ``--run-timeout``, a replica stopped with SIGSTOP
while its cell runs fails that cell with the timeout reason within the default bound, max(60 s, 20 x the
exclusive run's track_s + setup_s), and the sweep goes on; before, the sweep waited forever."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sharebench.devices import resolve_device
from sharebench.results import load_results
from sharebench.sweep import bound as bounds
from sharebench.sweep.bound import (
    FIRST_RUN_TIMEOUT_S,
    PREDICTED_SETUP_S,
    RUN_TIMEOUT_FACTOR,
    RUN_TIMEOUT_FLOOR_S,
    RunBound,
    run_bound,
)
from sharebench.sweep.budget import Calibration, recorded_calibration
from sharebench.sweep.plan import SweepConfig, validate
from sharebench.workloads import Workload
from support.paths import ROOT

pytestmark = pytest.mark.faults


def replica_of(cell: Path, replica: int, timeout_s: float = 120) -> psutil.Process:
    """The fresh replica process of ``cell`` once it is at the barrier (its ready file written)."""
    config = str(cell / f"config.{replica}.json")
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if (cell / f"ready.{replica}").exists():
            for p in psutil.process_iter(["cmdline"]):
                if config in (p.info["cmdline"] or []):
                    return p
        time.sleep(0.005)
    raise AssertionError(f"no replica {replica} at the barrier of {cell} after {timeout_s} s")


@pytest.mark.slow  # about 80 s: the 60 s floor of the bound
def test_a_replica_stopped_while_tracking_fails_its_cell_within_the_default_bound(lattice, tmp_path):
    out = tmp_path / "r"
    argv = ["--device", "cpu", "--modes", "exclusive,timeslice:2", "--particles", "2000", "--turns", "2000"]
    argv += ["--repeats", "1", "--warmup-repeats", "0", "--fresh-replicas", "--no-progress", "--no-telemetry"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sharebench", "run", *argv, "--lattice", lattice, "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        victim = replica_of(out / "cells" / "timeslice-2_p2000_r1", 1)
        victim.suspend()  # SIGSTOP, past the barrier: it never ends its window
        t_stop = time.monotonic()
        _, err = proc.communicate(timeout=RUN_TIMEOUT_FLOOR_S + 90)
    finally:
        if proc.poll() is None:
            proc.kill()
    took = time.monotonic() - t_stop
    assert "Traceback" not in err, err
    assert took < RUN_TIMEOUT_FLOOR_S + 60, took
    df = load_results(out)
    shared = df[df["mode"] == "timeslice:2"]
    exclusive = df[df["mode"] == "exclusive"]
    assert list(exclusive["cell_status"]) == ["ok"]
    assert set(shared["cell_status"]) == {"failed"}
    assert (
        f"replica 1: still running {RUN_TIMEOUT_FLOOR_S:g} s after the start; stopped" in shared["cell_error"].iloc[0]
    )
    assert not psutil.pid_exists(victim.pid) or victim.status() == psutil.STATUS_ZOMBIE
    assert proc.returncode == 1, err
    assert "run timeout: no --run-timeout" in (out / "notes.txt").read_text()


def test_the_default_bound_follows_the_exclusive_run():
    bound = RunBound()
    assert bound.timeout_s(1000) == FIRST_RUN_TIMEOUT_S  # nothing measured yet
    bound.learn([{"mode_kind": "exclusive", "status": "ok", "particles": 1000, "track_s": 10.0, "setup_s": 5.0}])
    bound.learn([{"mode_kind": "timeslice", "status": "ok", "particles": 1000, "track_s": 99.0, "setup_s": 5.0}])
    bound.learn([{"mode_kind": "exclusive", "status": "failed", "particles": 1000, "track_s": 99.0}])
    assert bound.timeout_s(1000) == 20 * 10.0 + 5.0
    assert bound.timeout_s(4000) == 20 * 40.0 + 5.0  # a size not measured: scaled from the nearest
    assert bound.timeout_s(10) == RUN_TIMEOUT_FLOOR_S
    assert RunBound(given=2.5).timeout_s(1000) == 2.5


def calibration(track_s_at_1000: float, turns: int = 10) -> Calibration:
    """A calibration whose exclusive run of 1000 particles x ``turns`` tracks ``track_s_at_1000`` s."""
    return Calibration(turns, 1, {1000: 1000 * turns / track_s_at_1000}, "a test calibration")


def test_the_first_cells_bound_comes_from_the_prediction_with_a_ceiling():
    bound = RunBound(predicted=calibration(4.0), predicted_setup_s=30.0)
    assert bound.timeout_s(1000) == pytest.approx(RUN_TIMEOUT_FACTOR * 4.0 + 30.0)
    assert bound.timeout_s(4000) == pytest.approx(RUN_TIMEOUT_FACTOR * 16.0 + 30.0)  # scaled by the work
    assert bound.timeout_s(10) == RUN_TIMEOUT_FLOOR_S
    assert bound.timeout_s(10_000_000) == FIRST_RUN_TIMEOUT_S  # a prediction of hours: the ceiling
    said = bound.waiting(1000)
    assert said.startswith(
        "waiting for its replicas to track 1,000 particles; run timeout 110 s (20 x the predicted 4 s"
    )
    assert said.endswith(f"ceiling {FIRST_RUN_TIMEOUT_S:g} s until an exclusive run is measured)")
    assert "(capped)" in bound.waiting(10_000_000)
    assert bound.waiting(1000, brief=True) == "first runs: timeout 110 s (predicted 4 s; ceiling 3600 s)"
    # once an exclusive run is measured it rules, and the bar says nothing more
    bound.learn([{"mode_kind": "exclusive", "status": "ok", "particles": 1000, "track_s": 1.0, "setup_s": 2.0}])
    assert bound.timeout_s(1000) == RUN_TIMEOUT_FLOOR_S and bound.waiting(1000) == ""
    # nothing predicted, or an unusable prediction: the ceiling, and the line says why
    for none in (RunBound(), RunBound(predicted=Calibration(10, 1, {}, "empty"))):
        assert none.timeout_s(1000) == FIRST_RUN_TIMEOUT_S
        assert "run timeout 3600 s (nothing predicts it" in none.waiting(1000)
        assert none.waiting(1000, brief=True) == "first runs: timeout 3600 s (no prediction; ceiling 3600 s)"
    assert RunBound(given=5.0).waiting(1000) == ""


def cpu_plan():
    return validate(SweepConfig(modes=("exclusive",), particles=(1000,), turns=10, workload=Workload(device="cpu")))


def test_a_sweep_predicts_its_first_cell_from_its_calibration_and_says_so(tmp_path, capsys):
    notes: list[str] = []
    bound = run_bound(cpu_plan(), tmp_path, notes, calibration(2.0))
    assert bound.timeout_s(1000) == pytest.approx(max(RUN_TIMEOUT_FLOOR_S, 20 * 2.0 + PREDICTED_SETUP_S))
    assert "before an exclusive run is measured, the same from the calibration (a test calibration)" in notes[-1]
    assert f"at most {FIRST_RUN_TIMEOUT_S:g} s" in notes[-1]
    err = capsys.readouterr().err
    assert (
        f"sharebench: first cell: waiting for its replicas to track 1,000 particles; run timeout {bound.timeout_s(1000):.0f} s"
        in err
    )


def test_a_gpu_sweep_predicts_its_first_cell_from_the_recorded_results_of_its_model(tmp_path, monkeypatch):
    plan = cpu_plan()
    h200 = dataclasses.replace(plan.device, name="NVIDIA H200", kind="gpu", backend="cuda", spec="cuda:0")
    plan = dataclasses.replace(plan, device=h200, particles=(10_000_000,), turns=1)
    monkeypatch.setattr(bounds, "RECORDED_ROOT", ROOT / "results")
    notes: list[str] = []
    bound = run_bound(plan, tmp_path, notes)
    t1 = recorded_calibration("H200", ROOT / "results", 1)[0].exclusive_s(10_000_000)  # about 1.4 s
    assert bound.timeout_s(10_000_000) == pytest.approx(max(RUN_TIMEOUT_FLOOR_S, 20 * t1 + PREDICTED_SETUP_S))
    assert bound.timeout_s(10_000_000) < FIRST_RUN_TIMEOUT_S / 10
    assert "the same from the recorded results of H200 (planned from recorded rates of H200" in notes[-1]
    # a model nothing was recorded for: the ceiling, and the note says why
    monkeypatch.setattr(bounds, "RECORDED_ROOT", tmp_path / "none")
    other = run_bound(plan, tmp_path, notes)
    assert other.timeout_s(10_000_000) == FIRST_RUN_TIMEOUT_S
    assert "the same from nothing (no recorded simpletrack results" in notes[-1]
    assert resolve_device("cpu").kind == "cpu"  # the plan's real device stays a CPU: nothing ran on a GPU
