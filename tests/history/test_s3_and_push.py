"""`sharebench history` against a real S3 API server (moto's, on loopback, as tests/kfp/test_fetch.py
starts it) and a real Pushgateway scraped by a real Prometheus (Debian packages prometheus and
prometheus-pushgateway), which also evaluates the rendered PrometheusRule."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import jsonschema
import pytest
import yaml

from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.history import CheckOptions, add_and_check, load_runs, open_store
from sharebench.manifests import monitoring
from support.paths import ROOT

moto_server = pytest.importorskip("moto.server", reason="moto[server] is in the test extra")
boto3 = pytest.importorskip("boto3", reason="boto3 is in the history extra")

TEMPLATE = ROOT / "tests" / "data" / "results" / "h200" / "warm" / "warm-10M-1turn"
PROMETHEUS = shutil.which("prometheus")
PUSHGATEWAY = shutil.which("prometheus-pushgateway")
RULE_FILE = ROOT / "manifests" / "monitoring" / f"0400_prometheusrule_{monitoring.HISTORY_RULE}.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_run(tmp: Path, name: str, day: int, stretch: float, node: str = "gpu-node-1") -> Path:
    """The committed H200 run with its timeslice:2 windows stretched by ``stretch``, dated ``day``."""
    import pandas as pd

    out = tmp / name
    out.mkdir(parents=True)
    df = pd.read_csv(TEMPLATE / "results.csv")
    for r, jitter in ((1, 0.0), (2, 0.002), (3, -0.002)):
        sel = (df["mode"] == "timeslice:2") & (df["repeat"] == r)
        k = stretch + jitter
        df.loc[sel, "track_end"] = (
            df.loc[sel, "track_start"] + (df.loc[sel, "track_end"] - df.loc[sel, "track_start"]) * k
        )
        df.loc[sel, "track_s"] *= k
    df.to_csv(out / "results.csv", index=False)
    prov = json.loads((TEMPLATE / "provenance.json").read_text())
    prov["created_utc"] = f"2026-12-{day:02d}T03:00:00+00:00"
    prov["cluster"]["node"] = node
    (out / "provenance.json").write_text(json.dumps(prov))
    return out


@pytest.fixture(scope="module")
def s3_url():
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    yield f"http://127.0.0.1:{server._port}"  # noqa: SLF001 - moto keeps the port it was given
    server.stop()


@pytest.fixture
def bucket(s3_url, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "minio")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "minio123")
    client = boto3.client("s3", endpoint_url=s3_url, region_name="us-east-1")
    name = f"history-{time.monotonic_ns()}"
    client.create_bucket(Bucket=name)
    return client, name


def test_s3_store_adds_once_checks_and_accepts(bucket, s3_url, tmp_path, capsys):
    client, name = bucket
    store = f"s3://{name}/sharebench/history"
    for day, stretch in ((1, 1.0), (2, 1.001), (3, 0.999)):
        code = main(
            ["history", "add", str(make_run(tmp_path, f"r{day}", day, stretch)), "--to", store, "--s3-endpoint", s3_url]
        )
        assert code == 0
    assert main(["history", "add", str(tmp_path / "r1"), "--to", store, "--s3-endpoint", s3_url]) == 0
    assert "already in the store" in capsys.readouterr().out
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=name)["Contents"]]
    assert len(keys) == 3 and all(k.startswith("sharebench/history/runs/2026120") for k in keys)
    res = add_and_check(make_run(tmp_path, "step", 4, 1.06), store, CheckOptions(), s3_endpoint=s3_url)
    assert res.added and res.changed and [v.cell["mode"] for v in res.changes] == ["timeslice:2"]
    assert main(["history", "check", store, "--s3-endpoint", s3_url]) == 1
    assert "changed: node gpu-node-1 timeslice:2" in capsys.readouterr().out
    assert main(["history", "accept", store, "--mode", "timeslice:2", "--s3-endpoint", s3_url]) == 0
    assert main(["history", "check", store, "--s3-endpoint", s3_url]) == 0
    assert len(load_runs(open_store(store, endpoint=s3_url))) == 8  # 4 runs x 2 cells


def test_s3_refusals_are_one_line(bucket, s3_url, tmp_path, monkeypatch, capsys):
    run = str(make_run(tmp_path, "r", 1, 1.0))
    assert main(["history", "add", run, "--to", "s3://no-such-bucket/x", "--s3-endpoint", s3_url]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sharebench: error: s3://no-such-bucket/x at http") and "refused: NoSuchBucket" in err
    with pytest.raises(UserError, match="cannot reach the object store 'http://127.0.0.1:9'"):
        add_and_check(run, f"s3://{bucket[1]}", s3_endpoint="http://127.0.0.1:9")


# ---------------------------------------------------------------- PrometheusRule


def _duration() -> str:
    return r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"


# The openAPIV3Schema of prometheus-operator's PrometheusRule CRD (monitoring.coreos.com/v1, operator
# v0.82), transcribed; additionalProperties false where the API server would prune unknown fields.
PROMETHEUS_RULE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": _duration()},
                            "query_offset": {"type": "string", "pattern": _duration()},
                            "limit": {"type": "integer"},
                            "partial_response_strategy": {
                                "type": "string",
                                "pattern": "^([aA][bB][oO][rR][tT]|[wW][aA][rR][nN])?$",
                            },
                            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["expr"],
                                    "properties": {
                                        "alert": {"type": "string"},
                                        "record": {"type": "string"},
                                        "expr": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                                        "for": {"type": "string", "pattern": _duration()},
                                        "keep_firing_for": {"type": "string", "minLength": 1, "pattern": _duration()},
                                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                                    },
                                },
                            },
                        },
                    },
                }
            },
        },
    },
}


def test_the_prometheus_rule_validates_against_the_operator_schema():
    rule = yaml.safe_load(RULE_FILE.read_text())
    jsonschema.validate(rule, PROMETHEUS_RULE_SCHEMA)
    bad = json.loads(json.dumps(rule))
    bad["spec"]["groups"][0]["rules"][0]["for"] = "five minutes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, PROMETHEUS_RULE_SCHEMA)
    (r,) = rule["spec"]["groups"][0]["rules"]
    assert r["alert"] == monitoring.HISTORY_ALERT and monitoring.HISTORY_CHANGES_METRIC in r["expr"]


# ---------------------------------------------------------------- Pushgateway + Prometheus


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def _wait(fn, timeout_s: float, what: str):
    end = time.time() + timeout_s
    while time.time() < end:
        try:
            got = fn()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def monitoring_stack(tmp_path_factory):
    if PROMETHEUS is None or PUSHGATEWAY is None:
        pytest.skip("prometheus / prometheus-pushgateway not installed (apt-get install; .ci/run installs them)")
    tmp = tmp_path_factory.mktemp("pushgw")
    gw_port, prom_port = free_port(), free_port()
    spec = yaml.safe_load(RULE_FILE.read_text())["spec"]
    for g in spec["groups"]:
        g["interval"] = "1s"  # the rendered 1m, shortened for the test
    (tmp / "rules.yml").write_text(yaml.safe_dump(spec))
    (tmp / "prometheus.yml").write_text(f"""
