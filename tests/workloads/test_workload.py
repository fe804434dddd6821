"""The Workload value: one dict form (round trip), one-line errors naming the bad key or value, and the
replica job that carries it (its JSON round trip, the victim, the exec rule)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharebench.errors import UserError
from sharebench.kernel import Barrier, RunConfig
from sharebench.workloads import DEFAULT_WORKLOAD, VICTIM, ReplicaJob, Workload, role
from sharebench.workloads.protocol import check_command
from sharebench.workloads.workload import KEYS
from support.faults import one_line_error, sharebench

DEVICES = st.sampled_from(["auto", "cpu", "cuda", "cuda:3", "opencl", "opencl:0.1", " CPU "])
WORDS = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20)
PATTERNS = st.sampled_from(["batch", "interactive", "Interactive:think=0.2,burst=3", "serve:rate=5", "serve:size=2"])
TRACKERS = st.builds(
    Workload,
    engine=st.sampled_from(["simpletrack", "xtrack", "XTrack"]),
    device=DEVICES,
    lattice=st.none() | WORDS,
    seed=st.integers(0, 2**31),
    pattern=PATTERNS,
    neighbours=st.none() | PATTERNS,
    bursts=st.none() | st.integers(1, 10**6),
)
PROGRAMS = st.builds(
    Workload,
    engine=st.just("exec"),
    device=DEVICES,
    command=WORDS,
    timing=st.sampled_from(["protocol", "process", "Process"]),
    name=st.none() | WORDS,
    seed=st.integers(0, 2**31),
)


@given(TRACKERS | PROGRAMS)
def test_dict_round_trip(w):
    d = w.to_dict()
    assert set(d) == set(KEYS) and None not in d.values()  # a KFP struct holds no null
    assert Workload.from_dict(d) == w
    assert Workload.from_dict(json.loads(json.dumps(d))) == w  # as sweep.json and a KFP struct carry it


@given(TRACKERS | PROGRAMS)
def test_a_kfp_struct_number_is_a_whole_seed(w):
    """A protobuf Struct carries numbers as doubles: seed 3.0 is seed 3."""
    assert Workload.from_dict({**w.to_dict(), "seed": float(w.seed)}).seed == w.seed


def test_defaults_and_normalisation():
    assert Workload.from_dict({}) == Workload() and Workload().to_dict() == DEFAULT_WORKLOAD
    w = Workload.from_dict({"engine": " EXEC ", "device": "CUDA:1", "command": " python3 job.py ", "lattice": ""})
    assert (w.engine, w.device, w.command, w.lattice, w.timing) == (
        "exec",
        "cuda:1",
        "python3 job.py",
        None,
        "protocol",
    )
    assert (
        w.label == "job" and w.table_timing == "protocol" and w.turns(10) == 1 and w.size_name.startswith("work size")
    )
    assert Workload(name="", lattice="").name is None
    t = Workload(engine="xtrack", lattice="ring.json", seed=4)
    assert t.label == "xtrack" and t.table_timing == "" and t.turns(10) == 10 and t.size_name == "particle count"


def test_describe():
    assert Workload().describe() == "simpletrack, lattice generated LHC-like ring"
    assert Workload(lattice="lhc.json", pattern="interactive").describe() == (
        "simpletrack, lattice lhc.json, pattern interactive:burst=10,think=0.5 (until decided)"
    )
    assert Workload(pattern="serve:rate=4", neighbours="batch", bursts=5).describe() == (
        "simpletrack, lattice generated LHC-like ring, pattern serve:rate=4,size=1 (at most 5 bursts a user), "
        "neighbours batch"
    )
    assert Workload(engine="exec", command="sleep 1", timing="process", name="nap").describe() == (
        "exec: 'sleep 1' as nap (process timing; work = SHAREBENCH_WORK)"
    )


@pytest.mark.parametrize(
    "d, message",
    [
        ({"engin": "exec"}, "unknown workload key(s) 'engin'; allowed: engine, device, command, timing, name, lattice"),
        ({"engine": "sixtrack"}, "bad engine 'sixtrack': allowed are simpletrack, xtrack, exec"),
        ({"device": "tpu"}, "bad device 'tpu': allowed are auto, cpu, cuda[:N], opencl[:P.D]"),
        ({"seed": -1}, "bad workload seed -1; allowed: a whole number >= 0"),
        ({"seed": 1.5}, "bad workload seed 1.5; allowed: a whole number >= 0"),
        ({"seed": True}, "bad workload seed True; allowed: a whole number >= 0"),
        ({"engine": 3}, "bad workload engine 3: a string is allowed"),
        ({"lattice": ["a"]}, "bad workload lattice ['a']: a string (or nothing) is allowed"),
        ({"pattern": " "}, "bad workload pattern '': a pattern name is allowed (default: batch)"),
        ({"pattern": "bursty"}, "unknown pattern 'bursty'; allowed: batch, interactive[:burst=N,think=SECONDS]"),
        ({"neighbours": "serve:rate=0"}, "bad rate '0' in pattern 'serve:rate=0'; allowed: requests/s > 0"),
        ({"bursts": 0}, "bad workload bursts (--bursts) 0; allowed: a whole number 1..1000000"),
        ({"engine": "exec"}, "workload engine 'exec' needs a command: the program each replica runs"),
        ({"engine": "exec", "command": "true", "timing": "wall"}, "bad exec timing 'wall'; allowed: protocol, process"),
        ({"command": "true"}, "workload command, timing and name need engine 'exec'; the engine is 'simpletrack'"),
        ({"timing": "process"}, "workload command, timing and name need engine 'exec'; the engine is 'simpletrack'"),
        ("exec", "bad workload 'exec': a JSON object with keys engine, device, command"),
    ],
)
def test_bad_key_or_value_is_one_line(d, message):
    with pytest.raises(UserError) as e:
        Workload.from_dict(d)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@given(PROGRAMS)
def test_job_of_a_program(w):
    job = ReplicaJob.of(w, particles=7, turns=1, replica=2)
    assert job.workload is w and (job.run.engine, job.run.device, job.run.seed) == ("exec", w.device, w.seed)
    assert (job.run.particles, job.replica) == (7, 2)
    # under process timing the harness times the whole process: fresh; under protocol timing a warm replica
    assert job.workload.is_program and job.workload.starts_fresh == (w.timing == "process")


def test_job_of_a_tracker_on_the_sweeps_device():
    w = Workload(engine="xtrack", lattice="ring.json", seed=9)
    job = ReplicaJob.of(w, device="opencl:0.0", particles=100, turns=3, start_at=5.0, nemitt_x=1e-6)
    assert job.run.to_dict() == {
        **RunConfig(particles=100, turns=3).to_dict(),
        "engine": "xtrack",
        "device": "opencl:0.0",
        "lattice": "ring.json",
        "seed": 9,
        "nemitt_x": 1e-6,
    }
    assert job.barrier == Barrier(start_at=5.0)
    assert ReplicaJob.of(Workload(), particles=1, turns=1).run.device == "auto"
    assert not w.is_program and not w.starts_fresh


@given(TRACKERS)
def test_job_of_a_pattern(w):
    """A patterned workload gives each replica its role: replica 0 the pattern, the others the neighbours'
    (the pattern itself when not given); a batch one is the study's replica."""
    victim = ReplicaJob.of(w, particles=5, turns=2)
    neighbour = ReplicaJob.of(w, particles=5, turns=2, replica=1)
    assert victim.patterned == w.patterned == (w.pattern != "batch" or (w.neighbours or w.pattern) != "batch")
    assert (victim.role, victim.own_pattern, victim.victim) == ("victim", w.pattern, True)
    assert (neighbour.role, neighbour.own_pattern, neighbour.victim) == ("neighbour", w.neighbours or w.pattern, False)
    assert [role(r) for r in (VICTIM, 1, 7)] == ["victim", "neighbour", "neighbour"]
    assert victim.replica_seed != neighbour.replica_seed


