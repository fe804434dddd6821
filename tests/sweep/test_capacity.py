"""Capacity by search (issues 33, 42, 46): each N decided by the one rule on every user, answers that say
what was measured ("N users" only with N within and N + 1 above, both measured), families side by side,
a failing N that ends the search with a stated answer, the budget used, and the dry run's seconds."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sharebench.analysis.tail import TailRule
from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.gpus import emulated_layout
from sharebench.modes import family_mode
from sharebench.report.answer import capacity_blocks, end_screen
from sharebench.results import ResultsWriter
from sharebench.results.bursts import append_bursts
from sharebench.sweep.capacity import (
    Capacity,
    CapacityOptions,
    CapacitySearch,
    Probe,
    answer,
    folder_options,
    next_n,
    parse_family,
    parse_users,
    probe_bounds,
    read_capacity,
)
from sharebench.sweep.capacity_folder import capacity_lines, populate, read_folder, write_capacity
from support.crafted import CPU, cell
from support.lattices import tiny_lattice
from support.schedules import FakeClock, replay_capacity

SLO = 2.0


def probe(n: int, verdict: str, worst: float = 1.0, cells: int = 1, error: str = "") -> Probe:
    return Probe(n, f"timeslice:{n}", verdict, cells, 200, worst, worst * 0.9, worst * 1.1, error=error)  # type: ignore[arg-type]


def run_search(search: CapacitySearch, verdict_of, stop_after: int | None = None) -> tuple[Capacity, list[int]]:
    """Drive ``next_n`` with synthetic verdicts (N -> verdict, or (verdict, worst)); ``stop_after`` cells: the
    budget stops it there."""
    order: list[int] = []
    while (n := next_n(search)) is not None:
        if stop_after is not None and len(order) >= stop_after:
            search.stopped = "budget"
            break
        v = verdict_of(n)
        v, worst = v if isinstance(v, tuple) else (v, 1.0)
        cells = search.probes[n].cells + 1 if n in search.probes else 1
        search.probes[n] = probe(n, v, worst, cells)
        order.append(n)
    return answer(search), order


def knee(at: int):
    return lambda n: ("within", 1.2) if n < at else ("above", 3.0)


def test_n_users_only_with_n_within_and_n_plus_1_above_both_measured():
    cap, order = run_search(CapacitySearch("timeslice", SLO, 2, 64), knee(11))
    assert cap.answer == "10 users" and (cap.lo, cap.hi, cap.why) == (10, 11, "none")
    assert order[:4] == [2, 4, 8, 16] and {10, 11} <= set(order)  # doubling, then bisection
    assert len(order) <= probe_bounds(2, 64)[1]
    assert "10 ✓ 1.20×" in cap.line() and "11 ✗ 3.00×" in cap.line()


def test_a_stopped_search_says_between_never_a_number_nor_no_sharing():
    cap, order = run_search(CapacitySearch("timeslice", SLO, 2, 64), knee(11), stop_after=3)
    assert order == [2, 4, 8]  # 16 not started
    assert (cap.answer, cap.lo, cap.hi, cap.why) == ("between 8 and 64", 8, 64, "budget")
    assert "the budget stopped the search" in cap.line() and cap.users is None
    cap, _ = run_search(CapacitySearch("timeslice", SLO, 2, 64), knee(11), stop_after=5)  # 16 ✗, 12 ✗: 8..12
    assert cap.answer == "between 8 and 12"
    nothing = CapacitySearch("mps", SLO, 2, 16)
    nothing.stopped = "interrupt"
    cap = answer(nothing)
    assert (cap.answer, cap.lo, cap.why) == ("not measured", None, "interrupt") and cap.users is None
    assert "no sharing" not in cap.line() and " 0 " not in cap.line()


def test_no_sharing_only_when_2_was_measured_above():
    cap, order = run_search(CapacitySearch("timeslice", SLO, 8, 64), lambda n: ("above", 4.0))
    assert order == [8, 4, 2] and (cap.answer, cap.lo, cap.hi) == ("no sharing", 1, 2)
    cap, _ = run_search(CapacitySearch("timeslice", SLO, 8, 64), lambda n: ("above", 4.0), stop_after=2)
    assert cap.answer == "between 1 and 4" and cap.why == "budget"  # 2 not measured: no "no sharing"


def test_at_least_only_at_a_stated_limit():
    cap, _ = run_search(CapacitySearch("timeslice", SLO, 2, 16), lambda n: "within")
    assert (cap.answer, cap.why) == (">= 16", "maximum") and cap.words == "≥ 16 users"
    assert "the stated maximum --users ..16" in cap.line()
    cap, _ = run_search(CapacitySearch("mps", SLO, 2, 64), lambda n: "within")
    assert (cap.answer, cap.why) == (">= 48", "kind") and "mps takes at most 48 clients" in cap.line()
    cap, _ = run_search(CapacitySearch("mps", SLO, 2, 64, mem_max=3), lambda n: "within")
    assert (cap.answer, cap.why) == (">= 3", "memory")


def test_an_undecided_n_gets_more_cells_then_the_answer_says_undecided():
    search = CapacitySearch("timeslice", SLO, 2, 16, max_cells=3)
    search.probes = {2: probe(2, "within"), 4: probe(4, "undecided", 1.98)}
    assert next_n(search) == 4  # another cell of 4, its users' samples pooled
    search.probes[4] = probe(4, "undecided", 1.98, cells=3)
    assert next_n(search) is None
    cap = answer(search)
    assert (cap.answer, cap.why) == ("between 2 and 16", "undecided")
    assert "4 undecided after 3 cell(s)" in cap.line() and "4 ? 1.98×" in cap.line()


def test_a_failed_n_is_never_measured_again():
    """A replica that fails at N >= 4: the search goes below it and ends, "≥ 3" with the failure said."""
    fails = lambda n: "failed" if n >= 4 else "within"  # noqa: E731
    cap, order = run_search(CapacitySearch("timeslice", SLO, 2, 64), fails)
    assert order == [2, 4, 3] and (cap.answer, cap.lo, cap.hi, cap.why) == (">= 3", 3, None, "failed")
    assert "4 users failed" in cap.detail and "4 failed" in cap.line()
    cap, order = run_search(CapacitySearch("timeslice", SLO, 2, 64), lambda n: "failed")
    assert order == [2] and (cap.answer, cap.why) == ("failed at 2", "failed")
    cap, order = run_search(CapacitySearch("timeslice", SLO, 2, 64), lambda n: "failed" if n >= 4 else "above")
    assert cap.answer == "no sharing" and order == [2]


def test_families_and_users_parse():
    assert parse_family("timeslice") == "timeslice" and parse_family("mps@25") == "mps@25"
    assert parse_family("timeslice:4") is None and parse_family("exclusive") is None
    assert parse_users("8..48") == (8, 48) and parse_users("16") == (2, 16)
    with pytest.raises(UserError, match="bad --users '0..4'"):
        parse_users("0..4")
    with pytest.raises(UserError, match="bad time-slice interval"):
        parse_family("timeslice/huge")


def test_emulated_mig_is_searched_as_equal_instances():
    """mig-emulated at N users: N equal instances, the largest profile the GPU holds N times, at most 7."""
    assert parse_family("mig-emulated") == "mig-emulated" and parse_family("mig") is None
    assert family_mode("mig-emulated", 4).label == "mig-emulated:4x"
    h200 = {n: [p.name for p in emulated_layout("H200", f"{n}x")] for n in range(1, 8)}
    assert h200[1] == ["7g.141gb"] and h200[2] == ["3g.71gb"] * 2 and h200[3] == ["2g.35gb"] * 3
    assert h200[4] == ["1g.35gb"] * 4 and h200[7] == ["1g.18gb"] * 7
    with pytest.raises(UserError, match="holds at most 7 equal instances"):
        emulated_layout("H200", "8x")
    search = CapacitySearch("mig-emulated", SLO, 2, 64)
    assert search.max_n == 7 and search.limit().why == "kind"


# ----------------------------------------------------------------- every user counted, from the folder


def write_cell(
    out: Path, mode: str, repeat: int, latencies: list[np.ndarray], status: str = "ok", pattern: str = "interactive"
) -> None:
    """One cell kept as the runner keeps it: its rows (results.csv) and every replica's bursts."""
    rows = cell(dict(CPU, particles=1), mode, repeat, [(0.0, 10.0)] * len(latencies), cores=2)
    for r in rows:
        r.update(cell_status=status, cell_error="" if status == "ok" else "replica 1: exit status 1")
    ResultsWriter(out).append(rows)
    bursts = []
    for replica, lat in enumerate(latencies):
        t = 100.0 * repeat
        for i, x in enumerate(map(float, lat)):
            bursts.append(dict(sweep_id="t", cell_id=rows[0]["cell_id"], mode=mode, repeat=repeat, warmup=False,
                               replica=replica, role="victim" if replica == 0 else "neighbour",
                               pattern=pattern, i=i, arrival=t, start=t, end=t + x, units=1))  # fmt: skip
            t += x + 0.01
    append_bursts(out, bursts)


