"""`sharebench submit` / `sharebench runs` with the real kfp.Client against a loopback HTTP
server speaking the subset of the KFP v2beta1 REST API the client uses; cron and --param checks."""

from __future__ import annotations

import json

import pytest
import yaml

pytest.importorskip("kfp", reason="kfp not installed (pip install -e '.[kfp]')")

from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.pipelines.cli import validate_cron
from support.paths import ROOT

PIPELINES = ROOT / "pipelines"


def _run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_uploads_the_compiled_sweep_with_typed_parameters(kfp_server, capsys):
    code, out, err = _run_cli(
        capsys,
        "submit",
        "--host",
        kfp_server.url,
        "--experiment",
        "gpu-sharing",
        "--run-name",
        "h200-nightly",
        "--param",
        "node_name=gpu-node-7",
        "--param",
        "gpu_model=H200",
        "--param",
        "modes=exclusive,timeslice:2,mig:1g",
        "--param",
        "particle_counts=5e6,1e7",
        "--param",
        "repeats=2",
        "--param",
        "force=true",
        "--param",
        'workload={"engine": "exec", "command": "python -m sharebench.workloads.train", "device": "CUDA"}',
        "--service-account",
        "sharebench-node",
    )
    assert code == 0, err
    (run,) = kfp_server.runs.values()
    assert out.strip().endswith(f"run {run['run_id']}")
    assert run["display_name"] == "h200-nightly" and run["service_account"] == "sharebench-node"
    (exp,) = kfp_server.experiments.values()
    assert exp["display_name"] == "gpu-sharing" and run["experiment_id"] == exp["experiment_id"]
    # the server received the committed pipeline spec itself, and the typed arguments
    committed, platform = yaml.safe_load_all((PIPELINES / "sharebench_sweep.yaml").read_text())
    sent = run["pipeline_spec"]
    # kfp.Client marks the root tasks uncached (enable_caching=False); the rest is byte for byte ours
    for spec in (sent["pipeline_spec"], committed):
        for task in spec["root"]["dag"]["tasks"].values():
            assert not task.pop("cachingOptions", {}).get("enableCache")
    assert sent["pipeline_spec"] == committed
    assert sent["platform_spec"] == platform
    assert run["runtime_config"]["parameters"] == {
        "node_name": "gpu-node-7",
        "gpu_model": "H200",
        "modes": ["exclusive", "timeslice:2", "mig:1g"],
        "particle_counts": [5000000, 10000000],
        "repeats": 2,
        "force": True,
        # checked here (Workload.from_dict) and sent whole, every key filled in
        "workload": {
            "engine": "exec",
            "device": "cuda",
            "command": "python -m sharebench.workloads.train",
            "timing": "protocol",
            "name": "",
            "lattice": "",
            "seed": 1,
            "pattern": "batch",
            "neighbours": "",
            "bursts": "",  # the sample rule's cap for each cell
        },
    }


def test_submit_with_a_schedule_makes_a_recurring_run(kfp_server, capsys):
    code, out, err = _run_cli(
        capsys,
        "submit",
        "--host",
        kfp_server.url,
        "--pipeline",
        "multi-node",
        "--schedule",
        "0 30 2 * * MON-FRI",
        "--param",
        'nodes=["a100-1=A100-40GB","h100-1=H100-80GB"]',
    )
    assert code == 0, err
    (rr,) = kfp_server.recurring.values()
    assert rr["trigger"]["cron_schedule"]["cron"] == "0 30 2 * * MON-FRI"
    assert rr["max_concurrency"] in (1, "1") and rr["no_catchup"] is True
    assert rr["runtime_config"]["parameters"] == {"nodes": ["a100-1=A100-40GB", "h100-1=H100-80GB"]}
    spec = rr["pipeline_spec"]
    assert (spec.get("pipeline_spec") or spec)["pipelineInfo"]["name"] == "sharebench-multi-node"
    assert f"recurring run {rr['recurring_run_id']} (cron 0 30 2 * * MON-FRI)" in out
    assert not kfp_server.runs


