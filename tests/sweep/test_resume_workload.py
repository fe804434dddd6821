"""Resume and the Workload value: a folder's sweep.json, old (loose fields) or new (``workload``), gives
the resumed run its workload, and the shared identity (so the ``work_key`` column) keeps its shape."""

from __future__ import annotations

import dataclasses

import pytest

from sharebench.errors import UserError
from sharebench.modes import Mode
from sharebench.results import append_sweep
from sharebench.sweep import SweepConfig
from sharebench.sweep.request import SweepRequest, sweep_config
from sharebench.sweep.resume import check_same_work, folder_workload, identity
from sharebench.workloads import Workload

# the config and identity sweep.json held before the Workload value (as run_sweep wrote them then)
LEGACY_EXEC = {
    "config": {
        "modes": ["exclusive"],
        "particles": [100],
        "turns": None,
        "device": "cpu",
        "engine": "exec",
        "lattice": None,
        "seed": 1,
        "run_options": {"exec_command": "sleep 0.1", "exec_timing": "process", "exec_name": "nap"},
    },
    "identity": {
        "workload": "nap",
        "turns": 1,
        "engine": "exec",
        "lattice_sha256": "generated",
        "seed": 1,
        "run_options": {"exec_command": "sleep 0.1", "exec_timing": "process", "exec_name": "nap"},
    },
}
LEGACY_TRACKER = {
    "config": {
        "modes": ["exclusive"],
        "particles": [100],
        "turns": 7,
        "device": "opencl:0.0",
        "engine": "simpletrack",
        "lattice": None,
        "seed": 3,
        "run_options": {},
    },
    "identity": {
        "workload": "simpletrack",
        "turns": 7,
        "engine": "simpletrack",
        "lattice_sha256": "generated",
        "seed": 3,
        "run_options": {},
    },
}
NOT_GIVEN = {"engine": None, "device": None, "lattice": None}


def resumed(out, workload=None) -> SweepConfig:
    """What `sharebench run --resume --out OUT` builds (sharebench.sweep.request), given ``workload`` keys."""
    return sweep_config(SweepRequest(out=out, resume=True, workload={**NOT_GIVEN, **(workload or {})}))


@pytest.mark.parametrize(
    "entry, given, workload",
    [
        (
            LEGACY_EXEC,
            {"command": "sleep 0.1", "timing": "process"},  # the program comes from the command line alone
            Workload(engine="exec", device="cpu", command="sleep 0.1", timing="process", name="nap"),
        ),
        (LEGACY_TRACKER, {}, Workload(device="opencl:0.0", seed=3)),
    ],
)
def test_an_old_folder_resumes_with_its_own_workload_and_identity(tmp_path, entry, given, workload):
    append_sweep(tmp_path, entry)
    cfg = resumed(tmp_path, given)
    assert cfg.workload == workload and cfg.run_options == {} and cfg.modes == (Mode("exclusive"),)
    shared = identity(cfg, entry["identity"]["turns"], cfg.workload.label)
    assert shared == entry["identity"]  # the same work_key for the same cell as before
    check_same_work(tmp_path, shared, cfg.workload.label)  # accepted


def test_a_new_folder_round_trips_through_sweep_json(tmp_path):
    w = Workload(engine="exec", device="cpu", command="python3 job.py", name="job")
    cfg = SweepConfig(modes=["exclusive"], particles=[5], workload=w, run_options={"warmup_turns": 0})
    append_sweep(tmp_path, {"config": cfg.to_dict(), "identity": identity(cfg, 1, w.label)})
    assert folder_workload(cfg.to_dict()) == (w.to_dict(), {"warmup_turns": 0})
    again = resumed(tmp_path, {"command": "python3 job.py"})
    assert again.workload == w and again.run_options == {"warmup_turns": 0}


def test_resume_never_takes_the_program_from_the_folder(tmp_path):
    append_sweep(tmp_path, LEGACY_EXEC)
    # the folder names a program: without --exec nothing of it runs, the refusal shows it
    with pytest.raises(UserError, match=r"needs --exec: a results folder never names the program to run "):
        resumed(tmp_path)
    with pytest.raises(UserError, match=r"\(the folder ran --exec 'sleep 0.1'\)"):
        resumed(tmp_path, {"device": "auto"})
    # the same command (spacing aside) and another device: kept; the name (a label) comes with the command
    assert resumed(tmp_path, {"device": "auto", "command": "sleep  0.1", "timing": "process"}).workload == Workload(
        engine="exec", device="auto", command="sleep  0.1", timing="process", name="nap"
    )
    # another program: refused, both shown
    with pytest.raises(UserError) as refused:
        resumed(tmp_path, {"command": "python3 b.py"})
    assert str(refused.value) == (
        f"--resume: {tmp_path} ran --exec 'sleep 0.1', this run gives --exec 'python3 b.py'; resume with the "
        "folder's command, or measure another program in another --out"
    )
    # a tracker given on an exec folder: measured beside it, without the folder's command
    tracker = resumed(tmp_path, {"engine": "simpletrack"}).workload
    assert tracker == Workload(device="cpu")


def test_resume_refuses_another_seed_of_the_same_workload(tmp_path):
    append_sweep(tmp_path, LEGACY_TRACKER)
    cfg = dataclasses.replace(resumed(tmp_path), workload=Workload(device="opencl:0.0", seed=4))
    with pytest.raises(UserError, match=r"measured with seed 3, this run has 4; resume without changing it"):
        check_same_work(tmp_path, identity(cfg, 7, "simpletrack"), "simpletrack")


def test_run_options_that_belong_to_the_workload_are_refused():
    with pytest.raises(UserError, match="run option.s. exec_command, seed belong to the workload; give them there"):
        SweepConfig(run_options={"seed": 2, "exec_command": "x"})
