"""Results storage: the CSV (schema, append-as-you-go, version checks) and the JSON documents
(one version convention, legacy spellings read, newer versions refused, provenance absorbing machine.json)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from sharebench.errors import UserError
from sharebench.parse import format_cpu_set
from sharebench.report import markdown_table
from sharebench.results import (
    COLUMN_NAMES,
    COLUMNS,
    DOCUMENTS,
    RESULTS_CSV,
    SCHEMA_VERSION,
    SWEEP_JSON,
    ResultsWriter,
    append_sweep,
    load_results,
    read_json,
    read_provenance,
    read_sweeps,
    schema_table,
    sweeps_warning,
    write_json,
)
from sharebench.telemetry import collect_provenance
from support.paths import ROOT


def schema_markdown() -> str:
    return markdown_table(pd.DataFrame(schema_table()))


def row(i, **kw):
    r = dict(
        sweep_id="s",
        cell_id=f"exclusive_p10_r{i}",
        mode="exclusive",
        mode_kind="exclusive",
        replicas=1,
        replica=0,
        repeat=i,
        warmup=i == 0,
        particles=10,
        turns=2,
        track_s=0.5 + i,
        track_start=100.0 + i,
        track_end=100.5 + 2 * i,
        status="ok",
        cell_status="ok",
        cpus=[0, 1, 2, 5],
    )
    r.update(kw)
    return r


def test_round_trip_types_and_units(tmp_path):
    w = ResultsWriter(tmp_path)
    w.append([row(0)])
    w.append([row(1), row(2, status="failed", error="a\nmulti-line   error", track_s=None)])
    df = load_results(tmp_path)
    assert list(df.columns[: len(COLUMN_NAMES)]) == list(COLUMN_NAMES)
    assert df["schema_version"].tolist() == [SCHEMA_VERSION] * 3
    assert df["warmup"].tolist() == [True, False, False]
    assert df["cpus"].tolist() == ["0-2,5"] * 3
    assert df["error"].tolist()[2] == "a multi-line error"  # one line on disk
    assert_allclose(df["track_s"].to_numpy()[:2], [0.5, 1.5])
    assert np.isnan(df["track_s"].iloc[2])  # failed: no number, not a zero
    assert df["particles"].dtype == np.int64


def test_a_number_that_does_not_parse_fails_its_row_and_cell_with_the_reason(tmp_path):
    """Issue 27: a row with track_s=abc gave empty times and no flag."""
    w = ResultsWriter(tmp_path)
    w.append([row(0, cell_id="c1"), row(1, cell_id="c1"), row(2, cell_id="c2")])
    path = tmp_path / RESULTS_CSV
    lines = path.read_text().splitlines(keepends=True)
    header = next(csv.reader([lines[0]]))
    fields = next(csv.reader([lines[2]]))
    fields[header.index("track_s")] = "abc"
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    path.write_text(lines[0] + lines[1] + buf.getvalue() + lines[3])
    df = load_results(tmp_path)
    assert df["status"].tolist() == ["ok", "failed", "ok"]
    assert df["error"].iloc[1] == "unreadable row: track_s='abc' is not a number"
    assert df["cell_status"].tolist() == ["failed", "failed", "ok"]
    assert df["cell_error"].iloc[0] == "unreadable row: track_s='abc' is not a number"
    assert np.isnan(df["track_s"].iloc[1]) and df["track_s"].iloc[2] == 2.5


def poison(path, line: int, column: str, value: str) -> None:
    """Set one field of one line of a results CSV on disk, as a hand edit or a broken tool would."""
    lines = path.read_text().splitlines(keepends=True)
    header = next(csv.reader([lines[0]]))
    fields = next(csv.reader([lines[line]]))
    fields[header.index(column)] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    lines[line] = buf.getvalue()
    path.write_text("".join(lines))


@pytest.mark.parametrize(
    "column, value, reason",
    [
        ("track_s", "inf", "track_s='inf' is not a finite number"),
        ("track_s", "nan", "track_s='nan' is not a finite number"),
        ("track_s", "1e999", "track_s='1e999' is not a finite number"),
        ("track_s", "-1", "track_s='-1' is negative"),
        ("particles", "-5", "particles='-5' is negative"),
        ("particle_turns_per_s", "-inf", "particle_turns_per_s='-inf' is not a finite number"),
        ("track_end", "99.0", "track_end=99.0 is before track_start=101.0"),
    ],
)
def test_an_impossible_number_flags_its_row_and_cell_run(tmp_path, column, value, reason):
    """Issue 37: inf and -1 in track_s were accepted without a flag."""
    ResultsWriter(tmp_path).append([row(0, cell_id="c1"), row(1, cell_id="c1"), row(2, cell_id="c2")])
    poison(tmp_path / RESULTS_CSV, 2, column, value)
    df = load_results(tmp_path)
    assert df["status"].tolist() == ["ok", "failed", "ok"]
    assert df["error"].iloc[1] == f"unreadable row: {reason}"
    assert df["cell_status"].tolist() == ["failed", "failed", "ok"]


def test_a_negative_repeat_is_a_warm_up_and_a_failed_rows_numbers_are_its_own(tmp_path):
    ResultsWriter(tmp_path).append(
        [
            row(-1, warmup=True, track_s=0.5, track_end=99.5),
            row(1, status="failed", cell_status="failed", error="boom", track_s=float("inf")),
        ]
    )
    df = load_results(tmp_path)
    assert df["status"].tolist() == ["ok", "failed"]
    assert df["error"].tolist() == ["", "boom"]


def test_a_bad_row_fails_its_own_cell_run_only_not_a_later_sweeps(tmp_path):
    """Issue 37: one unparsable number poisoned its cell id in every later sweep; the run of the same
    cell by a resumed sweep (another sweep_id) is another run, and counts."""
    ResultsWriter(tmp_path).append([row(1, cell_id="c1", sweep_id="first")])
    poison(tmp_path / RESULTS_CSV, 1, "track_s", "abc")
    ResultsWriter(tmp_path).append([row(1, cell_id="c1", sweep_id="resumed")])
    df = load_results(tmp_path)
    assert df["status"].tolist() == ["failed", "ok"]
    assert df["cell_status"].tolist() == ["failed", "ok"]


def test_rows_are_on_disk_after_each_append(tmp_path):
    w = ResultsWriter(tmp_path)
    w.append([row(1)])
    with (tmp_path / RESULTS_CSV).open() as f:
        assert len(list(csv.reader(f))) == 2  # header + row, before the writer is gone
    # a second writer (a resumed sweep) continues the same file
    ResultsWriter(tmp_path).append([row(2)])
    assert len(load_results(tmp_path)) == 2


def test_telemetry_columns_widen_the_file_without_loss(tmp_path):
    w = ResultsWriter(tmp_path)
    w.append([row(1)])
    w.append([row(2, tel_source="psutil", tel_cpu_util_pct_mean=87.5)])
    df = load_results(tmp_path)
    assert len(df) == 2
    assert df["tel_source"].tolist() == ["", "psutil"]
    assert np.isnan(df["tel_cpu_util_pct_mean"].iloc[0]) and df["tel_cpu_util_pct_mean"].iloc[1] == 87.5
    assert_allclose(df["track_s"], [1.5, 2.5])


def test_columns_outside_the_schema_are_refused(tmp_path):
    with pytest.raises(ValueError, match="outside the schema"):
        ResultsWriter(tmp_path).append([row(1, track_time=3.0)])


@pytest.mark.parametrize(
    "version, advice",
    [
        ("0", "re-run the sweep, or convert it to schema 1 (columns: docs/reference/results-schema.md)"),
        ("2", "upgrade sharebench to read it"),
    ],
)
def test_other_schema_version_says_what_to_do(tmp_path, version, advice):
    ResultsWriter(tmp_path).append([row(1)])
    p = tmp_path / RESULTS_CSV
    lines = p.read_text().splitlines()
    lines[1] = version + lines[1][1:]
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError) as e:
        load_results(tmp_path)
    assert str(e.value) == (f"{p} has results schema version {version}; this sharebench reads version 1: {advice}")


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no results file at"),
        ("", "is empty"),
        ("a,b\n1,2\n", "is not a sharebench results CSV (no schema_version column)"),
        ("schema_version,mode\n1,exclusive\n", "lacks required column(s) particles, track_s, replica, cell_id"),
    ],
)
def test_bad_results_files(tmp_path, content, message):
    if content is not None:
        (tmp_path / RESULTS_CSV).write_text(content)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_results(tmp_path)


@pytest.mark.parametrize("cpus, text", [([], ""), ([3], "3"), ([0, 1, 2, 3], "0-3"), ([7, 0, 1, 4, 5], "0-1,4-5,7")])
def test_format_cpus(cpus, text):
    assert format_cpu_set(cpus) == text


def test_schema_documents_every_column():
    md = schema_markdown()
    for c in COLUMNS:
        assert f"| `{c.name}` | {c.dtype} |" in md
    # units are in the names of timed columns
    assert {c.unit for c in COLUMNS if c.name.endswith("_s") and "_per_" not in c.name} == {"s"}


def test_provenance_describes_the_machine(tmp_path):
    prov = collect_provenance({"spec": "cpu", "kind": "cpu", "backend": "cpu"}, command=["sharebench", "run", "--x"])
    assert prov["command"] == ["sharebench", "run", "--x"]
    assert prov["host"]["cpu_logical"] >= 1 and prov["host"]["mem_bytes"] > 0 and prov["host"]["usable_cores"] >= 1
    assert prov["libraries"]["xtrack"] == "0.118.4"
    # no NVIDIA driver here: the reason is recorded, never a made-up GPU
    assert prov["nvidia"]["available"] is True or prov["nvidia"]["reason"].startswith("NVML unavailable")


def test_json_documents_carry_kind_and_version(tmp_path):
    p = write_json(tmp_path / "sweep.json", "sweep", {"sweeps": [1]})
    doc = json.loads(p.read_text())
    assert list(doc)[:2] == ["kind", "schema_version"] and doc["schema_version"] == DOCUMENTS["sweep"]
    assert read_json(p, "sweep") == {"sweeps": [1]}


@pytest.mark.parametrize(
    "content, kind, message",
    [
        (
            "{",
            "sweep",
            "is not valid JSON (Expecting property name enclosed in double quotes at line 1); "
            "re-run what wrote it or delete the file",
        ),
        ('{"kind": "bench", "schema_version": 1}', "sweep", "is not a sharebench sweep document (it holds 'bench')"),
        (
            '{"kind": "sweep", "schema_version": 7}',
            "sweep",
            "has sweep schema version 7; this sharebench reads up to 1: upgrade sharebench to read it",
        ),
        (
            '{"schema": "sharebench.provenance/99"}',
            "provenance",
            "has provenance schema version 99; this sharebench reads up to 2: upgrade sharebench to read it",
        ),
    ],
)
def test_bad_documents_say_what_to_do(tmp_path, content, kind, message):
    p = tmp_path / "doc.json"
    p.write_text(content)
    with pytest.raises(UserError) as e:
        read_json(p, kind)
    assert str(e.value) == f"{p} {message}"


def test_first_release_spellings_are_read(tmp_path):
    (tmp_path / "record.json").write_text('{"record_version": 1, "track_s": 2.5}')
    assert read_json(tmp_path / "record.json", "record") == {"track_s": 2.5}
    (tmp_path / "sweep.json").write_text('{"sweeps": []}')
    assert read_json(tmp_path / "sweep.json", "sweep") == {"sweeps": []}


def test_committed_first_release_folders_read_as_current_provenance():
    """results/h200 was written by the first release: provenance schema 1 beside machine.json."""
    prov = read_provenance(ROOT / "tests" / "data" / "results" / "h200" / "cuda")
    assert prov["gpu"]["model_key"] == "H200" and prov["nvidia"]["driver_version"].startswith("580.")
    assert prov["nvidia"]["gpus"][0]["name"] == "NVIDIA H200"
    assert prov["host"]["usable_cores"] >= 1 and len(prov["host"]["load_avg_1m_5m_15m"]) == 3
    assert prov["cuda_runtime"].startswith("CUDA runtime 13.")
    assert prov["device"]["memory_bytes"] > 0


def test_readme_section_holds_the_current_schema():
    doc = ROOT / "docs" / "readme" / "sweep.md"
    assert schema_markdown() in doc.read_text(), "docs/readme/sweep.md: paste the schema table (test_results)"


def test_a_torn_sweep_json_is_none_to_a_reader_and_an_error_to_a_writer(tmp_path):
    """Issue 37, item 6: report and compare work from an intact results.csv when sweep.json is torn."""
    append_sweep(tmp_path, {"sweep_id": "s1", "config": {}})
    assert sweeps_warning(tmp_path) is None
    text = (tmp_path / SWEEP_JSON).read_text()
    (tmp_path / SWEEP_JSON).write_text(text[: len(text) // 2])
    with pytest.raises(UserError, match="sweep.json is not valid JSON"):
        read_sweeps(tmp_path)  # resume and append refuse it, naming it
    assert read_sweeps(tmp_path, torn_ok=True) == []
    warning = sweeps_warning(tmp_path)
    assert warning is not None and "\n" not in warning
    assert warning.startswith(f"warning: {tmp_path / SWEEP_JSON} is not valid JSON (")
    assert warning.endswith("; working from results.csv alone (its rows are intact)")
