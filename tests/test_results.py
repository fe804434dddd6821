"""Results CSV: schema, append-as-you-go, version checks, machine description."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sharebench.errors import UserError
from sharebench.results import (COLUMN_NAMES, COLUMNS, RESULTS_CSV, SCHEMA_VERSION, ResultsWriter, format_cpus,
                                load_results, schema_markdown, write_machine)


def row(i, **kw):
    r = dict(sweep_id="s", cell_id=f"exclusive_p10_r{i}", mode="exclusive", mode_kind="exclusive", replicas=1,
             replica=0, repeat=i, warmup=i == 0, particles=10, turns=2, track_s=0.5 + i, track_start=100.0 + i,
             track_end=100.5 + 2 * i, status="ok", cell_status="ok", cpus=[0, 1, 2, 5])
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


@pytest.mark.parametrize("version, advice", [
    ("0", "re-run the sweep, or convert it to schema 1 (columns in README)"),
    ("2", "upgrade sharebench to read it"),
])
def test_other_schema_version_says_what_to_do(tmp_path, version, advice):
    ResultsWriter(tmp_path).append([row(1)])
    p = tmp_path / RESULTS_CSV
    lines = p.read_text().splitlines()
    lines[1] = version + lines[1][1:]
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError) as e:
        load_results(tmp_path)
    assert str(e.value) == (f"{p} has results schema version {version}; this sharebench reads version 1: {advice}")


@pytest.mark.parametrize("content, message", [
    (None, "no results file at"),
    ("", "is empty"),
    ("a,b\n1,2\n", "is not a sharebench results CSV (no schema_version column)"),
    ("schema_version,mode\n1,exclusive\n", "lacks required column(s) particles, track_s, replica, cell_id"),
])
def test_bad_results_files(tmp_path, content, message):
    if content is not None:
        (tmp_path / RESULTS_CSV).write_text(content)
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_results(tmp_path)


@pytest.mark.parametrize("cpus, text", [([], ""), ([3], "3"), ([0, 1, 2, 3], "0-3"), ([7, 0, 1, 4, 5], "0-1,4-5,7")])
def test_format_cpus(cpus, text):
    assert format_cpus(cpus) == text


def test_schema_documents_every_column():
    md = schema_markdown()
    for c in COLUMNS:
        assert f"| `{c.name}` | {c.dtype} |" in md
    # units are in the names of timed columns
    assert {c.unit for c in COLUMNS if c.name.endswith("_s") and "_per_" not in c.name} == {"s"}


def test_machine_description(tmp_path):
    p = write_machine(tmp_path, device={"spec": "cpu", "kind": "cpu"}, command=["sharebench", "run", "--x"])
    m = json.loads(p.read_text())
    assert m["command"] == ["sharebench", "run", "--x"]
    assert m["cpu"]["logical_cores"] >= 1 and m["cpu"]["memory_bytes"] > 0
    assert m["libraries"]["xtrack"] == "0.118.4"
    # no NVIDIA driver here: the reason is recorded, never a made-up GPU
    assert m["nvidia"]["nvml"] == "ok" or m["nvidia"]["nvml"].startswith("unavailable")


def test_readme_section_holds_the_current_schema():
    from pathlib import Path

    doc = Path(__file__).resolve().parents[1] / "docs" / "readme" / "sweep.md"
    assert schema_markdown() in doc.read_text(), "docs/readme/sweep.md: paste sharebench.results.schema_markdown()"
