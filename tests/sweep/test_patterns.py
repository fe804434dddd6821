"""Replica patterns end to end on real processes (issue 23): the CLI's one-line errors, each pattern on
PoCL and the CPU context, a mixed cell (an interactive victim beside batch neighbours), an exec program
that writes its burst record, and the default (batch) leaving results.csv as it was."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from sharebench.analysis import analyse
from sharebench.cli import main
from sharebench.results import RESULTS_CSV, load_results
from sharebench.results.bursts import BURSTS_CSV, load_bursts
from sharebench.sharing import cell_run, run_cell
from sharebench.sweep import SweepConfig, run_sweep
from sharebench.workloads import ReplicaJob, Workload
from sharebench.workloads.bursts import LiveRecord
from support.contexts import cpu_opencl_spec, device_of

FAST_USER = "interactive:burst=3,think=0.02"


def sweep(lattice, out, *, device="cpu", modes=("exclusive", "timeslice:2"), repeats=1, warmups=0, **workload):
    config = SweepConfig(
        workload=Workload.from_dict({"device": device, **({"lattice": str(lattice)} if lattice else {}), **workload}),
        modes=list(modes),
        particles=[200],
        turns=2,
        repeats=repeats,
        warmup_repeats=warmups,
        progress=False,
        telemetry_interval_s=None,
        command=["test"],
    )
    return run_sweep(config, out)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--pattern", "bursty"], "unknown pattern 'bursty'; allowed: batch, interactive[:burst=N,think=SECONDS]"),
        (["--pattern", "interactive:think=0"], "bad think '0' in pattern 'interactive:think=0'; allowed: seconds > 0"),
        (["--pattern", "serve:rate=-2"], "bad rate '-2' in pattern 'serve:rate=-2'; allowed: requests/s > 0"),
        (["--neighbours", "batch", "--modes", "exclusive"], "--neighbours batch needs a sharing mode (timeslice:N"),
        (["--slo", "0.5"], "bad --slo '0.5'; allowed: a p95 slowdown target >= 1"),
        (["--bursts", "0"], "bad --bursts '0'; allowed: a whole number 1..1000000"),
    ],
)
def test_bad_pattern_options_are_one_line_errors(lattice, tmp_path, capsys, args, message):
    code = main(["run", "--device", "cpu", "--lattice", str(lattice), "--out", str(tmp_path / "r"), "--dry-run", *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r").exists()  # nothing written


@pytest.mark.slow
def test_batch_by_default_leaves_results_as_they_were(lattice, tmp_path):
    out = sweep(lattice, tmp_path / "r", modes=["exclusive"])
    header = (out / RESULTS_CSV).read_text().splitlines()[0].split(",")
    assert "pattern" not in header and not (out / BURSTS_CSV).exists()
    t = analyse(out)
    assert t.latency.empty and len(t.cells) == 1 and int(load_results(out)["turns"].iloc[0]) == 2


@pytest.mark.slow
@pytest.mark.parametrize("context", ["pocl", "cpu"])
def test_an_interactive_victim_beside_a_batch_neighbour(lattice, tmp_path, context):
    device = cpu_opencl_spec() if context == "pocl" else "cpu"
    out = sweep(lattice, tmp_path / "r", device=device, repeats=3, pattern=FAST_USER, neighbours="batch", bursts=8)
    rows = load_results(out)
    assert (rows["cell_status"] == "ok").all()
    assert rows.set_index(["mode", "replica"])["pattern"].groupby(level=1).unique().map(list).to_dict() == {
        0: [FAST_USER],
        1: ["batch"],
    }
    bursts = load_bursts(out)
    victim = bursts[bursts["role"] == "victim"]
    alone = victim["mode"] == "exclusive"
    assert victim[~alone].groupby("cell_id").size().eq(8).all()  # --bursts: the cap, below any verdict's minimum
    assert victim[alone].groupby("cell_id").size().eq(8).all()  # the alone cell's too, and it runs once
    assert (victim["units"] == 3).all() and (victim["start"] >= victim["arrival"]).all()
    assert (victim["end"] > victim["start"]).all()
    neighbour = bursts[bursts["role"] == "neighbour"]
    assert set(neighbour["units"]) == {2}  # a batch neighbour's call: the cell's turns
    # the neighbour stopped once the victim was done (its last burst began before the victim's end + a poll)
    for _cell, g in bursts.groupby("cell_id"):
        if (g["role"] == "neighbour").any():
            assert g.loc[g["role"] == "neighbour", "start"].max() <= g.loc[g["role"] == "victim", "end"].max() + 0.5
    # turns recorded = the units run; the victim's window from the start instant to its last burst
    v_rows = rows[rows["replica"] == 0]
    for _, r in v_rows.iterrows():
        mine = victim[victim["cell_id"] == r["cell_id"]]
        assert int(r["turns"]) == int(mine["units"].sum())
        assert r["track_end"] == pytest.approx(float(mine["end"].max()), abs=1e-6)
    table = analyse(out).latency
    shared = table[(table["mode"] == "timeslice:2") & (table["role"] == "victim")].iloc[0]
    assert shared["beside"] == "batch" and shared["repeats"] == 3 and shared["bursts"] == 24
    assert victim[alone]["cell_id"].nunique() == 1
    p95 = np.percentile(victim[victim["mode"] == "timeslice:2"].eval("end - arrival"), 95)
    assert shared["latency_p95_s"] == pytest.approx(p95)
    assert np.isfinite(shared["slowdown_p95"]) and shared["slowdown_p95"] > 0
    assert analyse(out).timeslice.empty  # a patterned cell never enters the batch loss tables


@pytest.mark.slow
def test_serving_users_alone_and_together(lattice, tmp_path):
    out = sweep(lattice, tmp_path / "r", repeats=1, pattern="serve:rate=40,size=2", bursts=10)
    bursts = load_bursts(out)
    assert set(bursts["pattern"]) == {"serve:rate=40,size=2"} and set(bursts["units"]) == {2}
    v = bursts[bursts["role"] == "victim"]
    assert (v.groupby("cell_id").size() > 100).all()  # a duration, at least 5 s of arrivals at 40/s (issue 42)
    assert (v["start"] >= v["arrival"] - 1e-6).all()  # a request never starts before it arrives
    # arrivals are the seeded Poisson process: distinct per replica, the same for the same cell and replica
    shared = bursts[bursts["mode"] == "timeslice:2"]
    assert not np.allclose(
        np.diff(shared[shared["replica"] == 0]["arrival"])[:3], np.diff(shared[shared["replica"] == 1]["arrival"])[:3]
    )
    table = analyse(out).latency
    assert set(table["mode"]) == {"exclusive", "timeslice:2"} and set(table["beside"]) == {"", "serve:rate=40,size=2"}


PROGRAM = textwrap.dedent(
    """
    import time
    from sharebench.patterns import parse_pattern
    from sharebench.workloads.bursts import limit_from_env, pattern_from_env, record_bursts, run_pattern, seed_from_env
    from sharebench.workloads.protocol import ready, wait_for_start, write_result

    ready()
    start = wait_for_start()
    pattern = pattern_from_env()
    limit, stop = limit_from_env({"count": 5})
    bursts = run_pattern(pattern, lambda units: time.sleep(0.002 * units), seed=seed_from_env(), stop=stop, **limit)
    record_bursts(bursts, pattern, seed_from_env(), unit="sleeps")
    write_result(start, time.time(), max(1, sum(b.units for b in bursts)), "sleeps")
    """
)


@pytest.mark.slow
def test_an_exec_program_writes_its_burst_record(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    out = sweep(
        None,
        tmp_path / "r",
        engine="exec",
        command=f"{sys.executable} {prog}",
        pattern="interactive:burst=2,think=0.01",
        neighbours="serve:rate=100",
        bursts=6,
    )
    bursts = load_bursts(out)
    victim, neighbour = bursts[bursts["role"] == "victim"], bursts[bursts["role"] == "neighbour"]
    counts = victim.groupby("mode")["cell_id"].value_counts()  # SHAREBENCH_PATTERN_COUNT, not the program's 5
    assert counts["timeslice:2"].eq(6).all() and counts["exclusive"].eq(6).all()  # the cap: it writes no live record
    assert set(victim["pattern"]) == {"interactive:burst=2,think=0.01"}
    assert set(neighbour["pattern"]) == {"serve:rate=100,size=1"} and len(neighbour) > 0  # it stopped at the file
    rows = load_results(out)
    assert set(rows["pattern"]) == {"interactive:burst=2,think=0.01", "serve:rate=100,size=1"}
    assert isinstance(analyse(out).latency, pd.DataFrame) and not analyse(out).latency.empty


def test_a_patterned_cell_tells_its_progress_per_burst(lattice, tmp_path):
    """Every user appends each burst to its live record; the executor tells the sweep's bar the victim's (issue 35,
    issue 42)."""
    workload = Workload(device="cpu", lattice=str(lattice), pattern="interactive:burst=1,think=0.01", bursts=6)
    job = ReplicaJob.of(workload, particles=200, turns=2)
    seen: list[int] = []
    rows = run_cell(cell_run("timeslice:2", job, tmp_path / "c", device=device_of("cpu"), on_progress=seen.append))
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert seen == sorted(set(seen)) and seen[-1] == 6  # growing, ending at the victim's count
    victim, neighbour = (LiveRecord(tmp_path / "c" / f"progress.{r}") for r in (0, 1))
    assert victim.read() == 6 and neighbour.read() >= 1  # a neighbour of the same pattern is a user: it streams too
    assert [b.i for b in victim.bursts] == list(range(6))
