"""Feedback in a second (issue 43, item 4): every command's bad value is answered in one line, exit 2, before
any heavy import or device discovery: each options module checks its values (``cli.lazy``'s ``check``) before
the command's work module loads. The test measures what a bad value imports, not the wall clock (a benchmark
of seconds would be the machine's): the library stacks and sharebench's own heavy layers stay unloaded.

One fresh interpreter imports ``sharebench.cli`` and forks a child per case, so that what one case imported
cannot hide another's imports (a fork starts from the parent's modules: ``sharebench.cli`` alone)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from support.paths import ROOT

HEAVY = (
    "pandas",
    "numpy",
    "scipy",
    "matplotlib",
    "kfp",
    "kubernetes",
    "torch",
    "xtrack",
    "xobjects",
    "pyopencl",
    "boto3",
    "yaml",
    "pynvml",
    "prometheus_client",
)
LIBRARY = (
    "sharebench.sweep",
    "sharebench.kernel",
    "sharebench.analysis",
    "sharebench.node",
    "sharebench.telemetry",
    "sharebench.history",
    "sharebench.campaign",
    "sharebench.manifests.render",
    "sharebench.report",
    "sharebench.sharing",
    "sharebench.workloads",
)
SCRIPT = """
import contextlib, io, json, os, sys
from sharebench.cli import main
WATCH = json.loads(sys.argv[1])
out = []
for argv in json.loads(sys.stdin.read()):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code
        loaded = sorted(m for m in WATCH if m in sys.modules)
        os.write(w, json.dumps({"code": code, "err": err.getvalue(), "loaded": loaded}).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.waitpid(pid, 0)
    out.append(json.loads(data))
print(json.dumps(out))
"""
RESULTS = str(ROOT / "tests" / "data" / "results" / "h200" / "warm" / "warm-10M-1turn")
PLAN = str(ROOT / "benchmarks" / "plans" / "patterns.toml")
CASES = [
    (["run", "--modes", "bogus"], "unknown sharing mode 'bogus'; allowed: exclusive, timeslice:N"),
    (["lattice", "--lattice", "/nonexistent.json"], "lattice file '/nonexistent.json' not found"),
    (["track", "--engine", "exec"], "bad engine 'exec': allowed are simpletrack, xtrack"),
    (["track", "--particles", "0"], "bad --particles 0; allowed: a whole number >= 1"),
    (["track", "--nemitt-x", "-1"], "bad --nemitt-x -1; allowed: a number >= 0"),
    (["bench", "--devices", "cpu,tpu"], "bad device 'tpu': allowed are auto, cpu, cuda[:N], opencl[:P.D]"),
    (["bench", "--repeats", "0"], "bad --repeats '0'; allowed: a whole number >= 1"),
    (["report", "/nonexistent"], "results folder /nonexistent does not exist"),
    (["compare", RESULTS, RESULTS, "--ignore", "colour"], "bad --ignore 'colour'; allowed: engine, backend"),
    (["compare", RESULTS, "/nonexistent"], "results folder /nonexistent has no results.csv"),
    (["node", "apply", "n1", "bogus"], "node n1, mode bogus, state pre-flight: unknown sharing mode 'bogus'"),
    (["node", "apply", "n1", "partition:2"], "node n1, mode partition:2, state pre-flight: partition:2 is a CPU-only local "
     "mode; a node takes exclusive, timeslice:N, mps:N, mig:LAYOUT"),
    (["node", "apply", "n1", "mps:2", "--gpu-model", "T4"], "unknown GPU model 'T4'; known: A100-40GB"),
    (["node", "restore", "n1", "--poll", "0.001"], "--poll must be at least 0.1 s (got 0.001)"),
    (["node", "status", "n1", "--kubeconfig", "/nonexistent"], "kubeconfig '/nonexistent' does not exist"),
    (["node", "agent", "--every", "0"], "--every must be a finite number of seconds > 0 (got 0.0)"),
    (["manifests", "render", "--run-namespace", "Bad_NS"], "namespace 'Bad_NS' is not a valid Kubernetes name"),
    (["manifests", "check", "--dir", "/nonexistent"], "manifests folder '/nonexistent' does not exist"),
    (["telemetry", "sample", "--seconds", "-1"], "bad --seconds -1.0; allowed: seconds 0..3600"),
    (["telemetry", "sample", "--device", "tpu"], "unknown device 'tpu'; allowed: cpu, cuda[:N]"),
    (["telemetry", "dcgm", RESULTS, "--url", "prometheus:9090"], "bad Prometheus URL 'prometheus:9090'"),
    (["telemetry", "annotate", RESULTS, "--grafana", "grafana"], "bad Grafana URL 'grafana'"),
    (["history", "add", "/nonexistent", "--to", "/tmp/s"], "results folder /nonexistent does not exist"),
    (["history", "check", "ftp://x/y"], "history store 'ftp://x/y' is not a folder or an s3 URL"),
    (["history", "check", "s3://b/p", "--alpha", "1.5"], "bad --alpha 1.5; allowed: a probability in (0, 1)"),
    (["history", "show", "s3://b/p", "--since", "yesterday"], "bad --since 'yesterday'"),
    (["history", "accept", "s3://b/p", "--mode", "sliced"], "unknown sharing mode 'sliced'"),
    (["history", "add", RESULTS, "--to", "s3://b/p", "--pushgateway", "gw:9091"], "bad --pushgateway 'gw:9091'"),
    (["campaign", "/nonexistent.toml"], "plan '/nonexistent.toml' does not exist"),
    (["campaign", PLAN, "--steps", "bogus"], "no step or tag 'bogus' in plan patterns; allowed: "),
    (["campaign", PLAN, "--budget", "0"], "bad --budget 0; allowed: seconds > 0"),
    (["campaign", PLAN, "--lattice", "/nonexistent"], "lattice file '/nonexistent' not found"),
    (["probe", "timeslice", "--device", "cpu"], "bad --device 'cpu': the time-slice probe needs an NVIDIA GPU"),
    (["probe", "timeslice", "--neighbour", "bogus"], "bad --neighbour 'bogus': light, stream[:MB] or heavy[:MB]"),
    (["probe", "split", "--replicas", "1"], "bad --replicas '1'; allowed: a whole number 2..64"),
    (["probe", "split", "--lengths", "1,x"], "bad --lengths 'x'; allowed: seconds 0.01..1000"),
]  # fmt: skip


@pytest.fixture(scope="module")
def answers() -> list[dict]:
    """Each case's exit code, stderr and the watched modules it loaded (one interpreter, a fork per case)."""
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(HEAVY + LIBRARY)],
        input=json.dumps([argv for argv, _ in CASES]),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return list(json.loads(done.stdout))


@pytest.mark.parametrize("case", range(len(CASES)), ids=[" ".join(a[:3]) for a, _ in CASES])
def test_a_bad_value_is_one_line_before_any_heavy_import(answers, case):
    argv, message = CASES[case]
    r = answers[case]
    assert r["code"] == 2, r
    assert r["err"].startswith(f"sharebench: error: {message}"), r["err"]
    assert r["err"].count("\n") == 1, r["err"]
    assert r["loaded"] == [], f"sharebench {' '.join(argv)} loaded {r['loaded']} before refusing"


def test_every_command_with_values_has_a_case():
    """A command of the library's own whose values are not covered here would slip back to checking late."""
    from sharebench.cli import COMMANDS

    covered = {argv[0] for argv, _ in CASES}
    valueless = {"devices", "cleanup", "advise"}  # no values to check; advise: its own tests (issue 43, item 5)
    assert set(COMMANDS) - valueless <= covered, sorted(set(COMMANDS) - valueless - covered)