def test_replica_0_within_is_not_enough_when_another_user_is_above(tmp_path):
    rng = np.random.default_rng(1)

    def lat(scale):
        return 0.01 * scale * np.exp(rng.normal(0, 0.05, 300))

    write_cell(tmp_path, "exclusive", 1, [lat(1)])
    write_cell(tmp_path, "timeslice:3", 1, [lat(1.1), lat(1.2), lat(3.5)])  # replica 0 at 1.1x, replica 2 at 3.5x
    search = CapacitySearch("timeslice", SLO, 2, 8, pattern="interactive")
    populate(search, read_folder(tmp_path, TailRule(SLO)))
    p = search.probes[3]
    assert p.verdict == "above" and p.worst_replica == "2" and p.lo > SLO and p.samples == 300
    write_cell(tmp_path, "timeslice:2", 1, [lat(1.1), lat(1.2)[:40]])  # a user with too few samples
    write_cell(tmp_path, "timeslice:4", 1, [lat(1.0)] * 4, status="failed")
    populate(search, read_folder(tmp_path, TailRule(SLO)))
    assert search.probes[2].verdict == "undecided" and "samples a user" in search.probes[2].reason
    assert search.probes[4].verdict == "failed" and "exit status 1" in search.probes[4].error


def test_an_emulated_mig_layouts_cells_are_its_probes(tmp_path):
    """mig-emulated:Nx has no replica count (its layout names N instances): its cells are still the search's
    probes at N, decided or failed (an H200's step A measured mig-emulated:2x twice and answered "not
    measured"; its failed cells on another were measured again until the budget ended the search)."""
    rng = np.random.default_rng(2)

    def lat(scale):
        return 0.01 * scale * np.exp(rng.normal(0, 0.05, 300))

    write_cell(tmp_path, "exclusive", 1, [lat(1)])
    write_cell(tmp_path, "mig-emulated:2x", 1, [lat(1.2), lat(1.3)])
    write_cell(tmp_path, "mig-emulated:4x", 1, [lat(1.0)] * 4, status="failed")
    search = CapacitySearch("mig-emulated", SLO, 2, 8, pattern="interactive")
    populate(search, read_folder(tmp_path, TailRule(SLO)))
    assert search.probes[2].verdict == "within" and search.probes[2].mode == "mig-emulated:2x"
    assert search.probes[4].verdict == "failed" and "exit status 1" in search.probes[4].error
    assert next_n(search) == 3  # between 2 within and 4 failed, never 4 again
    assert search.n_of("mig-emulated:3x") == 3 and search.n_of("mps:3") is None and search.n_of("exclusive") is None
    assert CapacitySearch("timeslice/long", SLO).n_of("timeslice:4/long") == 4


