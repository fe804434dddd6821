"""The replica protocol and ``--engine exec``: a shell and a Python workload measured for real in every
local mode on the CPU, process timing, and each failure failing its cell (the sweep goes on)."""

from __future__ import annotations

import json
import time

import pandas as pd
import psutil
import pytest

from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.report import build_report
from sharebench.results import load_results
from sharebench.sweep import SweepConfig, run_sweep
from sharebench.workloads import Workload
from sharebench.workloads.protocol import parse_result, workload_name
from support.paths import ROOT

pytestmark = pytest.mark.slow  # real replica processes and sweeps

EXAMPLES = ROOT / "examples" / "workloads"
LOCAL_MODES = ["exclusive", "timeslice:2", "partition:2"]


def exec_cfg(command: str, work, modes=None, timing="protocol", **kw) -> SweepConfig:
    base = dict(
        workload=Workload(device="cpu", engine="exec", command=command, timing=timing),
        modes=modes or ["exclusive"],
        particles=work,
        repeats=1,
        warmup_repeats=0,
        progress=False,
        telemetry_interval_s=None,
        command=["test"],
    )
    base.update(kw)
    return SweepConfig(**base)


@pytest.mark.parametrize(
    "command, name, unit, work",
    [
        (f"{EXAMPLES}/sum_sqrt.sh", "sum_sqrt", "sqrt", 400_000),
        (f"python3 {EXAMPLES}/hash_chain.py", "hash_chain", "hash", 200_000),
    ],
)
def test_workload_in_every_local_mode(command, name, unit, work, tmp_path):
    out = run_sweep(exec_cfg(command, [work], modes=LOCAL_MODES), tmp_path / "out")
    df = load_results(out)
    assert sorted(set(df["mode"])) == sorted(LOCAL_MODES)
    assert len(df) == 1 + 2 + 2
    assert (df["cell_status"] == "ok").all(), df["cell_error"].tolist()
    assert set(df["engine"]) == {name} and set(df["exec_timing"]) == {"protocol"}
    assert (df["particles"] == work).all() and (df["track_s"] > 0).all()
    assert (df["track_end"] >= df["track_start"]).all()
    # partition:2 pinned each replica (and so its program) to its own core
    assert sorted(df.loc[df["mode"] == "partition:2", "cpus"]) == ["0", "1"]
    for mode in ("timeslice:2", "partition:2"):  # the barrier: both programs started within a few ms
        starts = df.loc[df["mode"] == mode, "track_start"]
        assert starts.max() - starts.min() < 0.25, (mode, starts.tolist())
    rec = json.loads(next((out / "cells").glob("timeslice-2_*")).joinpath("record.1.json").read_text())
    assert rec["extra"]["unit"] == unit and rec["extra"]["work"] == work and rec["exec_timing"] == "protocol"
    if name == "hash_chain":  # SHAREBENCH_REPLICA reached the program: each replica hashed its own seed
        digests = {
            json.loads(p.read_text())["extra"]["digest"]
            for p in next((out / "cells").glob("timeslice-2_*")).glob("record.*.json")
        }
        assert len(digests) == 2
    report = build_report(out)["markdown"].read_text()
    assert "## Workloads: which mode suits which workload" in report and f"| {name} | protocol |" in report
    table = pd.read_csv(out / "tables" / "workloads.csv")
    assert set(table["workload"]) == {name} and "exclusive" in set(table["mode"])


def test_process_timing_times_the_whole_program(tmp_path):
    out = run_sweep(exec_cfg("sleep 0.4", [1], modes=["exclusive", "timeslice:2"], timing="process"), tmp_path / "out")
    df = load_results(out)
    assert (df["cell_status"] == "ok").all(), df["cell_error"].tolist()
    assert set(df["exec_timing"]) == {"process"} and set(df["engine"]) == {"sleep"}
    assert (df["track_s"] >= 0.4).all() and (df["track_s"] < 5).all()


@pytest.mark.parametrize(
    "command, reason",
    [
        ("no-such-program-sharebench --x", "command 'no-such-program-sharebench' not found"),
        ("sh -c 'echo boom >&2; exit 3'", "command 'sh' exited with status 3: boom"),
        ("true", "the program wrote no result to"),
        ("sh -c 'echo not json > \"$SHAREBENCH_RESULT_FILE\"'", "malformed result in"),
        ('sh -c \'echo {\\"start\\": 1} > "$SHAREBENCH_RESULT_FILE"\'', "missing end, work, unit"),
        (
            'sh -c \'echo {\\"start\\": 2, \\"end\\": 1, \\"work\\": 1, \\"unit\\": \\"x\\"} > '
            '"$SHAREBENCH_RESULT_FILE"\'',
            "end 1 before start 2",
        ),
    ],
)
def test_a_failing_program_fails_its_cell_and_the_sweep_goes_on(command, reason, tmp_path):
    out = run_sweep(exec_cfg(command, [1, 2]), tmp_path / "out")
    df = load_results(out)
    assert sorted(df["particles"]) == [1, 2]  # both cells ran: the first failure did not stop the sweep
    assert (df["cell_status"] == "failed").all()
    for err in df["cell_error"]:
        assert reason in err and "\n" not in err and "Traceback" not in err, err


