"""`sharebench history` with a local store: real results folders (the committed H200 run, its
timeslice:2 windows stretched per repeat to make steps and noise) added, shown, checked, accepted."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sharebench.analysis import analyse
from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.history import (
    CheckOptions,
    check_history,
    compare_repeats,
    false_alarm_rate,
    load_runs,
    open_store,
    run_rows,
)
from support.paths import ROOT

TEMPLATE = ROOT / "tests" / "data" / "results" / "h200" / "warm" / "warm-10M-1turn"
MODE = "timeslice:2"


def make_run(tmp: Path, name: str, day: int, stretch: list[float], node: str = "gpu-node-1", uuid: str = "") -> Path:
    """A results folder: the template's rows with each timeslice:2 repeat's tracking windows stretched
    by ``stretch[repeat - 1]`` (its span and so its loss grow by about that factor), its provenance
    dated ``day`` December 2026 on ``node``."""
    out = tmp / name
    out.mkdir(parents=True)
    df = pd.read_csv(TEMPLATE / "results.csv")
    for r, k in enumerate(stretch, 1):
        sel = (df["mode"] == MODE) & (df["repeat"] == r)
        df.loc[sel, "track_end"] = (
            df.loc[sel, "track_start"] + (df.loc[sel, "track_end"] - df.loc[sel, "track_start"]) * k
        )
        df.loc[sel, "track_s"] = df.loc[sel, "track_s"] * k
    df.to_csv(out / "results.csv", index=False)
    prov = json.loads((TEMPLATE / "provenance.json").read_text())
    prov["created_utc"] = f"2026-12-{day:02d}T03:00:00+00:00"
    prov["cluster"]["node"] = node
    if uuid:
        prov["gpu"]["used_uuid"] = uuid
    (out / "provenance.json").write_text(json.dumps(prov))
    return out


def history(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["history", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_run_becomes_one_row_per_loss_cell_with_its_repeats():
    run = run_rows(TEMPLATE)
    rows = run.rows.set_index("mode")
    assert sorted(rows.index) == ["mps:2", "timeslice:2"]
    ts = rows.loc[MODE]
    losses = np.array([float(x) for x in ts["repeat_losses_pct"].split()])
    assert len(losses) == ts["repeats"] == 3
    # the mean of the per-repeat losses is the report's loss (T_1 is the run's mean in both)
    assert math.isclose(losses.mean(), ts["loss_pct"], abs_tol=1e-3)
    tables = pd.read_csv(TEMPLATE / "tables" / "timeslice.csv")
    assert math.isclose(float(tables["loss_pct"].iloc[0]), ts["loss_pct"], abs_tol=0.01)
    assert ts["gpu_model"] == "H200" and ts["gpu_uuid"].startswith("GPU-0c614d80") and ts["driver"] == "580.159.04"
    assert run.time_utc == "2026-12-03T07:57:53+0000" and run.file_name.startswith("20261203T075753Z_vm_")


def test_add_twice_is_a_no_op_and_show_writes_table_and_plot(tmp_path, capsys):
    store = tmp_path / "store"
    a = make_run(tmp_path, "a", 1, [1.0, 1.0, 1.0])
    code, out, _ = history(capsys, "add", str(a), "--to", str(store))
    assert code == 0 and out.startswith("added: run ")
    files = sorted((store / "runs").iterdir())
    assert len(files) == 1
    before = files[0].read_bytes()
    code, out, _ = history(capsys, "add", str(a), "--to", str(store))
    assert code == 0 and out.startswith("already in the store: run ")
    assert sorted((store / "runs").iterdir()) == files and files[0].read_bytes() == before
    make_run(tmp_path, "b", 2, [1.0, 1.0, 1.0], uuid="GPU-bbbbbbbb-0000-0000-0000-000000000002")
    assert history(capsys, "add", str(tmp_path / "b"), "--to", str(store))[0] == 0
    code, out, _ = history(
        capsys, "show", str(store), "--mode", MODE, "--plot", str(tmp_path / "plot"), "--csv", str(tmp_path / "t.csv")
    )
    assert code == 0
    t = pd.read_csv(tmp_path / "t.csv")
    assert list(t["mode"]) == [MODE, MODE] and list(t["time_utc"].str[:10]) == ["2026-12-01", "2026-12-02"]
    assert (tmp_path / "plot.png").stat().st_size > 10_000 and (tmp_path / "plot.svg").is_file()
    # the provenance change, marked on the time axis and printed
    assert "machine changed on gpu-node-1 at 2026-12-02T03:00:00+0000: gpu_uuid GPU-0c614d80→GPU-bbbbbbbb" in out
    code, out, _ = history(capsys, "show", str(store), "--since", "2026-12-02", "--plot", str(tmp_path / "p2"))
    assert code == 0 and "2026-12-01" not in out and "2026-12-02" in out


def test_check_names_a_real_step_and_accept_starts_a_new_baseline(tmp_path, capsys):
    store = str(tmp_path / "store")
    rng = np.random.default_rng(7)
    for day in range(1, 5):  # four runs of noise (0.3% of the span per repeat)
        make_run(tmp_path, f"r{day}", day, list(1 + rng.normal(0, 0.003, 3)))
        assert history(capsys, "add", str(tmp_path / f"r{day}"), "--to", store)[0] == 0
    code, out, _ = history(capsys, "check", store)
    assert code == 0, out
    assert out.strip().endswith("0 change(s) in 2 cell(s); 2 had a baseline to compare with")
    make_run(tmp_path, "step", 5, list(1.05 + rng.normal(0, 0.003, 3)))  # +5% span: about +6.6 loss points
    code, out, _ = history(capsys, "add", str(tmp_path / "step"), "--to", store, "--check")
    assert code == 1
    (line,) = [x for x in out.splitlines() if x.startswith("changed: ")]
    assert f"node gpu-node-1 {MODE} batch 10,000,000 particles x 1 turns" in line and "Welch p = " in line
    delta = float(line.split("(")[2].split(" pts")[0])
    assert 5.5 < delta < 8.0
    assert "mps:2" not in out  # the untouched cell did not change
    code, out, _ = history(capsys, "accept", store, "--node", "gpu-node-1", "--mode", MODE)
    assert code == 0 and "the baseline starts at run" in out
    assert history(capsys, "check", store)[0] == 0
    make_run(tmp_path, "after", 6, list(1.05 + rng.normal(0, 0.003, 3)))  # same as the accepted level
    assert history(capsys, "add", str(tmp_path / "after"), "--to", store, "--check")[0] == 0


def test_noise_alone_never_alarms_end_to_end_over_seeds(tmp_path, capsys):
    """Four series of five noisy runs each (1% of the span per repeat, ~1.3 loss points): no alarm."""
    for seed in range(4):
        rng = np.random.default_rng(100 + seed)
        store = str(tmp_path / f"s{seed}")
        for day in range(1, 6):
            folder = make_run(tmp_path / f"s{seed}", f"r{day}", day, list(1 + rng.normal(0, 0.01, 3)))
            assert history(capsys, "add", str(folder), "--to", store)[0] == 0
        code, out, _ = history(capsys, "check", store)
        assert code == 0, (seed, out)


def test_false_alarm_rate_is_stated_and_holds():
    """Noise alone (per-repeat sd 1 point, 3 repeats, 5 baseline runs of 3). Welch's test alone alarms
    at 2.9% for alpha = 1% (measured: its degrees-of-freedom approximation is liberal with 3 samples
    against 15), so the threshold does the rest: with 2 points, 0.13% (0.3% or less)."""
    welch_only = false_alarm_rate(2000, CheckOptions(threshold_pts=1e-9), seed=1)
    lo, hi = stats.binomtest(round(welch_only * 2000), 2000).proportion_ci(0.999)
    assert lo <= 0.029 <= hi and welch_only < 0.05, welch_only
    default = false_alarm_rate(2000, CheckOptions(), seed=2)
    assert default <= 0.003, default
    # run-to-run shifts (sd 0.5 point) beside the repeat noise: the threshold still holds it under 1%
    assert false_alarm_rate(2000, CheckOptions(), run_sigma_pts=0.5, seed=3) <= 0.01
    # power: with 3 repeats a 5-point step (5 sd) is found in 73% of series, a 10-point one in 97%
    assert 0.6 <= false_alarm_rate(500, CheckOptions(), step_pts=5.0, seed=4) <= 0.85
    assert false_alarm_rate(500, CheckOptions(), step_pts=10.0, seed=4) >= 0.95


def test_compare_repeats_needs_repeats_and_a_baseline():
    opts = CheckOptions()
    assert compare_repeats(np.array([40.0, 41, 42]), np.array([]), opts)[0] == "no baseline"
    assert compare_repeats(np.array([40.0]), np.array([30.0, 31, 32]), opts)[0] == "too few repeats"
    status, delta, p = compare_repeats(np.array([40.0, 41, 42]), np.array([30.0, 31, 32, 30, 31, 32]), opts)
    assert status == "changed" and math.isclose(delta, 10.0) and p < 0.01
    # significant but below the threshold: not a change
    assert compare_repeats(np.array([31.5, 31.6, 31.7]), np.array([30.0, 30.1, 30.2] * 2), opts)[0] == "same"


def test_baseline_is_the_last_n_runs(tmp_path):
    runs = pd.DataFrame(
        [
            dict(
                run_id=f"r{i}",
                time_utc=f"2026-12-0{i}T00:00:00+0000",
                node="n",
                engine="e",
                backend="b",
                device_class="gpu",
                lattice="l",
                particles=1,
                turns=1,
                mode=MODE,
                pattern="batch",
                loss_pct=v,
                repeat_losses_pct=f"{v} {v + 0.1} {v - 0.1}",
            )
            for i, v in enumerate([50.0, 30.0, 30.0, 30.0], 1)
        ]
    )
    (wide,) = check_history(runs, [], CheckOptions(baseline_runs=3))
    assert wide.baseline_run_ids == ("r1", "r2", "r3") and wide.status == "same"
    (narrow,) = check_history(runs, [], CheckOptions(baseline_runs=2))
    assert narrow.baseline_run_ids == ("r2", "r3") and narrow.delta_pts == 0.0


@pytest.mark.parametrize(
    "argv,message",
    [
        (["check", "{tmp}/none"], "no history store at {tmp}/none: add a run first"),
        (
            ["check", "{tmp}/file.txt"],
            "history store {tmp}/file.txt is a file, not a folder; allowed: a local folder or s3://bucket/prefix",
        ),
        (
            ["check", "ftp://x/y"],
            "history store 'ftp://x/y' is not a folder or an s3 URL; allowed: a local folder or s3://bucket/prefix",
        ),
        (["check", "s3://"], "history store 's3://' names no bucket; allowed: a local folder or s3://bucket/prefix"),
        (["add", "{tmp}/nothing", "--to", "{tmp}/s"], "results folder {tmp}/nothing does not exist"),
        (["add", "{tmp}", "--to", "{tmp}/s"], "results folder {tmp} has no results.csv"),
        (["check", "{tmp}", "--threshold", "0"], "bad --threshold 0; allowed: percentage points > 0"),
        (["check", "{tmp}", "--threshold", "-1"], "bad --threshold -1; allowed: percentage points > 0"),
        (["check", "{tmp}", "--baseline", "0"], "bad --baseline '0'; allowed: a whole number >= 1"),
        (["check", "{tmp}", "--alpha", "1.5"], "bad --alpha 1.5; allowed: a probability in (0, 1)"),
        (["show", "{tmp}", "--since", "yesterday"], "bad --since 'yesterday'; allowed: an ISO date or time"),
        (["show", "{tmp}", "--mode", "sliced"], "unknown sharing mode 'sliced'"),
        (["add", "{tmp}/ok", "--to", "{tmp}/s", "--pushgateway", "pushgw:9091"], "bad --pushgateway 'pushgw:9091'"),
    ],
)
def test_bad_input_is_one_line(tmp_path, capsys, argv, message):
    (tmp_path / "file.txt").write_text("x")
    make_run(tmp_path, "ok", 1, [1.0, 1.0, 1.0])
    code, out, err = history(capsys, *[a.format(tmp=tmp_path) for a in argv])
    assert code == 2
    assert err.startswith("sharebench: error: " + message.format(tmp=tmp_path)), err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_store_is_one_line(tmp_path, capsys):
    store = tmp_path / "ro"
    store.mkdir()
    store.chmod(0o500)
    try:
        code, _, err = history(capsys, "add", str(make_run(tmp_path, "a", 1, [1.0] * 3)), "--to", str(store))
    finally:
        store.chmod(0o700)
    assert code == 2 and "cannot write to the history store" in err


def test_a_killed_add_leaves_no_file_readers_see(tmp_path):
    """A writer killed between writing and renaming leaves only a hidden temporary file: the store reads
    as before, and the next add of that run writes it whole."""
    store = tmp_path / "store"
    run = make_run(tmp_path, "a", 1, [1.0] * 3)
    script = (
        "import os, signal, sys\n"
        "import sharebench.files as f\n"
        "real = os.replace\n"
        "def killed(src, dst):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "os.replace = killed\n"
        "from sharebench.cli import main\n"
        f"sys.exit(main(['history', 'add', {str(run)!r}, '--to', {str(store)!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    left = list((store / "runs").iterdir())
    assert left and all(p.name.startswith(".") for p in left)  # the torn write, hidden
    assert load_runs(open_store(str(store))).empty
    assert main(["history", "add", str(run), "--to", str(store)]) == 0
    assert len(load_runs(open_store(str(store)))) == 2


def test_open_store_refuses_a_missing_folder_unless_adding(tmp_path):
    with pytest.raises(UserError, match="no history store at"):
        open_store(str(tmp_path / "new"))
    assert open_store(str(tmp_path / "new"), create=True).url == str(tmp_path / "new")
    shutil.rmtree(tmp_path, ignore_errors=True)


def resize(folder: Path, particles: int, k: float) -> Path:
    """The run in ``folder`` as if it had tracked ``particles`` per replica, every window ``k`` times as long."""
    df = pd.read_csv(folder / "results.csv")
    df["particles"] = particles
    df["track_end"] = df["track_start"] + (df["track_end"] - df["track_start"]) * k
    df["track_s"] = df["track_s"] * k
    df.to_csv(folder / "results.csv", index=False)
    return folder


def test_a_row_keeps_its_rate_trust_and_disturbance():
    ts = run_rows(TEMPLATE).rows.set_index("mode").loc[MODE]
    thr = analyse(TEMPLATE).throughput  # the report's throughput table
    shown = float(thr.loc[thr["mode"] == MODE, "throughput_pt_per_s"].iloc[0])
    assert math.isclose(ts["rate_pt_per_s"], shown, rel_tol=1e-6)
    rates = [float(x) for x in ts["repeat_rates_pt_per_s"].split()]
    assert len(rates) == 3 and min(rates) <= ts["rate_pt_per_s"] <= max(rates)
    assert ts["trust"] == "ok" and ts["disturbed"] == ""


def test_runs_of_other_sizes_are_compared_by_their_rate_per_particle_turn(tmp_path, capsys):
    """Calibrated CPU runs measure other sizes from run to run: with no run of its own size the newest is
    compared by its rate per particle-turn with the runs of other sizes (issue 36: '0 had a baseline')."""
    store = str(tmp_path / "store")
    rng = np.random.default_rng(11)
    for day in range(1, 4):
        make_run(tmp_path, f"r{day}", day, list(1 + rng.normal(0, 0.003, 3)))
        assert history(capsys, "add", str(tmp_path / f"r{day}"), "--to", store)[0] == 0
    same = resize(make_run(tmp_path, "half", 4, list(1 + rng.normal(0, 0.003, 3))), 5_000_000, 0.5)
    assert history(capsys, "add", str(same), "--to", store)[0] == 0
    code, out, _ = history(capsys, "check", store)
    assert code == 0, out
    assert out.strip().endswith(
        "0 change(s) in 4 cell(s); 4 had a baseline to compare with (2 by the rate per particle-turn: sizes differ)"
    )
    slow = resize(make_run(tmp_path, "slow", 5, list(1 + rng.normal(0, 0.003, 3))), 4_000_000, 0.4 * 1.1)
    code, out, _ = history(capsys, "add", str(slow), "--to", store, "--check")
    assert code == 1, out
    lines = [x for x in out.splitlines() if x.startswith("changed: ")]
    assert len(lines) == 2 and all("sizes differ: against 5,000,000, 10,000,000 particles" in x for x in lines)
    change = float(lines[0].split("particle-turns/s (")[1].split("%")[0])
    assert -12 < change < -6  # 10% slower windows: about 9% fewer particle-turns per second


def test_a_disturbed_run_is_no_baseline(tmp_path):
    runs = pd.DataFrame(
        [
            dict(
                run_id=f"r{i}",
                time_utc=f"2026-12-0{i}T00:00:00+0000",
                node="n",
                engine="e",
                backend="b",
                device_class="gpu",
                lattice="l",
                particles=1,
                turns=1,
                mode=MODE,
                pattern="batch",
                loss_pct=v,
                repeat_losses_pct=f"{v} {v + 0.1} {v - 0.1}",
                trust="ok" if i < 4 else "1 cell(s) of it or its baseline disturbed (cpu busy)",
                disturbed="cpu busy" if i == 3 else "",
            )
            for i, v in enumerate([30.0, 30.0, 50.0, 30.0], 1)
        ]
    )
    (v,) = check_history(runs, [], CheckOptions())
    assert v.baseline_run_ids == ("r1", "r2") and v.status == "same"
    assert v.line().endswith(
        "; newest run not trusted as measured: 1 cell(s) of it or its baseline disturbed (cpu busy)"
    )


def test_show_writes_into_a_new_folder_or_says_why_not(tmp_path, capsys):
    store = str(tmp_path / "store")
    assert history(capsys, "add", str(make_run(tmp_path, "a", 1, [1.0] * 3)), "--to", store)[0] == 0
    deep = tmp_path / "new" / "deeper"
    code, out, _ = history(capsys, "show", store, "--csv", str(deep / "t.csv"), "--plot", str(deep / "plot"))
    assert code == 0 and (deep / "t.csv").is_file() and (deep / "plot.png").is_file()
    assert list(pd.read_csv(deep / "t.csv").columns[-5:]) == ["rate_pt_per_s", "trust", "disturbed", "run_id", "source"]
    (tmp_path / "file").write_text("x")
    code, _, err = history(capsys, "show", store, "--csv", str(tmp_path / "file" / "t.csv"))
    assert code == 2 and err.startswith(f"sharebench: error: cannot create the folder of --csv {tmp_path}/file/t.csv")
    assert len(err.strip().splitlines()) == 1


def test_show_without_plot_writes_into_the_store_never_the_current_folder(tmp_path, capsys, monkeypatch):
    store = tmp_path / "store"
    assert history(capsys, "add", str(make_run(tmp_path, "a", 1, [1.0] * 3)), "--to", str(store))[0] == 0
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    code, out, _ = history(capsys, "show", str(store))
    assert code == 0 and list(here.iterdir()) == []
    png, svg = store / "plots" / "history.png", store / "plots" / "history.svg"
    assert png.read_bytes().startswith(b"\x89PNG") and svg.read_text().lstrip().startswith("<?xml")
    assert out.splitlines()[-1] == f"written: {png}  {svg}"
    assert history(capsys, "check", str(store))[0] == 0  # the plot beside the runs: the store still reads


def test_a_store_of_the_older_schema_still_reads(tmp_path):
    store = tmp_path / "store"
    (store / "runs").mkdir(parents=True)
    rows = run_rows(make_run(tmp_path, "a", 1, [1.0] * 3)).rows
    old = rows.drop(columns=["rate_pt_per_s", "repeat_rates_pt_per_s", "trust", "disturbed"]).assign(schema_version=1)
    old.to_csv(store / "runs" / "20261201T030000Z_n_old.csv", index=False)
    runs = load_runs(open_store(str(store)))
    assert len(runs) == 2 and runs["rate_pt_per_s"].isna().all() and (runs["trust"] == "").all()
    assert all(v.status == "no baseline" for v in check_history(runs, [], CheckOptions()))