def test_capacity_json_has_the_design_shape_and_the_end_screen_its_lines(tmp_path):
    """The run's capacity.json, and the end screen and report deciding again from the folder's cells."""
    serve = "serve:rate=2.055,size=1,load=0.3"
    rng = np.random.default_rng(3)
    write_cell(tmp_path, "exclusive", 1, [0.01 * np.exp(rng.normal(0, 0.02, 300))], pattern=serve)
    for n, scale in ((2, 1.2), (3, 1.6), (4, 2.6)):
        write_cell(tmp_path, f"mps:{n}", 1, [0.01 * scale * np.exp(rng.normal(0, 0.02, 300))] * n, pattern=serve)
    search = CapacitySearch("mps", SLO, 2, 8, pattern=serve)
    populate(search, read_folder(tmp_path, TailRule(SLO)))
    cap = answer(search)
    write_capacity(tmp_path, [cap], CapacityOptions(("mps",), (2, 8)).record(TailRule(SLO)))
    (entry,) = read_capacity(tmp_path)
    assert {"family", "pattern", "slo", "answer", "lo", "hi", "why", "probes"} <= set(entry)
    assert (entry["answer"], entry["lo"], entry["hi"], entry["why"]) == ("3 users", 3, 4, "none")
    assert {"n", "mode", "verdict", "worst", "lo", "hi", "samples", "cells"} <= set(entry["probes"][0])
    line = "mps: 3 users per GPU, 6.165 requests/s per GPU (3 × 2.055/s; load 0.3 of 6.85/s alone) at p95 ≤ 2×"
    text, _ = end_screen(tmp_path)
    assert f"  capacity: {line} (measured {cap.measured})" in text.splitlines()
    assert re.fullmatch(r"2 ✓ 1\.\d\d×, 3 ✓ 1\.\d\d×, 4 ✗ 2\.\d\d×", cap.measured)
    blocks = capacity_blocks(tmp_path)
    assert len(blocks) == 2 and blocks[1].items == [cap.line()]
    assert capacity_blocks(tmp_path / "none") == [] and "capacity" not in end_screen(tmp_path / "none")[0]


