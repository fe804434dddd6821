"""`sharebench probe split`'s document on the CPU: what a GPU run would record (probe pairs alone, raw records
beside each neighbour, the work, the machine state) is enough to recompute its table with `--from`, the same
rows; a recorded command names the work of its document (tools.split_tables)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from sharebench.analysis.timeslice_split import SPLIT_COLUMNS
from sharebench.cli import build_parser, main
from sharebench.cli.probe import split_options
from sharebench.cli.probe_cmd import split_document, workload_job
from sharebench.telemetry.provenance import MACHINE_STATE_FIELDS, collect
from sharebench.telemetry.timeslice_probe import BesideRun, ProbeTrace, analyse
from support.paths import ROOT
from tools import split_tables

MS = 1_000_000  # ns


def alternating(slice_ms: float, switch_ms: float, periods: int, seed: int, neighbour: str) -> list[ProbeTrace]:
    """Two processes taking turns on one GPU: slices of ``slice_ms``, switches of ``switch_ms`` (jittered by
    a few microseconds, as the H200's are), each process's gaps the other's slice and the two switches."""
    rng = np.random.default_rng(seed)
    t, runs = 0, ([], [])
    for k in range(2 * periods):
        runs[k % 2].append((t, t + int(slice_ms * MS)))
        t += int(slice_ms * MS) + int((switch_ms + rng.normal(0, 0.002)) * MS)
    traces = []
    for p, mine in enumerate(runs):
        gaps = tuple((a[1], b[0]) for a, b in zip(mine, mine[1:]))
        traces.append(
            ProbeTrace(
                p,
                100 + p,
                mine[0][0],
                mine[-1][1],
                gaps,
                len(gaps),
                neighbour=neighbour,
                uuid="GPU-test",
                device_name="NVIDIA H200",
            )
        )
    return traces


def beside(slice_ms: float, switch_ms: float, rate: float, seed: int, neighbour: str) -> tuple[BesideRun, float]:
    """One workload replica beside one probe: the probe's trace and the workload's window inside it; and
    the workload's time alone when it progresses at ``rate`` inside its slices."""
    probe, workload = alternating(slice_ms, switch_ms, 400, seed, neighbour)
    lo, hi = workload.first_ns, workload.last_ns
    record = {"track_start": lo / 1e9, "track_end": hi / 1e9, "track_s": (hi - lo) / 1e9}
    on_gpu_s = sum(b - a for a, b in workload.slices()) / 1e9
    return BesideRun(record, probe), rate * on_gpu_s


def test_a_document_recomputes_to_the_same_rows_with_from(tmp_path, capsys):
    argv = ["probe", "split", "--device", "cpu", "--particles", "1e6", "--turns", "1", "--from", "recorded.json"]
    args = build_parser("probe").parse_args(argv)
    job = workload_job(args, split_options(args))
    neighbours = {"light": (2.09, 0.151), "heavy:128": (2.04, 0.243)}
    probes = {k: analyse(alternating(sl, sw, 300, 1, k), seconds=2.0) for k, (sl, sw) in neighbours.items()}
    runs: dict[str, list[BesideRun]] = {k: [] for k in neighbours}
    t1 = []
    for i in range(3):
        for k, (sl, sw) in neighbours.items():
            run, alone = beside(sl, sw, 0.82 + 0.005 * i, 10 + i, k)
            runs[k].append(run)
        t1.append(alone)
    tn = [2 * a * 1.36 * (1 + 0.001 * i) for i, a in enumerate(t1)]
    doc = split_document(job, 2, (t1, tn), probes, runs)
    doc["provenance"] = collect({"kind": "cpu", "backend": "cpu", "name": "cpu", "uuid": None, "spec": "cpu"})
    path = tmp_path / "split.json"
    path.write_text(json.dumps(doc, default=str))
    # what a GPU run keeps: the raw record of every run beside each neighbour, the probes' percentiles, the work
    assert {len(v) for v in doc["beside"].values()} == {3} and doc["beside"]["light"][0]["gaps_ms"]
    assert doc["beside"]["heavy:128"][0]["probe_switch"]["n"] > 100 and doc["work"]["particles"] == 1_000_000
    assert set(MACHINE_STATE_FIELDS) <= set(doc["provenance"]["machine_state"])
    table = tmp_path / "t.csv"
    assert main(["probe", "split", "--from", str(path), "--table", str(table)]) == 0
    again = tmp_path / "again.csv"
    assert main(["probe", "split", "--from", str(path), "--table", str(again)]) == 0
    # the measuring machine's --lattice only names the work: a recomputation elsewhere needs no such file
    gone = tmp_path / "elsewhere" / "lhc.json.gz"
    assert (
        main(["probe", "split", "--from", str(path), "--table", str(tmp_path / "l.csv"), "--lattice", str(gone)]) == 0
    )
    out = capsys.readouterr().out
    assert "probe pair alone (slice and switch, no workload)" in out and "transfer from the time-sliced run" in out
    t = pd.read_csv(table)
    assert list(t.columns) == SPLIT_COLUMNS and len(t) == 1 and t.loc[0, "neighbour"] == "heavy:128"
    assert table.read_text() == again.read_text()
    r = t.iloc[0]
    assert r["independent_pct"] == pytest.approx(100 * 0.243 / 2.04, rel=0.01)
    assert r["switch_ms_ci_low"] < r["switch_ms"] < r["switch_ms_ci_high"]  # the probe's spread, never zero width
    assert r["in_slice_rate"] == pytest.approx(0.825, abs=0.01) and math.isfinite(r["refill_ms"])
    assert r["predicted_ci_low"] < r["predicted_loss_pct"] < r["predicted_ci_high"]


def test_a_recorded_command_names_its_documents_work():
    folder = ROOT / "tests" / "data" / "results" / "timeslice-split" / "GPU-9479f04d"  # a copy of 2026-12-04's
    [(doc, argv)] = split_tables.split_commands(folder)
    assert doc.name == "st_5M_1turn.json" and "--lattice" in argv and "--exec" not in argv


def test_a_folder_of_documents_that_record_their_work_rebuilds_without_commands(tmp_path):
    folder = ROOT / "tests" / "data" / "results" / "timeslice-split" / "GPU-9479f04d"
    doc = json.loads((folder / "st_5M_1turn.json").read_text())
    work = dict(engine="simpletrack", backend="cuda", device_class="gpu", lattice="lhc_simpletrack_7tev.json.gz")
    (tmp_path / "st_5M_1turn.json").write_text(
        json.dumps({**doc, "work": {**work, "particles": 5_000_000, "turns": 1}})
    )
    assert split_tables.split_commands(tmp_path) == [(tmp_path / "st_5M_1turn.json", [])]
    assert split_tables.stale(tmp_path).endswith("tables/timeslice_split.csv missing")
    assert split_tables.main(["--write", str(tmp_path)]) == 0 and split_tables.stale(tmp_path) == ""
    row = pd.read_csv(tmp_path / "tables" / "timeslice_split.csv").iloc[0]
    assert (row["particles"], row["neighbour"]) == (5_000_000, "heavy:128")
