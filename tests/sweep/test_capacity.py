"""Capacity by search (issue 33, item 2): the search on synthetic slowdown curves with intervals, the
"≥ N" answer only at a stated limit, "between" at a budget stop, and a CPU run that finds a knee."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.modes import parse_mode
from sharebench.report.answer import capacity_blocks, end_screen
from sharebench.sweep.capacity import (
    Capacity,
    CapacityOptions,
    CapacitySchedule,
    CapacitySearch,
    Probe,
    answer,
    next_n,
    parse_family,
    parse_users,
    probe_bounds,
    read_capacity,
    verdict,
    write_capacity,
)
from sharebench.sweep.plan import Cell


def run_search(search: CapacitySearch, curve, *, noise: float = 0.0, seed: int = 0, stop_after: int | None = None):
    """Drive ``next_n`` with a synthetic replica: slowdown(N) = curve(N), an interval that narrows with repeats."""
    rng = np.random.default_rng(seed)
    cells = 0
    while (step := next_n(search)) is not None:
        if stop_after is not None and cells >= stop_after:
            return answer(search, budget_stop=True), cells
        n, _ = step
        reps = search.probes[n].repeats + 1 if n in search.probes else 1
        s = curve(n) * (1 + noise * rng.standard_normal())
        half = 0.15 * curve(n) / math.sqrt(reps)
        search.probes[n] = Probe(
            n, search.mode(n).label, s, s - half, s + half, verdict(s, s - half, s + half, search.slo), reps
        )
        cells += 1
    return answer(search), cells


def knee(n: int) -> float:
    return 1 + (n / 10.5) ** 3  # 10: 1.86x within 2x, 11: 2.15x above


def test_search_finds_the_knee_of_a_synthetic_curve_within_the_probe_bound():
    search = CapacitySearch("timeslice", slo=2.0, lo=2, hi=64)
    cap, cells = run_search(search, knee, noise=0.02, seed=3)
    assert cap.bound == "exact" and cap.users == 10
    assert "≥" not in cap.answer and cap.answer == "10 users"
    distinct = len(search.probes)
    assert distinct <= probe_bounds(2, 64)[1]
    assert [p.n for p in cap.probes][:4] == [2, 4, 8, 16]  # doubling, then bisection
    assert "10 ✓" in cap.line() and "11 ✗" in cap.line()


def test_unsure_probe_repeats_then_the_point_estimate_decides():
    search = CapacitySearch("mps", slo=2.0, lo=2, hi=8, max_repeats=3)
    search.probes[4] = Probe(4, "mps:4", 1.95, 1.5, 2.4, "unsure", 1)
    assert next_n(search) == (4, True)  # a further repeat of the unsure N
    search.probes[4] = Probe(4, "mps:4", 1.95, 1.7, 2.2, "unsure", 3)
    assert search.bracket() == (4, None)  # at max repeats: 1.95 <= 2 decides within
    assert "within noise" in answer(search).note


def test_at_least_only_at_the_stated_maximum():
    search = CapacitySearch("timeslice", slo=2.0, lo=2, hi=16)
    cap, _ = run_search(search, lambda n: 1.05)
    assert cap.bound == "at_least" and cap.users == 16
    assert cap.answer == "≥ 16 users (the stated maximum --users ..16)"


def test_at_least_at_the_gpu_memory():
    from sharebench.sweep.capacity import memory_max

    mem = memory_max(141e9, 40e9)  # 40 GB per replica on a 141 GB H200
    assert mem == 3
    search = CapacitySearch("mps", slo=2.0, lo=2, hi=64, mem_max=mem)
    cap, _ = run_search(search, lambda n: 1.1)
    assert cap.users == 3 and cap.answer == "≥ 3 users (GPU memory holds 3 replicas)"


def test_kind_limit_mps_clients():
    search = CapacitySearch("mps", slo=2.0, lo=2, hi=64)
    cap, _ = run_search(search, lambda n: 1.0)
    assert cap.answer == "≥ 48 users (mps takes at most 48 clients)"


def test_budget_stop_says_between_never_at_least():
    search = CapacitySearch("timeslice", slo=2.0, lo=2, hi=64)
    cap, cells = run_search(search, knee, stop_after=3)  # 2, 4, 8 within, 16 not measured
    assert cells == 3 and cap.bound == "between" and "≥" not in cap.answer
    assert cap.answer == "between 8 and 64 users (the budget stopped the search)"
    search = CapacitySearch("timeslice", slo=2.0, lo=2, hi=64)
    cap, _ = run_search(search, knee, stop_after=5)  # 16 above, 12 above: 8 .. 12
    assert cap.answer == "between 8 and 12 users (the budget stopped the search)"


def test_nothing_within_the_target():
    search = CapacitySearch("timeslice", slo=2.0, lo=2, hi=64)
    cap, _ = run_search(search, lambda n: 3.0 * n)
    assert cap.users is None and cap.bound == "none" and "no sharing within 2×" in cap.answer


def test_families_and_users_parse():
    assert parse_family("timeslice") == "timeslice" and parse_family("mps@25") == "mps@25"
    assert parse_family("timeslice:4") is None and parse_family("exclusive") is None
    assert parse_users("8..48") == (8, 48) and parse_users("16") == (2, 16)
    with pytest.raises(UserError, match="bad --users '0..4'"):
        parse_users("0..4")
    with pytest.raises(UserError, match="bad time-slice interval"):
        parse_family("timeslice/huge")


CONTENDED = f"{sys.executable} -m support.contended"


def capacity_args(out, *more):
    return [
        "run", "--device", "cpu", "--engine", "exec", "--exec", CONTENDED, "--work", "1",
        "--pattern", "interactive:burst=2,think=0.1", "--bursts", "20", "--modes", "timeslice", "--capacity",
        "--repeats", "1", "--max-repeats", "2", "--warmup-repeats", "0", "--no-progress", "--no-telemetry",
        "--out", str(out), *more,
    ]  # fmt: skip


def test_dry_run_prints_the_probe_range_and_minutes(tmp_path, capsys):
    assert main(capacity_args(tmp_path / "r", "--users", "2..16", "--dry-run")) == 0
    out = capsys.readouterr().out
    assert "capacity search: N from 2 doubling to at most 16" in out
    assert "timeslice: 4–7 N probed (4–14 cells)" in out and " min" in out
    assert not (tmp_path / "r").exists()


def test_users_without_capacity_is_a_one_line_error(tmp_path, capsys):
    code = main(["run", "--device", "cpu", "--users", "2..8", "--out", str(tmp_path / "r"), "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--users LO..HI goes with --capacity" in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_a_cpu_capacity_run_finds_a_knee(tmp_path, monkeypatch):
    """Bursts serialised on one file lock: latency grows with N, so the search stops at a number, not '≥'."""
    monkeypatch.setenv("SHAREBENCH_CONTENDED_LOCK", str(tmp_path / "device.lock"))
    monkeypatch.setenv("PYTHONPATH", f"{Path(__file__).parents[1]}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    out = tmp_path / "r"
    assert main(capacity_args(out, "--users", "2..16")) == 0
    (cap,) = read_capacity(out)
    assert cap["bound"] == "exact" and 2 <= cap["users"] < 16, cap["line"]
    ns = [p["n"] for p in cap["probes"]]
    assert ns[0] == 2 and len(ns) >= 2 and "≥" not in cap["answer"]
    table = pd.read_csv(out / "tables" / "capacity.csv")
    assert table["users"].tolist() == [cap["users"]] and table["bound"].tolist() == ["exact"]


def test_the_answer_and_the_end_screen_carry_the_capacity_lines(tmp_path):
    probes = (Probe(2, "mps:2", 1.2, 1.1, 1.3, "within", 2), Probe(4, "mps:4", 2.6, 2.4, 2.8, "above", 2))
    cap = Capacity("mps", "serve:rate=2.055,size=1,load=0.3", 2.0, 3, "exact", None, None, probes)
    write_capacity(tmp_path, [cap])
    text, _ = end_screen(tmp_path)
    line = "mps: 3 users per GPU, 6.165 requests/s per GPU (3 × 2.055/s; load 0.3 of 6.85/s alone) at p95 ≤ 2×"
    assert f"  capacity: {line} (measured 2 ✓ 1.20×, 4 ✗ 2.60×)" in text.splitlines()
    blocks = capacity_blocks(tmp_path)
    assert len(blocks) == 2 and blocks[1].items == [cap.line()]
    assert capacity_blocks(tmp_path / "none") == [] and "capacity" not in end_screen(tmp_path / "none")[0]


@pytest.mark.parametrize(
    "pattern, expected", [("serve:rate=2,size=1,load=0.3", 1.1 * 10 * 1.5), ("interactive", 1.1 * 10 * 2 * 1.5)]
)
def test_a_probe_of_a_service_is_not_stretched_by_the_target(tmp_path, pattern, expected):
    options = CapacityOptions(("timeslice",), (2, 8), 1, 2)
    fixed = [Cell(parse_mode("exclusive"), 100, 1)]
    sched = CapacitySchedule(tmp_path, options.searches(2.0, pattern), fixed, 100, options, lambda m: None)
    sched.spans["exclusive"] = 10.0
    assert sched.probe_s(parse_mode("timeslice:2")) == pytest.approx(expected)