def test_a_search_of_before_this_round_is_answered_again_from_its_bursts(tmp_path):
    """An old capacity.json said "exact" from replica 0's interval; its bursts say what was measured."""
    rng = np.random.default_rng(2)
    write_cell(tmp_path, "exclusive", 1, [0.01 * np.exp(rng.normal(0, 0.05, 300))])
    write_cell(tmp_path, "timeslice:2", 1, [0.012 * np.exp(rng.normal(0, 0.05, 300))] * 2)
    write_cell(tmp_path, "timeslice:4", 1, [0.011 * np.exp(rng.normal(0, 0.05, 300)), 0.05 * np.ones(300)] * 2)
    old = {"family": "timeslice", "pattern": "interactive", "slo": 2.0, "users": 4, "bound": "exact", "limit": None,
           "probes": [{"n": 2}, {"n": 4}], "line": "timeslice: 4 users per GPU at p95 ≤ 2×"}  # fmt: skip
    (tmp_path / "capacity.json").write_text(json.dumps({"capacity": [old]}))
    (line,) = capacity_lines(tmp_path)
    assert line.startswith("timeslice: between 2 and 4 users per GPU") and "4 ✗" in line, line
    assert folder_options(tmp_path) == CapacityOptions(("timeslice",), (2, 64))


# ----------------------------------------------------------------- the schedule: families in turn, failure, budget


@pytest.fixture(scope="module")
def lattice(tmp_path_factory) -> str:
    return str(tiny_lattice(tmp_path_factory.mktemp("lattice") / "fodo.json"))


def test_families_take_turns_so_a_stopped_search_leaves_each_a_bracket(lattice, tmp_path):
    order, notes, schedule = replay_capacity(
        lattice, tmp_path, FakeClock(), CapacityOptions(("timeslice", "mps"), (2, 16), 1, 4), 300.0
    )
    probes = [c.split("_")[0] for c in order if not c.startswith("exclusive")]
    assert probes[:4] == ["timeslice:2", "mps:2", "timeslice:4", "mps:4"]  # one of each in turn
    caps = {c["family"]: c for c in read_capacity(tmp_path)}
    for family in ("timeslice", "mps"):
        c = caps[family]
        assert c["why"] == "budget" and c["answer"].startswith("between ") and c["lo"] >= 4, c
    assert any("its fewest samples take" in n for n in notes)


def test_a_failing_n_ends_the_search_with_a_stated_answer(lattice, tmp_path):
    order, _, schedule = replay_capacity(
        lattice, tmp_path, FakeClock(), CapacityOptions(("timeslice",), (2, 64), 1, 4), None, fails_at={"timeslice": 4}
    )
    assert [c for c in order if c.startswith("timeslice:4")] == ["timeslice:4_p1000_r1"]  # never again
    (cap,) = read_capacity(tmp_path)
    assert (cap["answer"], cap["why"]) == (">= 3", "failed") and "4 users failed" in cap["line"]
    assert pd.read_csv(tmp_path / "tables" / "capacity.csv")["answer"].tolist() == [">= 3"]


