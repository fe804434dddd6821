"""tools.patterns_headline on synthetic pattern folders (results.csv, sweep.json and a bursts.csv generated
here, read back through the real analysis): one answer per workload x pattern x mode family, general only
where two machines agree, a below-1 cell left out with the reason, a search's bracket read from its
capacity.json, the folders as links that resolve from the pages that show the table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from sharebench.results import ResultsWriter
from sharebench.results.bursts import append_bursts
from support.crafted import BASE, cell
from tools.patterns_headline import NOT_MEASURED, UP, table

USERS = "interactive:burst=1,think=0.2"
BURSTS = 200  # a user's bursts in one cell: above the 127 that four users need for a verdict


def gpu(uuid: str, pattern: str) -> dict:
    return dict(
        BASE,
        device_class="gpu",
        backend="cuda",
        device_spec="cuda:0",
        particles=1000,
        device_uuid=uuid,
        parent_uuid=uuid,
        pattern=pattern,
    )


def bursts(mode: str, scales: list[float], rng: np.random.Generator, pattern: str, particles: int = 1000) -> list[dict]:
    """One cell run's bursts: replica r's latencies 20 ms x ``scales[r]`` (lognormal, 10% spread)."""
    rows = []
    for r, scale in enumerate(scales):
        t = 1000.0
        for i in range(BURSTS):
            lat = 0.02 * scale * float(rng.lognormal(0, 0.1))
            rows.append(
                dict(
                    sweep_id="crafted",
                    cell_id=f"{mode}_p{particles}_r1",
                    mode=mode,
                    repeat=1,
                    warmup=False,
                    replica=r,
                    role="victim" if r == 0 else "neighbour",
                    pattern=pattern,
                    i=i,
                    arrival=t,
                    start=t,
                    end=t + lat,
                    units=1,
                )
            )
            t += lat + 0.2
    return rows


def write_folder(path: Path, uuid: str, cells: dict[str, list[float]], seed: int, pattern: str = USERS) -> Path:
    """A Simpletrack pattern folder on GPU ``uuid``: the alone cell and ``cells`` (mode -> each user's latency
    factor against alone), one repeat each, every replica following ``pattern``."""
    rows = cell(gpu(uuid, pattern), "exclusive", 1, [(0, 10)])
    for mode, scales in cells.items():
        rows += cell(gpu(uuid, pattern), mode, 1, [(0, 10)] * len(scales))
    ResultsWriter(path).append(rows)
    sweep = {"sweep_id": "crafted", "config": {"workload": {"engine": "simpletrack"}, "slo": 2}}
    (path / "sweep.json").write_text(json.dumps({"kind": "sweep", "schema_version": 1, "sweeps": [sweep]}))
    rng = np.random.default_rng(seed)
    append_bursts(path, bursts("exclusive", [1.0], rng, pattern))
    for mode, scales in cells.items():
        append_bursts(path, bursts(mode, scales, rng, pattern))
    return path


def place(root: Path, machine: str, name: str) -> Path:
    return root / "results" / "h200" / "patterns-x" / machine / name


def rows_of(lines: list[str]) -> dict[tuple[str, str], list[str]]:
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    return {(r[0], r[1]): r[2:] for r in rows}


def links_resolve(text: str, root: Path) -> None:
    """Every link of the table resolves from results/h200/ and from docs/readme/ (two levels below the root)."""
    targets = re.findall(r"\]\(([^)]+)\)", text)
    assert targets and all(t.startswith(UP) for t in targets)
    for page in (root / "results" / "h200", root / "docs" / "readme"):
        assert all((page / t).resolve().exists() for t in targets), targets


def test_two_machines_that_agree_give_a_general_figure(tmp_path):
    """GPU-aaaa: 2 within, 4 above (between 2 and 4); GPU-bbbb: 2 within, 3 above (2 users): what both prove
    (2 within on each, 4 above on each) is the general figure, each machine's bracket and folder beside it."""
    a = write_folder(
        place(tmp_path, "GPU-aaaa0001", "st-users"), "GPU-aaaa0001-0000", {"mps:2": [1.2] * 2, "mps:4": [3.0] * 4}, 1
    )
    b = write_folder(
        place(tmp_path, "GPU-bbbb0002", "st-users"), "GPU-bbbb0002-0000", {"mps:2": [1.2] * 2, "mps:3": [3.0] * 3}, 2
    )
    lines = table([a, b], root=tmp_path)
    interactive, serving = rows_of(lines)[("Simpletrack", "MPS")]
    assert interactive.startswith("**between 2 and 4 users**: general, 2 machines agree (GPU-aaaa0001, GPU-bbbb0002)")
    assert "<br>GPU-aaaa0001: between 2 and 4 users: 2 ✓ 1." in interactive and ", 4 ✗ 3." in interactive
    assert "<br>GPU-bbbb0002: 2 users: 2 ✓ 1." in interactive
    assert "[st-users](../../results/h200/patterns-x/GPU-aaaa0001/st-users/)" in interactive
    assert serving == NOT_MEASURED  # no serving folder at load 0.3
    assert rows_of(lines)[("Simpletrack", "time-slicing")] == [NOT_MEASURED, NOT_MEASURED]
    assert rows_of(lines)[("ResNet-18 inference", "MPS")] == [NOT_MEASURED, NOT_MEASURED]
    links_resolve("\n".join(lines), tmp_path)