def test_a_program_that_never_gets_ready_is_stopped(tmp_path):
    t0 = time.monotonic()
    out = run_sweep(exec_cfg("sleep 60", [1], ready_timeout_s=1.5), tmp_path / "out")
    assert time.monotonic() - t0 < 30
    df = load_results(out)
    assert df["cell_error"].iloc[0] == "replica 0: not ready after 1.5 s (setup too slow or hung)"
    time.sleep(0.5)
    left = [
        p
        for p in psutil.process_iter(["cmdline"])
        if (p.info["cmdline"] or [])[:2] == ["sleep", "60"] and p.ppid() == 1
    ]
    assert not left, "the program outlived its replica"


@pytest.mark.parametrize(
    "doc, message",
    [
        ([], "a JSON object with start, end, work, unit is needed, got list"),
        ({"start": 1, "end": 2, "work": 0, "unit": "x"}, "work 0; allowed: a number > 0"),
        ({"start": "a", "end": 2, "work": 1, "unit": "x"}, "start 'a' is not a finite number"),
        ({"start": 1, "end": 2, "work": 1, "unit": ""}, "unit ''; allowed: a non-empty name"),
    ],
)
def test_parse_result_names_the_fault(doc, message):
    with pytest.raises(UserError) as e:
        parse_result(doc, "f.json")
    assert str(e.value) == f"malformed result in f.json: {message}"


def test_workload_names():
    assert workload_name("python -m sharebench.workloads.train --amp") == "train"
    assert workload_name("python3 examples/workloads/hash_chain.py") == "hash_chain"
    assert workload_name("/x/sum_sqrt.sh") == "sum_sqrt"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--engine", "exec", "--work", "10"], "--engine exec needs a command: --exec 'CMD ARGS'"),
        (
            ["--engine", "exec", "--exec", "true"],
            "--engine exec needs --work N[,N...]: the sizes SHAREBENCH_WORK gives the program",
        ),
        (
            ["--engine", "exec", "--exec", "true", "--work", "10", "--exec-timing", "wall"],
            "bad exec timing 'wall'; allowed: protocol, process",
        ),
        (["--exec", "true"], "--exec, --exec-timing and --exec-name need --engine exec; the engine is 'simpletrack'"),
        (
            ["--engine", "exec", "--exec", "true", "--work", "0"],
            "bad work size (--work) '0'; allowed: whole numbers > 0 such as 10000 or 5e6",
        ),
    ],
)
def test_cli_bad_exec_input(argv, message, capsys, tmp_path):
    out = tmp_path / "out"
    assert main(["run", "--device", "cpu", "--out", str(out), "--no-progress", *argv]) == 2
    assert capsys.readouterr().err == f"sharebench: error: {message}\n"
    assert not out.exists()


def test_cli_runs_a_workload(capsys, tmp_path):
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                "--device",
                "cpu",
                "--engine",
                "exec",
                "--exec",
                f"{EXAMPLES}/sum_sqrt.sh",
                "--exec-name",
                "sqrt-sh",
                "--work",
                "1000",
                "--modes",
                "exclusive",
                "--repeats",
                "1",
                "--warmup-repeats",
                "0",
                "--no-telemetry",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    df = load_results(out)
    assert df["engine"].tolist() == ["sqrt-sh"] and df["cell_status"].tolist() == ["ok"]


