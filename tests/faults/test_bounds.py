"""Absurd values and doomed sweeps: refused in one line, exit 2, before anything is allocated or
started; and hypothesis over the option grammar and the results CSV round trip."""

from __future__ import annotations

import csv
import io
import json
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.modes import parse_modes
from sharebench.parse import seconds, whole_number
from sharebench.results import COLUMN_NAMES, ResultsWriter, load_results
from sharebench.results.guard import complete_rows
from support.faults import one_line_error
from support.lattices import tiny_lattice

pytestmark = [pytest.mark.faults, pytest.mark.slow]


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--modes", "timeslice:99999999999999999999"],
            "replica count too large in 'timeslice:99999999999999999999'; allowed: 1..64 replicas per cell",
        ),
        (["--modes", "mps:65"], "replica count too large in 'mps:65'; allowed: 1..64 replicas per cell"),
        (["--repeats", "99999999999", "--dry-run"], "bad --repeats '99999999999'; allowed: a whole number 1..1000"),
        (["--warmup-repeats", "1e400"], "bad --warmup-repeats '1e400'; allowed: a whole number 0..1000"),
        (["--turns", "1e30"], "bad --turns '1e30'; allowed: a whole number 1..1000000000"),
        (["--ready-timeout", "nan"], "bad --ready-timeout 'nan'; allowed: seconds 0.001..1e+07"),
        (["--run-timeout", "inf"], "bad --run-timeout 'inf'; allowed: seconds 0.001..1e+07"),
        (["--stop-after", "nan"], "bad --stop-after 'nan'; allowed: seconds 0..1e+07"),
        (["--run-timeout", "-1"], "bad --run-timeout '-1'; allowed: seconds 0.001..1e+07"),
    ],
)
def test_absurd_values_are_refused_at_once(argv, message, capsys, tmp_path):
    out = tmp_path / "out"
    t0 = time.monotonic()
    assert main(["run", "--device", "cpu", "--out", str(out), "--no-progress", *argv]) == 2
    assert capsys.readouterr().err == f"sharebench: error: {message}\n"
    assert time.monotonic() - t0 < 30 and not out.exists()


def line_with(tmp_path, change):
    path = tiny_lattice(tmp_path / "fodo.json", cells=2)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    return str(path)


def nan_length(data):
    name = next(n for n in data["element_names"] if data["elements"][n]["__class__"] == "Drift")
    data["elements"][name]["length"] = float("nan")


def no_elements(data):
    data["elements"], data["element_names"] = {}, []


def missing_element(data):
    data["element_names"].append("ghost")


@pytest.mark.parametrize(
    "change, message",
    [
        (nan_length, "has a non-finite length (nan); every length and strength must be a finite number"),
        (no_elements, "has no elements; give a line with at least one element"),
        (missing_element, "'ghost'"),
    ],
)
def test_a_doomed_lattice_is_refused_before_the_first_cell(change, message, capsys, tmp_path):
    lat = line_with(tmp_path, change)
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
                "100",
                "--lattice",
                lat,
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 2
    )
    err = one_line_error(capsys.readouterr().err)  # (xtrack's loader prints its progress bar before)
    assert err.startswith("sharebench: error: lattice file") and message in err
    assert not (out / "results.csv").exists()


def test_xtrack_on_pocl_is_refused_before_the_first_cell(capsys, tmp_path):
    from sharebench.devices import list_devices

    pocl = [d for d in list_devices() if d.backend == "opencl" and "portable" in d.platform.lower()]
    if not pocl:
        pytest.skip("no PoCL device here")
    out = tmp_path / "out"
    assert main(["run", "--device", pocl[0].spec, "--engine", "xtrack", "--out", str(out), "--no-progress"]) == 2
    assert "the xtrack engine does not build on" in capsys.readouterr().err
    assert not out.exists()


# the option grammar: whatever is typed, a value or a one-line UserError, at once
@settings(max_examples=300, deadline=1000, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet="exclusivtmeslp:ragn0123456789@-,.eE ", max_size=40))
def test_any_mode_text_is_a_mode_list_or_one_line(text):
    try:
        modes = parse_modes(text)
    except UserError as exc:
        assert "\n" not in str(exc)
    else:
        assert all(m.replicas is None or 1 <= m.replicas <= (10**6 if m.kind == "partition" else 64) for m in modes)


@settings(max_examples=300, deadline=1000)
@given(
    st.one_of(
        st.text(max_size=30),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(10**30), max_value=10**30),
    )
)
def test_any_count_or_duration_is_bounded_or_one_line(value):
    for parse in (lambda v: whole_number("--repeats", v, 1, 1000), lambda v: seconds("--run-timeout", v, 0.001)):
        try:
            x = parse(value)
        except UserError as exc:
            assert "\n" not in str(exc)
        else:
            assert x == x and abs(x) <= 10**7


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {
                "cell_id": TEXT,
                "mode": TEXT,
                "error": TEXT,
                # a time of an ok row: a negative or non-finite one flags its row (tests/faults/test_bad_numbers.py)
                "track_s": st.floats(min_value=0.0, allow_nan=False, allow_infinity=False),
                "particles": st.integers(1, 10**12),
            }
        ),
        min_size=1,
        max_size=5,
    ),
    cut=st.integers(0, 10**6),
)
def test_results_round_trip_and_any_truncation_keeps_whole_rows(tmp_path_factory, rows, cut):
    d = tmp_path_factory.mktemp("rt")
    # one replica a row: the same (sweep, cell, replica) twice is a duplicate, flagged (tests/faults/test_grammars.py)
    full = [dict(r, replica=i, status="ok", cell_status="ok") for i, r in enumerate(rows)]
    ResultsWriter(d).append(full)
    df = load_results(d)
    assert df["particles"].tolist() == [r["particles"] for r in full]
    assert df["track_s"].tolist() == [r["track_s"] for r in full]
    assert df["error"].tolist() == [" ".join(r["error"].split()) for r in full]
    data = (d / "results.csv").read_bytes()
    whole, tail = complete_rows(data[: cut % (len(data) + 1)])
    assert whole + tail == data[: cut % (len(data) + 1)]
    parsed = list(csv.reader(io.StringIO(whole.decode())))
    assert not parsed or all(len(r) == len(parsed[0]) == len(COLUMN_NAMES) for r in parsed)
