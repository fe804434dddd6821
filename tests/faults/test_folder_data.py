"""A results folder is data, never code, and nothing happens silently (issue 27): resume runs only the
program the command line names, checks the rows themselves, refuses what it cannot prove; a missing
folder, no folder at all, a finished one, a binary results.csv, ``compare --out FILE`` and a bad
``submit --param`` each answer in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from sharebench.results import ResultsWriter, append_sweep, load_results
from support.crafted import crafted_rows
from support.faults import one_line_error, sharebench, sweep_argv

pytestmark = [pytest.mark.faults]


def in_dir(cwd, *argv: str) -> subprocess.CompletedProcess:
    """`sharebench ARGV` run from ``cwd`` (where the default results root is)."""
    return subprocess.run(
        [sys.executable, "-m", "sharebench", *argv], capture_output=True, text=True, timeout=300, cwd=cwd
    )


def exec_folder(path, command: str):
    """A folder an exec sweep of ``command`` wrote (its sweep.json; nothing measured yet)."""
    path.mkdir()
    workload = {"engine": "exec", "device": "cpu", "command": command, "timing": "protocol"}
    append_sweep(path, {"sweep_id": "s1", "config": {"modes": ["exclusive"], "particles": [10], "workload": workload}})
    return path


def test_an_exec_folder_never_names_the_program(tmp_path):
    marker = tmp_path / "ran"
    out = exec_folder(tmp_path / "r", f"touch {marker}")  # an edited sweep.json: the folder says what to run
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode == 2
    assert one_line_error(p.stderr) == (
        f"sharebench: error: --resume of the exec sweep in {out} needs --exec: a results folder never names the "
        f"program to run (the folder ran --exec 'touch {marker}'); give --engine exec --exec with that command"
    )
    p = sharebench("run", "--resume", "--out", str(out), "--engine", "exec", "--exec", "sleep 0", "--no-progress")
    assert p.returncode == 2
    assert one_line_error(p.stderr) == (
        f"sharebench: error: --resume: {out} ran --exec 'touch {marker}', this run gives --exec 'sleep 0'; "
        "resume with the folder's command, or measure another program in another --out"
    )
    assert not marker.exists()


def test_resume_of_a_missing_folder_is_refused(tmp_path):
    p = sharebench("run", "--resume", "--out", str(tmp_path / "nope"), "--no-progress")
    assert p.returncode == 2
    assert one_line_error(p.stderr) == (
        f"sharebench: error: --resume: no results folder at {tmp_path / 'nope'}; give an existing folder, "
        "or run without --resume"
    )
    assert not (tmp_path / "nope").exists()
    (tmp_path / "empty").mkdir()
    p = sharebench("run", "--resume", "--out", str(tmp_path / "empty"), "--no-progress")
    assert p.returncode == 2
    assert "holds no sharebench sweep (no results.csv, no sweep.json)" in one_line_error(p.stderr)


def test_resume_without_out_takes_the_newest_folder_and_says_so(tmp_path):
    p = in_dir(tmp_path, "run", "--resume", "--no-progress")
    assert p.returncode == 2
    assert one_line_error(p.stderr) == (
        "sharebench: error: --resume without --out: there is no results folder under sharebench-results/ to "
        "continue; give --out DIR"
    )
    assert not (tmp_path / "sharebench-results").exists()
    root = tmp_path / "sharebench-results"
    for name in ("20250101T000000Z", "20250102T000000Z"):
        ResultsWriter(root / name)  # creates the folder
        (root / name / "results.csv").write_bytes(b"schema_version,cell_id\n" + bytes(range(128, 256)) + b"\n")
    p = in_dir(tmp_path, "run", "--resume", "--no-progress")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.splitlines() == [
        "sharebench: --resume without --out: continuing the newest results folder, sharebench-results/20250102T000000Z",
        "sharebench: sharebench-results/20250102T000000Z/sweep.json is gone: continuing from what its results.csv "
        "rows prove",
        "sharebench: error: sharebench-results/20250102T000000Z/results.csv is not a readable results CSV "
        "(UnicodeDecodeError); restore it from a copy, or move it aside and re-run the sweep",
    ]


def test_binary_results_csv_is_one_line(tmp_path):
    out = tmp_path / "r"
    ResultsWriter(out).append(crafted_rows())
    append_sweep(out, {"sweep_id": "crafted", "config": {"modes": ["exclusive"]}})
    header = (out / "results.csv").read_bytes().split(b"\n")[0]
    (out / "results.csv").write_bytes(header + b"\n" + os.urandom(4096) + b"\n")
    p = sharebench("run", "--resume", "--out", str(out), "--device", "cpu", "--no-progress", "--no-telemetry")
    assert p.returncode == 2
    assert one_line_error(p.stderr).startswith(f"sharebench: error: {out}/results.csv is not a readable results CSV")
    (out / "results.csv").write_bytes(b"schema_version,\xff\xfe\n")  # a header that is not UTF-8
    with pytest.raises(Exception, match="its header is not UTF-8 CSV"):
        ResultsWriter(out)


def test_compare_out_an_existing_file_is_one_line(tmp_path):
    a, b, f = tmp_path / "a", tmp_path / "b", tmp_path / "afile"
    ResultsWriter(a).append(crafted_rows())
    ResultsWriter(b).append(crafted_rows())
    f.write_text("mine\n")
    p = sharebench("compare", str(a), str(b), "--out", str(f))
    assert p.returncode == 2
    assert one_line_error(p.stderr) == (
        f"sharebench: error: --out {f} is a file, not a folder; give a folder (it is created if missing)"
    )
    assert f.read_text() == "mine\n"


@pytest.mark.parametrize(
    "param, message",
    [
        ("particle_counts=abc", "--param: bad particle count 'abc'; allowed: whole numbers > 0"),
        ("modes=exclusive,bogus:3", "--param: unknown sharing mode 'bogus:3'"),
        ("repeats=0", "--param: bad repeats 0; allowed: a whole number >= 1"),
        ("start_delay_s=inf", "--param: bad start_delay_s inf"),
    ],
)
def test_submit_checks_every_argument_locally(param, message):
    # no cluster at that address: the refusal comes before any connection
    p = sharebench("submit", "--host", "http://127.0.0.1:9", "--param", param)
    assert p.returncode == 2
    assert message in one_line_error(p.stderr)


def test_rows_of_a_sweep_the_folder_does_not_list_are_flagged(tmp_path):
    out = tmp_path / "r"
    rows = crafted_rows()
    ResultsWriter(out).append(rows)
    append_sweep(out, {"sweep_id": "crafted", "config": {}})
    measured = next(r for r in rows if int(r["repeat"]) >= 1)
    foreign = [{**measured, "sweep_id": "elsewhere", "cell_id": measured["cell_id"] + "x"}]
    ResultsWriter(out).append(foreign)
    p = sharebench("report", str(out))
    assert p.returncode == 0, p.stderr
    flags = pd.read_csv(out / "tables" / "flags.csv")
    unlisted = flags[flags["kind"] == "unlisted"]
    assert unlisted["cell_id"].tolist() == [foreign[0]["cell_id"]] and unlisted["excluded"].all()
    cells = pd.read_csv(out / "tables" / "cells.csv")
    assert cells.loc[cells["sweep_id"] == "elsewhere", "excluded"].all()
    assert not cells.loc[cells["sweep_id"] == "crafted", "flags"].fillna("").str.startswith("unlisted").any()


# ------------------------------------------------------------------ real sweeps


@pytest.fixture(scope="module")
def two_turns(lattice, tmp_path_factory):
    """A finished folder: 2 repeats of one cell, 2 turns."""
    out = tmp_path_factory.mktemp("t") / "r"
    p = sharebench(*sweep_argv(lattice, out, "--repeats", "2", "--turns", "2"))
    assert p.returncode == 0, p.stderr
    return out


def last_line(stderr: str) -> str:
    """The refusal after the notice that sweep.json is gone (no traceback)."""
    assert "Traceback" not in stderr and "sweep.json is gone" in stderr.splitlines()[0], stderr
    return stderr.splitlines()[-1]


def copy_of(folder, tmp_path):
    import shutil

    return shutil.copytree(folder, tmp_path / "r")


@pytest.mark.slow
def test_without_sweep_json_resume_continues_only_what_the_rows_prove(two_turns, tmp_path, lattice):
    out = copy_of(two_turns, tmp_path)
    (out / "sweep.json").unlink()
    before = (out / "results.csv").read_bytes()
    p = sharebench("run", "--resume", "--turns", "5", "--lattice", lattice, "--out", str(out), "--no-progress")
    assert p.returncode == 2
    assert last_line(p.stderr) == (
        f"sharebench: error: --resume: the rows of simpletrack in {out} were measured with --turns 2, this run "
        "has 5; resume without changing it, or give another --out"
    )
    assert not (out / "sweep.json").exists() and (out / "results.csv").read_bytes() == before
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress")  # the lattice's path: not in the rows
    assert p.returncode == 2
    assert "they were measured on lattice fodo.json: give --lattice PATH" in last_line(p.stderr)
    p = sharebench("run", "--resume", "--repeats", "3", "--lattice", lattice, "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    df = load_results(out)
    assert df["cell_id"].tolist() == [f"exclusive_p2000_r{i}" for i in (1, 2, 3)] and set(df["turns"]) == {2}
    assert json.loads((out / "sweep.json").read_text())["sweeps"][-1]["turns"] == 2


@pytest.mark.slow
def test_a_finished_folder_says_nothing_to_do(two_turns, tmp_path):
    out = copy_of(two_turns, tmp_path)
    before = {p.name: p.read_bytes() for p in (out / "results.csv", out / "sweep.json")}
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(f"nothing to do: every cell of this sweep in {out} is measured (2 cells)")
    assert {n: (out / n).read_bytes() for n in before} == before
    p = sharebench("run", "--resume", "--turns", "3", "--out", str(out), "--no-progress")  # not the same work
    assert p.returncode == 2 and "was measured with --turns 2, this run has 3" in one_line_error(p.stderr)


@pytest.mark.slow
def test_a_resume_that_repaired_every_failed_cell_exits_0(two_turns, tmp_path):
    out = copy_of(two_turns, tmp_path)
    df = pd.read_csv(out / "results.csv", dtype=str, keep_default_na=False)
    last = df["cell_id"] == "exclusive_p2000_r2"
    df.loc[last, ["status", "cell_status", "error"]] = ["failed", "failed", "killed by a test"]
    df.to_csv(out / "results.csv", index=False)
    p = sharebench("report", str(out))
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode == 0, p.stderr
    assert "cells: 2 measured, 0 failed" in p.stdout
    flags = pd.read_csv(out / "tables" / "flags.csv")
    rerun = flags[flags["kind"] == "rerun"]
    assert rerun["cell_id"].tolist() == ["exclusive_p2000_r2"] and "killed by a test" in rerun["flag"].iloc[0]
