"""Serving load relative to capacity (issue 33, item 3): ``serve:load=F`` parsed, resolved at the capacity
alone measured first by the sweep itself, recorded, and the requests/s per GPU beside a capacity answer."""

from __future__ import annotations

import dataclasses
import json

import pytest

from sharebench.analysis import analyse
from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.patterns import parse_pattern, resolve_load
from sharebench.results import load_results
from sharebench.results.bursts import load_bursts
from sharebench.sweep import SweepConfig, run_sweep
from sharebench.sweep.capacity import Capacity
from sharebench.sweep.load import folder_capacity, resolved_workload, resume_config, units_per_s
from sharebench.workloads import Workload
from sharebench.workloads.bursts import run_pattern


@pytest.mark.parametrize(
    "text, label, needs",
    [
        ("serve:load=0.3", "serve:load=0.3,size=1", True),
        ("serve:size=4,load=1.5", "serve:load=1.5,size=4", True),
        ("serve:rate=2.055,size=1,load=0.3", "serve:rate=2.055,size=1,load=0.3", False),
        ("serve:rate=4", "serve:rate=4,size=1", False),
    ],
)
def test_load_grammar_and_labels(text, label, needs):
    p = parse_pattern(text)
    assert p.label == label and parse_pattern(p.label) == p and p.needs_capacity is needs


@pytest.mark.parametrize(
    "text, message",
    [
        ("serve:load=0", "bad load '0' in pattern 'serve:load=0'; allowed: a fraction of capacity > 0 and <= 4"),
        ("serve:load=4.5", "bad load '4.5' in pattern 'serve:load=4.5'; allowed: a fraction of capacity > 0"),
        ("serve:load=nan", "bad load 'nan'"),
        ("serve:load=", "bad setting 'load=' in pattern 'serve:load='"),
        ("interactive:load=0.3", "unknown key 'load' in pattern 'interactive:load=0.3'; allowed keys for interactive"),
    ],
)
def test_bad_loads_are_one_line_errors(text, message):
    with pytest.raises(UserError) as e:
        parse_pattern(text)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_resolution_sets_the_rate_from_the_capacity():
    p = resolve_load(parse_pattern("serve:load=0.3,size=2"), 6.85 * 2)  # 6.85 requests/s of 2 units alone
    assert p.label == "serve:rate=2.055,size=2,load=0.3" and p.rate_per_s == pytest.approx(0.3 * 6.85)
    assert resolve_load(parse_pattern("serve:rate=3"), 100.0) == parse_pattern("serve:rate=3")  # absolute: as is
    with pytest.raises(UserError, match="bad capacity"):
        resolve_load(parse_pattern("serve:load=0.3"), 0.0)


def test_a_workload_resolves_victim_and_neighbours():
    w = Workload(pattern="serve:load=0.5", neighbours="serve:load=2,size=4", bursts=5)
    r = resolved_workload(w, 10.0)
    assert (r.pattern, r.neighbours) == ("serve:rate=5,size=1,load=0.5", "serve:rate=5,size=4,load=2")
    assert resolved_workload(Workload(pattern="serve:load=0.5", neighbours="batch"), 8.0).neighbours == "batch"


def test_an_unresolved_load_never_runs():
    with pytest.raises(UserError, match="no rate yet"):
        run_pattern(parse_pattern("serve:load=0.5"), lambda units: None, count=3)


def test_capacity_is_units_over_the_victims_window():
    bursts = [dict(replica=0, start=10.0 + i, end=11.0 + i, units=2) for i in range(4)] + [
        dict(replica=1, start=0.0, end=100.0, units=50)
    ]
    assert units_per_s(bursts) == (pytest.approx(8 / 4.0), 4, pytest.approx(4.0))


def test_a_serving_capacity_gives_requests_per_gpu():
    c = Capacity("mps", "serve:rate=2.055,size=1,load=0.3", 2.0, "12 users", 12, 13, "none")
    assert "12 users per GPU, 24.66 requests/s per GPU (12 × 2.055/s; load 0.3 of 6.85/s alone)" in c.line()
    assert "requests/s" not in Capacity("mps", "interactive:burst=1,think=0.2", 2.0, "12 users", 12, 13, "none").line()
    between = Capacity("mps", "serve:rate=2,size=1", 2.0, "between 8 and 12", 8, 12, "budget").line()
    assert "between 8 and 12 users per GPU, between 16 and 24 requests/s per GPU" in between


def test_a_bad_load_on_the_command_line_is_one_line(tmp_path, capsys):
    code = main(["run", "--device", "cpu", "--pattern", "serve:load=-1", "--dry-run", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "bad load '-1'" in err and len(err.splitlines()) == 1 and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_a_cpu_sweep_measures_capacity_first_and_runs_the_resolved_rate(lattice, tmp_path):
    config = SweepConfig(
        workload=Workload(device="cpu", lattice=str(lattice), pattern="serve:load=0.5,size=2", bursts=10),
        modes=["exclusive", "timeslice:2"],
        particles=[200],
        turns=2,
        repeats=1,
        warmup_repeats=0,
        progress=False,
        telemetry_interval_s=None,
        command=["test"],
    )
    out = run_sweep(config, tmp_path / "r")
    sweep = json.loads((out / "sweep.json").read_text())["sweeps"][-1]
    cap = sweep["capacity_units_per_s"]
    resolved = parse_pattern(sweep["resolved_pattern"])
    assert cap > 0 and sweep["load_pattern"] == "serve:load=0.5,size=2" and sweep["capacity_requests"] >= 20
    assert resolved.load == 0.5 and resolved.rate_per_s == pytest.approx(0.5 * cap / 2, rel=1e-3)
    assert sweep["config"]["workload"]["pattern"] == resolved.label  # the replicas saw a plain rate
    notes = (out / "notes.txt").read_text()
    assert f"serve:load=0.5,size=2 -> {resolved.label}" in notes and "capacity alone:" in notes

    rows = load_results(out)
    first = rows.iloc[0]
    assert first["cell_id"] == "capacity_p200_r0" and bool(first["warmup"]) and first["mode"] == "exclusive"
    measured = rows[~rows["warmup"].astype(bool)]
    assert set(measured["pattern"]) == {resolved.label} and (rows["cell_status"] == "ok").all()
    bursts = load_bursts(out)
    victim = bursts[(bursts["role"] == "victim") & ~bursts["warmup"].astype(bool)]
    # a service's cell lasts a duration, never a count that fits in under a second (issue 42): at least 5 s
    # (--bursts 10 at the resolved rate is less), its requests all that arrived in it (an overloaded queue:
    # those it served)
    assert (measured["track_s"] >= 4.9).all() and (victim.groupby("cell_id").size() > 10).all()
    assert (victim.groupby("cell_id")["arrival"].agg(lambda a: a.max() - a.min()) <= 5.0).all()
    assert set(analyse(out).latency["pattern"]) == {resolved.label}  # tables grouped by the resolved pattern

    # --resume reuses the folder's capacity: the same resolved pattern, nothing measured again
    assert folder_capacity(out, None)[0] == pytest.approx(cap)
    again = resume_config(SweepConfig(workload=config.workload, resume=True), out, None)
    assert again.workload.pattern == resolved.label
    run_sweep(dataclasses.replace(config, repeats=2, resume=True), out)
    assert "reused from the resumed folder's capacity cell" in (out / "notes.txt").read_text()
    rows = load_results(out)
    assert (rows["cell_id"] == "capacity_p200_r0").sum() == 1 and set(rows["repeat"]) == {0, 1, 2}
    assert set(rows.loc[~rows["warmup"].astype(bool), "pattern"]) == {resolved.label}
