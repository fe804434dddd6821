"""``sharebench COMMAND --help`` and a bad option's usage error stay light (issue 26, item 5): each command's
options module imports argparse and a few constants; the library stacks (pandas, scipy, matplotlib,
kfp, the Kubernetes client, the trackers) load only when the command runs, through ``sharebench.cli.lazy``.

Each case runs in a fresh interpreter, so what one command imported cannot hide another's import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sharebench.cli import COMMANDS, Lazy, lazy, main, plugin_commands
from sharebench.pipelines.commands import HAVE_KFP, needs_kfp
from tools.reference import command_parsers

HEAVY = (
    "pandas",
    "numpy",
    "scipy",
    "matplotlib",
    "kfp",
    "kfp_server_api",
    "kubernetes",
    "torch",
    "xtrack",
    "xobjects",
    "pyopencl",
    "boto3",
    "botocore",
    "yaml",
)
# main(argv) in a fresh interpreter: its exit code, what it printed, and which heavy modules it loaded
SCRIPT = f"""
import contextlib, io, json, sys
from sharebench.cli import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = main(json.loads(sys.argv[1]))
    except SystemExit as exc:
        code = exc.code
heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)
print(json.dumps({{"code": code, "heavy": heavy, "out": out.getvalue(), "err": err.getvalue()}}))
"""
PATHS = [path.split()[1:] for path, _parser, _help in command_parsers()]
ALL = {**COMMANDS, **plugin_commands()}


def run_fresh(argv: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(argv)], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout)


def test_every_command_and_its_subcommands_are_covered():
    assert {p[0] for p in PATHS} == set(ALL)
    assert {"compile", "submit", "runs", "run", "history", "node"} <= set(ALL)
    assert ["history", "add"] in PATHS and ["runs", "fetch"] in PATHS and ["probe", "split"] in PATHS


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_help_imports_no_library_stack(path):
    r = run_fresh([*path, "--help"])
    assert r["code"] == 0, r["err"]
    assert r["out"].startswith(f"usage: sharebench {' '.join(path)}"), r["out"][:200]
    assert r["heavy"] == [], f"sharebench {' '.join(path)} --help imported {r['heavy']}"


@pytest.mark.parametrize("name", list(ALL))
def test_an_unknown_option_is_refused_without_the_library_stack(name):
    r = run_fresh([name, "--no-such-option"])
    assert r["code"] == 2
    # argparse names the unknown option, or first a required argument (or one of a required group) that is missing
    missing = "arguments are required" in r["err"] or "is required" in r["err"]
    assert "unrecognized arguments: --no-such-option" in r["err"] or missing, r["err"]
    assert r["heavy"] == [], f"sharebench {name} --no-such-option imported {r['heavy']}"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["submit", "--pipeline", "nope"], "argument --pipeline: invalid choice: 'nope'"),
        (["submit", "--wait", "soon"], "argument --wait: invalid float value: 'soon'"),
        (["runs", "--limit", "many"], "argument --limit: invalid int value: 'many'"),
        (["runs", "fetch", "run-1"], "the following arguments are required: --out"),
        (["compile", "extra"], "unrecognized arguments: extra"),
        (["run", "--dry-run", "--bogus", "1"], "unrecognized arguments: --bogus 1"),
        (["probe", "timeslice", "--grid", "half"], "argument --grid: invalid choice: 'half'"),
        (["manifests", "render", "--mig-strategy", "some"], "argument --mig-strategy: invalid choice: 'some'"),
        (["track", "--cpus", "3-1"], "argument --cpus:"),
    ],
)
def test_the_usage_errors_of_the_options_stay_light(argv, message):
    r = run_fresh(argv)
    assert r["code"] == 2
    assert message in r["err"], r["err"]
    assert r["heavy"] == [], f"sharebench {' '.join(argv)} imported {r['heavy']}"


def test_every_command_function_resolves_to_its_implementation():
    """A lazy reference with a typo would only fail when the command runs: each one is resolved here."""
    seen = 0
    for path, parser, _help in command_parsers():
        func = parser.get_default("func")
        if isinstance(func, Lazy):
            target = func.resolve()
            assert callable(target) and target.__name__ == func.function, path
            assert func.module.endswith("_cmd") or func.module == "sharebench.pipelines.cli", path
            seen += 1
        elif path.split()[1] in ("compile", "submit", "runs") and not HAVE_KFP:
            assert func is needs_kfp, path
    assert seen >= (25 if HAVE_KFP else 21)


def test_lazy_names_a_module_and_a_function():
    for bad in ("sharebench.cli.sweep_cmd", "sharebench.cli.sweep_cmd:", ":cmd_run", "a.b:not-a-name"):
        with pytest.raises(ValueError, match="write 'package.module:function'"):
            lazy(bad)
    assert repr(lazy("sharebench.cli.sweep_cmd:cmd_run")) == "lazy(sharebench.cli.sweep_cmd:cmd_run)"


def test_a_lazy_command_runs_and_its_user_error_is_one_line(capsys, tmp_path):
    assert main(["compare", str(tmp_path)]) == 2  # compare_cmd imported on the call; its UserError at the boundary
    err = capsys.readouterr().err
    assert err == f"sharebench: error: compare needs at least two results folders, got 1: {tmp_path}\n"