@given(st.one_of(TRACKERS, PROGRAMS), st.integers(0, 7), st.integers(1, 8), st.integers(0, 2**31))
def test_job_round_trips_through_json(w, replica, replicas, seed):
    """What the replica process reads is the job the cell wrote: exactly, for every replica's job."""
    cell = ReplicaJob.of(w, particles=11, turns=2, pattern_seed=seed, start_at=1.5e9, warmup_turns=0)
    run = replace(cell.run, replica=replica, device="cpu", cpus=[0, 1], mem_limit_bytes=2**20)
    job = replace(cell, run=run, replicas=replicas, barrier=Barrier("r", "s", cell.barrier.start_at), stop_file="x")
    assert ReplicaJob.from_dict(json.loads(json.dumps(job.to_dict()))) == job
    assert (job.replica, job.replicas, job.run.mem_limit_bytes, job.barrier.start_at) == (
        replica,
        replicas,
        2**20,
        1.5e9,
    )
    assert "engine" not in job.to_dict()["run"]  # each value once: the workload's stay in the workload


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: ReplicaJob.of(Workload(), particles=1, turns=1, exec_command="x"),
            "unknown run option(s) exec_command",
        ),
        (lambda: ReplicaJob(Workload(), RunConfig(seed=2)), "the run's seed differ from the workload's"),
        (lambda: ReplicaJob.from_dict({"run": {"engine": "xtrack"}}), "unknown replica job key(s) run.engine"),
        (lambda: ReplicaJob.from_dict({"run": {}, "extra": 1}), "unknown replica job key(s) extra"),
        (lambda: ReplicaJob.of(Workload(), particles=1, turns=1, replicas=0), "bad replicas 0"),
    ],
)
def test_bad_job_is_one_line(make, message):
    with pytest.raises(UserError) as e:
        make()
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_check_command_finds_the_program_or_says_why(tmp_path):
    """The exec rule's program, found as a replica finds it: on the PATH, or a path to an executable file."""
    assert check_command(f"{sys.executable} -c pass") == sys.executable
    assert check_command("sh -c 'exit 0'").endswith("/sh")
    script = tmp_path / "prog.sh"
    script.write_text("#!/bin/sh\n")
    for command in ("no-such-program-sharebench --work 3", str(script), str(tmp_path / "gone")):
        with pytest.raises(UserError, match=r"^command '.*' not found \(--exec .*\): give a program on the PATH"):
            check_command(command)
    script.chmod(0o755)
    assert check_command(f"{script} --work 3") == str(script)


def test_a_missing_program_is_one_line_before_any_folder(tmp_path):
    """`run --engine exec` with a program that is not there: refused in one line, no folder made."""
    out = tmp_path / "r"
    p = sharebench(
        *("run", "--device", "cpu", "--modes", "exclusive", "--engine", "exec", "--exec", "no-such-program-x --n 1"),
        *("--no-progress", "--no-telemetry", "--out", str(out)),
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    assert one_line_error(p.stderr) == (
        "sharebench: error: command 'no-such-program-x' not found (--exec 'no-such-program-x --n 1'): "
        "give a program on the PATH or a path to an executable file"
    )
    assert not out.exists()
