"""The fork server of the built-in PyTorch programs (issue 43, item 6), on the CPU with PyTorch installed: the
server imports PyTorch once and touches no device; a replica's program is a fork of it (no new interpreter,
no import of its own) that keeps the replica's environment, CPUs and descriptors, serves cells, and ends
with its replica's connection or with the server; a warm sweep of the inference program runs its programs as
forks and leaves nothing running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from sharebench import processes
from sharebench.cli import main
from sharebench.results import load_results
from sharebench.workloads.forkserver import PROGRAMS, fork_program, module_of
from sharebench.workloads.protocol import PRIMED, RESULT_FILE, WORK, cell_line

torch = pytest.importorskip("torch", reason="the ml extra is not installed (make install-ml)")
pytestmark = pytest.mark.slow  # the server imports PyTorch; the sweep runs ResNet-18 on the CPU

INFER = [sys.executable, "-m", "sharebench.workloads.infer", "--image-size", "32", "--warmup", "0"]


def clean_env(**given: str) -> dict[str, str]:
    """This process's environment without the protocol's variables another test may have left, and ``given``."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("SHAREBENCH_")}, **given}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A real fork server (as the pool starts it), its socket and process."""
    home = tmp_path_factory.mktemp("fork")
    path = Path("/tmp") / f"sbfork-test-{os.getpid()}.sock"  # a socket's path is short
    proc = processes.spawn([sys.executable, "-m", "sharebench.workloads.forkserver", str(path)], log=home / "log")
    deadline = time.monotonic() + 300
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert path.exists(), (home / "log").read_text()
    yield str(path), proc, home
    processes.stop([proc])


def test_only_this_pythons_built_in_programs_are_forked():
    assert module_of([sys.executable, "-m", "sharebench.workloads.infer", "--batch", "8"]) == PROGRAMS[0]
    assert module_of([sys.executable, "-m", "sharebench.workloads.train"]) == PROGRAMS[1]
    assert module_of(["/usr/bin/python3.9", "-m", "sharebench.workloads.infer"]) is None  # another interpreter
    assert module_of([sys.executable, "-m", "my_own_job"]) is None and module_of(["sh", "-c", "x"]) is None


def test_the_server_imports_torch_once_and_initialises_no_device(server):
    path, proc, home = server
    log = (home / "log").read_text()
    assert "forkserver: torch, sharebench.workloads.infer, sharebench.workloads.train imported in " in log
    # the server runs no CUDA context (CUDA does not survive a fork): no libcuda mapped in its memory
    maps = Path(f"/proc/{proc.pid}/maps").read_text()
    assert "libcuda.so" not in maps


def test_a_fork_serves_cells_with_its_replicas_environment_and_cpus(server, tmp_path):
    path, proc, _ = server
    ready, result = tmp_path / "ready", tmp_path / "result.json"
    env = clean_env(
        SHAREBENCH_READY_FILE=str(ready),
        SHAREBENCH_SERVE="1",
        SHAREBENCH_DEVICE="cpu",
        SHAREBENCH_WORK="2",
        SHAREBENCH_REPLICA="0",
    )
    cpus = sorted(os.sched_getaffinity(0))[:1]
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)  # the replica's CPUs: the fork takes them, not the server's
    try:
        fork = fork_program(path, [*INFER, "--requests", "2"], tmp_path / "program.log", env)
    finally:
        os.sched_setaffinity(0, before)
    assert fork is not None
    child = psutil.Process(fork.pid)
    # a fork of the server: no interpreter started, no PyTorch imported of its own
    assert child.ppid() == proc.pid and child.cmdline() == psutil.Process(proc.pid).cmdline()
    deadline = time.monotonic() + 120
    while not ready.exists() and fork.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert PRIMED in ready.read_text(), (tmp_path / "program.log").read_text()
    assert child.cpu_affinity() == cpus  # its environment too: the ready file above, the work size below
    assert fork.stdin is not None
    fork.stdin.write(cell_line({RESULT_FILE: str(result), WORK: "2"}))
    deadline = time.monotonic() + 120
    while not result.exists() and fork.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    doc = json.loads(result.read_text())
    assert doc["serving"] is True and doc["work"] == 4 and fork.poll() is None
    fork.stdin.close()  # the end of its cells: it exits 0, and the server says so
    assert fork.wait(timeout=60) == 0


