"""A cell measured beside a real CPU hog is flagged, named, and stops a --strict sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from sharebench.cli import main
from sharebench.telemetry.disturbance import FOREIGN_CORES_MAX, Probe, verdict
from support.lattices import tiny_lattice

pytestmark = pytest.mark.slow  # real replica processes and sweeps


@pytest.fixture
def hogs():
    """Two busy loops, orphaned (not this process's children, as another job's would be); stopped after."""
    pids = []
    for _ in range(2):
        p = subprocess.run(
            ["sh", "-c", f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
            capture_output=True,
            text=True,
            check=True,
        )
        pids.append(int(p.stdout.strip()))
    time.sleep(0.5)
    yield pids
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_verdict_rules():
    assert verdict({"tel_foreign_cpu_cores": 0.1, "tel_steal_pct": 0.0}) == ""
    assert verdict({"tel_foreign_cpu_cores": 1.2, "tel_busy_processes": "x (pid 7) 1.00"}) == (
        f"other processes used 1.20 cores (> {FOREIGN_CORES_MAX}), busiest: x (pid 7) 1.00"
    )
    assert verdict({"tel_steal_pct": 12.5}) == "CPU steal 12.5% (> 5%)"
    assert verdict({"tel_gpu_other_pids": "4242", "tel_gpu_throttle": "thermal slowdown (hardware)"}) == (
        "other processes on the GPU: pid 4242; GPU throttled: thermal slowdown (hardware)"
    )
    assert verdict({"tel_gpu_other_pids": "", "tel_gpu_throttle": ""}) == ""


def test_probe_names_the_hog(hogs):
    probe = Probe()
    time.sleep(2.0)
    d = probe.stop()
    assert d["tel_foreign_cpu_cores"] > FOREIGN_CORES_MAX
    # each hog is seen as another job's process and busy (on a machine shared with other jobs it may not be
    # among the five busiest the message names, but it is counted)
    for pid in hogs:
        name, cores = probe.others[pid]
        assert name.startswith("python") and cores > 0.05, probe.others
    assert not any(pid == os.getpid() for pid in probe.others)
    assert d["tel_disturbed"].startswith("other processes used")


def _run(tmp_path, *extra):
    lat = tiny_lattice(tmp_path / "fodo.json")
    out = tmp_path / "out"
    # 400 turns: windows of about half a second, so a few ms of scheduling jitter beside the hogs cannot
    # push the replicas' overlap under 95% (at 20 turns, 17 ms windows, it once did: the cell left the loss)
    return out, main(
        [
            "run",
            "--device",
            "cpu",
            "--modes",
            "exclusive,timeslice:2",
            "--particles",
            "2000",
            "--turns",
            "400",
            "--repeats",
            "1",
            "--warmup-repeats",
            "0",
            "--lattice",
            str(lat),
            "--out",
            str(out),
            "--no-progress",
            "--no-telemetry",
            *extra,
        ]
    )


def test_cells_beside_a_hog_are_flagged_in_the_answer(hogs, tmp_path, capsys):
    out, status = _run(tmp_path)
    printed = capsys.readouterr().out
    assert status == 0  # disturbed is a warning: the cells themselves are ok
    flags = pd.read_csv(out / "tables" / "flags.csv")
    disturbed = flags[flags["flag"].str.startswith("disturbed: other processes used")]
    assert set(disturbed["cell_id"]) == {"exclusive_p2000_r1", "timeslice:2_p2000_r1"}
    answer = pd.read_csv(out / "tables" / "answer.csv").set_index("mode")
    assert "cell(s) of it or its baseline disturbed (other processes used" in answer.loc["timeslice:2", "trust"]
    assert "cell(s) of it or its baseline disturbed" in printed  # the end screen says it too


def test_strict_refuses_to_start_on_a_busy_host(hogs, tmp_path, capsys):
    out, status = _run(tmp_path, "--strict")
    err = capsys.readouterr().err
    assert status == 2 and not (out / "results.csv").exists()
    assert (
        err.startswith("sharebench: error: --strict: the host is busy before the sweep starts (other processes used")
        and err.count("\n") == 1
    )


def test_strict_stops_after_a_disturbed_cell(hogs, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("sharebench.cli.sweep_cmd.check_quiet", lambda: None)  # the hog starts after the check
    out, status = _run(tmp_path, "--strict")
    err = capsys.readouterr().err
    assert status == 1
    assert "sharebench: --strict: cell exclusive_p2000_r1 was measured under disturbance (other processes" in err
    # the disturbed cell is kept (results and report), the next one never ran
    assert set(pd.read_csv(out / "results.csv")["cell_id"]) == {"exclusive_p2000_r1"}
    assert (out / "report.md").exists()
