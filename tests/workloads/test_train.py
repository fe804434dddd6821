"""The built-in ML workload (ResNet-18 training in PyTorch) on the CPU at a tiny size: alone through the
protocol's Python side, and as the exec engine's program in a real sweep. Skipped where torch is absent
(the ``ml`` extra: ``make install-ml``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sharebench.results import load_results
from sharebench.sweep import SweepConfig, run_sweep
from sharebench.workloads import Workload

pytestmark = pytest.mark.slow  # trains a model for real (PyTorch)

pytest.importorskip("torch", reason="the ml extra is not installed (make install-ml)")


TINY = ["--steps", "2", "--warmup-steps", "1", "--image-size", "32"]


@pytest.mark.parametrize("amp", [False, True])
def test_train_alone_writes_a_protocol_result(amp, tmp_path):
    result = tmp_path / "result.json"
    env = {
        "SHAREBENCH_WORK": "4",
        "SHAREBENCH_RESULT_FILE": str(result),
        "SHAREBENCH_DEVICE": "cpu",
        "SHAREBENCH_READY_FILE": str(tmp_path / "ready"),
        "PATH": "/usr/bin:/bin",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "sharebench.workloads.train", *TINY, *(["--amp"] if amp else [])],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(result.read_text())
    assert doc["unit"] == "samples" and doc["work"] == 4 * 2 and doc["batch"] == 4
    assert doc["end"] > doc["start"] and doc["model"] == "resnet18"
    assert doc["precision"] == ("bf16-amp" if amp else "fp32")
    assert doc["final_loss"] > 0 and (tmp_path / "ready").exists()


def test_train_bad_work_is_one_line(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "sharebench.workloads.train", *TINY],
        env={"SHAREBENCH_WORK": "lots", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert proc.stderr == "train: error: bad SHAREBENCH_WORK 'lots'; allowed: a whole number > 0\n"


def test_train_in_a_sweep(tmp_path):
    command = f"{sys.executable} -m sharebench.workloads.train " + " ".join(TINY)
    out = run_sweep(
        SweepConfig(
            workload=Workload(device="cpu", engine="exec", command=command),
            modes=["exclusive", "timeslice:2"],
            particles=[2],
            repeats=1,
            warmup_repeats=0,
            progress=False,
            telemetry_interval_s=None,
            command=["test"],
        ),
        tmp_path / "out",
    )
    df = load_results(out)
    assert (df["cell_status"] == "ok").all(), df["cell_error"].tolist()
    assert set(df["engine"]) == {"train"} and len(df) == 3
    rec = json.loads(next((out / "cells").glob("exclusive_*")).joinpath("record.0.json").read_text())
    assert rec["extra"]["unit"] == "samples" and rec["extra"]["work"] == 4 and rec["context"] == "torch-cpu"
