"""``sharebench campaign PLAN.toml``: a tiny CPU plan run for real, the smoke step that stops a campaign,
every committed plan parsed and dry-run, and bad plans refused in one line."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from sharebench.campaign import Command, Runner, Sweep, load_plan, run_campaign
from sharebench.cli import main
from sharebench.kernel import RunConfig
from sharebench.sweep.request import SweepRequest
from support.paths import ROOT

PLANS = sorted((ROOT / "benchmarks" / "plans").glob("*.toml"))


def write(tmp_path: Path, text: str) -> Path:
    plan = tmp_path / "plan.toml"
    plan.write_text(text)
    return plan


def test_a_tiny_cpu_plan_runs_its_sweep_and_its_tool(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # the tools run as `python -m tools.NAME` from the repository root
    plan = write(
        tmp_path,
        """
name = "tiny"
device = "cpu"
budget_s = 300
[[step]]
name = "smoke"
modes = ["exclusive"]
particles = [1000, 2000]
turns = 1
repeats = 1
smoke = true
[[step]]
name = "overhead"
run = ["{python}", "-m", "tools.cell_overhead", "{out}/smoke"]
stdout = "{out}/cell_overhead.txt"
""",
    )
    out = tmp_path / "out"
    assert main(["campaign", str(plan), "--out", str(out)]) == 0
    with (out / "smoke" / "results.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert sorted((r["mode"], r["particles"], r["cell_status"]) for r in rows) == [
        ("exclusive", "1000", "ok"),
        ("exclusive", "2000", "ok"),
    ]
    commands = (out / "commands.txt").read_text().splitlines()
    assert commands[0].startswith(f"{sys.executable} -m sharebench run --device cpu --modes exclusive ")
    assert "--stop-after" in commands[0] and commands[1].endswith(f"> {out}/cell_overhead.txt")
    assert "overhead_per_cell_s" in (out / "cell_overhead.txt").read_text()


def test_a_failed_smoke_cell_stops_the_campaign(tmp_path, capsys):
    plan = write(
        tmp_path,
        f"""
