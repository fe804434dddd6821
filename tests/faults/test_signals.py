"""Real signals to a running sweep and to its replicas; then a second sweep on the same folder.

After each: the rows written before the signal are there byte for byte, results.csv parses, no
process of the sweep is left, the exit status is the documented one (128 + N; SIGINT 130), and
``--resume`` finishes the folder.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil
import pytest

from sharebench.results import load_results
from support.faults import one_line_error, sharebench, sweep_argv

pytestmark = [pytest.mark.faults, pytest.mark.slow]
REPEATS = 6


def start(lattice, out, repeats=REPEATS):
    return subprocess.Popen(
        [sys.executable, "-m", "sharebench", *sweep_argv(lattice, out, "--repeats", str(repeats))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_rows(out, n, proc, timeout=120):
    csv = out / "results.csv"
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if csv.exists() and csv.read_bytes().count(b"\n") > n:
            return csv.read_bytes()
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"no {n} row(s) in {csv} after {timeout} s")


def descendants(pid):
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def assert_none_left(procs):
    gone, alive = psutil.wait_procs(procs, timeout=15)
    assert not alive, [p.cmdline() for p in alive]


@pytest.mark.parametrize(
    "sig, status", [(signal.SIGKILL, -9), (signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_a_signal_to_the_sweep_keeps_what_was_measured(lattice, tmp_path, sig, status):
    out = tmp_path / "r"
    proc = start(lattice, out)
    before = wait_rows(out, 1, proc)
    kids = descendants(proc.pid)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == status, err
    assert "Traceback" not in err
    if sig != signal.SIGKILL:
        assert f"continue with --resume --out {out}" in err
    assert_none_left(kids)
    after = (out / "results.csv").read_bytes()
    assert after.startswith(before)
    assert len(load_results(out)) >= 1
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode == 0, p.stderr
    df = load_results(out)
    assert sorted(df["repeat"]) == list(range(1, REPEATS + 1))
    assert (out / "results.csv").read_bytes().startswith(after)


def test_kill_9_of_a_replica_fails_its_cell_only(lattice, tmp_path):
    out = tmp_path / "r"
    proc = start(lattice, out)
    wait_rows(out, 1, proc)
    t0 = time.monotonic()
    victim = None
    while victim is None and time.monotonic() - t0 < 60:
        victim = next(
            (p for p in descendants(proc.pid) if "sharebench.workloads.replica" in " ".join(p.cmdline())), None
        )
        time.sleep(0.02)
    assert victim is not None
    victim.send_signal(signal.SIGKILL)
    out_text, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err  # a cell failed (sharebench.report.answer): the sweep went on
    assert "1 failed" in out_text
    df = load_results(out)
    assert len(df) == REPEATS
    failed = df[df["status"] != "ok"]
    assert len(failed) == 1 and failed["cell_status"].tolist() == ["failed"]
    assert (df["status"] == "ok").sum() == REPEATS - 1


def test_two_sweeps_on_one_folder(lattice, tmp_path):
    out = tmp_path / "r"
    first = start(lattice, out, repeats=1000)  # still running when the second starts
    wait_rows(out, 1, first)
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress")
    assert first.poll() is None
    assert p.returncode == 2
    assert one_line_error(p.stderr) == (
        f"sharebench: error: {out} is in use by another sweep (pid {first.pid}); "
        "wait for it to end, or give another --out"
    )
    first.send_signal(signal.SIGTERM)
    first.communicate(timeout=120)
    p = sharebench("run", "--resume", "--repeats", str(REPEATS), "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode == 0, p.stderr
    df = load_results(out)
    assert set(range(1, REPEATS + 1)) <= set(df["repeat"]) and df["cell_id"].is_unique