def test_two_machines_that_disagree_are_shown_per_machine(tmp_path):
    """GPU-aaaa: 2 users (3 above); GPU-bbbb: within at 2 and 4 (≥ 4): disjoint, no general figure."""
    a = write_folder(
        place(tmp_path, "GPU-aaaa0001", "st-users"), "GPU-aaaa0001-0000", {"mps:2": [1.2] * 2, "mps:3": [3.0] * 3}, 1
    )
    b = write_folder(
        place(tmp_path, "GPU-bbbb0002", "st-users"), "GPU-bbbb0002-0000", {"mps:2": [1.2] * 2, "mps:4": [1.3] * 4}, 2
    )
    interactive = rows_of(table([a, b], root=tmp_path))[("Simpletrack", "MPS")][0]
    assert interactive.startswith("**machines differ** (GPU-aaaa0001, GPU-bbbb0002): per machine below")
    assert "<br>GPU-aaaa0001: 2 users: " in interactive and "<br>GPU-bbbb0002: ≥ 4 users: 4 ✓ 1." in interactive
    assert "general" not in interactive


def test_one_machines_lower_bound_and_anothers_upper_bound_make_no_general_figure(tmp_path):
    """GPU-aaaa: within at 2 only (≥ 2); GPU-bbbb: above at 4 only (< 4): the brackets overlap, but neither
    machine proves "between 2 and 4": no general figure."""
    a = write_folder(place(tmp_path, "GPU-aaaa0001", "st-users"), "GPU-aaaa0001-0000", {"mps:2": [1.2] * 2}, 1)
    b = write_folder(place(tmp_path, "GPU-bbbb0002", "st-users"), "GPU-bbbb0002-0000", {"mps:4": [3.0] * 4}, 2)
    interactive = rows_of(table([a, b], root=tmp_path))[("Simpletrack", "MPS")][0]
    assert interactive.startswith("**no common answer** (GPU-aaaa0001, GPU-bbbb0002): each decided another side")
    assert "<br>GPU-aaaa0001: ≥ 2 users: 2 ✓ 1." in interactive and "<br>GPU-bbbb0002: < 4 users: 4 ✗ 3." in interactive
    assert "general" not in interactive and "between 2 and 4" not in interactive


def test_a_failed_probe_is_left_out_with_its_error(tmp_path):
    """A search whose mps:2 cell failed (its replicas were not MPS clients): no verdict, no "? nan×", left out
    with the error; an undecided probe (timeslice:2, both users near 2×) says why."""
    a = write_folder(place(tmp_path, "GPU-aaaa0001", "st-users"), "GPU-aaaa0001-0000", {"timeslice:2": [2.0] * 2}, 4)
    error = "no process started by replica process 796 ([]) is an MPS client"
    failed = cell(gpu("GPU-aaaa0001-0000", USERS), "mps:2", 1, [(0, 10)] * 2)
    for r in failed:
        r.update(status="failed", cell_status="failed", cell_error=f"{error}; and replica 797's")
    ResultsWriter(a).append(failed)
    search = dict(users=[2, 8], min_cells=1, max_cells=1, slo=2.0)
    entries = [
        dict(family=f, pattern=USERS, slo=2.0, answer="", lo=None, hi=None, why="budget", probes=[])
        for f in ("timeslice", "mps")
    ]
    (a / "capacity.json").write_text(json.dumps({"capacity": entries, "search": search}))
    rows = rows_of(table([a], root=tmp_path))
    mps, timeslice = rows[("Simpletrack", "MPS")][0], rows[("Simpletrack", "time-slicing")][0]
    assert "nan" not in mps and f"left out: mps:2 on GPU-aaaa0001 (the cell failed: {error}) in [st-users]" in mps
    assert re.search(
        r"GPU-aaaa0001: [^<]*2 \? 2\.\d\d× \[1\.\d\d, 2\.\d\d\] \(\? = an interval across the target\)", timeslice
    )


