"""``sharebench run`` has a shape (issue 41, item 5): four argument groups, every option checked before the
library loads (``cli.sweep.run_options``, run by ``cli.lazy`` before ``sweep_cmd`` is imported), and the parsed
arguments never rewritten (the run builds values from them)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from sharebench.cli import build_parser, main
from sharebench.cli.sweep import RunOptions, run_options
from sharebench.errors import UserError
from sharebench.modes import parse_mode
from support.lattices import tiny_lattice

# the stacks a bad option must not wait for, and the library modules that would load them
HEAVY = ("pandas", "numpy", "scipy", "matplotlib", "kfp", "kubernetes", "torch", "xtrack", "xobjects", "pyopencl")
LIBRARY = ("sharebench.sweep", "sharebench.cli.sweep_cmd", "sharebench.kernel", "sharebench.analysis")
SCRIPT = f"""
import contextlib, io, json, sys
from sharebench.cli import main
err = io.StringIO()
with contextlib.redirect_stderr(err):
    code = main(json.loads(sys.argv[1]))
loaded = sorted(m for m in {HEAVY + LIBRARY!r} if m in sys.modules)
nvml = "pynvml" in sys.modules
print(json.dumps({{"code": code, "err": err.getvalue(), "loaded": loaded, "nvml": nvml}}))
"""
BAD = [
    (["--modes", "bogus"], "unknown sharing mode 'bogus'; allowed: exclusive, timeslice:N[/INTERVAL], "
     "mps:N[@PCT], mig:LAYOUT, mig-emulated:LAYOUT, partition:N"),
    (["--modes", "timeslice/huge"], "bad time-slice interval in 'timeslice:2/huge'; allowed: default, short, "
     "medium, long (e.g. timeslice:2/long)"),
    (["--turns", "0"], "bad --turns '0'; allowed: a whole number 1..1000000000"),
    (["--particles", "1e4,lots"], "bad particle count 'lots'; allowed: whole numbers > 0 such as 10000 or 5e6"),
    (["--engine", "exec", "--exec", "true", "--work", "0"], "bad work size (--work) '0'; allowed: whole numbers "
     "> 0 such as 10000 or 5e6"),
    (["--device", "tpu"], "bad device 'tpu': allowed are auto, cpu, cuda[:N], opencl[:P.D]"),
    (["--engine", "warp"], "bad engine 'warp': allowed are simpletrack, xtrack, exec"),
    (["--lattice", "/nonexistent.json"], "lattice file '/nonexistent.json' not found; give an Xsuite line JSON "
     "or JSON.gz"),
    (["--exec-timing", "wall", "--engine", "exec", "--exec", "true"], "bad exec timing 'wall'; allowed: "
     "protocol, process"),
    (["--pattern", "sometimes"], "unknown pattern 'sometimes'; allowed: batch, interactive[:burst=N,think=SECONDS], "
     "serve[:rate=PER_SECOND,size=N], serve:load=FRACTION[,size=N]"),
    (["--bursts", "0"], "bad --bursts '0'; allowed: a whole number 1..1000000"),
    (["--slo", "0.5"], "bad --slo '0.5'; allowed: a p95 slowdown target >= 1 (e.g. 2 for twice as slow)"),
    (["--users", "2..8"], "--users LO..HI goes with --capacity (users per GPU by search)"),
    (["--capacity", "--modes", "mps", "--users", "9..3"], "bad --users '9..3'; allowed: LO..HI with 1 <= LO <= HI "
     "<= 64 (e.g. 2..32)"),
    (["--budget", "soon"], "bad --budget 'soon'; allowed: a duration such as 90s, 10m, 1h30m (h, m, s; at most "
     "30 days)"),
    (["--budget", "9m", "--max-repeats", "2"], "bad --max-repeats '2'; allowed: a whole number 3..1000"),
    (["--budget", "9m", "--gpu-model", "H200", "--dry-run", "--recorded", "/nonexistent"], "--recorded "
     "/nonexistent: no such folder; give the folder that holds recorded results folders"),
    (["--precision", "1"], "--precision goes with --budget DURATION (adaptive repeats within a node-time budget)"),
    (["--stop-after", "-1"], "bad --stop-after '-1'; allowed: seconds 0..1e+07"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), BAD, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_bad_option_is_refused_in_one_line_before_the_library_loads(argv, message):
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(["run", *argv, "--out", "/nonexistent/out"])],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    r = json.loads(done.stdout)
    assert (r["code"], r["err"]) == (2, f"sharebench: error: {message}\n")
    assert r["loaded"] == [] and not r["nvml"], f"sharebench run {' '.join(argv)} loaded {r['loaded']}"


def parse(*argv: str):
    return build_parser("run").parse_args(["run", *argv])


def test_the_options_come_in_four_groups(capsys):
    with pytest.raises(SystemExit):
        parse("--help")
    headings = [ln for ln in capsys.readouterr().out.splitlines() if ln and not ln.startswith(" ") and ln.endswith(":")]
    assert headings[-4:] == ["what to run:", "how to share:", "pattern and capacity:", "budget and output:"]


def test_a_search_takes_its_families_repeats_and_users_as_values():
    opts = run_options(parse("--modes", "exclusive,timeslice,mps@25", "--repeats", "1", "--users", "3..9"))
    assert isinstance(opts, RunOptions) and opts.budget is None
    assert opts.search is not None and opts.search.families == ("timeslice", "mps@25")
    assert (opts.search.users, opts.search.min_repeats, opts.search.max_repeats) == ((3, 9), 1, 4)
    assert opts.modes == (parse_mode("exclusive"), parse_mode("timeslice:3"), parse_mode("mps:3@25"))
    assert opts.repeats == 1
    with_budget = run_options(parse("--capacity", "--modes", "mps", "--budget", "10m", "--max-repeats", "2"))
    assert with_budget.search is not None and with_budget.search.max_repeats == 2  # the search's, per N
    assert with_budget.budget is not None and with_budget.budget.max_repeats is None
    with pytest.raises(UserError, match="--capacity needs a mode family without N"):
        run_options(parse("--capacity", "--modes", "timeslice:2"))


def test_the_parsed_arguments_are_never_rewritten(tmp_path, capsys):
    lattice = str(tiny_lattice(tmp_path / "fodo.json"))
    argv = ["run", "--device", "cpu", "--modes", "timeslice", "--capacity", "--repeats", "1", "--max-repeats",
            "3", "--budget", "5m", "--particles", "500", "--pattern", "interactive", "--lattice", lattice,
            "--dry-run", "--out", str(tmp_path / "r")]  # fmt: skip
    args = build_parser("run").parse_args(argv)
    before = copy.deepcopy({k: v for k, v in vars(args).items() if k != "func"})
    assert args.func(args) == 0
    assert "capacity search: N from 2 doubling to at most 64" in capsys.readouterr().out
    assert {k: v for k, v in vars(args).items() if k != "func"} == before
    assert main(argv) == 0 and not (tmp_path / "r").exists()
