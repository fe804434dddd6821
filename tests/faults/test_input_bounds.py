"""Bounded input (issue 27): what an ``--exec`` program hands back has size limits. A result file over
1 MiB, or a value in it over 4 KiB, fails the replica with the limit named, and the oversized file is not
kept in the cell's folder; a burst record over its limits is refused naming them. Real programs, real cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sharebench.errors import UserError
from sharebench.sharing import cell_run, run_cell
from sharebench.workloads import ReplicaJob, Workload
from sharebench.workloads.bursts import MAX_BURST_LINE_BYTES, MAX_BURST_LINES, read_bursts
from sharebench.workloads.protocol import MAX_RESULT_BYTES, MAX_RESULT_VALUE_BYTES
from support.contexts import device_of

pytestmark = [pytest.mark.faults]

# a protocol program whose result carries an extra value of $BIG bytes
BIG_RESULT = """#!/usr/bin/env python3
import json, os, time
from pathlib import Path
Path(os.environ["SHAREBENCH_READY_FILE"]).touch()
while not Path(os.environ["SHAREBENCH_START_FILE"]).exists():
    time.sleep(0.01)
now = time.time()
doc = {"start": now, "end": now + 0.01, "work": 1, "unit": "op", "blob": "x" * int(os.environ["BIG"])}
Path(os.environ["SHAREBENCH_RESULT_FILE"]).write_text(json.dumps(doc))
"""


def run_big(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, big: int) -> tuple[list[dict], Path]:
    prog = tmp_path / "big.py"
    prog.write_text(BIG_RESULT)
    prog.chmod(0o755)
    monkeypatch.setenv("BIG", str(big))
    cfg = ReplicaJob.of(Workload(engine="exec", device="cpu", command=str(prog)), particles=1, turns=1)
    cell = tmp_path / "cell"
    recs = run_cell(cell_run("timeslice:2", cfg, cell, device=device_of("cpu"), run_timeout_s=60))
    return recs, cell


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_result_file_over_the_limit_fails_the_replica_and_is_not_kept(tmp_path, monkeypatch):
    recs, cell = run_big(tmp_path, monkeypatch, 3 * MAX_RESULT_BYTES)  # 3 MiB: the 300 MiB case, smaller
    assert [r["status"] for r in recs] == ["failed", "failed"]
    for r in recs:
        assert f"allowed: at most {MAX_RESULT_BYTES} bytes (1 MiB)" in r["error"], r["error"]
        assert r["cell_status"] == "failed"
    assert folder_bytes(cell) < 200_000  # neither the file nor its value copied into the records


def test_a_value_over_the_limit_fails_the_replica_naming_it(tmp_path, monkeypatch):
    recs, cell = run_big(tmp_path, monkeypatch, 2 * MAX_RESULT_VALUE_BYTES)
    assert [r["status"] for r in recs] == ["failed", "failed"]
    for r in recs:
        assert "value of 'blob'" in r["error"] and f"at most {MAX_RESULT_VALUE_BYTES} bytes per value" in r["error"]
    assert folder_bytes(cell) < 200_000


def test_a_value_within_the_limit_is_kept(tmp_path, monkeypatch):
    recs, _ = run_big(tmp_path, monkeypatch, MAX_RESULT_VALUE_BYTES // 2)
    assert [r["status"] for r in recs] == ["ok", "ok"], recs[0]["error"]


def burst_file(path: Path, lines: list[str]) -> Path:
    header = json.dumps({"kind": "bursts", "schema_version": 1, "pattern": "think:1ms"})
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def burst(i: int) -> str:
    return json.dumps({"i": i, "arrival": 1.0, "start": 1.0, "end": 2.0, "units": 1})


def test_a_burst_record_with_too_many_lines_is_refused(tmp_path):
    path = burst_file(tmp_path / "b.jsonl", [burst(0)] * MAX_BURST_LINES)  # + the header: one over
    with pytest.raises(UserError, match=f"lines; allowed: at most {MAX_BURST_LINES}$"):
        read_bursts(path)
    assert len(read_bursts(burst_file(tmp_path / "ok.jsonl", [burst(0)] * 1000))[1]) == 1000


def test_a_burst_record_line_over_the_limit_is_refused(tmp_path):
    long_line = json.dumps({"i": 0, "arrival": 1.0, "start": 1.0, "end": 2.0, "units": 1, "x": "y" * 5000})
    with pytest.raises(UserError, match=f"line 2 is \\d+ characters; allowed: at most {MAX_BURST_LINE_BYTES}$"):
        read_bursts(burst_file(tmp_path / "b.jsonl", [long_line]))
