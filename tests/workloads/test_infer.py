"""The built-in inference workload (ResNet-18 forward passes) on the CPU at a tiny size, under each pattern:
the protocol's result and the per-request record. Runs needing torch skip where it is absent (the ``ml``
extra: ``make install-ml``); bad input is refused before torch is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sharebench.patterns import parse_pattern
from sharebench.workloads.bursts import read_bursts

TINY = ["--warmup", "1", "--image-size", "32"]


def run_infer(args, env):
    return subprocess.run(
        [sys.executable, "-m", "sharebench.workloads.infer", *TINY, *args],
        env={"PATH": "/usr/bin:/bin", **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"}, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "pattern, requests",
    [("batch", 4), ("interactive:burst=2,think=0.01", 3), ("serve:rate=50,size=1", 6)],
)
def test_infer_follows_its_pattern_and_records_every_request(pattern, requests, tmp_path):
    pytest.importorskip("torch", reason="the ml extra is not installed (make install-ml)")
    env = {
        "SHAREBENCH_WORK": "2",
        "SHAREBENCH_RESULT_FILE": str(tmp_path / "result.json"),
        "SHAREBENCH_DEVICE": "cpu",
        "SHAREBENCH_READY_FILE": str(tmp_path / "ready"),
        "SHAREBENCH_BURSTS": str(tmp_path / "bursts.jsonl"),
        "SHAREBENCH_PATTERN": pattern,
        "SHAREBENCH_PATTERN_SEED": "5",
        "SHAREBENCH_REPLICA": "1",
    }
    proc = run_infer(["--requests", str(requests)], env)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "result.json").read_text())
    units = {"batch": 1, "interactive:burst=2,think=0.01": 2, "serve:rate=50,size=1": 1}[pattern]
    assert doc["unit"] == "samples" and doc["batch"] == 2 and doc["work"] == 2 * units * requests
    assert doc["pattern"] == parse_pattern(pattern).label and doc["bursts"] == requests
    assert doc["pattern_seed"] == [5, 1] and (tmp_path / "ready").exists()
    header, bursts = read_bursts(tmp_path / "bursts.jsonl")
    assert header["pattern"] == doc["pattern"] and header["unit"] == "batches" and header["seed"] == [5, 1]
    assert len(bursts) == requests and all(b.units == units for b in bursts)
    assert doc["start"] <= bursts[0].arrival and bursts[-1].end <= doc["end"]
    assert all(b.arrival <= b.start < b.end for b in bursts)


def test_infer_for_a_duration_outside_a_cell(tmp_path):
    pytest.importorskip("torch", reason="the ml extra is not installed (make install-ml)")
    proc = run_infer(["--batch", "1", "--duration", "0.5", "--pattern", "interactive:think=0.05"], {})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # no result file: stdout; no SHAREBENCH_BURSTS: no record, still works
    assert doc["bursts"] >= 1 and doc["end"] - doc["start"] >= 0.4 and doc["latency_p95_ms"] > 0


@pytest.mark.parametrize(
    "args, env, message",
    [
        (["--pattern", "bursty"], {}, "infer: error: unknown pattern 'bursty'; allowed: batch, interactive"),
        ([], {"SHAREBENCH_PATTERN": "serve:rate=0"}, "infer: error: bad rate '0' in pattern 'serve:rate=0'"),
        (["--requests", "0"], {}, "infer: error: bad --requests '0'; allowed: a whole number >= 1"),
        (["--duration", "-1"], {}, "infer: error: bad --duration '-1'; allowed: seconds 0.001..1e+07"),
        ([], {"SHAREBENCH_PATTERN_SEED": "x"}, "infer: error: bad SHAREBENCH_PATTERN_SEED 'x'"),
    ],
)
def test_bad_input_is_one_line(args, env, message):
    proc = run_infer(args, env)
    assert proc.returncode == 2
    assert proc.stderr.startswith(message) and proc.stderr.count("\n") == 1
