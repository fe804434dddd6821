"""advise refuses what it cannot read, before it writes (issue 46 item 4; issue 43 item 5's advise lines).

Every input the audit fed it: ``--out`` holding a user's files or naming a file, timestamps in nanoseconds
(and milliseconds, microseconds, relative seconds), one sample at ``time=1`` among current epochs, two rows
for one (time, pod), ``--check 1.5``, a file with its first lines cut, a text time; plus a usage that names
no GPU model, the ``--class`` grammar, and the streamed reading itself (chunk boundaries). Each refusal is
one line, exit 2, with nothing written and the usage file unchanged.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sharebench.advise import reading
from sharebench.advise.reading import read_usage_csv, usage_from_rows
from sharebench.advise.synthetic import pool16, synthetic_trace, synthetic_usage
from sharebench.cli import main
from sharebench.errors import UserError
from tests.advise.test_advise import results_folder


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Path]:
    """(a usage CSV of 16 GPUs over 2.4 hours, a results folder of the H200)."""
    path = tmp_path / "u.csv"
    synthetic_usage(pool16(), 0.1, seed=1).to_csv(path, index=False)
    return path, results_folder(tmp_path / "r")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def refused(capsys, argv: list[str], match: str) -> str:
    """Runs the command; asserts exit 2 with one line naming ``match``; the line."""
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert match in err and err.count("\n") == 1, err
    return err


def advise_argv(site: tuple[Path, Path], out: Path, *more: str) -> list[str]:
    usage, results = site
    return ["advise", "--usage", str(usage), "--results", str(results), "--out", str(out), *more]


# ------------------------------------------------------------------------------------------ --out


def test_out_naming_a_file_is_one_line(site, tmp_path, capsys):
    (tmp_path / "a-file").write_text("mine\n")
    refused(capsys, advise_argv(site, tmp_path / "a-file"), "is a file; give a folder")
    assert (tmp_path / "a-file").read_text() == "mine\n"
    refused(capsys, advise_argv(site, tmp_path / "a-file" / "below"), "is a file, not a folder")


def test_out_holding_a_users_own_files_is_refused_without_force(site, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "advice.md").write_text("my notes\n")
    (out / "assignment.csv").write_text("pod,owner\n")
    (out / "notes.txt").write_text("keep\n")
    before = digest(site[0])
    refused(capsys, advise_argv(site, out), "holds files that are not an advice (notes.txt)")
    assert (out / "advice.md").read_text() == "my notes\n" and not (out / "advice.json").exists()
    assert main([*advise_argv(site, out), "--force"]) == 0
    assert (out / "advice.json").exists() and (out / "notes.txt").read_text() == "keep\n"
    assert digest(site[0]) == before  # the usage file is never modified


def test_out_holding_a_previous_advice_needs_force(site, tmp_path, capsys):
    out = tmp_path / "o"
    assert main(advise_argv(site, out)) == 0
    capsys.readouterr()
    before = (out / "advice.json").read_text()
    refused(capsys, advise_argv(site, out), "already holds an advice")
    assert (out / "advice.json").read_text() == before
    assert main([*advise_argv(site, out), "--force"]) == 0


@pytest.mark.parametrize(
    ("more", "match"),
    [
        (["--check", "1.5"], "bad --check 1.5"),
        (["--check", "0"], "bad --check 0.0"),
        (["--slo", "0.5"], "bad --slo '0.5'"),
        (["--memory-headroom", "2"], "bad --memory-headroom 2.0"),
        (["--gpu-model", "T4"], "unknown GPU model 'T4'"),
        (["--class", "nb"], "bad --class 'nb'"),
        (["--class", "nb=interactive,isolation=maybe"], "bad isolation='maybe'"),
        (["--class", "nb=results=/no/such/folder"], "results=/no/such/folder is no folder"),
        (["--class", "nb=interactive", "--class", "nb=batch"], "--class nb given twice"),
        (["--class", "nb=bursty"], "unknown pattern 'bursty'"),
    ],
)
def test_every_option_is_checked_before_anything_is_written(site, tmp_path, capsys, more, match):
    out = tmp_path / "o"
    refused(capsys, advise_argv(site, out, *more), match)
    assert not out.exists()


def test_check_refused_before_the_advice_is_written_so_the_fix_runs(site, tmp_path, capsys):
    out = tmp_path / "o"
    refused(capsys, advise_argv(site, out, "--check", "1.5"), "0 < F < 1")
    assert not out.exists()
    assert main(advise_argv(site, out, "--check", "0.5")) in (0, 1)  # the corrected command is not refused
    assert (out / "check.json").exists()


# ------------------------------------------------------------------------------------------ times


@pytest.mark.parametrize(("scale", "unit"), [(1e3, "milliseconds"), (1e6, "microseconds"), (1e9, "nanoseconds")])
def test_time_units_are_detected_converted_and_said(tmp_path, scale, unit):
    df = synthetic_trace({"a": ("batch", 2)}, 30)
    seconds = usage_from_rows(df, "s")
    df["time"] = (df["time"] * scale).astype("int64")
    path = tmp_path / "u.csv"
    df.to_csv(path, index=False)
    got = read_usage_csv(path)
    assert got.start == pytest.approx(seconds.start) and got.steps == seconds.steps
    np.testing.assert_array_equal(got.busy, seconds.busy)
    assert any(f"epoch {unit}" in w for w in got.warnings)


def test_times_in_no_unit_are_refused(tmp_path):
    df = synthetic_trace({"a": ("batch", 2)}, 30)
    df["time"] = df["time"] - df["time"].min()  # seconds from 0: no epoch in any unit
    path = tmp_path / "u.csv"
    df.to_csv(path, index=False)
    with pytest.raises(UserError, match="neither epoch seconds") as err:
        read_usage_csv(path)
    assert "\n" not in str(err.value)


def test_a_sample_far_outside_the_window_is_refused_with_its_row(tmp_path):
    """One sample at time=1 among current epochs would make a grid of 29 million steps: refused, naming it."""
    df = synthetic_trace({"a": ("batch", 3)}, 200)
    df.loc[17, "time"] = 1
    path = tmp_path / "u.csv"
    df.to_csv(path, index=False)
    with pytest.raises(UserError, match=r"data row 18: time 1 \(1970-01-01T00:00:01Z\) lies far outside") as err:
        read_usage_csv(path)
    assert "2027-01-15T08:00:00Z to" in str(err.value)


def test_a_text_time_is_reported_with_its_own_value_and_row(tmp_path):
    df = synthetic_trace({"a": ("batch", 2)}, 30).astype({"time": object})
    df.loc[4, "time"] = "yesterday"
    path = tmp_path / "u.csv"
    df.to_csv(path, index=False)
    with pytest.raises(UserError, match=r"data row 5: bad time 'yesterday'"):
        read_usage_csv(path)


def test_iso_and_epoch_times_mixed_read_alike(tmp_path):
    df = synthetic_trace({"a": ("batch", 2)}, 30)
    mixed = df.astype({"time": object})
    mixed.loc[::2, "time"] = pd.to_datetime(df["time"][::2], unit="s", utc=True).map(lambda t: t.isoformat())
    mixed.to_csv(tmp_path / "m.csv", index=False)
    np.testing.assert_array_equal(read_usage_csv(tmp_path / "m.csv").busy, usage_from_rows(df, "df").busy)


# ------------------------------------------------------------------------------------------ duplicates


def test_duplicate_time_pod_rows_merge_by_the_larger_busy_with_a_warning(tmp_path):
    df = synthetic_trace({"a": ("interactive", 3)}, 60, seed=4)
    twice = pd.concat([df, df.iloc[[10]].assign(busy=0.99, memory_bytes=df["memory_bytes"].iloc[10] * 2)])
    path = tmp_path / "u.csv"
    twice.to_csv(path, index=False)
    got, alone = read_usage_csv(path), usage_from_rows(df, "df")
    pod, step = got.pods.index(df["pod"].iloc[10]), 10 % 60
    assert got.busy[pod, step] == pytest.approx(0.99) and alone.busy[pod, step] != pytest.approx(0.99)
    assert got.memory_peak[pod] == pytest.approx(2 * alone.memory_peak[pod])
    (warning,) = [w for w in got.warnings if "duplicate (time, pod)" in w]
    assert "1 duplicate" in warning and "data row 181" in warning and "larger busy" in warning


def test_samples_of_one_step_are_averaged_with_a_warning(tmp_path):
    df = synthetic_trace({"a": ("batch", 1)}, 20)
    extra = df.iloc[[5]].assign(time=df["time"].iloc[5] + 5, busy=0.0)  # 5 s later: the same 60-s step
    got = usage_from_rows(pd.concat([df, extra]), "df")
    assert got.busy[0, 5] == pytest.approx(df["busy"].iloc[5] / 2, abs=1e-6)
    assert any("averaged" in w for w in got.warnings)


def test_a_pod_under_two_classes_keeps_its_first_with_a_warning():
    df = synthetic_trace({"a": ("batch", 1)}, 20)
    df.loc[7, "class"] = "b"
    got = usage_from_rows(df, "df")
    assert got.classes == ("a",) and any("named under class b too (data row 8)" in w for w in got.warnings)


# ------------------------------------------------------------------------------------------ header and stream


def test_a_file_with_its_first_lines_cut_is_refused_from_the_header_alone(tmp_path, capsys):
    """The header is checked before the body: a body that cannot be parsed at all is never reached."""
    df = synthetic_usage(pool16(), 0.05, seed=2)
    lines = df.to_csv(index=False).splitlines()
    path = tmp_path / "cut.csv"
    path.write_bytes(("\n".join(lines[3:]) + "\n").encode() + b'\xff\xfe"unterminated\n' * 1000)
    with pytest.raises(
        UserError, match=r"lacks column\(s\) time, gpu, pod, class, busy, memory_bytes \(its first line"
    ):
        read_usage_csv(path)
    res = results_folder(tmp_path / "r")
    refused(
        capsys, ["advise", "--usage", str(path), "--results", str(res), "--out", str(tmp_path / "o")], "lacks column"
    )


def test_a_usage_that_names_no_model_is_refused_unless_said(tmp_path, capsys):
    path = tmp_path / "u.csv"
    body = synthetic_trace({"a": ("batch", 2)}, 30).to_csv(index=False)
    path.write_text(body.splitlines()[0] + "\n" + "not,a,row,of,this,file\n" * 3)  # the body is never read
    res = results_folder(tmp_path / "r")
    argv = ["advise", "--usage", str(path), "--results", str(res), "--out", str(tmp_path / "o")]
    refused(capsys, argv, "names no GPU model (no gpu_model column); give --gpu-model MODEL")
    path.write_text(body)
    assert main([*argv, "--gpu-model", "H200"]) == 0
    assert main([*argv[:-1], str(tmp_path / "o2"), "--usage-gpu-model", "H200"]) == 0


def test_the_stream_reads_as_the_whole(tmp_path, monkeypatch):
    """Chunks of 7 rows (codes, classes, duplicates and rows numbered across chunk boundaries) give the
    usage one chunk gives."""
    df = synthetic_usage(pool16(), 0.05, seed=5)
    df = pd.concat([df, df.iloc[[40]].assign(busy=1.0)])  # a duplicate in another chunk than its first
    path = tmp_path / "u.csv"
    df.to_csv(path, index=False)
    whole = read_usage_csv(path)
    monkeypatch.setattr(reading, "CHUNK_ROWS", 7)
    chunked = read_usage_csv(path)
    assert chunked.pods == whole.pods and chunked.classes == whole.classes and chunked.gpus == whole.gpus
    np.testing.assert_array_equal(chunked.busy, whole.busy)
    np.testing.assert_array_equal(chunked.memory_peak, whole.memory_peak)
    assert chunked.warnings == whole.warnings and any("duplicate" in w for w in whole.warnings)


def test_a_refused_run_leaves_the_usage_and_out_untouched(site, tmp_path, capsys):
    usage, _ = site
    before = (digest(usage), usage.stat().st_mtime_ns)
    refused(capsys, advise_argv(site, tmp_path / "o", "--gpu-model", "A100-40GB"), "--allow-other-model")
    assert (digest(usage), usage.stat().st_mtime_ns) == before and not (tmp_path / "o").exists()
    assert main(advise_argv(site, tmp_path / "o2")) == 0
    assert (digest(usage), usage.stat().st_mtime_ns) == before
    assert json.loads((tmp_path / "o2" / "advice.json").read_text())["recommended"]