def test_a_fork_ends_with_its_replicas_connection_and_with_the_server(server, tmp_path):
    path, _, _ = server
    env = clean_env(SHAREBENCH_DEVICE="cpu", SHAREBENCH_SERVE="1", SHAREBENCH_READY_FILE=str(tmp_path / "r"))
    fork = fork_program(path, INFER, tmp_path / "a.log", env)
    assert fork is not None
    child = psutil.Process(fork.pid)
    fork.sock.close()  # the replica went away (killed: the kernel closes its socket)
    assert psutil.wait_procs([child], timeout=10)[1] == []
    # a server that is stopped (the sweep's end or death) kills what it forked first
    home = tmp_path / "own"
    home.mkdir()
    own = home / "s"
    proc = processes.spawn([sys.executable, "-m", "sharebench.workloads.forkserver", str(own)], log=home / "log")
    deadline = time.monotonic() + 300
    while not own.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    fork = fork_program(str(own), INFER, tmp_path / "b.log", env)
    assert fork is not None
    child = psutil.Process(fork.pid)
    os.kill(proc.pid, signal.SIGTERM)
    assert psutil.wait_procs([child], timeout=10)[1] == [] and proc.wait(timeout=10) == 0


def test_a_warm_sweep_of_the_inference_program_runs_its_programs_as_forks(tmp_path, capsys):
    out = tmp_path / "sweep"
    command = " ".join([*INFER[:3], "--image-size", "32"])
    argv = ["run", "--device", "cpu", "--engine", "exec", "--exec", command, "--work", "1", "--out", str(out)]
    pattern = ["--pattern", "interactive:burst=1,think=0.01", "--bursts", "3"]
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    assert (
        main([*argv, *pattern, "--modes", "timeslice:2", "--repeats", "1", "--warmup-repeats", "0", "--no-progress"])
        == 0
    )
    capsys.readouterr()
    notes = (out / "notes.txt").read_text()
    assert "fork server: PyTorch imported once in " in notes, notes
    rows = load_results(out)
    assert (rows["status"] == "ok").all() and len(rows) == 3  # exclusive (added) and two replicas
    # every replica's program was a fork (its log says so), and nothing the sweep started is left
    logs = sorted(out.rglob("program-prime.*.log"))
    assert len(logs) == 2, sorted(p.relative_to(out) for p in out.rglob("*.log"))
    assert all("sharebench.workloads.infer forked as " in log.read_text() for log in logs)
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    assert left == [], left


def test_the_mps_check_finds_a_replicas_forked_program_by_its_ready_file(server, tmp_path):
    """A forked program is the server's child, not its replica's: the MPS check of exec replicas finds it by
    the pid it wrote into the replica's ready file (an H200's ResNet-18 mps:2 cells failed the check on
    2026-12-05: "no process started by replica process 796 ([]) is an MPS client")."""
    from sharebench.sharing.mps import exec_client_check

    path, _, _ = server
    ready = tmp_path / "ready.0"
    env = clean_env(SHAREBENCH_DEVICE="cpu", SHAREBENCH_SERVE="1", SHAREBENCH_READY_FILE=str(ready))
    fork = fork_program(path, INFER, tmp_path / "program.log", env)
    assert fork is not None
    child = psutil.Process(fork.pid)
    replica = subprocess.Popen(["sleep", "120"])  # the replica's process, the server's sibling as in a sweep
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and fork.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert int(ready.read_text().split()[0]) == fork.pid

        def check(pids):  # what MpsDaemon.check_clients answers: the server knows the forked program only
            return "" if all(p == fork.pid for p in pids) else f"{pids} are not clients"

        assert exec_client_check(check, "protocol", [ready])([replica.pid]) == ""
        assert exec_client_check(check, "protocol", [tmp_path / "absent"])([replica.pid]) == (
            f"no process started by replica process {replica.pid} ([]) is an MPS client: they did not run under MPS"
        )
        assert exec_client_check(lambda pids: "not a client", "protocol", [ready])([replica.pid]) == (
            f"no process started by replica process {replica.pid} ([{fork.pid}]) is an MPS client: "
            "they did not run under MPS"
        )
    finally:
        replica.kill()
        replica.wait()
        fork.sock.close()  # the replica went away: the server ends its program
        assert psutil.wait_procs([child], timeout=10)[1] == []
