"""A capacity search interrupted at every stage (issue 46, item 2; issue 42, item 5): SIGINT through the real
command line after the alone cell, in the middle of a probe and between probes; what it wrote says what it
measured (never a number it did not bracket, never "no sharing"), and ``--resume`` (no other option but
the program) continues it to the answer an uninterrupted search reaches.

The replica is ``support.knee``: its bursts sleep 20 ms in cells of fewer than 4 replicas and 80 ms from 4
on, so every user is within 2x up to 3 users and above it at 4 whatever the machine's timing:
``tests/sweep/test_capacity.py::test_a_cpu_capacity_run_finds_the_knee`` runs the search uninterrupted
to "3 users"."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.paths import ROOT

pytestmark = [pytest.mark.faults, pytest.mark.slow]
PROGRAM = f"{sys.executable} -m support.knee"
KNEE = {"3 users": {2: "within", 3: "within", 4: "above"}}  # the uninterrupted search's answer and probes


def env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=f"{ROOT / 'tests'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
                SHAREBENCH_KNEE_FACTOR="4")  # fmt: skip


def start(out: Path) -> subprocess.Popen:
    argv = [
        sys.executable, "-m", "sharebench", "run", "--device", "cpu", "--engine", "exec", "--exec", PROGRAM,
        "--work", "1", "--pattern", "interactive:burst=1,think=0.002", "--bursts", "150", "--modes", "timeslice",
        "--capacity", "--users", "2..8", "--warmup-repeats", "0", "--no-progress", "--no-telemetry", "--out", str(out),
    ]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())


def cells_done(out: Path) -> list[str]:
    csv = out / "results.csv"
    if not csv.exists():
        return []
    lines = csv.read_text().splitlines()[1:]
    return list(dict.fromkeys(line.split(",")[2] for line in lines if line.count(",") > 2))


def interrupt(out: Path, after: int, delay_s: float) -> subprocess.CompletedProcess:
    """The search started, SIGINT ``delay_s`` after its ``after``-th cell is on disk; what it said."""
    proc = start(out)
    t0 = time.monotonic()
    while len(cells_done(out)) < after:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 300, "no cell measured in 300 s"
        time.sleep(0.01)
    time.sleep(delay_s)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize(
    "after, delay_s, stage",
    [(1, 0.0, "after the alone cell"), (1, 1.5, "in the middle of a probe"), (2, 0.0, "between probes")],
)
def test_an_interrupted_search_resumes_to_the_same_answer(tmp_path, after, delay_s, stage):
    out = tmp_path / "r"
    stopped = interrupt(out, after, delay_s)
    assert stopped.returncode == 130, stopped.stderr
    assert f"continue with --resume --out {out}" in stopped.stderr and "Traceback" not in stopped.stderr
    (said,) = json.loads((out / "capacity.json").read_text())["capacity"]
    assert said["why"] == "interrupt", (stage, said["line"])
    assert said["answer"] == "not measured" or said["answer"].startswith("between "), (stage, said["line"])
    assert "no sharing" not in said["line"]
    before = cells_done(out)

    resumed = subprocess.run(
        [sys.executable, "-m", "sharebench", "run", "--resume", "--out", str(out), "--engine", "exec", "--exec",
         PROGRAM, "--no-progress", "--no-telemetry"],
        capture_output=True, text=True, env=env(), timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    (cap,) = json.loads((out / "capacity.json").read_text())["capacity"]
    assert cap["answer"] in KNEE and (cap["lo"], cap["hi"], cap["why"]) == (3, 4, "none"), (stage, cap["line"])
    assert {p["n"]: p["verdict"] for p in cap["probes"]} == KNEE[cap["answer"]]
    after_resume = cells_done(out)
    assert after_resume[: len(before)] == before  # nothing measured is lost or measured again
    assert len(after_resume) == len(set(after_resume))
    assert "capacity: timeslice: 3 users per GPU" in resumed.stdout

    again = subprocess.run(
        [sys.executable, "-m", "sharebench", "run", "--resume", "--out", str(out), "--engine", "exec", "--exec",
         PROGRAM, "--no-progress"],
        capture_output=True, text=True, env=env(), timeout=300,
    )  # fmt: skip
    assert again.returncode == 0 and again.stdout.startswith("nothing to do: the capacity search"), again
