"""manifests/monitoring/: rendered from the library, valid objects, a sane dashboard, known metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.manifests import monitoring
from sharebench.manifests.render import check
from sharebench.results import ResultsWriter
from sharebench.telemetry import grafana, prometheus
from support.paths import ROOT

DIR = ROOT / "manifests" / "monitoring"
FILES = sorted(DIR.glob("*.yaml"))
K8S_VERSION = "1.31.0"


def _load(path: Path) -> dict:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    assert len(docs) == 1, f"{path.name}: one object per file"
    return docs[0]


def test_committed_files_are_the_render():
    assert check(ROOT / "manifests") == [], "run: sharebench manifests render"
    assert [p.name for p in FILES] == [name for name, _ in monitoring.objects()]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_one_numbered_object_named_like_its_file(path):
    obj = _load(path)
    m = re.fullmatch(r"(\d{4})_([a-z]+)_(.+)\.yaml", path.name)
    assert m, path.name
    assert m.group(2) == obj["kind"].lower()
    assert m.group(3) == obj["metadata"]["name"]
    assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "sharebench"


@pytest.mark.parametrize("path", [p for p in FILES if "_configmap_" in p.name], ids=lambda p: p.name)
def test_configmaps_validate_against_the_kubernetes_schema(path):
    kubernetes_validate.validate(_load(path), K8S_VERSION, strict=True)


def test_kubernetes_validate_catches_a_broken_configmap():
    bad = _load(DIR / f"0100_configmap_{monitoring.METRICS_CONFIGMAP}.yaml")
    bad["data"] = {"dcgm-metrics.csv": 42}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)


def _csv_names() -> list[str]:
    cm = _load(DIR / f"0100_configmap_{monitoring.METRICS_CONFIGMAP}.yaml")
    return monitoring.csv_metric_names(cm["data"][monitoring.METRICS_KEY])


def test_csv_enables_the_profiling_metrics():
    names = _csv_names()
    for required in (
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_POWER_USAGE",
    ):
        assert required in names
    assert len(names) == len(set(names)), "a field listed twice"
    assert set(prometheus.REQUIRED) <= {m.name for m in prometheus.METRICS}


def test_a_malformed_csv_line_is_a_user_error():
    with pytest.raises(UserError, match=r"bad dcgm-exporter CSV line 'DCGM_FI_PROF_SM_ACTIVE, histogram, x'"):
        monitoring.csv_metric_names("DCGM_FI_PROF_SM_ACTIVE, histogram, x\n")


def _dashboard() -> dict:
    cm = _load(DIR / f"0300_configmap_{monitoring.DASHBOARD_CONFIGMAP}.yaml")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    return json.loads(cm["data"][monitoring.DASHBOARD_KEY])


def _exprs(dash: dict) -> list[str]:
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def test_dashboard_is_sane():
    dash = _dashboard()
    assert dash["uid"] == monitoring.DASHBOARD_UID and dash["schemaVersion"] >= 36
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dash["templating"]["list"]}
    for p in dash["panels"]:
        assert p["type"] == "timeseries" and p["targets"], p["title"]
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs))
        for t in p["targets"]:
            used = set(re.findall(r"\$\{?(\w+)\}?", t["expr"] + t["datasource"]["uid"]))
            assert used <= variables, (p["title"], used - variables)
    titles = {p["title"]: p for p in dash["panels"]}
    gpu = titles["SM activity per GPU"]["targets"][0]["expr"]
    mig = titles["SM activity per MIG instance"]["targets"][0]["expr"]
    assert "DCGM_FI_PROF_SM_ACTIVE" in gpu and 'GPU_I_ID=""' in gpu
    assert "DCGM_FI_PROF_SM_ACTIVE" in mig and 'GPU_I_ID!=""' in mig and "GPU_I_PROFILE" in mig
    ann = [a for a in dash["annotations"]["list"] if a.get("target", {}).get("tags")]
    assert ann and ann[0]["target"]["tags"] == [grafana.ANNOTATION_TAG]


def test_every_metric_in_the_dashboard_and_queries_is_in_the_csv():
    names = set(_csv_names())
    used = set()
    for expr in _exprs(_dashboard()):
        used |= set(re.findall(r"\bDCGM_FI_[A-Z0-9_]+\b", expr))
    used |= {m.name for m in prometheus.METRICS}
    assert used and used <= names, sorted(used - names)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package prometheus) not installed")
def test_dashboard_queries_are_valid_promql(tmp_path):
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"sharebench:panel_{i}", "expr": e.replace("$node", ".*")}
                    for i, e in enumerate(_exprs(_dashboard()))
                ],
            }
        ]
    }
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    out = subprocess.run(["promtool", "check", "rules", str(tmp_path / "rules.yml")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    # and promtool does fail on a broken one
    (tmp_path / "bad.yml").write_text(
        yaml.safe_dump(
            {"groups": [{"name": "x", "rules": [{"record": "x:y", "expr": "max by (node (DCGM_FI_PROF_SM_ACTIVE)"}]}]}
        )
    )
    assert (
        subprocess.run(["promtool", "check", "rules", str(tmp_path / "bad.yml")], capture_output=True).returncode != 0
    )


def test_service_monitor_targets_the_operators_exporter():
    sm = _load(DIR / f"0200_servicemonitor_{monitoring.SERVICE_MONITOR}.yaml")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == monitoring.PROMETHEUS_RELEASE
    assert sm["spec"]["selector"]["matchLabels"] == {"app": "nvidia-dcgm-exporter"}
    assert sm["spec"]["namespaceSelector"]["matchNames"] == ["gpu-operator"]
    (ep,) = sm["spec"]["endpoints"]
    assert ep["port"] == "gpu-metrics" and ep["interval"] == "1s"
    (relabel,) = ep["relabelings"]
    assert relabel["sourceLabels"] == ["__meta_kubernetes_pod_node_name"]
    assert relabel["targetLabel"] == prometheus.DEFAULT_NODE_LABEL


CELLS = [
    {"cell_id": "timeslice:2_p1e6_r1", "mode": "timeslice:2", "start": 1796210000.25, "end": 1796210012.5},
    {"cell_id": "exclusive_p1e6_r1", "mode": "exclusive", "start": 1796209980.0, "end": 1796209986.0},
]


def _grafana(got: list[dict]) -> ThreadingHTTPServer:
    """A loopback HTTP endpoint that records what is POSTed to it and answers like Grafana."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            got.append(
                {
                    "path": self.path,
                    "auth": self.headers.get("Authorization"),
                    "body": json.loads(self.rfile.read(int(self.headers["Content-Length"]))),
                }
            )
            body = json.dumps({"id": len(got), "message": "Annotation added"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_annotations_reach_grafana_as_regions():
    got: list[dict] = []
    srv = _grafana(got)
    try:
        ids = grafana.post_annotations(f"http://127.0.0.1:{srv.server_address[1]}", "tok", CELLS, run="r42")
    finally:
        srv.shutdown()
        srv.server_close()
    assert ids == [1, 2]
    assert got[0]["path"] == "/api/annotations" and got[0]["auth"] == "Bearer tok"
    assert got[0]["body"] == {
        "time": 1796210000250,
        "timeEnd": 1796210012500,
        "tags": ["sharebench", "timeslice:2", "run:r42"],
        "text": "sharebench timeslice:2 timeslice:2_p1e6_r1",
    }


def test_a_backwards_cell_is_a_user_error():
    with pytest.raises(UserError, match=r"cell 'x' ends before it starts"):
        grafana.annotation_payloads([{"cell_id": "x", "mode": "exclusive", "start": 10, "end": 5}])


def test_unreachable_grafana_is_a_user_error():
    with pytest.raises(UserError, match=r"Grafana at http://127.0.0.1:9 not reachable"):
        grafana.post_annotations("http://127.0.0.1:9", None, CELLS[:1], timeout_s=2)


def test_annotate_cli_writes_the_results_cells(tmp_path, monkeypatch, capsys):
    base = dict(
        sweep_id="s",
        engine="simpletrack",
        lattice="generated",
        turns=10,
        particles=1000,
        host="h",
        status="ok",
        error="",
        cell_status="ok",
        cell_error="",
        device_class="cpu",
        backend="cpu",
        warmup=False,
        repeat=1,
    )
    ResultsWriter(tmp_path).append(
        [
            dict(
                base,
                mode="exclusive",
                mode_kind="exclusive",
                replicas=1,
                replica=0,
                cell_id="ex_r1",
                track_start=100.0,
                track_end=110.0,
                track_s=10.0,
            )
        ]
        + [
            dict(
                base,
                mode="timeslice:2",
                mode_kind="timeslice",
                replicas=2,
                replica=i,
                cell_id="ts_r1",
                track_start=200.0 + i,
                track_end=220.0 + i,
                track_s=20.0,
            )
            for i in (0, 1)
        ]
    )
    got: list[dict] = []
    srv = _grafana(got)
    monkeypatch.setenv("GRAFANA_TOKEN", "t0k")
    try:
        rc = main(["telemetry", "annotate", str(tmp_path), "--grafana", f"http://127.0.0.1:{srv.server_address[1]}"])
    finally:
        srv.shutdown()
        srv.server_close()
    assert rc == 0 and "2 annotations written" in capsys.readouterr().out
    assert [(g["body"]["time"], g["body"]["timeEnd"]) for g in got] == [(100_000, 110_000), (200_000, 221_000)]
    assert {g["auth"] for g in got} == {"Bearer t0k"}
