"""`sharebench run` / `sharebench report`: exact exit codes and one-line messages."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from sharebench.cli import main
from sharebench.results import ResultsWriter
from support.crafted import crafted_rows
from support.lattices import tiny_lattice

pytestmark = pytest.mark.slow  # real replica processes and sweeps

MODES = "exclusive, timeslice:N[/INTERVAL], mps:N[@PCT], mig:LAYOUT, mig-emulated:LAYOUT, partition:N"
PARTICLES = "allowed: whole numbers > 0 such as 10000 or 5e6"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--modes", "bogus"], f"unknown sharing mode 'bogus'; allowed: {MODES}"),
        (["--modes", "exclusive,timeslice:0"], "replica count must be >= 1 in 'timeslice:0'"),
        (["--modes", "timeslice:two"], "bad replica count in 'timeslice:two'; allowed: an integer N >= 1"),
        (["--particles", "0"], f"bad particle count '0'; {PARTICLES}"),
        (["--particles=-5"], f"bad particle count '-5'; {PARTICLES}"),
        (["--particles", "1e4,lots"], f"bad particle count 'lots'; {PARTICLES}"),
        (["--turns", "0"], "bad --turns '0'; allowed: a whole number 1..1000000000"),
        (["--repeats", "x"], "bad --repeats 'x'; allowed: a whole number 1..1000"),
        (["--device", "tpu"], "bad device 'tpu': allowed are auto, cpu, cuda[:N], opencl[:P.D]"),
        (
            ["--device", "cpu", "--modes", "mps:2"],
            "mps:2 needs an NVIDIA GPU (--device cuda, or NVIDIA's OpenCL); the device is cpu ({cpu}): MPS exists only "
            "on NVIDIA GPUs",
        ),
        (
            ["--device", "cpu", "--modes", "mig:1g"],
            "mig:1g needs an NVIDIA GPU through CUDA (--device cuda); the device is cpu ({cpu})",
        ),
        (
            ["--device", "cpu", "--modes", "partition:99"],
            "partition:99 needs at least 99 cores; this process may use {ncores} ({cpus})",
        ),
        (
            ["--device", "cpu", "--particles", "1e12"],
            # 1e12 x 96 B + 67,108,864 B overhead = 96,000,067,108,864 B
            "exclusive at 1,000,000,000,000 particles: 1,000,000,000,000 particles need 96,000,067,108,864 bytes with the "
            "simpletrack engine (96 B/particle + 67,108,864 B overhead) but the device memory is {mem:,} bytes; at most "
            "{most:,} particles fit",
        ),
        (
            ["--lattice", "/nonexistent.json"],
            "lattice file '/nonexistent.json' not found; give an Xsuite line JSON or JSON.gz",
        ),
    ],
)
def test_run_bad_input(argv, message, capsys, tmp_path):
    from sharebench.devices import resolve_device
    from sharebench.parse import format_cpu_set as format_cpus

    cpu = resolve_device("cpu")
    cpus = sorted(os.sched_getaffinity(0))
    expected = message.format(
        cpu=cpu.name,
        ncores=len(cpus),
        cpus=format_cpus(cpus),
        mem=cpu.memory_bytes,
        most=(cpu.memory_bytes - 67_108_864) // 96,
    )
    out = tmp_path / "out"
    assert main(["run", "--out", str(out), "--no-progress", *argv]) == 2
    assert capsys.readouterr().err == f"sharebench: error: {expected}\n"
    assert not out.exists()  # nothing ran, nothing written


def test_run_refuses_a_folder_with_results(capsys, tmp_path):
    ResultsWriter(tmp_path).append(crafted_rows()[:1])
    assert main(["run", "--device", "cpu", "--out", str(tmp_path), "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"sharebench: error: {tmp_path} already holds results.csv; use --resume to continue it, or another --out\n"
    )


def test_report_command(capsys, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    ResultsWriter(a).append(crafted_rows())
    ResultsWriter(b).append(crafted_rows())
    assert main(["report", str(a)]) == 0
    assert capsys.readouterr().out == f"report: {a}/report.html  ({a}/report.md)\n"
    # --compare used to overwrite a's report with b beside it: refused, pointing at `sharebench compare`
    before = (a / "report.md").read_text()
    assert main(["report", str(a), "--compare", str(b)]) == 2
    assert capsys.readouterr().err == (
        f"sharebench: error: report --compare is gone: run `sharebench compare {a} "
        f"{b}` (differences per cell, never overwriting a report)\n"
    )
    assert (a / "report.md").read_text() == before
    assert main(["report", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == f"sharebench: error: results folder {tmp_path}/none does not exist\n"
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert capsys.readouterr().err == (
        f"sharebench: error: no results file at {tmp_path}/empty/results.csv; run `sharebench run --out DIR` first\n"
    )


def test_entry_point_prints_one_line_without_traceback(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "sharebench", "run", "--modes", "timeslice:0", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 2
    assert p.stderr == "sharebench: error: replica count must be >= 1 in 'timeslice:0'\n"


def test_dry_run_prints_the_plan_and_runs_nothing(capsys, tmp_path):
    lat = tiny_lattice(tmp_path / "fodo.json")
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                "--dry-run",
                "--device",
                "cpu",
                "--modes",
                "timeslice:4",
                "--particles",
                "1e3,2e3",
                "--repeats",
                "2",
                "--lattice",
                str(lat),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out.splitlines()
    assert "modes:     exclusive (1 replica), timeslice:4 (4 replicas)" in text
    assert "particles: 1,000, 2,000 per replica, 10 turns" in text
    # (2 measured + 1 warm-up) x 2 sizes x 2 modes = 12 cells, 3 x 2 x (1 + 4) = 30 replica runs
    assert "cells:     12 (30 replica runs)" in text
    assert (
        "cost:      about 5 exclusive runs per particle count and repeat; 15 per particle count in all "
        "(15 x 1,000, 15 x 2,000)"
    ) in text
    assert "note: added 'exclusive': every loss needs the T_1 baseline" in text
    assert not out.exists()


def test_run_writes_a_results_folder(capsys, tmp_path):
    lat = tiny_lattice(tmp_path / "fodo.json")
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                "--device",
                "cpu",
                "--modes",
                "exclusive",
                "--particles",
                "2000",
                "--turns",
                "20",
                "--repeats",
                "1",
                "--warmup-repeats",
                "0",
                "--lattice",
                str(lat),
                "--out",
                str(out),
                "--no-progress",
                "--no-telemetry",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out.splitlines()
    assert printed[:3] == [f"results: {out}/results.csv", f"report:  {out}/report.html  ({out}/report.md)", "Answer:"]
    # the end screen: the Answer's lines (one repeat: no interval, not trusted) and the counts
    assert printed[3].startswith("  exclusive (2,000 particles): the baseline, throughput 1.00×")
    assert "trust: 1 repeat(s) < 3: no interval" in printed[3]
    # flags: the few-repeats one, and a 'disturbed' one where other jobs keep this machine busy
    assert re.fullmatch(
        r"cells: 1 measured, 0 failed; flags: [12] \(see the report\), 1 mode\(s\) not to be "
        r"trusted as measured",
        printed[-1],
    ), printed[-1]
    for name in ("results.csv", "provenance.json", "sweep.json", "report.md", "report.html", "tables/throughput.csv"):
        assert (out / name).exists(), name


def test_run_where_every_cell_failed_exits_1(capsys, tmp_path):
    """Every cell stopped by --run-timeout: the sweep still writes its report, prints why, and exits 1."""
    lat = tiny_lattice(tmp_path / "fodo.json")
    out = tmp_path / "out"
    status = main(
        [
            "run",
            "--device",
            "cpu",
            "--modes",
            "exclusive,timeslice:2",
            "--particles",
            "20000",
            "--turns",
            "100000",
            "--repeats",
            "1",
            "--warmup-repeats",
            "0",
            "--lattice",
            str(lat),
            "--run-timeout",
            "0.5",
            "--out",
            str(out),
            "--no-progress",
            "--no-telemetry",
        ]
    )
    printed = capsys.readouterr().out.splitlines()
    assert status == 1, printed
    assert "  none: no cell was measured" in printed
    assert printed[-1].startswith("cells: 0 measured, 2 failed;")
    assert (out / "report.md").read_text().split("\n## ")[1].startswith("Answer\n\nNo mode was measured")
