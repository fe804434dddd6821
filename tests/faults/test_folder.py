"""The results folder as a store: resume continues the folder's own sweep, a torn tail is set aside,
user files are never overwritten, file errors are one line naming the file."""

from __future__ import annotations

import json

import pytest

from sharebench.results import load_results
from support.faults import one_line_error, sharebench, sweep_argv

pytestmark = [pytest.mark.faults, pytest.mark.slow]


@pytest.fixture(scope="module")
def measured(lattice, tmp_path_factory):
    """A folder with one measured cell (repeat 1 of 2), as --stop-after leaves it."""
    out = tmp_path_factory.mktemp("m") / "r"
    p = sharebench(*sweep_argv(lattice, out, "--repeats", "2", "--turns", "30", "--stop-after", "0.01"))
    assert p.returncode == 0, p.stderr
    return out


def copy_of(measured, tmp_path):
    import shutil

    dst = tmp_path / "r"
    shutil.copytree(measured, dst)
    return dst


def test_resume_alone_continues_the_folders_own_sweep(measured, tmp_path):
    out = copy_of(measured, tmp_path)
    before = (out / "results.csv").read_bytes()
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode == 0, p.stderr
    df = load_results(out)
    assert df["cell_id"].tolist() == ["exclusive_p2000_r1", "exclusive_p2000_r2"]
    assert set(df["turns"]) == {30} and df["work_key"].str.len().eq(16).all()
    assert (out / "results.csv").read_bytes().startswith(before)  # the first row, byte for byte
    last = json.loads((out / "sweep.json").read_text())["sweeps"][-1]
    assert last["config"]["repeats"] == 2 and last["turns"] == 30


@pytest.mark.parametrize(
    "change, message",
    [
        (["--turns", "40"], "was measured with --turns 30, this run has 40"),
    ],
)
def test_resume_with_changed_options_is_refused(measured, tmp_path, change, message):
    out = copy_of(measured, tmp_path)
    before = (out / "results.csv").read_bytes()
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress", *change)
    assert p.returncode == 2
    assert message in one_line_error(p.stderr)
    assert (out / "results.csv").read_bytes() == before


def test_resume_with_another_lattice_is_refused(measured, tmp_path, lattice):
    from support.lattices import tiny_lattice

    out = copy_of(measured, tmp_path)
    other = tiny_lattice(tmp_path / "other.json", cells=10)
    p = sharebench("run", "--resume", "--out", str(out), "--lattice", str(other), "--no-progress")
    assert p.returncode == 2
    assert "was measured with --lattice (its content)" in one_line_error(p.stderr)


def test_a_torn_tail_is_set_aside_and_its_cell_runs_again(measured, tmp_path):
    out = copy_of(measured, tmp_path)
    csv = out / "results.csv"
    whole = csv.read_bytes()
    second = whole.splitlines(keepends=True)[1].replace(b"_r1,", b"_r2,")
    csv.write_bytes(whole + second[: len(second) // 2])  # a disk that filled mid-append
    assert load_results(out)["cell_id"].tolist() == ["exclusive_p2000_r1"]  # the tail is never parsed
    p = sharebench("report", str(out))
    assert p.returncode == 0, p.stderr
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode == 0, p.stderr
    assert load_results(out)["cell_id"].tolist() == ["exclusive_p2000_r1", "exclusive_p2000_r2"]
    assert (out / "results-torn.txt").read_bytes() == second[: len(second) // 2] + b"\n"
    assert "torn row" in (out / "notes.txt").read_text()
    assert csv.read_bytes().startswith(whole)


def test_user_files_are_never_overwritten(lattice, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "report.md").write_text("my own notes\n")
    p = sharebench(*sweep_argv(lattice, out, "--repeats", "1"))
    assert p.returncode == 2
    assert one_line_error(p.stderr) == (
        f"sharebench: error: {out} is not empty (it holds report.md); sharebench writes only into a new or empty "
        "folder: give another --out, or --resume to continue a sharebench results folder"
    )
    assert (out / "report.md").read_text() == "my own notes\n"


def test_out_that_is_a_file(lattice, tmp_path):
    f = tmp_path / "afile"
    f.write_text("x")
    p = sharebench(*sweep_argv(lattice, f, "--repeats", "1"))
    assert p.returncode == 2
    assert one_line_error(p.stderr) == (
        f"sharebench: error: --out {f} is a file, not a folder; give a folder path (it is created if missing)"
    )


def test_garbage_results_and_torn_sweep_json_are_one_line(measured, tmp_path):
    out = copy_of(measured, tmp_path)
    (out / "sweep.json").write_text((out / "sweep.json").read_text()[:50])
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress")
    assert p.returncode == 2
    assert one_line_error(p.stderr).startswith(f"sharebench: error: {out}/sweep.json is not valid JSON")
    (out / "results.csv").write_bytes(b"schema_version,cell_id\n\xff\xfe\x00garbage\x81,\x00\n")
    p = sharebench("report", str(out))
    assert p.returncode == 2
    assert one_line_error(p.stderr).startswith(f"sharebench: error: {out}/results.csv is not a readable results CSV")


def test_report_and_compare_work_from_results_csv_when_sweep_json_is_torn(measured, tmp_path):
    """A torn sweep.json beside an intact results.csv: report and compare work from the rows, and say so
    in one warning line; the rows are unchanged (nothing is flagged by a list that cannot be read)."""
    out = copy_of(measured, tmp_path)
    (out / "sweep.json").write_text((out / "sweep.json").read_text()[:50])
    before = (out / "results.csv").read_bytes()
    p = sharebench("report", str(out))
    assert p.returncode == 0, p.stderr
    warning = f"sharebench: warning: {out}/sweep.json is not valid JSON"
    assert one_line_error(p.stderr).startswith(warning)
    assert "Traceback" not in p.stderr
    assert "unlisted" not in (out / "report.md").read_text()
    assert (out / "results.csv").read_bytes() == before
    p = sharebench("compare", str(measured), str(out))
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("warning:") == 1 and warning in p.stderr, p.stderr
