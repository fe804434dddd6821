"""timeslice:N/INTERVAL: the grammar, the refusal without --allow-gpu-settings, and the GPU's interval
set and put back (success, error, a real SIGINT) through a fake ``nvidia-smi`` on PATH that records
its calls. The real card is never touched: every test puts the fake first on PATH."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from sharebench.cli import main
from sharebench.devices import DeviceInfo
from sharebench.errors import UserError
from sharebench.modes import Mode, mode_sort_key, parse_mode
from sharebench.sharing.timeslice import check_allowed, gpu_timeslice

pytestmark = pytest.mark.slow  # real replica processes and sweeps

UUID = "GPU-11111111-2222-3333-4444-555555555555"
GPU = DeviceInfo(
    spec="cuda:0", kind="gpu", backend="cuda", name="NVIDIA H200", uuid=UUID, memory_bytes=141 * 2**30, platform="CUDA"
)

FAKE = textwrap.dedent("""\
    #!{python}
    # a stand-in for nvidia-smi: records its argv, keeps the interval in a state file
    import os, sys
    log, state = os.environ["FAKE_SMI_LOG"], os.environ["FAKE_SMI_STATE"]
    with open(log, "a") as f:
        f.write(" ".join(sys.argv[1:]) + "\\n")
    names = ["Default", "Short", "Medium", "Long"]
    if os.environ.get("FAKE_SMI_FAIL") and os.environ["FAKE_SMI_FAIL"] in " ".join(sys.argv[1:]):
        print("Insufficient Permissions", file=sys.stderr)
        sys.exit(4)
    args = sys.argv[1:]
    if args[:2] == ["compute-policy", "-l"]:
        code = int(open(state).read()) if os.path.exists(state) else 0
        print("+------------------------------+")
        print("| GPU compute policies:        |")
        print("| GPU  Timeslice               |")
        print("|==============================|")
        print(f"|   0  {{names[code]:<24}}|")
        print("+------------------------------+")
    elif args and args[0] == "compute-policy":
        code = [a for a in args if a.startswith("--set-timeslice=")][0].split("=")[1]
        open(state, "w").write(code)
        print(f"Set timeslice to {{names[int(code)]}} for GPU 00000000:00:00.0")
    """)


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "nvidia-smi"
    exe.write_text(FAKE.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    log, state = tmp_path / "calls.log", tmp_path / "interval"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SMI_LOG", str(log))
    monkeypatch.setenv("FAKE_SMI_STATE", str(state))

    class Fake:
        def calls(self) -> list[str]:
            return log.read_text().splitlines() if log.exists() else []

        def interval(self) -> int:
            return int(state.read_text()) if state.exists() else 0

        def set(self, code: int) -> None:
            state.write_text(str(code))

    return Fake()


# ------------------------------------------------------------------ grammar
@pytest.mark.parametrize(
    "text, mode",
    [
        ("timeslice:2/long", Mode("timeslice", 2, interval="long")),
        ("TimeSlice:4/Short", Mode("timeslice", 4, interval="short")),
        ("timeslice:8/default", Mode("timeslice", 8, interval="default")),
    ],
)
def test_interval_grammar(text, mode):
    assert parse_mode(text) == mode
    assert parse_mode(mode.label) == mode
    assert mode.label == text.lower()


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "timeslice:2/forever",
            "bad time-slice interval in 'timeslice:2/forever'; allowed: default, short, medium, "
            "long (e.g. timeslice:2/long)",
        ),
        ("timeslice:2/", "bad time-slice interval in 'timeslice:2/'"),
        ("mps:2/long", "only timeslice takes a /INTERVAL (got 'mps:2/long')"),
        ("timeslice:x/long", "bad replica count in 'timeslice:x/long'"),
    ],
)
def test_interval_grammar_errors(text, message):
    with pytest.raises(UserError) as err:
        parse_mode(text)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_interval_sort_order():
    labels = [
        "timeslice:4",
        "timeslice:2/long",
        "timeslice:2/short",
        "exclusive",
        "timeslice:2",
        "mps:2",
        "timeslice:2/default",
        "timeslice:2/medium",
    ]
    assert sorted(labels, key=mode_sort_key) == [
        "exclusive",
        "timeslice:2",
        "timeslice:2/default",
        "timeslice:2/short",
        "timeslice:2/medium",
        "timeslice:2/long",
        "timeslice:4",
        "mps:2",
    ]


# ------------------------------------------------------------------ refusal
def test_refused_without_the_flag():
    check_allowed([parse_mode("timeslice:2")], allowed=False)  # no interval: nothing to refuse
    with pytest.raises(UserError) as err:
        check_allowed([parse_mode("timeslice:2/long"), parse_mode("timeslice:4/short")], allowed=False)
    assert str(err.value).startswith(
        "timeslice:2/long, timeslice:4/short: a time-slice interval is a setting of the whole GPU"
    )
    assert "--allow-gpu-settings" in str(err.value)


def test_cli_refuses_in_one_line(capsys, tmp_path, fake_smi):
    out = tmp_path / "out"
    assert main(["run", "--device", "cpu", "--modes", "timeslice:2/long", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sharebench: error: timeslice:2/long: a time-slice interval") and err.count("\n") == 1
    assert "--allow-gpu-settings" in err
    # with the flag, the CPU is still no NVIDIA GPU: refused before anything runs
    assert (
        main(
            [
                "run",
                "--device",
                "cpu",
                "--modes",
                "timeslice:2/long",
                "--allow-gpu-settings",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "timeslice:2/long sets an NVIDIA GPU's time-slice interval; the device cpu" in err
    assert err.count("\n") == 1
    assert not out.exists()
    assert fake_smi.calls() == []  # the GPU was never asked, let alone changed


# ------------------------------------------------------------------ set and restore
def test_set_and_restored(fake_smi):
    fake_smi.set(1)  # short before
    said: list[str] = []
    with gpu_timeslice(GPU, parse_mode("timeslice:2/long"), allowed=True, say=said.append) as before:
        assert before == "short"
        assert fake_smi.interval() == 3
    assert fake_smi.interval() == 1
    assert fake_smi.calls() == [
        f"compute-policy -l -i {UUID}",
        f"compute-policy -i {UUID} --set-timeslice=3",
        f"compute-policy -i {UUID} --set-timeslice=1",
    ]
    assert said == [
        f"GPU {UUID}: time-slice interval short -> long for timeslice:2/long",
        f"GPU {UUID}: time-slice interval back to short",
    ]


def test_restored_on_error(fake_smi):
    with (
        pytest.raises(RuntimeError, match="replica blew up"),
        gpu_timeslice(GPU, parse_mode("timeslice:2/medium"), allowed=True),
    ):
        assert fake_smi.interval() == 2
        raise RuntimeError("replica blew up")
    assert fake_smi.interval() == 0
    assert fake_smi.calls()[-1] == f"compute-policy -i {UUID} --set-timeslice=0"


def test_untouched_when_equal_or_absent(fake_smi):
    fake_smi.set(3)
    with gpu_timeslice(GPU, parse_mode("timeslice:2/long"), allowed=True):
        pass
    assert fake_smi.calls() == [f"compute-policy -l -i {UUID}"]  # read, already long: no write
    with gpu_timeslice(GPU, parse_mode("timeslice:2"), allowed=True) as before:
        assert before is None
    assert len(fake_smi.calls()) == 1


def test_unreadable_value_is_never_changed(fake_smi, monkeypatch):
    monkeypatch.setenv("FAKE_SMI_FAIL", "-l")
    with pytest.raises(UserError) as err, gpu_timeslice(GPU, parse_mode("timeslice:2/long"), allowed=True):
        pytest.fail("the body must not run")
    assert str(err.value) == (
        f"reading GPU {UUID}'s time-slice interval: nvidia-smi compute-policy -l -i {UUID} "
        "failed (status 4): Insufficient Permissions"
    )
    assert not any("--set-timeslice" in c for c in fake_smi.calls())


def test_restored_on_a_real_sigint(fake_smi, tmp_path):
    fake_smi.set(0)
    inside = tmp_path / "inside"
    script = textwrap.dedent(f"""
        import pathlib, time
        from sharebench.devices import DeviceInfo
        from sharebench.modes import parse_mode
        from sharebench.sharing.timeslice import gpu_timeslice
        gpu = DeviceInfo(**{GPU.to_dict()!r})
        with gpu_timeslice(gpu, parse_mode("timeslice:4/long"), allowed=True):
            pathlib.Path({str(inside)!r}).touch()
            time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env=os.environ.copy(), stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not inside.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert fake_smi.interval() == 3
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err
    assert fake_smi.interval() == 0
    assert fake_smi.calls()[-2:] == [
        f"compute-policy -i {UUID} --set-timeslice=3",
        f"compute-policy -i {UUID} --set-timeslice=0",
    ]


