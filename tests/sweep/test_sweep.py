"""The sweep: validation before anything runs, real tiny sweeps on PoCL and the CPU context, resume, Ctrl-C."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_allclose

from sharebench.errors import UserError
from sharebench.report import TABLE_TITLES, build_report
from sharebench.results import load_results
from sharebench.sweep import SweepConfig, parse_particles, run_sweep, validate
from sharebench.telemetry.provenance import MACHINE_STATE_FIELDS
from sharebench.workloads import Workload
from sharebench.workloads.workload import KEYS
from support.contexts import cpu_opencl_spec, device_of

pytestmark = pytest.mark.slow  # real replica processes and sweeps


def cfg(lattice_path, **kw):
    """A tiny sweep's config; keyword arguments named as Workload fields go to its workload."""
    workload = {"device": "cpu", "lattice": lattice_path, **{k: v for k, v in kw.items() if k in KEYS}}
    base = dict(
        modes=["exclusive"],
        particles=[2000],
        turns=20,
        repeats=1,
        warmup_repeats=0,
        progress=False,
        telemetry_interval_s=None,
        command=["test"],
    )
    base.update({k: v for k, v in kw.items() if k not in KEYS})
    return SweepConfig(workload=Workload.from_dict(workload), **base)


@pytest.mark.parametrize(
    "text, values", [("5e6,1e7,1.5e7", [5_000_000, 10_000_000, 15_000_000]), ("1000, 2_000,1000", [1000, 2000])]
)
def test_parse_particles(text, values):
    assert parse_particles(text) == values


@pytest.mark.parametrize(
    "change, message",
    [
        (
            dict(modes=["bogus"]),
            "unknown sharing mode 'bogus'; allowed: exclusive, timeslice:N[/INTERVAL], mps:N[@PCT], "
            "mig:LAYOUT, mig-emulated:LAYOUT, partition:N",
        ),
        (dict(modes=["timeslice:0"]), "replica count must be >= 1 in 'timeslice:0'"),
        (dict(particles="0"), "bad particle count '0'; allowed: whole numbers > 0 such as 10000 or 5e6"),
        (dict(particles="-5"), "bad particle count '-5'; allowed: whole numbers > 0 such as 10000 or 5e6"),
        (dict(particles="1.5"), "bad particle count '1.5'; allowed: whole numbers > 0 such as 10000 or 5e6"),
        (dict(repeats=0), "bad repeats 0; allowed: a whole number 1..1000"),
        (dict(turns=0), "bad turns 0; allowed: a whole number 1..1000000000"),
        (dict(modes=["mps:2"]), "mps:2 needs an NVIDIA GPU (--device cuda, or NVIDIA's OpenCL); the device is cpu"),
        (dict(modes=["partition:64"]), "partition:64 needs at least 64 cores; this process may use"),
        (dict(modes=["mig:1g"]), "mig:1g needs an NVIDIA GPU through CUDA (--device cuda); the device is cpu"),
        (dict(lattice="/nonexistent/line.json"), "lattice file '/nonexistent/line.json' not found"),
        (dict(engine="sixtrack"), "bad engine 'sixtrack': allowed are simpletrack, xtrack, exec"),
        (dict(device="tpu"), "bad device 'tpu': allowed are auto, cpu, cuda[:N], opencl[:P.D]"),
    ],
)
def test_bad_input_is_refused_before_anything_runs(lattice, tmp_path, change, message):
    with pytest.raises(UserError) as e:
        run_sweep(cfg(lattice, **change), tmp_path / "out")
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()


