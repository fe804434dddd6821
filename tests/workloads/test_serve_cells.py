"""Serving cells (issue 35): a program kept by its warm replica from one cell to the next."""

from __future__ import annotations

import io
import json
import os
import sys
import time

import psutil
import pytest

from sharebench.errors import UserError
from sharebench.results import load_results
from sharebench.sweep import SweepConfig, run_sweep
from sharebench.workloads import Workload
from sharebench.workloads.protocol import READY_FILE, RESULT_FILE, SERVE, WORK, cell_line, cells

SERVING = """
import os, sys, time
from sharebench.workloads.protocol import cells, offered_serving, ready, wait_for_start, work_size, write_result
time.sleep(0.2)  # set-up
n = 0
for _ in cells():
    n += 1
    if n == int(os.environ.get("FAIL_AT", "0")):
        print("failing on purpose", file=sys.stderr)
        sys.exit(1)
    ready()
    start = wait_for_start()
    time.sleep(0.02 * work_size(1))
    write_result(start, time.time(), work_size(1), "items", serving=offered_serving(), pid=os.getpid())
"""
PLAIN = """
import os, time
from sharebench.workloads.protocol import ready, wait_for_start, work_size, write_result
ready()
start = wait_for_start()
time.sleep(0.02)
write_result(start, time.time(), work_size(1), "items", pid=os.getpid())
"""


def test_cells_from_the_environment_then_lines(tmp_path, monkeypatch):
    monkeypatch.setenv(RESULT_FILE, str(tmp_path / "r1"))
    monkeypatch.setenv(WORK, "4")
    monkeypatch.setenv(SERVE, "1")
    line = cell_line({RESULT_FILE: str(tmp_path / "r2"), WORK: "8", "OTHER": "x"})
    seen = [(os.environ[RESULT_FILE], os.environ.get(WORK)) for _ in cells(io.StringIO(line))]
    assert seen == [(str(tmp_path / "r1"), "4"), (str(tmp_path / "r2"), "8")]


def test_a_prime_writes_the_ready_file_and_waits_for_its_first_line(tmp_path, monkeypatch):
    monkeypatch.delenv(RESULT_FILE, raising=False)
    monkeypatch.setenv(READY_FILE, str(tmp_path / "ready"))
    monkeypatch.setenv(SERVE, "1")
    it = cells(io.StringIO(cell_line({RESULT_FILE: str(tmp_path / "r"), WORK: "2"}) + "\n"))
    next(it)
    assert "serving" in (tmp_path / "ready").read_text()
    assert list(it) == []  # end of input: no more cells


def test_without_serving_one_cell_only(tmp_path, monkeypatch):
    monkeypatch.setenv(RESULT_FILE, str(tmp_path / "r1"))
    monkeypatch.delenv(SERVE, raising=False)
    assert len(list(cells(io.StringIO(cell_line({RESULT_FILE: "x"}))))) == 1


@pytest.mark.parametrize("line", ["not json\n", "[1]\n", '{"SHAREBENCH_WORK": 3}\n'])
def test_a_bad_cell_line_is_one_line(line, monkeypatch):
    monkeypatch.delenv(RESULT_FILE, raising=False)
    monkeypatch.delenv(READY_FILE, raising=False)
    monkeypatch.setenv(SERVE, "1")
    with pytest.raises(UserError, match="bad cell line"):
        list(cells(io.StringIO(line)))


def sweep(tmp_path, source: str, **env):
    prog = tmp_path / "prog.py"
    prog.write_text(source)
    for k, v in env.items():
        os.environ[k] = v
    cfg = SweepConfig(
        workload=Workload(device="cpu", engine="exec", command=f"{sys.executable} {prog}"),
        modes=["exclusive"],
        particles=[1, 2, 3],
        repeats=1,
        warmup_repeats=0,
        progress=False,
        telemetry_interval_s=None,
        command=["test"],
    )
    try:
        return load_results(run_sweep(cfg, tmp_path / "out"))
    finally:
        for k in env:
            os.environ.pop(k)


@pytest.mark.slow
def test_a_serving_program_takes_every_cell_in_one_process(tmp_path):
    df = sweep(tmp_path, SERVING)
    assert (df["cell_status"] == "ok").all(), df["cell_error"].tolist()
    assert sorted(df["warm_cells"]) == [0, 1, 2]  # one program: it served the cells before each
    pids = {json.loads(p.read_text())["extra"]["pid"] for p in (tmp_path / "out" / "cells").glob("*/record.0.json")}
    assert len(pids) == 1
    assert sorted(df["particles"]) == [1, 2, 3]


@pytest.mark.slow
def test_a_program_that_does_not_serve_starts_fresh_every_cell(tmp_path):
    df = sweep(tmp_path, PLAIN)
    assert (df["cell_status"] == "ok").all(), df["cell_error"].tolist()
    assert list(df["warm_cells"]) == [0, 0, 0]


@pytest.mark.slow
def test_a_serving_program_that_fails_fails_its_cell_and_the_next_starts_fresh(tmp_path):
    df = sweep(tmp_path, SERVING, FAIL_AT="2")
    assert list(df["cell_status"]) == ["ok", "failed", "ok"], df["cell_error"].tolist()
    assert "failing on purpose" in df["cell_error"].iloc[1]
    assert df["warm_cells"].iloc[2] == 0  # a new program
    time.sleep(0.3)
    left = [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path / "prog.py") in (p.info["cmdline"] or [])]
    assert left == []
