"""A sweep's time-slice probe where it cannot run (the CPU): the sweep records why in one line, in its
notes, its provenance and its report, and measures every cell all the same; --no-probe says it skipped."""

from __future__ import annotations

import json

import pytest

from sharebench.analysis import analyse
from sharebench.analysis.timeslice_split import read_runs
from sharebench.cli import main
from sharebench.results import load_results
from sharebench.sweep import SweepConfig, run_sweep
from sharebench.workloads import Workload

pytestmark = pytest.mark.slow  # real replica processes and sweeps

CPU_REASON = (
    "the time-slice probe needs an NVIDIA GPU through CUDA; device 'cpu' is not one "
    "(time slices of the CPU, PoCL or other OpenCL devices are not probed)"
)


def test_a_sweep_on_the_cpu_records_why_the_probe_cannot_run(lattice, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["run", "--device", "cpu", "--modes", "exclusive,timeslice:2", "--particles", "2000", "--turns", "20"]
    argv += ["--repeats", "1", "--warmup-repeats", "0", "--lattice", str(lattice), "--out", str(out)]
    assert main([*argv, "--no-progress", "--no-telemetry"]) == 0
    capsys.readouterr()
    assert f"probe: cannot run here: {CPU_REASON}" in (out / "notes.txt").read_text()
    probe = json.loads((out / "provenance.json").read_text())["timeslice_probe"]
    assert probe == {"status": "unavailable", "reason": CPU_REASON, "device": "cpu"}
    df = load_results(out)
    assert set(df["mode"]) == {"exclusive", "timeslice:2"} and (df["cell_status"] == "ok").all()
    assert not (out / "timeslice_split.json").exists() and not (out / "timeslice_split").exists()
    md = (out / "report.md").read_text()
    assert f"No loss was split here: probe: cannot run here: {CPU_REASON}." in md


def test_no_probe_skips_it_and_a_sweep_without_time_slicing_says_nothing(lattice, tmp_path):
    def config(modes: list[str], probe: bool, pattern: str = "batch") -> SweepConfig:
        return SweepConfig(
            workload=Workload(device="cpu", lattice=str(lattice), pattern=pattern, bursts=2),
            modes=modes,
            particles=[2000],
            turns=20,
            repeats=1,
            warmup_repeats=0,
            progress=False,
            telemetry_interval_s=None,
            command=["test"],
            timeslice_probe=probe,
        )

    run_sweep(config(["exclusive", "timeslice:2"], False), tmp_path / "a")
    assert "probe: skipped (--no-probe)" in (tmp_path / "a" / "notes.txt").read_text()
    assert json.loads((tmp_path / "a" / "provenance.json").read_text())["timeslice_probe"]["status"] == "skipped"
    run_sweep(config(["exclusive"], True), tmp_path / "b")
    assert "probe:" not in (tmp_path / "b" / "notes.txt").read_text()
    # replica patterns: no batch loss to split or predict, so the probe's seconds are not spent (issue 35)
    run_sweep(config(["exclusive", "timeslice:2"], True, "interactive:burst=1,think=0.01"), tmp_path / "c")
    assert "probe: skipped (replica patterns:" in (tmp_path / "c" / "notes.txt").read_text()
    assert "timeslice_probe" not in json.loads((tmp_path / "b" / "provenance.json").read_text())


@pytest.mark.gpu
def test_a_timeslice_sweep_on_an_nvidia_gpu_probes_and_splits_its_loss(tmp_path):
    """On a CUDA GPU: the probe in provenance, then per size 3 runs beside it, and the split table."""
    out = tmp_path / "gpu"
    config = SweepConfig(
        workload=Workload(device="cuda:0"),
        modes=["exclusive", "timeslice:2"],
        particles=[1_000_000],
        turns=10,
        repeats=3,
        warmup_repeats=1,
        progress=False,
        command=["test"],
    )
    run_sweep(config, out)
    probe = json.loads((out / "provenance.json").read_text())["timeslice_probe"]
    assert probe["status"] == "ok" and 0.5 < probe["slice_ms"] < 50 and 0 < probe["switch_ms"] < 2
    assert [r["processes"] for r in probe["runs"]] == [2, 4]
    runs = read_runs(out)
    assert len(runs) == 3 and all(r["status"] == "ok" and r["gaps_ms"] for r in runs), runs
    split = analyse(out).timeslice_split
    assert len(split) == 1 and split.iloc[0]["repeats"] == 3
    assert 0 < split.iloc[0]["in_slice_rate"] <= 1.2 and split.iloc[0]["uuid"] == probe["uuid"]