def test_a_cell_below_one_is_left_out_with_the_reason(tmp_path):
    """mps:2 with every user at half the alone latency (a baseline measured slow): no figure, left out with the
    reason and its folder; mps:4 within and mps:8 above still bracket the answer on that machine alone."""
    a = write_folder(
        place(tmp_path, "GPU-aaaa0001", "st-users"),
        "GPU-aaaa0001-0000",
        {"mps:2": [0.5] * 2, "mps:4": [1.2] * 4, "mps:8": [3.0] * 8},
        3,
    )
    interactive = rows_of(table([a], root=tmp_path))[("Simpletrack", "MPS")][0]
    assert interactive.startswith("**between 4 and 8 users** on one machine (GPU-aaaa0001)")
    assert "<br>GPU-aaaa0001: between 4 and 8 users: 4 ✓ 1." in interactive
    assert re.search(
        r"<br>left out: mps:2 on GPU-aaaa0001 \(below 1: a user faster shared than alone, so the baseline is off; "
        r"worst user 0\.\d\d× \[0\.\d\d, 0\.\d\d\]\) in \[st-users\]\(\.\./\.\./results/h200/patterns-x/GPU-aaaa0001/st-users/\)",
        interactive,
    ), interactive
    assert "2 ✓" not in interactive


def test_a_search_gives_its_bracket_from_its_capacity_json(tmp_path):
    """A folder with a capacity.json of this round (answer, lo, hi, why, probes with the worst user): its
    probes, decided again from the folder's cells, are the points and its why (the budget) is said; an older
    capacity.json is left for the verdicts."""
    a = write_folder(
        place(tmp_path, "GPU-aaaa0001", "st-search"), "GPU-aaaa0001-0000", {"mps:4": [1.2] * 4, "mps:8": [3.2] * 8}, 4
    )
    probes = [dict(n=4, mode="mps:4", verdict="within", worst=1.31, lo=1.12, hi=1.58, samples=200, cells=1)]
    entry = dict(  # as the run wrote it before its last cell was read: the report and the table read both
        family="mps", pattern=USERS, slo=2.0, answer=">= 4", lo=4, hi=None, why="budget", probes=probes
    )
    (a / "capacity.json").write_text(json.dumps({"capacity": [entry]}))
    interactive = rows_of(table([a], root=tmp_path))[("Simpletrack", "MPS")][0]
    assert interactive.startswith("**between 4 and 8 users** on one machine (GPU-aaaa0001)")
    assert re.search(
        r"<br>GPU-aaaa0001: between 4 and 8 users \(budget\): 4 ✓ 1\.\d\d× \[1\.\d\d, 1\.\d\d\], 8 ✗ 3\.\d\d× \[",
        interactive,
    )
    old = dict(family="mps", pattern=USERS, slo=2.0, users=32, bound="between", upper=48, probes=[])
    (a / "capacity.json").write_text(json.dumps({"capacity": [old]}))
    interactive = rows_of(table([a], root=tmp_path))[("Simpletrack", "MPS")][0]
    assert interactive.startswith("**between 4 and 8 users** on one machine") and "(budget)" not in interactive


@pytest.mark.parametrize("load", ["0.3", "0.5"])
def test_the_serving_column_is_the_pattern_at_load_0_3(tmp_path, load):
    """A serving folder counts in the serving column at load 0.3 only, its figure in services and requests/s."""
    serve = f"serve:rate=20,size=1,load={load}"
    a = write_folder(place(tmp_path, "GPU-aaaa0001", "st-serve"), "GPU-aaaa0001-0000", {"mps:2": [1.2] * 2}, 5, serve)
    serving = rows_of(table([a], root=tmp_path))[("Simpletrack", "MPS")][1]
    if load == "0.3":
        assert (
            serving.startswith("**≥ 2 services** on one machine") and "≥ 2 services (≥ 40 requests/s): 2 ✓" in serving
        )
    else:
        assert serving == NOT_MEASURED