def test_not_an_nvidia_gpu(fake_smi):
    cpu = DeviceInfo(spec="cpu", kind="cpu", backend="cpu", name="AMD EPYC", uuid="", memory_bytes=0, platform="")
    with (
        pytest.raises(UserError, match="the device cpu .AMD EPYC. is not one"),
        gpu_timeslice(cpu, parse_mode("timeslice:2/short"), allowed=True),
    ):
        pass
    assert fake_smi.calls() == []


def test_plan_refuses_interval_on_the_cpu():
    from sharebench.sharing import plan_cell

    with pytest.raises(UserError, match="sets an NVIDIA GPU's time-slice interval"):
        plan_cell("timeslice:2/long", {"spec": "cpu", "kind": "cpu", "backend": "cpu", "name": "x"})
    assert plan_cell("timeslice:2/long", GPU.to_dict()).n == 2


def test_sweep_cell_runs_between_set_and_restore(fake_smi, tmp_path, lattice):
    """The runner's hook: a real cell (two replicas on PoCL) whose plan's device is an NVIDIA GPU, so the
    fake nvidia-smi is asked to set the interval before the replicas and to put it back after them."""
    from sharebench.sharing import CellPlan, ReplicaPlan
    from sharebench.sweep import Cell, SweepConfig, measure_cell
    from sharebench.sweep.plan import SweepPlan
    from sharebench.workloads import Workload
    from support.contexts import cpu_opencl_spec

    spec = cpu_opencl_spec()
    mode = parse_mode("timeslice:2/long")
    config = SweepConfig(
        modes=[mode.label],
        particles=[200],
        turns=2,
        repeats=1,
        warmup_repeats=0,
        workload=Workload(device=spec, lattice=str(lattice)),
        telemetry_interval_s=None,
        progress=False,
        allow_gpu_settings=True,
    )
    plan = SweepPlan(
        config, GPU, [mode], {mode.label: CellPlan(mode, GPU, [ReplicaPlan(i, spec) for i in range(2)])}, [200], 2, []
    )
    fake_smi.set(1)
    result = measure_cell(plan, Cell(mode, 200, 1), tmp_path / "out")
    assert [r["status"] for r in result.rows] == ["ok", "ok"]
    assert {r["mode"] for r in result.rows} == {"timeslice:2/long"}
    assert fake_smi.calls() == [
        f"compute-policy -l -i {UUID}",
        f"compute-policy -i {UUID} --set-timeslice=3",
        f"compute-policy -i {UUID} --set-timeslice=1",
    ]
    assert f"GPU {UUID}: time-slice interval short -> long for timeslice:2/long" in result.notes
    assert fake_smi.interval() == 1
