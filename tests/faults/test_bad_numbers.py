"""A bad number is one flagged row, never a poisoned cell (issue 37, item 4): a real sweep, one of its
rows edited on disk to an unparsable or impossible value; ``--resume`` measures that cell again, once,
the resumed measurement counts, the folder ends well, and a further resume measures nothing."""

from __future__ import annotations

import csv
import io

import pytest

from sharebench.results import RESULTS_CSV, load_results
from support.faults import sharebench, sweep_argv

pytestmark = [pytest.mark.faults, pytest.mark.slow]


def set_field(path, line: int, column: str, value: str) -> str:
    """Set ``column`` of ``line`` of a results CSV on disk; returns that row's cell id."""
    lines = path.read_text().splitlines(keepends=True)
    header = next(csv.reader([lines[0]]))
    fields = next(csv.reader([lines[line]]))
    fields[header.index(column)] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(fields)
    lines[line] = buf.getvalue()
    path.write_text("".join(lines))
    return fields[header.index("cell_id")]


@pytest.mark.parametrize("value", ["abc", "inf", "-1"])
def test_a_bad_track_s_is_measured_again_once(lattice, tmp_path, value):
    out = tmp_path / "r"
    p = sharebench(*sweep_argv(lattice, out, "--repeats", "2"))
    assert p.returncode == 0, p.stderr
    cell = set_field(out / RESULTS_CSV, 1, "track_s", value)
    df = load_results(out)
    assert df.loc[df["cell_id"] == cell, "status"].tolist() == ["failed"]
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode == 0, p.stdout + p.stderr
    df = load_results(out)
    mine = df[df["cell_id"] == cell]
    assert mine["status"].tolist() == ["failed", "ok"]  # the flagged row stays, the new run counts
    assert mine["sweep_id"].nunique() == 2
    size = len(df)
    p = sharebench("run", "--resume", "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode == 0, p.stdout + p.stderr
    assert len(load_results(out)) == size  # measured again once, not on every resume
    p = sharebench("report", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