name = "doomed"
device = "cpu"
[[step]]
name = "smoke"
modes = ["exclusive"]
engine = "exec"
exec = "{sys.executable} -c 'raise SystemExit(1)'"
particles = [1]
turns = 1
repeats = 1
smoke = true
[[step]]
name = "long"
modes = ["exclusive"]
particles = [1000]
turns = 1
repeats = 1
""",
    )
    out = tmp_path / "out"
    assert main(["campaign", str(plan), "--out", str(out)]) == 3
    assert "smoke step smoke: a cell failed" in capsys.readouterr().err
    assert not (out / "long").exists()  # the long step never started
    assert len((out / "commands.txt").read_text().splitlines()) == 1


@pytest.mark.parametrize("plan", PLANS, ids=[p.stem for p in PLANS])
def test_every_committed_plan_parses_and_dry_runs(plan, capsys):
    parsed = load_plan(plan)
    assert parsed.steps and parsed.name == plan.stem
    code = main(["campaign", str(plan), "--out", "OUT", "--dry-run"])
    out, err = capsys.readouterr()
    # exit 2 only where the plan's device is here and runs none of its sweeps (opencl: PoCL, no MPS), its plan printed
    assert code == 0 or (code == 2 and f"no step of plan {plan.stem} can run on {parsed.device}" in err), err
    lines = [ln for ln in out.splitlines() if not ln.startswith("#")]
    commands = [ln for ln in lines if not ln.endswith("# untimed warm-up")]
    assert len(commands) == len(parsed.steps) and len(lines) - len(commands) == (parsed.warm is not None)
    for step, line in zip(parsed.steps, commands):
        if isinstance(step, Sweep):
            assert f"-m sharebench run --device {parsed.device} " in line and f"--out OUT/{step.name} " in line
        else:
            assert isinstance(step, Command) and line.startswith(step.run[0].replace("{python}", sys.executable))


def test_committed_plans_reproduce_the_committed_campaigns():
    recorded = ROOT / "tests" / "data" / "results" / "h200"  # trimmed copies of results/h200
    warm = {s.name: s for s in load_plan(ROOT / "benchmarks" / "plans" / "warm.toml").steps}
    assert set(warm) >= {"smoke", "warm-10M-1turn", "fresh-10M-1turn", "emulated-15M"}
    for name in ("warm-10M-1turn", "fresh-10M-1turn", "emulated-15M", "headline-10M-10turn"):
        assert (recorded / "warm" / name).is_dir() or name in (
            "emulated-15M",
            "headline-10M-10turn",
        )
    fresh = warm["fresh-10M-1turn"]
    assert isinstance(fresh, Sweep) and fresh.fresh_replicas and fresh.particles == (10_000_000,)
    cuda = load_plan(ROOT / "benchmarks" / "plans" / "sweep-cuda.toml").steps[0]
    assert isinstance(cuda, Sweep) and cuda.name == "cuda" and (recorded / "cuda").is_dir()


def test_steps_are_chosen_by_name_or_tag(capsys):
    plan = ROOT / "benchmarks" / "plans" / "warm.toml"
    # the ab steps share by MPS: none of them runs on the CPU, so the dry run says so and exits 2 (issue 43)
    assert main(["campaign", str(plan), "--out", "OUT", "--dry-run", "--steps", "ab", "--device", "cpu"]) == 2
    runs = [ln for ln in capsys.readouterr().out.splitlines() if " run " in ln]
    assert [ln.split("--out OUT/")[1].split()[0] for ln in runs] == ["warm-10M-1turn", "fresh-10M-1turn"]
    assert all("--device cpu" in ln for ln in runs)


@pytest.mark.parametrize(
    "text, message",
    [
        ("name = 'x'\n", "no [[step]]"),
        ("[[step]]\nname = 'a'\nmodes = ['exclusive']\nparticles = [1]\nturns = 1\nrepeats = 1\ncolour = 1\n",
         "unknown step 'a' key 'colour'"),
        ("[[step]]\nname = 'a'\nmodes = ['sometimes:2']\nparticles = [1]\nturns = 1\nrepeats = 1\n", "sometimes:2"),
        ("[[step]]\nname = 'a'\nmodes = ['exclusive']\nparticles = [1]\nturns = 0\nrepeats = 1\n", "turns 0"),
        ("[[step]]\nname = 'a'\nmodes = ['exclusive']\nparticles = [1]\nrepeats = 1\n", "turns is missing"),
        ("[[step]]\nname = 'a'\nrun = 'ls'\n", "bad run 'ls'"),
        ("[[step]]\nname = 'a'\nrun = ['ls']\nmodes = ['exclusive']\n", "either modes (a sweep) or run"),
        ("budget_s = -1\n[[step]]\nname = 'a'\nrun = ['ls']\n", "bad budget_s -1"),
        ("[[step]]\nname = 'a'\nrun = ['ls']\n[[step]]\nname = 'a'\nrun = ['ls']\n", "'a' repeated".replace("'", "")),
        ("[[step\n", "not valid TOML"),
    ],
)  # fmt: skip
def test_a_bad_plan_is_one_line(tmp_path, capsys, text, message):
    plan = write(tmp_path, text)
    assert main(["campaign", str(plan), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"sharebench: error: plan {plan}") and message in err, err


def test_a_missing_plan_or_step_is_one_line(tmp_path, capsys):
    assert main(["campaign", str(tmp_path / "none.toml"), "--dry-run"]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["campaign", str(PLANS[0]), "--dry-run", "--steps", "nosuch"]) == 2
    assert "no step or tag 'nosuch'" in capsys.readouterr().err


SWEEP = "[[step]]\nname = 'a'\nmodes = ['exclusive', 'timeslice:2']\nparticles = [1000]\nturns = 1\n"


@pytest.mark.parametrize(
    "text, message",
    [
        ("repeats = 1\npattern = 'sometimes'\n", "step 'a': unknown pattern 'sometimes'"),
        ("repeats = 1\nneighbours = 'interactive:think=0'\n", "step 'a': "),
        ("repeats = 1\nbursts = 0\n", "bad step 'a' bursts 0; allowed: a whole number 1..1000000"),
        ("repeats = 1\nbursts = 'many'\n", "step 'a': bad bursts 'many'; allowed: a number"),
        ("repeats = 1\nslo = 0.5\n", "step 'a': bad --slo 0.5; allowed: a p95 slowdown target >= 1"),
        ("budget = '10m'\nrepeats = 3\n", "step 'a': repeats goes without budget (a budget plans its repeats"),
        ("budget = '10 minutes'\n", "step 'a': bad budget '10 minutes'; allowed: a duration such as 90s, 10m"),
        ("budget = '10m'\nprecision = 0\n", "step 'a': bad precision 0; allowed: points of loss > 0"),
        ("budget = '10m'\nprecision = 'fine'\n", "step 'a': bad precision 'fine'; allowed: a number"),
        ("budget = '10m'\nmax_repeats = 2\n", "step 'a': bad max_repeats 2; allowed: a whole number 3..1000"),
        ("repeats = 3\nprecision = 0.5\n", "step 'a': precision goes with budget (a duration such as \"10m\")"),
        ("budget = '10m'\nrepeats = 1\n", "repeats goes without budget"),
    ],
)
def test_pattern_and_budget_keys_are_checked_in_one_line(tmp_path, capsys, text, message):
    plan = write(tmp_path, SWEEP + text)
    assert main(["campaign", str(plan), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"sharebench: error: plan {plan}: ") and message in err, err


def test_a_neighbour_pattern_needs_a_sharing_mode(tmp_path, capsys):
    plan = write(
        tmp_path, SWEEP.replace("'exclusive', 'timeslice:2'", "'exclusive'") + "repeats = 1\nneighbours = 'batch'\n"
    )
    assert main(["campaign", str(plan), "--dry-run"]) == 2
    assert "step 'a': neighbours needs a sharing mode" in capsys.readouterr().err


def test_pattern_and_budget_keys_reach_sharebench_run(tmp_path, capsys):
    plan = write(
        tmp_path,
        SWEEP
        + "pattern = 'interactive:burst=2,think=0.1'\nneighbours = 'batch'\nbursts = 5\nslo = 2\n"
        + "budget = '90s'\nprecision = 0.5\nmax_repeats = 6\n",
    )
    step = load_plan(plan).steps[0]
    assert isinstance(step, Sweep) and step.repeats is None and step.budget == "90s" and step.precision == 0.5
    assert main(["campaign", str(plan), "--out", "OUT", "--dry-run"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if " run " in ln)
    assert "--repeats" not in line
    assert (
        "--pattern interactive:burst=2,think=0.1 --neighbours batch --bursts 5 --slo 2 --budget 90s --precision 0.5 "
        "--max-repeats 6"
    ) in line
    assert line.endswith("# a: up to 2 cells within --budget 90s, repeats while unsettled")


def test_a_plan_from_a_clone_names_how_to_get_its_lattice(tmp_path, monkeypatch, capsys):
    """A clone has no .devcarry/: the committed plans' LHC line is missing. The run stops before anything in one
    line that says how to get it; the dry run says the same as a note; --lattice none runs the generated ring."""
    monkeypatch.chdir(tmp_path)
    plan = ROOT / "benchmarks" / "plans" / "patterns.toml"
    assert main(["campaign", str(plan), "--out", "OUT", "--device", "cpu", "--steps", "st-users"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not (tmp_path / "OUT").exists()
    assert err.startswith("sharebench: error: plan lattice '.devcarry/lhc_simpletrack_7tev.json.gz' not found; ")
    assert "rdemaria/simpletrack" in err and "--lattice FILE" in err and "--lattice none" in err
    assert main(["campaign", str(plan), "--out", "OUT", "--dry-run"]) == 0
    notes = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("# not runnable as planned: ")]
    assert notes and "plan lattice '.devcarry/lhc_simpletrack_7tev.json.gz' not found" in notes[0]


def test_modes_the_device_cannot_run_stop_the_campaign_before_anything_runs(tmp_path, capsys):
    plan = write(
        tmp_path,
        "device = 'cuda:0'\n[[step]]\nname = 'ok'\nmodes = ['exclusive', 'timeslice:2']\nparticles = [1000]\n"
        "turns = 1\nrepeats = 1\n[[step]]\nname = 'gpu'\nmodes = ['exclusive', 'mps:2']\nparticles = [1000]\n"
        "turns = 1\nrepeats = 1\n",
    )
    out = tmp_path / "out"
    assert main(["campaign", str(plan), "--out", str(out), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sharebench: error: step gpu: mps:2 needs an NVIDIA GPU") and len(err.splitlines()) == 1
    assert "leave the step out (--steps) or give another --device" in err and not out.exists()
    assert main(["campaign", str(plan), "--out", str(out), "--device", "cpu", "--dry-run"]) == 0
    assert "# not runnable as planned: step gpu: mps:2 needs an NVIDIA GPU" in capsys.readouterr().out


def test_the_warm_up_and_the_sweeps_reach_the_runner_as_values(tmp_path):
    """A plan's warm-up is a RunConfig and its sweep a SweepRequest handed to the runner: no argv of
    sharebench is built to run them (the dry run shows the equivalent command, for the record)."""
    plan = load_plan(
        write(
            tmp_path,
            """
name = "values"
device = "cpu"
warm = { particles = 2000, turns = 2 }
[[step]]
name = "one"
modes = ["exclusive"]
particles = [1000]
turns = 1
repeats = 1
""",
        )
    )
    warmed: list[RunConfig] = []
    swept: list[SweepRequest] = []

    def sweep(request: SweepRequest) -> int:
        swept.append(request)
        return 0

    runner = Runner(sweep=sweep, report=lambda folder: None, warm=warmed.append)
    assert run_campaign(plan, tmp_path / "out", runner, say=lambda line: None) == 0
    assert [(w.device, w.particles, w.turns) for w in warmed] == [("cpu", 2000, 2)]
    assert len(swept) == 1 and [m.label for m in swept[0].modes or ()] == ["exclusive"]
