"""The ``latency`` table of the analysis Tables, read from a results folder's bursts.csv: only the good
measured cells' bursts enter it (warm-ups, failed and excluded cells left out), and a folder without
bursts.csv (batch only, or written before patterns) gives the table with its columns and no rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.testing import assert_frame_equal

from sharebench import analysis
from sharebench.analysis.latency import LATENCY_COLUMNS, latency_table
from sharebench.errors import UserError
from sharebench.results import ResultsWriter
from sharebench.results.bursts import BURST_CSV_COLUMNS, BURSTS_CSV, append_bursts, load_bursts
from support.crafted import crafted_rows

INTERACTIVE = "interactive:burst=10,think=0.5"


def burst_rows(cell_id, mode, repeat, replicas, rng, scale=1.0, n=30):
    rows = []
    for r in range(replicas):
        t = 1000.0 * repeat
        for i in range(n):
            lat = 0.02 * scale * float(rng.lognormal(0, 0.3))
            rows.append(
                dict(
                    sweep_id="crafted",
                    cell_id=cell_id,
                    mode=mode,
                    repeat=repeat,
                    warmup=repeat == 0,
                    replica=r,
                    role="victim" if r == 0 else "neighbour",
                    pattern=INTERACTIVE if r == 0 else "batch",
                    i=i,
                    arrival=t,
                    start=t,
                    end=t + lat,
                    units=10,
                )
            )
            t += lat + 0.1
    return rows


@pytest.fixture
def folder(tmp_path):
    ResultsWriter(tmp_path).append(crafted_rows())
    rng = np.random.default_rng(1)
    cells = {}
    for rep in range(4):  # r0 is the warm-up
        cells[("exclusive", rep)] = burst_rows(f"exclusive_p1000_r{rep}", "exclusive", rep, 1, rng)
    for rep in range(1, 5):  # r4 is excluded (50% overlap)
        cells[("timeslice:2", rep)] = burst_rows(f"timeslice:2_p1000_r{rep}", "timeslice:2", rep, 2, rng, 2.0)
    cells[("mps:2", 1)] = burst_rows("mps:2_p1000_r1", "mps:2", 1, 2, rng, 9.0)  # a failed cell
    for rows in cells.values():
        append_bursts(tmp_path, rows)
    return tmp_path, cells


def test_the_latency_table_holds_the_good_measured_cells_only(folder):
    path, cells = folder
    tables = analysis.analyse(path)
    good = [r for (mode, rep), rows in cells.items() for r in rows if rep in (1, 2, 3) and mode != "mps:2"]
    want = latency_table(pd.DataFrame(good))
    assert list(tables.latency.columns) == LATENCY_COLUMNS
    assert_frame_equal(tables.latency.reset_index(drop=True), want, check_dtype=False)
    victim = tables.latency[(tables.latency["mode"] == "timeslice:2") & (tables.latency["role"] == "victim")]
    assert victim["repeats"].tolist() == [3] and victim["beside"].tolist() == ["batch"]
    assert "mps:2" not in set(tables.latency["mode"])
    assert 1.5 < float(victim["slowdown_p50"].iloc[0]) < 2.7  # the victim's bursts were drawn 2x as long


def test_a_folder_without_bursts_has_an_empty_latency_table(tmp_path):
    ResultsWriter(tmp_path).append(crafted_rows())
    tables = analysis.analyse(tmp_path)
    assert tables.latency.empty and list(tables.latency.columns) == LATENCY_COLUMNS
    assert "latency" in tables.to_dict()
    assert list(load_bursts(tmp_path).columns) == list(BURST_CSV_COLUMNS)


def test_bursts_csv_reads_back_typed_and_a_torn_row_is_dropped(tmp_path):
    rng = np.random.default_rng(0)
    rows = burst_rows("exclusive_p1000_r1", "exclusive", 1, 1, rng, n=5)
    assert append_bursts(tmp_path, rows) == 5
    with (tmp_path / BURSTS_CSV).open("a") as f:
        f.write("1,crafted,exclusive_p1000_r2,exclusive,2,false,0,victim,batch,0,12.5")  # cut short
    assert len(load_bursts(tmp_path)) == 5
    append_bursts(tmp_path, rows[:2])  # the torn row is dropped before the next cell's rows
    back = load_bursts(tmp_path)
    assert len(back) == 7 and back["arrival"].tolist()[:5] == [r["arrival"] for r in rows]
    assert back["replica"].dtype == np.int64 and back["warmup"].dtype == bool


def test_a_bursts_csv_of_another_version_is_refused(tmp_path):
    append_bursts(tmp_path, burst_rows("c", "exclusive", 1, 1, np.random.default_rng(0), n=1))
    text = (tmp_path / BURSTS_CSV).read_text().splitlines()
    (tmp_path / BURSTS_CSV).write_text(text[0] + "\n9" + text[1][1:] + "\n")
    with pytest.raises(UserError, match="bursts schema version 9"):
        load_bursts(tmp_path)