def test_runs_lists_runs_and_recurring_runs(kfp_server, capsys):
    assert _run_cli(capsys, "submit", "--host", kfp_server.url, "--run-name", "once")[0] == 0
    assert (
        _run_cli(capsys, "submit", "--host", kfp_server.url, "--schedule", "0 0 3 * * *", "--run-name", "nightly")[0]
        == 0
    )
    code, out, err = _run_cli(capsys, "runs", "--host", kfp_server.url, "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert [r["name"] for r in listed["runs"]] == ["once"]
    assert [(r["name"], r["cron"]) for r in listed["recurring_runs"]] == [("nightly", "0 0 3 * * *")]
    code, out, _ = _run_cli(capsys, "runs", "--host", kfp_server.url, "--experiment", "sharebench")
    assert code == 0 and "once" in out and "nightly" in out and "0 0 3 * * *" in out


def test_submit_sends_the_token_and_waits(kfp_server, capsys):
    kfp_server.token = "s3cret"
    code, out, err = _run_cli(capsys, "submit", "--host", kfp_server.url, "--token", "s3cret", "--wait", "30")
    assert code == 0, err
    assert "finished: SUCCEEDED" in out
    assert {h.get("authorization") for _, p, _, h in kfp_server.requests if not p.endswith("healthz")} == {
        "Bearer s3cret"
    }


@pytest.mark.parametrize(
    "cron, message",
    [
        ("0 3 * * *", "cron '0 3 * * *' has 5 fields; KFP cron has 6, seconds first: use '0 0 3 * * *'"),
        ("*/5 * * * *", "use '0 */5 * * * *'"),
        ("0 0 3 * *", "has 5 fields"),
        ("0 0 3 * * * *", "has 7 fields; KFP cron has 6, seconds first"),
        ("0 61 3 * * *", "minute field '61' is out of range; allowed: 0-59"),
        ("0 0 24 * * *", "hour field '24' is out of range; allowed: 0-23"),
        ("0 0 3 0 * *", "day of month field '0' is out of range; allowed: 1-31"),
        ("0 0 3 * FOO *", "month field 'FOO' is out of range; allowed: 1-12 or JAN-DEC"),
        ("0 0 3 * * 5-1", "day of week range '5-1' runs backwards"),
        ("0 0 3 * * */0", "bad step '0'"),
    ],
)
def test_cron_is_checked_with_a_one_line_explanation(cron, message):
    with pytest.raises(UserError) as exc:
        validate_cron(cron)
    assert message in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("cron", ["0 0 3 * * *", "0 */15 8-18 ? * MON-FRI", "30 0 0 1,15 JAN-JUN *", "0 0 12 * * sun"])
def test_good_crons_pass(cron):
    assert validate_cron(cron) == cron


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--schedule", "0 3 * * *"], "use '0 0 3 * * *'"),
        (
            ["--param", "node=gpu-1"],
            "--param 'node' is not a parameter of this pipeline; allowed: advise_class_label, advise_slo,",
        ),
        (
            ["--param", "budget=10min"],
            "--param: bad budget '10min'; allowed: a duration such as 90s, 10m, 1h30m (h, m, s; at most 30 days)",
        ),
        (["--param", "budget=0s"], "--param: bad budget '0s'; allowed: a duration such as 90s, 10m, 1h30m"),
        (["--param", "workload=exec"], "--param workload='exec': expected a JSON object"),
        (
            ["--param", 'workload={"engin": "exec"}'],
            "--param workload: unknown workload key(s) 'engin'; allowed: engine,",
        ),
        (["--param", 'workload={"seed": -2}'], "--param workload: bad workload seed -2; allowed: a whole number >= 0"),
        (
            ["--param", 'workload={"engine": "exec"}'],
            "--param workload: workload engine 'exec' needs a command: the program each replica runs",
        ),
        (
            ["--param", 'workload={"pattern": "interactive", "neighbours": "batch"}'],
            "--param: placement 'pods' runs each replica in its own pod: neighbours 'batch' beside pattern "
            "'interactive:burst=10,think=0.5' need placement 'processes'",
        ),
        (["--param", "repeats=three"], "--param repeats='three': expected an integer"),
        (["--param", "repeats"], "--param 'repeats': write NAME=VALUE"),
        (["--param", "force=maybe"], "--param force='maybe': expected true or false"),
        (["--param", 'modes=["exclusive",'], "--param modes='[\"exclusive\",': expected a JSON list"),
        (["--package", "/nonexistent/p.yaml"], "pipeline package '/nonexistent/p.yaml' does not exist"),
    ],
)
def test_bad_submit_options_exit_2_with_one_line_before_contacting_the_server(kfp_server, capsys, argv, message):
    code, out, err = _run_cli(capsys, "submit", "--host", kfp_server.url, *argv)
    assert code == 2
    assert err.startswith("sharebench: error: ") and message in err and err.count("\n") == 1
    assert kfp_server.requests == []


def test_host_without_scheme_is_refused(capsys):
    code, _, err = _run_cli(capsys, "runs", "--host", "kubeflow.example.org")
    assert code == 2 and "give the KFP API URL with its scheme" in err


def test_unreachable_or_refusing_server_is_one_line(kfp_server, capsys):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, _, err = _run_cli(capsys, "runs", "--host", f"http://127.0.0.1:{port}")
    assert (
        code == 2
        and err.startswith(f"sharebench: error: cannot reach http://127.0.0.1:{port}")
        and err.count("\n") == 1
    )
    kfp_server.token = "s3cret"
    code, _, err = _run_cli(capsys, "submit", "--host", kfp_server.url, "--token", "wrong")
    assert code == 2 and "answered HTTP 401" in err and "pass --token or --cookies" in err and err.count("\n") == 1


def test_notebook_cluster_path_submits_and_waits(kfp_server):
    from sharebench.pipelines.notebook import submit_and_wait

    out = submit_and_wait(
        kfp_server.url,
        {
            "node_name": "gpu-node-7",
            "gpu_model": "H200",
            "modes": ["exclusive", "mps:2"],
            "particle_counts": [10000],
            "placement": "pods",
        },
        experiment="notebook",
        service_account="sharebench-node",
        timeout_s=60,
    )
    (run,) = kfp_server.runs.values()
    assert out == {"run_id": run["run_id"], "state": "SUCCEEDED"}
    assert run["runtime_config"]["parameters"]["modes"] == ["exclusive", "mps:2"]
    assert run["service_account"] == "sharebench-node"
    with pytest.raises(UserError, match="'nodes' is not a parameter of this pipeline"):
        submit_and_wait(kfp_server.url, {"nodes": ["a=H200"]})
