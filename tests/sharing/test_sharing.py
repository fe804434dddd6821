"""Local sharing executors: real replica processes on the CPU / PoCL, refusal paths for MPS and MIG."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import psutil
import pytest

from sharebench.errors import UserError
from sharebench.parse import cpu_set
from sharebench.sharing import (
    CellPlan,
    MpsDaemon,
    ReplicaPlan,
    cell_run,
    check_mps_available,
    find_mig_instances,
    parse_nvidia_smi_list,
    partition_cpus,
    plan_cell,
    run_cell,
    select_instances,
)
from sharebench.sharing.executor import check_devices
from sharebench.workloads import ReplicaJob, Workload
from support.contexts import device_of

pytestmark = pytest.mark.slow  # real replica processes and sweeps

# `nvidia-smi -L` as printed by a driver with MIG on (format of NVIDIA's MIG user guide)
SMI_L = """\
GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)
  MIG 3g.20gb     Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)
  MIG 1g.5gb      Device  1: (UUID: MIG-cba663e8-9bed-5b26-b243-5deb0e8a8dbf)
  MIG 1g.5gb      Device  2: (UUID: MIG-1e099852-3624-5f1e-8ef1-c8ed1a68b2d3)
GPU 1: NVIDIA H200 (UUID: GPU-0e1b1a6e-7c4a-4c6a-9a1e-2f3b4c5d6e7f)
  MIG 1g.18gb     Device  0: (UUID: MIG-aaaaaaaa-1111-2222-3333-444444444444)
