"""A real SIGINT in the middle of a watched patterned cell (issue 42): the alone cell and every burst on disk
before it stay byte for byte, no process is left, and ``--resume`` finishes the folder without measuring the
alone cell again (its baseline is the one every later cell is decided against)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest

from sharebench.results import load_results
from support.faults import sharebench
from support.paths import ROOT

pytestmark = [pytest.mark.faults, pytest.mark.slow]
UNEVEN = ROOT / "tests" / "support" / "uneven.py"


def argv(out) -> list[str]:
    return [
        "run", "--engine", "exec", "--exec", f"{sys.executable} {UNEVEN}", "--work", "1", "--device", "cpu",
        "--pattern", "interactive:burst=1,think=0.002", "--modes", "exclusive,timeslice:2", "--repeats", "3",
        "--warmup-repeats", "0", "--slo", "3", "--out", str(out), "--no-progress", "--no-telemetry",
    ]  # fmt: skip


def test_an_interrupt_mid_cell_keeps_the_baseline_and_resume_reuses_it(tmp_path):
    out = tmp_path / "r"
    proc = subprocess.Popen(
        [sys.executable, "-m", "sharebench", *argv(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    live = out / "cells" / "timeslice-2_p1_r2" / "progress.1"  # the second sharing cell, under way
    t0 = time.monotonic()
    while not (live.exists() and live.stat().st_size > 2000):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 300, "the second sharing cell never started"
        time.sleep(0.02)
    kids = psutil.Process(proc.pid).children(recursive=True)
    rows_before, bursts_before = (out / "results.csv").read_bytes(), (out / "bursts.csv").read_bytes()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in err, err
    _, alive = psutil.wait_procs(kids, timeout=15)
    assert not alive, [p.cmdline() for p in alive]
    assert (out / "results.csv").read_bytes().startswith(rows_before)
    assert (out / "bursts.csv").read_bytes().startswith(bursts_before)
    done = load_results(out)
    assert set(done["cell_id"]) == {"exclusive_p1_r1", "timeslice:2_p1_r1"}  # the interrupted cell: not a row
    baseline = float(done.loc[done["cell_id"] == "exclusive_p1_r1", "alone_p95_s"].iloc[0])
    p = sharebench(*argv(out)[:-4], "--resume", "--out", str(out), "--no-progress", "--no-telemetry", timeout=600)
    assert p.returncode == 0, p.stderr
    rows = load_results(out)
    assert (rows["cell_id"] == "exclusive_p1_r1").sum() == 1  # the alone cell: measured once, reused
    shared = rows[rows["mode"] == "timeslice:2"].drop_duplicates("cell_id")
    assert sorted(shared["cell_id"]) == ["timeslice:2_p1_r1", "timeslice:2_p1_r2", "timeslice:2_p1_r3"]
    assert shared["alone_p95_s"].tolist() == pytest.approx([baseline] * 3)