@pytest.mark.parametrize("budget_s", [300.0, 450.0, 600.0, 900.0])
def test_a_run_with_cells_left_uses_its_budget(lattice, tmp_path, budget_s):
    """The deadline refuses a probe only when even its fewest samples do not fit, and tries the other
    family's: stopped with cells left, the search has used 90% of the budget (up to 900 s, where one probe's
    fewest samples at 12 users take over 10% of it, it has left less than its cheapest probe needs)."""
    clock = FakeClock()
    t0 = clock()
    options = CapacityOptions(("timeslice", "mps"), (2, 64), 1, 4)
    _, notes, schedule = replay_capacity(lattice, tmp_path, clock, options, budget_s)
    assert schedule.left() and schedule.stopped() is not None
    refusals = re.findall(r"not started: (\S+), its fewest samples take (\d+) s, (\d+) s left", " ".join(notes))
    assert {cell.split("_")[0].split(":")[0] for cell, _, _ in refusals} == {"timeslice", "mps"}  # both tried
    assert all(int(need) >= int(left) for _, need, left in refusals)  # rounded to the second
    if budget_s <= 600:
        assert clock() - t0 >= 0.9 * budget_s, (clock() - t0, budget_s)


# ----------------------------------------------------------------- the command line


def capacity_args(out, *more):
    return [
        "run", "--device", "cpu", "--engine", "exec", "--exec", f"{sys.executable} -m support.knee", "--work", "1",
        "--pattern", "interactive:burst=1,think=0.002", "--bursts", "150", "--modes", "timeslice", "--capacity",
        "--warmup-repeats", "0", "--no-progress", "--no-telemetry", "--out", str(out), *more,
    ]  # fmt: skip


def test_dry_run_prints_each_probes_samples_and_seconds_and_a_total(tmp_path, capsys, knee_env):
    """The probes' fewest samples, the range of the total, and the one prediction: one unit calibrated here
    (the program's cell of a few bursts), the search the model predicts, within its --budget."""
    assert main(capacity_args(tmp_path / "r", "--users", "2..16", "--budget", "1m", "--dry-run")) == 0
    out = capsys.readouterr().out
    assert "families side by side" in out and "p95 slowdown ≤ 2× decided at 95% confidence" in out
    assert "timeslice: 4–7 N probed (4–28 cells)" in out
    assert "N=2: 113 samples per user, ≥ " in out and "N=16: 153 samples per user" in out
    assert "  total: " in out and " min of probes at their fewest samples" in out
    predicted = re.search(
        r"^predicted: (\d+) s \(cells \d+ s, .*the search as the model predicts it .*: timeslice N=2 ", out, re.M
    )
    assert predicted and 0 < int(predicted[1]) <= 60, out  # the --budget bounds it
    assert not (tmp_path / "r").exists()


def test_users_without_capacity_is_a_one_line_error(tmp_path, capsys):
    code = main(["run", "--device", "cpu", "--users", "2..8", "--out", str(tmp_path / "r"), "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--users LO..HI goes with --capacity" in err and len(err.splitlines()) == 1


@pytest.fixture
def knee_env(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", f"{Path(__file__).parents[1]}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("SHAREBENCH_KNEE_FACTOR", "4")


@pytest.mark.slow
def test_a_cpu_capacity_run_finds_the_knee(tmp_path, knee_env):
    """Bursts 4x slower from 4 replicas on: 2 and 3 within 2x, 4 above, every user counted: "3 users"."""
    out = tmp_path / "r"
    assert main(capacity_args(out, "--users", "2..8")) == 0
    (cap,) = read_capacity(out)
    assert (cap["answer"], cap["lo"], cap["hi"], cap["why"]) == ("3 users", 3, 4, "none"), cap["line"]
    assert {p["n"]: p["verdict"] for p in cap["probes"]} == {2: "within", 3: "within", 4: "above"}
    table = pd.read_csv(out / "tables" / "capacity.csv")
    assert table["answer"].tolist() == ["3 users"] and table["users"].tolist() == [3]
    assert json.loads((out / "sweep.json").read_text())["sweeps"][-1]["capacity"]["families"] == ["timeslice"]


@pytest.mark.slow
def test_a_replica_that_fails_from_4_ends_the_search_in_bounded_time(tmp_path, knee_env, monkeypatch):
    monkeypatch.setenv("SHAREBENCH_KNEE_FAIL_AT", "4")
    monkeypatch.setenv("SHAREBENCH_KNEE_AT", "64")  # no knee: only the failure bounds it
    out = tmp_path / "r"
    assert main(capacity_args(out, "--users", "2..16")) == 1  # a cell failed: the end screen's status
    (cap,) = read_capacity(out)
    assert (cap["answer"], cap["why"]) == (">= 3", "failed"), cap["line"]
    rows = pd.read_csv(out / "results.csv")
    assert rows.loc[rows["mode"] == "timeslice:4", "cell_id"].nunique() == 1  # measured once, never again
    assert not math.isnan(rows["track_s"].max())
