"""A cell's id, and the check of a cell whose replicas ran as separate pods
(sharebench.sweep.cell.check_cell); a pipeline's cells themselves: tests/sweep/test_grid.py."""

from __future__ import annotations

import pytest

from sharebench.modes import parse_mode
from sharebench.sweep import cell_id, check_cell


def test_a_cell_id_names_the_mode_size_and_repeat():
    assert cell_id(parse_mode("TimeSlice:2"), 10_000, 1) == "timeslice:2_p10000_r1"
    assert cell_id(parse_mode("mps:2@50"), 300, 0) == "mps:2@50_p300_r0"


# ------------------------------------------------------------------ a cell of several pods
def _row(replica, uuid="GPU-a", status="ok", mode="timeslice:2", **kw):
    row = dict(
        replica=replica,
        mode=mode,
        device_uuid=uuid,
        status=status,
        error="" if status == "ok" else "boom",
        cell_status="ok",
        cell_error="",
    )
    return {**row, **kw}


@pytest.mark.parametrize(
    "rows, cell_status, cell_error",
    [
        ([_row(0), _row(1)], "ok", ""),
        ([_row(0), _row(1, uuid="GPU-b")], "failed", "replicas ran on different devices: GPU-a, GPU-b"),
        ([_row(0), _row(1, status="failed")], "failed", "replica 1: boom"),
        ([_row(0, mode="mig:1g.18gb", uuid="MIG-1"), _row(1, mode="mig:1g.18gb", uuid="MIG-2")], "ok", ""),
        ([_row(0, cell_status="failed", cell_error="overran"), _row(1)], "failed", "overran"),
    ],
)
def test_check_cell_fails_a_cell_as_a_whole(rows, cell_status, cell_error):
    out = check_cell(rows)
    assert {r["cell_status"] for r in out} == {cell_status}
    assert {r["cell_error"] for r in out} == {cell_error}


def test_check_cell_of_no_rows_is_no_rows():
    assert check_cell([]) == []
