"""A plan step's own limits, its prediction and its wall time (issue 41: measurements run from plans, not
dated scripts): ``budget_s``, ``predict_s`` and the capacity keys run for real on the CPU, ``walls.csv`` and
``dry_<step>.txt`` feed ``tools.time_to_answer``, and ``--dry-run`` ends with the total a device call needs."""

from __future__ import annotations

import csv
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from sharebench.campaign import (
    WALLS_COLUMNS,
    Command,
    Context,
    Runner,
    Sweep,
    describe,
    load_plan,
    parse_plan,
    run_campaign,
    sweep_request,
)
from sharebench.cli import main
from sharebench.cli.campaign_cmd import predict_in_child
from sharebench.devices import resolve_device
from sharebench.sweep.budget import REPORT_S
from sharebench.sweep.capacity import CapacityOptions
from sharebench.sweep.request import SweepRequest
from support.paths import ROOT

PLANS = ROOT / "benchmarks" / "plans"


def write(tmp_path: Path, text: str) -> Path:
    plan = tmp_path / "plan.toml"
    plan.write_text(text)
    return plan


def walls(out: Path) -> list[dict[str, str]]:
    with (out / "walls.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and list(rows[0]) == list(WALLS_COLUMNS)
    return rows


PAIR = """
name = "pair"
device = "cpu"
[[step]]
name = "st-adaptive"
modes = ["exclusive", "timeslice:2"]
particles = [1000]
turns = 1
timeslice_probe = false
budget = "60s"
precision = 50
max_repeats = 3
predict_s = 120
budget_s = 200
[[step]]
name = "st-fixed"
modes = ["exclusive", "timeslice:2"]
particles = [1000]
turns = 1
timeslice_probe = false
repeats = 3
predict_s = 120
budget_s = 200
[[step]]
name = "answer"
run = ["{python}", "-m", "tools.time_to_answer", "{out}"]
stdout = "{out}/time_to_answer.md"
timeout_s = 120
"""


@pytest.mark.slow  # two real CPU sweeps of 6 cells, each after its dry run
def test_a_step_is_predicted_before_it_runs_and_every_step_has_its_wall(tmp_path, monkeypatch):
    """What benchmarks/h200_2026-12-04_call4.sh did by hand, from a plan: the dry run of each step first, its
    output kept; each step's wall time in walls.csv; then the time-to-answer table from both."""
    monkeypatch.chdir(ROOT)  # the tools run as `python -m tools.NAME` from the repository root
    out = tmp_path / "out"
    assert main(["campaign", str(write(tmp_path, PAIR)), "--out", str(out)]) == 0
    rows = walls(out)
    assert [r["step"] for r in rows] == ["st-adaptive", "st-fixed", "answer"]
    assert all(r["status"] == "0" and float(r["end"]) >= float(r["start"]) for r in rows)
    for row in rows[:2]:
        dry = out / f"dry_{row['step']}.txt"
        # the prediction was written before the step's process started, by the step's own dry run
        assert dry.stat().st_mtime <= float(row["start"]) + 0.01
        assert "device:    cpu" in dry.read_text() and not (out / row["step"] / "dry_run").exists()
    assert "budget:" in (out / "dry_st-adaptive.txt").read_text()
    commands = (out / "commands.txt").read_text().splitlines()
    assert commands[0].endswith(f"--no-probe --dry-run > {out}/dry_st-adaptive.txt")
    stop = f" --stop-after {int(200 - REPORT_S)}"  # budget_s: no new cell after it (its report's time left)
    assert stop in commands[1]  # the prediction was of the step's own command
    assert commands[1].replace(stop, "") == commands[0].removesuffix(f" --dry-run > {out}/dry_st-adaptive.txt")
    table = (out / "time_to_answer.md").read_text()
    assert re.search(r"^\| st-adaptive \| \d+ \| [\d.]+ \| 0 \| \d+ s = [\d.]+% \|", table, re.M), table
    assert re.search(r"^\| st-fixed \| \d+ \|", table, re.M) and "| answer |" not in table
    assert re.search(r"^\| exclusive \| 1000 \| 3 \| [\d.]+ \| 3 \| [\d.]+ \|$", table, re.M), table


CAPACITY = """
name = "cap"
device = "cpu"
[[step]]
name = "cap"
modes = ["exclusive", "timeslice"]
particles = [1000]
turns = 1
pattern = "interactive:burst=1,think=0.01"
bursts = 4
users = "2..4"
repeats = 1
max_repeats = 2
budget = "60s"
predict_s = 60
budget_s = 90
"""


@pytest.mark.slow  # two dry runs (one in a process of its own): about 3 s
def test_a_capacity_step_is_the_search_the_command_line_runs(tmp_path, capsys):
    """``capacity`` keys build the search ``sharebench run --capacity`` builds: the families at their first
    N, the repeats of each N; the prediction (a real dry run in its own process) is what the recorded
    command line's --dry-run prints."""
    plan = load_plan(write(tmp_path, CAPACITY))
    step = plan.steps[0]
    assert isinstance(step, Sweep) and step.capacity == CapacityOptions(("timeslice",), (2, 4), 1, 2)
    out = tmp_path / "out"
    request = sweep_request(Context(out=out, plan=plan), step, None)
    assert [m.label for m in request.modes or ()] == ["exclusive", "timeslice:2"] and request.repeats == 1
    assert request.budget is not None and request.budget.budget_s == 60 and request.capacity == step.capacity
    recorded = list(request.command or ())
    assert recorded[recorded.index("--modes") + 1] == "exclusive,timeslice"
    assert recorded[-5:] == ["--capacity", "--users", "2..4", "--max-repeats", "2"]
    out.mkdir()
    dry = out / "dry_cap.txt"
    assert predict_in_child(replace(request, dry_run=True), dry, 60) == 0
    assert main([*recorded[3:], "--dry-run"]) == 0  # `python -m sharebench run ...`, parsed by the CLI
    # the same text, but for the seconds each calibrated on this machine (two calibrations, moments apart)
    seconds = re.compile(r"(?m)^predicted: .*$")
    assert seconds.sub("predicted:", dry.read_text()) == seconds.sub("predicted:", capsys.readouterr().out)
    assert "capacity search: N from 2 doubling to at most 4" in dry.read_text() and not (out / "cap").exists()


def test_a_dry_run_past_its_predict_s_is_stopped_and_says_so(tmp_path):
    plan = load_plan(write(tmp_path, CAPACITY))
    request = sweep_request(Context(out=tmp_path, plan=plan), plan.steps[0], None)  # type: ignore[arg-type]
    dry = tmp_path / "dry_cap.txt"
    assert predict_in_child(replace(request, dry_run=True), dry, 0.2) == 124
    assert dry.read_text().endswith("sharebench campaign: the dry run was stopped after 0.2 s (the step's predict_s)\n")


def test_a_step_budget_and_the_plan_budget_bound_a_sweep_and_its_prediction(tmp_path):
    """A sweep's --stop-after is its budget_s less its report, or what the plan's budget leaves when that is
    less; the prediction gets its predict_s, or what the budget leaves; walls.csv gets a row per step run."""
    plan = parse_plan(
        {
            "budget_s": 1000,
            "device": "cpu",
            "step": [
                {"name": "a", "modes": ["exclusive"], "particles": [1000], "turns": 1, "repeats": 1,
                 "budget_s": 100, "predict_s": 30},
                {"name": "b", "modes": ["exclusive"], "particles": [1000], "turns": 1, "repeats": 1,
                 "budget_s": 5000},
                {"name": "c", "run": [sys.executable, "-c", "raise SystemExit(3)"], "optional": True},
                {"name": "d", "run": ["no-such-program-here"], "needs": "no-such-program-here"},
            ],
        }
    )  # fmt: skip
    swept: list[SweepRequest] = []
    predicted: list[tuple[Path, float]] = []

    def sweep(request: SweepRequest) -> int:
        swept.append(request)
        return 0

    def predict(request: SweepRequest, path: Path, limit_s: float) -> int:
        assert request.dry_run and request.out == tmp_path / "a"
        path.write_text("predicted: 12 s\n")
        predicted.append((path, limit_s))
        return 0

    said: list[str] = []
    runner = Runner(sweep=sweep, report=lambda folder: None, predict=predict)
    assert run_campaign(plan, tmp_path, runner, say=said.append) == 0
    assert predicted == [(tmp_path / "dry_a.txt", 30.0)] and "a dry run: predicted: 12 s" in said
    # a: its own budget less its report; b: what the plan's budget leaves (less the report) is less than its own
    assert [r.stop_after_s for r in swept] == [100 - REPORT_S, pytest.approx(1000 - REPORT_S, abs=2)]
    assert [(r["step"], r["status"]) for r in walls(tmp_path)] == [("a", "0"), ("b", "0"), ("c", "3")]
    commands = (tmp_path / "commands.txt").read_text().splitlines()
    assert commands[0].endswith(f"--dry-run > {tmp_path}/dry_a.txt") and "--dry-run" not in commands[1]


BASIS = "by the steps' limits (budget_s + predict_s of a sweep, timeout_s of a command)"


@pytest.mark.parametrize(
    ("extra", "total"),
    [
        ("", f"# total: at most 190 s {BASIS} (and a cell started before a deadline)"),
        ("budget_s = 100\n", f"# total: at most 160 s {BASIS}; no new cell after the plan's budget_s 100 s"),
        ("budget_s = 500\n", f"# total: at most 190 s {BASIS}; no new cell after the plan's budget_s 500 s"),
    ],
)
def test_the_dry_run_ends_with_the_total(tmp_path, capsys, extra, total):
    """The steps' limits summed (a sweep's predict_s + budget_s, a command's timeout_s), capped by the plan's
    budget (the sweeps stop there; a command only at its timeout)."""
    plan = write(
        tmp_path,
        extra + "device = 'cpu'\n[[step]]\nname = 'a'\nmodes = ['exclusive']\nparticles = [1000]\nturns = 1\n"
        "repeats = 1\npredict_s = 30\nbudget_s = 100\n[[step]]\nname = 't'\nrun = ['true']\ntimeout_s = 60\n",
    )
    assert main(["campaign", str(plan), "--out", "OUT", "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1].startswith(total)
    assert lines[-3].endswith(
        "# a: 1 cells x 1 repeats; at most 100 s; its dry run first (at most 30 s) into OUT/dry_a.txt"
    )
    assert lines[-2] == "true   # at most 60 s"


def test_a_step_without_a_limit_is_named_in_the_total(tmp_path):
    plan = parse_plan(
        {"step": [{"name": "a", "modes": ["exclusive"], "particles": [1], "turns": 1, "repeats": 1},
                  {"name": "t", "run": ["true"]}]}
    )  # fmt: skip
    assert describe(plan, tmp_path)[-1] == (
        f"# total: at least 0 s {BASIS}; not bounded: a, t without budget_s (a sweep) or timeout_s (a command), "
        "not estimated here: give one, or dry-run on the device"
    )
    bounded = replace(plan, budget_s=50.0)  # the plan's budget bounds the sweeps, not the command
    assert describe(bounded, tmp_path)[-1].startswith(f"# total: at least 50 s {BASIS}; no new cell after the plan's")
    assert "; not bounded: t without budget_s" in describe(bounded, tmp_path)[-1]
    estimated = describe(plan, tmp_path, estimates={"a": 41.6})[-1]  # a step's own dry run gave its seconds
    assert estimated.startswith(f"# total: at least 42 s {BASIS} and the dry runs on this machine of a (42 s)")


@pytest.mark.slow  # a real dry run of a tiny CPU sweep, in a process of its own
def test_a_step_without_a_limit_is_estimated_by_its_own_dry_run(tmp_path, capsys):
    plan = write(
        tmp_path, "device = 'cpu'\n" + SWEEP + "repeats = 1\n[[step]]\nname = 't'\nrun = ['true']\ntimeout_s = 5\n"
    )
    assert main(["campaign", str(plan), "--out", str(tmp_path / "OUT"), "--dry-run"]) == 0
    total = capsys.readouterr().out.splitlines()[-1]
    found = re.match(
        rf"# total: about (\d+) s {re.escape(BASIS)} and the dry runs on this machine of a \((\d+) s\) ", total
    )
    assert found and int(found[1]) == int(found[2]) + 5, total
    assert not (tmp_path / "OUT").exists()  # a dry run writes nothing of the campaign


def cpu_name() -> str:
    return resolve_device("cpu").name


def test_a_dry_run_where_no_step_runs_on_the_device_exits_2(tmp_path, capsys):
    plan = write(tmp_path, "device = 'cpu'\n[[step]]\nname = 'm'\nmodes = ['exclusive', 'mps:2']\nparticles = [1000]\n"
                 "turns = 1\nrepeats = 1\n")  # fmt: skip
    assert main(["campaign", str(plan), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out.splitlines()[-1].startswith("# not runnable as planned: step m: mps:2 needs an NVIDIA GPU")
    assert err == (
        f"sharebench campaign: no step of plan {plan.stem} can run on cpu ({cpu_name()}); give another --device, "
        "or --steps that run here\n"
    )


SWEEP = "[[step]]\nname = 'a'\nmodes = ['exclusive', 'timeslice:2']\nparticles = [1000]\nturns = 1\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("repeats = 1\nbudget_s = 0\n", "step 'a': bad budget_s 0; allowed: a number of seconds > 0"),
        ("repeats = 1\npredict_s = -1\n", "step 'a': bad predict_s -1; allowed: a number of seconds >= 0"),
        ("repeats = 1\nusers = '2..8'\n", "step 'a': users goes with capacity (a mode family without N in modes)"),
        ("repeats = 1\ncapacity = true\n", "step 'a': capacity needs a mode family without N in modes"),
        ("repeats = 1\ntimeslice_probe = 'no'\n", "step 'a': bad timeslice_probe 'no'; allowed: true or false"),
        ("repeats = 1\nawake_control = true\n", "step 'a': awake_control needs a replica pattern (pattern)"),
        ("repeats = 1\npattern = 'batch'\nawake_control = true\n", "step 'a': awake_control needs a replica pattern"),
        (
            "repeats = 1\npattern = 'interactive'\nawake_control = 1\n",
            "step 'a': bad awake_control 1; allowed: true or",
        ),
    ],
)
def test_the_new_step_keys_are_checked_in_one_line(tmp_path, capsys, text, message):
    plan = write(tmp_path, SWEEP + text)
    assert main(["campaign", str(plan), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"sharebench: error: plan {plan}: ") and message in err, err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("modes = ['timeslice']\nusers = '1..100'\n", "step 'a': bad users '1..100'; allowed: LO..HI"),
        ("modes = ['timeslice']\nrepeats = 0\n", "bad step 'a' repeats 0"),
        ("modes = ['timeslice/often']\n", "step 'a': "),
        ("modes = ['timeslice']\nprecision = 0.5\n", "step 'a': precision goes with budget"),
    ],
)
def test_capacity_keys_are_checked_in_one_line(tmp_path, capsys, text, message):
    plan = write(tmp_path, "[[step]]\nname = 'a'\nparticles = [1000]\nturns = 1\n" + text)
    assert main(["campaign", str(plan), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


# the device calls the committed plans' headers give: (plan, --steps, --budget or None)
DEVICE_CALLS = [
    ("headline-capacity.toml", "A", None),
    ("headline-capacity.toml", "B", None),
    ("headline-capacity.toml", "B2", None),
    ("headline-capacity.toml", "C", None),
    ("time-to-answer.toml", "rn", "420"),
    ("time-to-answer.toml", "users,st", "420"),
    ("capacity.toml", "", None),
    ("capacity.toml", "serve", None),
]
SETUP_S = 60  # device_setup.sh (the wheels' install and byte-compilation), the warm-up and start-up, at most


@pytest.mark.parametrize(("plan", "steps", "budget"), DEVICE_CALLS)
def test_each_device_call_of_the_plans_fits_one_ten_minute_command(capsys, plan, steps, budget):
    args = ["campaign", str(PLANS / plan), "--out", "OUT", "--dry-run"]
    args += (["--steps", steps] if steps else []) + (["--budget", budget] if budget else [])
    assert main(args) == 0
    total = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("# total: "))
    found = re.match(r"# total: at most (\d+(?:\.\d+)?) s", total)
    assert found and float(found[1]) + SETUP_S <= 600, total


def test_the_plans_cover_what_the_dated_scripts_ran():
    """call4's steps (the nine-mode users step, adaptive against fixed on ResNet-18 users, each predicted first
    and timed) and call3's (ResNet-18 users, adaptive against fixed on Simpletrack, serving capacity by search)
    are plan steps; the scripts are gone."""
    tta = {s.name: s for s in load_plan(PLANS / "time-to-answer.toml").steps}
    cap = {s.name: s for s in load_plan(PLANS / "capacity.toml").steps}
    for name in ("rn-plan", "rn-adaptive", "rn-fixed", "rn-users", "st-adaptive", "st-fixed"):
        step = tta[name]
        assert isinstance(step, Sweep) and step.predict_s and step.budget_s, name
    plan_step = tta["rn-plan"]
    assert isinstance(plan_step, Sweep) and len(plan_step.modes) == 9 and plan_step.repeats == 1
    adaptive = tta["rn-adaptive"]
    assert isinstance(adaptive, Sweep) and adaptive.budget == "120s" and adaptive.max_repeats == 8
    answer = tta["answer"]
    assert isinstance(answer, Command) and answer.run[1:3] == ("-m", "tools.time_to_answer")
    for name in ("rn-serve-0.3", "st-serve-0.3", "rn-capacity"):
        step = cap[name]
        assert isinstance(step, Sweep) and step.capacity is not None and step.budget_s, name
    assert not list((ROOT / "benchmarks").glob("h200_*.sh"))


def test_patterned_steps_let_their_cells_decide():
    """Issue 42: no committed plan caps a patterned step's cells below what its rule needs (no ``bursts``) or
    repeats its cells (a fixed step: ``repeats = 1``; a search: one cell of an N, another only while undecided)."""
    for path in PLANS.glob("*.toml"):
        for step in load_plan(path).steps:
            if isinstance(step, Sweep) and step.pattern and step.pattern != "batch":
                assert step.bursts is None, (path.name, step.name)
                assert step.repeats in (1, None), (path.name, step.name, step.repeats)


def test_the_headline_capacity_plan_is_the_next_h200_session():
    """A: Simpletrack users (1 M particles) and serving at load 0.3 (fewer particles) over three families; B:
    ResNet-18 users with the keep-awake control and serving; B2: the fork-server rn-users step; C: the two-family
    Simpletrack search within 6 minutes; every step under 9.5 minutes by its limits."""
    plan = load_plan(PLANS / "headline-capacity.toml")
    steps = {s.name: s for s in plan.steps}
    sweeps = {n: s for n, s in steps.items() if isinstance(s, Sweep)}
    families = {n: s.capacity.families for n, s in sweeps.items() if s.capacity is not None}
    assert families == {
        "st-users": ("timeslice", "mps", "mig-emulated"),
        "st-serve-0.3": ("timeslice", "mps", "mig-emulated"),
        "rn-users-capacity": ("timeslice", "mps", "mig-emulated"),
        "rn-serve-0.3": ("timeslice", "mps", "mig-emulated"),
        "st-users-two": ("timeslice", "mps"),
    }
    st, serve, rn, two = sweeps["st-users"], sweeps["st-serve-0.3"], sweeps["rn-users-capacity"], sweeps["st-users-two"]
    assert st.particles == (1_000_000,) and st.pattern == "interactive:burst=1,think=0.2" and st.budget == "5m"
    assert serve.particles[0] < st.particles[0] and serve.pattern == "serve:load=0.3,size=1"
    assert rn.awake_control and rn.exec_name == "resnet18-infer-b8" and rn.particles == (8,)
    assert rn.pattern == "interactive:burst=5,think=0.1" and sweeps["rn-serve-0.3"].pattern == serve.pattern
    assert two.budget == "6m" and two.capacity is not None and two.capacity.users == (2, 16)
    assert sweeps["rn-users"].tags[0] == "B2" and [m.label for m in sweeps["rn-users"].modes] == [
        "exclusive",
        "timeslice:2",
        "mps:2",
    ]
    assert {t for s in sweeps.values() for t in s.tags} >= {"A", "B", "B2", "C"}
    assert all((s.limit_s() or 0) < 570 for s in sweeps.values())
    request = sweep_request(Context(out=Path("OUT"), plan=plan), rn, None)
    assert request.awake_control and "--awake-control" in (request.command or ())


@pytest.mark.parametrize("plan", sorted(PLANS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_plan_dry_runs_on_the_cpu(plan, capsys):
    """``campaign PLAN --dry-run --device cpu --lattice none`` (arguments checked, nothing measured): every step's
    command printed for the CPU; exit 2 only where none of the plan's sweeps can run on the CPU (MPS), saying so."""
    code = main(["campaign", str(plan), "--out", "OUT", "--dry-run", "--device", "cpu", "--lattice", "none"])
    out, err = capsys.readouterr()
    parsed = load_plan(plan)
    assert code == 0 or (code == 2 and f"no step of plan {parsed.name} can run on cpu" in err), err
    runs = [ln for ln in out.splitlines() if " -m sharebench run " in ln]
    assert len(runs) == sum(isinstance(s, Sweep) for s in parsed.steps)
    assert all("--device cpu " in ln and "--lattice" not in ln for ln in runs)
    assert out.splitlines()[-1].startswith("# ") and any(ln.startswith("# total: ") for ln in out.splitlines())