def test_too_many_particles_for_the_memory(lattice):
    from sharebench.devices import resolve_device

    mem = resolve_device("cpu").memory_bytes
    # 96 B per particle with simpletrack (+ a fixed overhead): fits alone, not in half the memory
    n = int(mem // 2 // 96)
    with pytest.raises(UserError) as e:
        validate(cfg(lattice, modes=["exclusive", "timeslice:2"], particles=[n]))
    msg = str(e.value)
    assert msg.startswith(f"timeslice:2 at {n:,} particles: {n:,} particles need ")
    assert f"but the 1/2 share of the device memory ({mem:,} bytes) is {mem // 2:,} bytes" in msg


def test_defaults_for_this_machine(lattice):
    # (the generated ring would take ~20 s to build)
    plan = validate(SweepConfig(workload=Workload(device="cpu", lattice=lattice)))
    assert [m.label for m in plan.modes] == ["exclusive", "timeslice:2", "timeslice:4", "partition:2"]
    assert plan.particles == (500, 1000) and plan.turns == 10 and plan.config.repeats == 3
    # a shared mode alone gets its baseline
    plan = validate(cfg(lattice, modes=["timeslice:2"]))
    assert [m.label for m in plan.modes] == ["exclusive", "timeslice:2"]


def _check_consistent(out, modes, particles, repeats, warmups):
    df = load_results(out)
    n_rep = {"exclusive": 1, "timeslice:2": 2, "partition:2": 2, "mps:2": 2}
    assert len(df) == sum(n_rep[m] for m in modes) * len(particles) * (repeats + warmups)
    assert set(df["status"]) == {"ok"} and set(df["cell_status"]) == {"ok"}, df["error"].tolist()
    assert df["warmup"].sum() == sum(n_rep[m] for m in modes) * len(particles) * warmups
    meas = df[~df["warmup"]]
    # cells the analysis left out (overlap < 95% on a busy machine) must be left out here too
    cells = pd.read_csv(out / "tables" / "cells.csv")
    excluded = set(cells.loc[cells["excluded"], "cell_id"])
    flags = pd.read_csv(out / "tables" / "flags.csv")
    # flags cover the measured cells; a warm-up cell (repeat 0) is out of the statistics anyway
    measured = set(meas["cell_id"])
    assert excluded & measured == set(flags.loc[flags["excluded"], "cell_id"])
    meas = meas[~meas["cell_id"].isin(excluded)]
    tables = {n: pd.read_csv(out / "tables" / f"{n}.csv") for n in ("timeslice", "partition", "throughput")}
    for p in particles:
        ex = meas[(meas["mode"] == "exclusive") & (meas["particles"] == p)]
        t1 = float(np.median(ex["track_s"]))
        ts = meas[(meas["mode"] == "timeslice:2") & (meas["particles"] == p)]
        spans = ts.groupby("cell_id").apply(
            lambda g: g["track_end"].max() - g["track_start"].min(), include_groups=False
        )
        rows = tables["timeslice"][tables["timeslice"]["particles"] == p]
        assert len(rows) == (1 if len(spans) else 0)
        for _, row in rows.iterrows():
            assert_allclose([row["T1_s"], row["TN_s"]], [t1, float(np.median(spans))], rtol=1e-9)
            assert_allclose(row["loss_pct"], 100 * (np.median(spans) - 2 * t1) / (2 * t1), rtol=1e-9)
        pt = meas[(meas["mode"] == "partition:2") & (meas["particles"] == p)]
        parts = tables["partition"][tables["partition"]["particles"] == p]
        assert len(parts) == (1 if len(pt) else 0)
        for _, part in parts.iterrows():
            slice_s = float(np.median(pt.groupby("cell_id")["track_s"].mean()))
            cores = len(os.sched_getaffinity(0))
            assert_allclose(
                [part["full_units"], part["slice_units"], part["slice_s"], part["ideal_s"]],
                [cores, cores // 2, slice_s, t1 * cores / (cores // 2)],
                rtol=1e-9,
            )
    for name in ("loss_vs_particles", "time_vs_particles", "throughput"):
        for ext in ("png", "svg"):
            assert (out / "plots" / f"{name}.{ext}").stat().st_size > 1000
    md = (out / "report.md").read_text()
    sections = {"timeslice:2": "timeslice", "mps:2": "mps", "partition:2": "partition"}
    for mode in set(modes) & set(sections):  # a table with rows has its section (a cell left out: no rows)
        rows = len(pd.read_csv(out / "tables" / f"{sections[mode]}.csv"))
        assert (f"## {TABLE_TITLES[sections[mode]]}" in md) == (rows > 0), mode
    assert "timeslice:2" in (out / "report.html").read_text()
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["command"] == ["test"] and prov["kind"] == "provenance"
    state = prov["machine_state"]  # issue 45: every field of the machine's state, or the reason it is missing
    assert all(state[f] is not None or state["unavailable"][f] for f in MACHINE_STATE_FIELDS)
    assert prov["sharebench"]["source_sha256"]
    return df


@pytest.mark.parametrize("context", ["pocl", "cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_tiny_sweep_end_to_end(lattice, tmp_path, context):
    """CI's sweep: exclusive, timeslice:2, partition:2 on PoCL and on the CPU context (exclusive,
    timeslice:2, mps:2 on a CUDA GPU), tables consistent with the rows."""
    device = device_of(context if context != "pocl" else cpu_opencl_spec())
    gpu = device.kind == "gpu"
    if not gpu and len(os.sched_getaffinity(0)) < 2:
        pytest.skip("partition:2 needs 2 cores")
    modes = ["exclusive", "timeslice:2", "mps:2" if gpu else "partition:2"]
    # PoCL: one warm-up + one measured repeat; CPU context: two measured repeats (CI budget)
    repeats, warmups = (1, 1) if device.backend != "cpu" else (2, 0)
    out = run_sweep(
        cfg(
            lattice,
            device=device.spec,
            modes=modes,
            particles=[3000],
            turns=60,
            repeats=repeats,
            warmup_repeats=warmups,
            telemetry_interval_s=0.1,
        ),
        tmp_path / "r",
    )
    build_report(out)
    df = _check_consistent(out, modes, [3000], repeats, warmups)
    assert set(df["device_class"]) == {device.kind} and set(df["backend"]) == {device.backend}
    if any(c.startswith("tel_") for c in df.columns):  # telemetry hook present: its summary is on every row
        assert (df["tel_source"] != "").all()


def test_resume_runs_only_what_is_missing_and_refuses_to_overwrite(lattice, tmp_path):
    out = tmp_path / "r"
    run_sweep(cfg(lattice), out)
    first = load_results(out)
    assert first["cell_id"].tolist() == ["exclusive_p2000_r1"]
    with pytest.raises(UserError, match="already holds results.csv; use --resume to continue it, or another --out"):
        run_sweep(cfg(lattice), out)
    run_sweep(cfg(lattice, repeats=2, resume=True), out)
    after = load_results(out)
    assert after["cell_id"].tolist() == ["exclusive_p2000_r1", "exclusive_p2000_r2"]
    assert_allclose(after["track_s"].iloc[0], first["track_s"].iloc[0])
    assert "resumed: 1 cell(s) already on disk" in (out / "notes.txt").read_text()
    assert len(json.loads((out / "sweep.json").read_text())["sweeps"]) == 2
    # the first session's provenance stays; the second session's sits beside it
    assert len(list(out.glob("provenance-*.json"))) == 1 and (out / "provenance.json").exists()


def test_stop_after_then_resume(lattice, tmp_path):
    out = tmp_path / "r"
    run_sweep(cfg(lattice, repeats=2, stop_after_s=0.05), out)  # the first cell starts, then the budget is spent
    assert load_results(out)["cell_id"].tolist() == ["exclusive_p2000_r1"]
    assert "stopped after 0.05 s (--stop-after): 1 of 2 cell(s) not run" in (out / "notes.txt").read_text()
    run_sweep(cfg(lattice, repeats=2, resume=True), out)
    assert load_results(out)["cell_id"].tolist() == ["exclusive_p2000_r1", "exclusive_p2000_r2"]


def test_interrupt_keeps_what_is_on_disk(lattice, tmp_path):
    out = tmp_path / "r"

    def stop_after_first(rows):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(cfg(lattice, repeats=3), out, on_cell=stop_after_first)
    df = load_results(out)
    assert df["cell_id"].tolist() == ["exclusive_p2000_r1"] and df["status"].tolist() == ["ok"]


def test_a_file_that_is_not_a_line_is_refused_before_anything_runs(tmp_path):
    bad = tmp_path / "notaline.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(UserError) as e:
        run_sweep(cfg(str(bad)), tmp_path / "out")
    assert str(e.value).startswith(f"lattice file '{bad}' is not an Xsuite line")
    assert not (tmp_path / "out").exists()


def test_resume_refuses_results_of_another_device(lattice, tmp_path):
    from sharebench.results import ResultsWriter

    ResultsWriter(tmp_path).append(
        [
            dict(
                sweep_id="s",
                cell_id="exclusive_p2000_r1",
                mode="exclusive",
                replica=0,
                replicas=1,
                particles=2000,
                turns=20,
                track_s=1.0,
                device_class="gpu",
                backend="cuda",
                device_name="NVIDIA H200",
                status="ok",
                cell_status="ok",
            )
        ]
    )
    with pytest.raises(UserError) as e:
        run_sweep(cfg(lattice, resume=True), tmp_path)
    assert str(e.value).startswith(
        f"{tmp_path} holds results measured on NVIDIA H200 (cuda, gpu); this run's device is "
    )
    assert "use another --out (and compare the two with sharebench compare A B)" in str(e.value)