"""

CUDA_DEV = {
    "spec": "cuda:0",
    "kind": "gpu",
    "backend": "cuda",
    "name": "NVIDIA A100-SXM4-40GB",
    "uuid": "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77",
    "memory_bytes": 40 * 2**30,
    "platform": "CUDA",
}


def run_config(spec: str, lattice: Path, particles: int = 2000, turns: int = 20):

    return ReplicaJob.of(Workload(device=spec, lattice=str(lattice)), particles=particles, turns=turns)


# --------------------------------------------------------------------------- real cells


@pytest.mark.parametrize(
    "spec, mode",
    [
        ("cpu", "exclusive"),
        ("opencl", "timeslice:2"),
        ("cpu", "partition:2"),
        pytest.param("cuda", "timeslice:2", marks=pytest.mark.gpu),
        pytest.param("cuda", "mps:2", marks=pytest.mark.gpu),
    ],
)
def test_cell_replicas_start_together(tmp_path, lattice, spec, mode):
    dev = device_of(spec)
    if mode == "partition:2" and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("partition:2 needs 2 cores")
    recs = run_cell(cell_run(mode, run_config(dev.spec, lattice), tmp_path, device=dev))
    n = 1 if mode == "exclusive" else 2
    assert [r["replica"] for r in recs] == list(range(n))
    assert all(r["status"] == "ok" and r["cell_status"] == "ok" for r in recs), recs
    start_at = float((tmp_path / "start").read_text())
    for r in recs:
        assert r["particles"] == 2000 and r["turns"] == 20 and r["track_s"] > 0
        # nobody tracked before the instant in the start file, and all began right after it
        assert start_at - 1e-3 <= r["track_start"] < start_at + 1.0
        assert r["device_uuid"] == dev.uuid and r["device_spec"] == dev.spec
    if mode == "partition:2":
        import json

        sets = [json.loads((tmp_path / f"config.{i}.json").read_text())["run"]["cpus"] for i in range(2)]
        assert set(sets[0]).isdisjoint(sets[1]) and [cpu_set(r["cpus"]) for r in recs] == sets
        assert [r["cores"] for r in recs] == [len(s) for s in sets]


def test_a_replica_that_fails_at_setup_fails_the_cell_fast(tmp_path, lattice, own_children):
    dev = device_of("cpu")
    plan = plan_cell("timeslice:2", dev)
    plan.replicas[1].device = "opencl:9.9"  # this replica cannot open its device
    t0 = time.monotonic()
    recs = run_cell(cell_run("timeslice:2", run_config("cpu", lattice), tmp_path, plan=plan))
    assert time.monotonic() - t0 < 60
    assert recs[1]["status"] == "failed" and "opencl:9.9" in recs[1]["error"]
    assert recs[0]["status"] == "failed" and recs[0]["error"] == "stopped: another replica of the cell failed first"
    assert {r["cell_status"] for r in recs} == {"failed"}
    assert recs[0]["cell_error"].startswith("replica 1: ")
    assert not own_children()


def _replica_pid(workdir: Path, i: int, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for p in psutil.Process().children(recursive=True):
            try:
                if str(workdir / f"config.{i}.json") in p.cmdline():
                    return p.pid
            except psutil.Error:
                continue
        time.sleep(0.02)
    raise AssertionError("replica process not found")


def _when_started(workdir: Path, action, timeout_s: float = 120) -> threading.Thread:
    def watch():
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not (workdir / "start").exists():
            time.sleep(0.01)
        start_at = float((workdir / "start").read_text())
        time.sleep(max(0.0, start_at - time.time()) + 0.2)
        action()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_a_crash_while_tracking_keeps_the_other_replicas_record(tmp_path, lattice):
    dev = device_of("cpu")
    # long enough to be killed mid-run: ~4e6 particle-turns on a 100-element ring
    cfg = run_config("cpu", lattice, particles=20000, turns=200)
    _when_started(tmp_path, lambda: os.kill(_replica_pid(tmp_path, 1), signal.SIGKILL))
    recs = run_cell(cell_run("timeslice:2", cfg, tmp_path, device=dev))
    assert recs[0]["status"] == "ok" and recs[0]["track_s"] > 0
    assert recs[1]["status"] == "failed" and recs[1]["error"].startswith("exited with status -9")
    assert recs[0]["cell_status"] == "failed" and recs[0]["cell_error"].startswith("replica 1: exited with status -9")


def test_ctrl_c_stops_every_replica(tmp_path, lattice, own_children):
    dev = device_of("cpu")
    cfg = run_config("cpu", lattice, particles=20000, turns=400)
    _when_started(tmp_path, lambda: os.kill(os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        run_cell(cell_run("timeslice:2", cfg, tmp_path, device=dev))
    assert not own_children()


def test_run_timeout_stops_a_cell_that_tracks_too_long(tmp_path, lattice, own_children):
    dev = device_of("cpu")
    cfg = run_config("cpu", lattice, particles=20000, turns=400)
    recs = run_cell(cell_run("timeslice:2", cfg, tmp_path, device=dev, run_timeout_s=0.5))
    assert [r["status"] for r in recs] == ["failed", "failed"]
    assert recs[0]["error"] == "still running 0.5 s after the start; stopped"
    assert not own_children()


def test_barrier_timeout(tmp_path, lattice, own_children):
    dev = device_of("cpu")
    # 10 ms: less than a Python interpreter needs to start and import numpy, so never ready in time
    # (0.3 s was flaky: with warm kernel and lattice caches a replica can be ready sooner)
    recs = run_cell(cell_run("exclusive", run_config("cpu", lattice), tmp_path, device=dev, ready_timeout_s=0.01))
    assert recs[0]["status"] == "failed"
    assert recs[0]["error"] == "not ready after 0.01 s (setup too slow or hung)"
    assert not own_children()


# --------------------------------------------------------------------------- device check


@pytest.mark.parametrize(
    "kind, uuids, message",
    [
        ("timeslice", ["host-a", "host-a"], ""),
        ("timeslice", ["GPU-1", "GPU-2"], "replicas ran on different devices: GPU-1, GPU-2"),
        ("mig", ["MIG-a", "MIG-b"], ""),
        ("mig", ["MIG-a", "MIG-x"], "replicas not on their MIG instances: replica 1 on MIG-x instead of MIG-b"),
    ],
)
def testcheck_devices(kind, uuids, message):
    from sharebench.modes import parse_mode

    mode = parse_mode("mig:3g" if kind == "mig" else "timeslice:2")
    reps = [
        ReplicaPlan(i, "cuda:0", mig_uuid=f"MIG-{'ab'[i]}" if kind == "mig" else "", parent_uuid="GPU-p")
        for i in range(2)
    ]
    assert check_devices(CellPlan(mode, {}, reps), [{"device_uuid": u} for u in uuids]) == message


# --------------------------------------------------------------------------- MPS


@pytest.mark.parametrize(
    "dev, message",
    [
        (
            {"spec": "cpu", "kind": "cpu", "backend": "cpu", "name": "AMD EPYC", "platform": "cpu"},
            "mps:2 needs an NVIDIA GPU (--device cuda, or NVIDIA's OpenCL); the device is cpu (AMD EPYC): MPS exists "
            "only on NVIDIA GPUs",
        ),
        (
            {
                "spec": "opencl:0.0",
                "kind": "cpu",
                "backend": "opencl",
                "name": "pthread-AMD EPYC",
                "platform": "Portable Computing Language",
            },
            "mps:2 needs an NVIDIA GPU (--device cuda, or NVIDIA's OpenCL); the device is opencl:0.0 (pthread-AMD EPYC): "
            "MPS exists only on NVIDIA GPUs",
        ),
        (
            {
                "spec": "opencl:1.0",
                "kind": "gpu",
                "backend": "opencl",
                "name": "gfx90a",
                "platform": "AMD Accelerated Parallel Processing",
            },
            "mps:2 needs an NVIDIA GPU (--device cuda, or NVIDIA's OpenCL); the device is opencl:1.0 (gfx90a): MPS exists "
            "only on NVIDIA GPUs",
        ),
    ],
)
def test_mps_refused_off_nvidia(dev, message):
    with pytest.raises(UserError) as e:
        plan_cell("mps:2", dev)
    assert str(e.value) == message


@pytest.mark.parametrize(
    "servers, pids, problem",
    [
        ({4100: [5001, 5002]}, [5001, 5002], ""),
        ({}, [5001, 5002], "no MPS server was started: the replicas did not connect to MPS"),
        (
            {4100: [5001]},
            [5001, 5002],
            "replica process(es) [5002] are not clients of the MPS server [4100] "
            "(clients: [5001]): they did not run under MPS",
        ),
    ],
)
def test_every_replica_must_be_an_mps_client(servers, pids, problem):
    from sharebench.sharing.mps import mps_client_problem

    assert mps_client_problem(servers, pids) == problem


@pytest.mark.skipif(shutil.which("nvidia-cuda-mps-control") is not None, reason="MPS control program present")
def test_mps_refused_without_control_program():
    with pytest.raises(UserError) as e:
        check_mps_available(CUDA_DEV, "mps:4@50")
    assert str(e.value) == (
        "mps:4@50 needs nvidia-cuda-mps-control (NVIDIA driver utilities) on the PATH; it was not found"
    )


@pytest.mark.skipif(shutil.which("nvidia-cuda-mps-control") is not None, reason="MPS control program present")
def test_mps_daemon_failing_to_start_leaves_nothing_behind(tmp_path):
    before = signal.getsignal(signal.SIGTERM)
    d = MpsDaemon(CUDA_DEV)
    with pytest.raises(UserError, match="needs nvidia-cuda-mps-control"), d:
        raise AssertionError("the body must not run")
    assert d.root is None and not d.running
    assert signal.getsignal(signal.SIGTERM) is before


def test_mps_client_environment_and_cleanup():
    d = MpsDaemon(CUDA_DEV)
    d.make_dirs()
    root = d.root
    env = d.client_env(thread_pct=25)
    assert env == {
        "CUDA_MPS_PIPE_DIRECTORY": str(root / "pipe"),
        "CUDA_MPS_LOG_DIRECTORY": str(root / "log"),
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "25",
    }
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in d.client_env()
    assert d.daemon_env()["CUDA_MPS_PIPE_DIRECTORY"] == str(root / "pipe")
    with pytest.raises(UserError, match="out of range; allowed: 1..100"):
        d.client_env(thread_pct=0)
    # sockets live in the pipe folder: the path must stay well under the 108-byte UNIX socket limit
    assert len(str(root / "pipe" / "control_privileged")) < 100
    d.stop()  # never started: nothing to quit, folders removed
    assert not root.exists()


# --------------------------------------------------------------------------- MIG


def test_parse_nvidia_smi_list():
    inst = parse_nvidia_smi_list(SMI_L)
    assert [(i.parent_index, i.profile, i.sms) for i in inst] == [
        (0, "3g.20gb", 42),
        (0, "1g.5gb", 14),
        (0, "1g.5gb", 14),
        (1, "1g.18gb", 16),
    ]
    assert inst[1].uuid == "MIG-cba663e8-9bed-5b26-b243-5deb0e8a8dbf"
    assert inst[1].parent_uuid == "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"


@pytest.mark.parametrize(
    "layout, gpu, profiles",
    [
        ("1g", 0, ["1g.5gb", "1g.5gb"]),
        ("all-1g.5gb", 0, ["1g.5gb", "1g.5gb"]),
        ("3g", 0, ["3g.20gb"]),
        ("1g", 1, ["1g.18gb"]),
    ],
)
def test_select_instances(layout, gpu, profiles):
    chosen = select_instances(layout, parse_nvidia_smi_list(SMI_L), gpu)
    assert [i.profile for i in chosen] == profiles and {i.parent_index for i in chosen} == {gpu}


@pytest.mark.parametrize(
    "layout, instances, message",
    [
        (
            "2g",
            SMI_L,
            "mig:2g: the layout does not match the MIG instances that exist (GPU 0: 1g.5gb x2, 3g.20gb x1); "
            "give a layout that exists, e.g. mig:1g.5gb",
        ),
        ("5g", SMI_L, "mig:5g: MIG layout '5g' has no profile on A100-40GB; allowed sizes: 1g, 2g, 3g, 4g, 7g"),
        (
            "1g",
            "",
            "mig:1g: no MIG instances exist on this machine (none found); sharebench does not change MIG mode "
            "or layout locally: create them with nvidia-smi mig (or use the cluster pipeline)",
        ),
    ],
)
def test_select_instances_refusals(layout, instances, message):
    with pytest.raises(UserError) as e:
        select_instances(layout, parse_nvidia_smi_list(instances), 0 if instances else None)
    assert str(e.value) == message


def test_mig_plan_pins_one_replica_per_instance():
    plan = plan_cell("mig:1g", CUDA_DEV, mig_instances=parse_nvidia_smi_list(SMI_L))
    assert plan.n == 2 and plan.mode.replicas == 2
    assert [r.env for r in plan.replicas] == [
        {"CUDA_VISIBLE_DEVICES": "MIG-1e099852-3624-5f1e-8ef1-c8ed1a68b2d3"},
        {"CUDA_VISIBLE_DEVICES": "MIG-cba663e8-9bed-5b26-b243-5deb0e8a8dbf"},
    ]
    assert {r.device for r in plan.replicas} == {"cuda:0"} and {r.sms for r in plan.replicas} == {14}


def test_mig_on_this_machine():
    """No NVIDIA driver here: nothing found, with the reason; a mig cell is refused in one line."""
    found, how = find_mig_instances()
    if found:
        pytest.skip(f"MIG instances exist here ({how})")
    assert how
    with pytest.raises(UserError, match=r"^mig:1g: no MIG instances exist on this machine \("):
        plan_cell("mig:1g", CUDA_DEV)
    with pytest.raises(UserError, match=r"^mig:1g needs an NVIDIA GPU through CUDA"):
        plan_cell("mig:1g", {"spec": "cpu", "kind": "cpu", "backend": "cpu", "name": "x"})


# --------------------------------------------------------------------------- CPU partitions


@pytest.mark.parametrize(
    "n, cpus, sets",
    [
        (2, [0, 1], [[0], [1]]),
        (2, list(range(8)), [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (3, list(range(8)), [[0, 1], [2, 3], [4, 5]]),  # equal sizes; 6 and 7 stay idle
    ],
)
def test_partition_cpus(n, cpus, sets):
    got = partition_cpus(n, cpus)
    # disjoint, equal sizes (hyperthread siblings, where sysfs names them, stay in one set)
    assert all(set(a).isdisjoint(b) for i, a in enumerate(got) for b in got[i + 1 :])
    assert [len(s) for s in got] == [len(s) for s in sets]
    assert set().union(*got) <= set(cpus)


@pytest.mark.parametrize(
    "mode, dev, message",
    [
        (
            "partition:3",
            {"spec": "cpu", "kind": "cpu", "backend": "cpu"},
            "partition:3 needs at least 3 cores; this process may use 2 (0-1)",
        ),
        (
            "partition:2",
            CUDA_DEV,
            "partition:2 is for the CPU (disjoint core sets); the device cuda:0 is a GPU: "
            "use mig:LAYOUT to partition a GPU",
        ),
    ],
)
def test_partition_refusals(mode, dev, message):
    with pytest.raises(UserError) as e:
        plan_cell(mode, dev, cpus=[0, 1])
    assert str(e.value) == message


def test_mps_daemon_turns_sigterm_into_an_interrupt_while_it_runs():
    """While a daemon runs, SIGTERM unwinds like Ctrl-C, so the `with` block still sends quit."""
    before = signal.getsignal(signal.SIGTERM)
    d = MpsDaemon(CUDA_DEV)
    d.install_signal_handlers()
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this
    finally:
        d.stop()
    assert signal.getsignal(signal.SIGTERM) is before