def test_workloads_of_several_folders_are_compared(tmp_path):
    from sharebench.analysis.workloads import combine_workloads

    # the same work size for both: the report's plots tell the workloads apart
    a = run_sweep(exec_cfg(f"{EXAMPLES}/sum_sqrt.sh", [200_000], modes=["exclusive", "timeslice:2"]), tmp_path / "a")
    b = run_sweep(
        exec_cfg(f"python3 {EXAMPLES}/hash_chain.py", [200_000], modes=["exclusive", "timeslice:2"]), tmp_path / "b"
    )
    out = combine_workloads([a, b], tmp_path / "both")
    df = load_results(out)
    assert sorted(set(df["engine"])) == ["hash_chain", "sum_sqrt"] and len(df) == 6
    build_report(out)
    table = pd.read_csv(out / "tables" / "workloads.csv")
    assert sorted(set(table["workload"])) == ["hash_chain", "sum_sqrt"]
    assert (table.loc[table["mode"] == "exclusive", "gain"] == 1).all()
    with pytest.raises(UserError, match="already holds results.csv"):
        combine_workloads([a], out)
    # another workload resumed into a folder is measured beside the first, in cells of its own
    before = load_results(a)
    run_sweep(
        exec_cfg(f"python3 {EXAMPLES}/hash_chain.py", [200_000], modes=["exclusive", "timeslice:2"], resume=True), a
    )
    after = load_results(a)
    assert sorted(set(after["engine"])) == ["hash_chain", "sum_sqrt"] and len(after) == 6
    pd.testing.assert_frame_equal(
        after[after["engine"] == "sum_sqrt"].reset_index(drop=True), before.reset_index(drop=True), check_dtype=False
    )


@pytest.mark.parametrize("processes", [2, 1])
def test_pipeline_run_step_runs_a_command(processes, tmp_path):
    from sharebench.components import steps
    from sharebench.results import read_json

    out = tmp_path / "rows.json"
    start_at = time.time() + 4
    steps.run_simpletrack(
        mode="timeslice:2",
        particles=200_000,
        turns=1,
        repeat=1,
        replica=processes - 1,
        replicas=2,
        processes=processes,
        start_at=start_at,
        workload={"device": "cpu", "engine": "exec", "command": f"{EXAMPLES}/sum_sqrt.sh", "timing": "protocol"},
        out_path=str(out),
        workdir=str(tmp_path / "cell"),
    )
    rows = read_json(out, "rows")["rows"]
    assert len(rows) == processes  # processes=1: this pod is one replica of the cell's two pods
    assert all(
        r["cell_status"] == "ok"
        and r["engine"] == "sum_sqrt"
        and r["mode"] == "timeslice:2"
        and r["exec_timing"] == "protocol"
        for r in rows
    ), rows
    if processes == 1:  # the program waited for the instant the pods agreed on
        assert start_at <= rows[0]["track_start"] < start_at + 1


def test_mps_check_of_exec_replicas_looks_at_their_programs():
    import subprocess
    import sys

    from sharebench.sharing.mps import exec_client_check

    # two replica processes, each with a program child; the "MPS server" knows the first one's program only
    wrappers = [
        subprocess.Popen([sys.executable, "-c", "import subprocess; subprocess.run(['sleep', '30'])"]) for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 20
        while any(not psutil.Process(w.pid).children() for w in wrappers) and time.monotonic() < deadline:
            time.sleep(0.05)
        kids = [psutil.Process(w.pid).children()[0].pid for w in wrappers]
        clients = {kids[0]}

        def check(pids):  # what MpsDaemon.check_clients answers: '' when every pid is a client
            return "" if all(p in clients for p in pids) else f"{pids} are not clients"

        assert exec_client_check(None, "protocol") is None
        assert exec_client_check(check, "process") is None  # the program starts only after the barrier
        verdict = exec_client_check(check, "protocol")
        assert verdict([wrappers[0].pid]) == ""
        assert verdict(pids := [w.pid for w in wrappers]) == (
            f"no process started by replica process {pids[1]} ([{kids[1]}]) is an MPS client: "
            "they did not run under MPS"
        )
    finally:
        for w in wrappers:
            for c in psutil.Process(w.pid).children(recursive=True):
                c.terminate()
            w.terminate()
            w.wait()


def test_cli_resumes_an_exec_folder_with_its_own_command(tmp_path, capsys):
    out = tmp_path / "out"
    argv = [
        "run",
        "--device",
        "cpu",
        "--engine",
        "exec",
        "--exec",
        f"{EXAMPLES}/sum_sqrt.sh",
        "--work",
        "1000",
        "--modes",
        "exclusive",
        "--repeats",
        "1",
        "--warmup-repeats",
        "0",
        "--no-telemetry",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 0
    resume = ["run", "--resume", "--repeats", "2", "--out", str(out), "--no-progress", "--no-telemetry"]
    assert main(resume) == 2  # the folder's command is never run on the folder's word
    assert "needs --exec: a results folder never names the program to run" in capsys.readouterr().err
    assert main([*resume, "--engine", "exec", "--exec", f"{EXAMPLES}/sum_sqrt.sh"]) == 0
    df = load_results(out)
    assert sorted(df["repeat"]) == [1, 2] and set(df["engine"]) == {"sum_sqrt"}
    assert (df["cell_status"] == "ok").all()