global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: ["{tmp / "rules.yml"}"]
scrape_configs:
  - job_name: pushgateway
    honor_labels: true
    static_configs: [{{targets: ["127.0.0.1:{gw_port}"]}}]
""")
    log = open(tmp / "log.txt", "w")  # noqa: SIM115 - open while both servers run, closed in finally
    procs = [
        subprocess.Popen([PUSHGATEWAY, f"--web.listen-address=127.0.0.1:{gw_port}"], stdout=log, stderr=log),
        subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=log,
            stderr=log,
        ),
    ]
    try:
        prom = f"http://127.0.0.1:{prom_port}"
        _wait(lambda: _get_json(f"{prom}/api/v1/rules")["data"]["groups"], 30, "Prometheus to load the rule")
        yield f"http://127.0.0.1:{gw_port}", prom
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=10)
        log.close()


def _query(prom: str, q: str) -> list[dict]:
    return _get_json(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": q}))["data"]["result"]


def test_pushed_losses_are_queryable_and_a_failed_check_fires_the_alert(monitoring_stack, tmp_path, capsys):
    gateway, prom = monitoring_stack
    store = str(tmp_path / "store")
    for day, stretch in ((1, 1.0), (2, 1.001)):
        assert (
            main(
                [
                    "history",
                    "add",
                    str(make_run(tmp_path, f"r{day}", day, stretch)),
                    "--to",
                    store,
                    "--check",
                    "--pushgateway",
                    gateway,
                ]
            )
            == 0
        )
    sel = 'sharebench_loss_percent{node="gpu-node-1",mode="timeslice:2",gpu_model="H200",pattern="batch",particles="10000000"}'
    (series,) = _wait(lambda: _query(prom, sel), 30, "the pushed loss in Prometheus")
    assert 30 < float(series["value"][1]) < 36
    (low,) = _query(prom, sel.replace("sharebench_loss_percent", "sharebench_loss_ci_low_percent"))
    (high,) = _query(prom, sel.replace("sharebench_loss_percent", "sharebench_loss_ci_high_percent"))
    assert float(low["value"][1]) <= float(series["value"][1]) <= float(high["value"][1])
    assert _wait(lambda: _query(prom, 'sharebench_history_check_changes{node="gpu-node-1"} == 0'), 30, "check = 0")
    assert not _query(prom, 'ALERTS{alertname="SharebenchLossChanged"}')
    capsys.readouterr()
    code = main(
        ["history", "add", str(make_run(tmp_path, "step", 3, 1.06)), "--to", store, "--check", "--pushgateway", gateway]
    )
    assert code == 1
    firing = _wait(
        lambda: _query(prom, 'ALERTS{alertname="SharebenchLossChanged",alertstate="firing"}'), 30, "the alert to fire"
    )
    assert firing[0]["metric"]["node"] == "gpu-node-1"


def test_an_unreachable_pushgateway_is_one_line(tmp_path, capsys):
    code = main(
        [
            "history",
            "add",
            str(make_run(tmp_path, "r", 1, 1.0)),
            "--to",
            str(tmp_path / "s"),
            "--pushgateway",
            f"http://127.0.0.1:{free_port()}",
        ]
    )
    assert code == 2
    assert "cannot push to the Pushgateway http://127.0.0.1:" in capsys.readouterr().err
