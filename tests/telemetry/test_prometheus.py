"""Cluster telemetry against a real Prometheus server scraping a DCGM-format exporter on loopback.

Two exporters (http.server) serve dcgm-exporter text with known values; Prometheus (the
Debian package) scrapes them every second, labelling them node gpu-node-1 / gpu-node-2 as
the ServiceMonitor's relabelling does. On gpu-node-1:
  GPU-A   full GPU, time-sliced by two pods → every series twice (pod bench-0, bench-1)
          phase 1: SM active 0.8, FP64 0.5, DRAM 0.25, FB 1000 MiB, power 300 W, SM clock 1980 MHz
          phase 2: SM active 0.4, power 500 W (the rest unchanged)
  GPU-B   MIG, GI 1 (1g.18gb): SM active 0.6, FB 100 MiB; GI 2 (1g.18gb): SM active 0.2, FB 300 MiB;
          power 200 W (whole GPU)
gpu-node-2 serves the same names with SM active 0.99 everywhere (must never leak into node 1).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from numpy.testing import assert_allclose

from sharebench import analysis
from sharebench.analysis import prediction
from sharebench.analysis import telemetry as tel_analysis
from sharebench.errors import UserError
from sharebench.report.render import markdown
from sharebench.report.sections import telemetry_section
from sharebench.results import DCGM_CSV, ResultsWriter
from sharebench.telemetry import prometheus as prom_mod
from sharebench.telemetry.prometheus import Prometheus, cell_summary, summarize_cells

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(
    PROMETHEUS is None, reason="prometheus binary not installed (apt-get install prometheus; .ci/run installs it)"
)
STEP_S = 0.5
GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000001"
GPU_B = "GPU-bbbbbbbb-0000-0000-0000-000000000002"


def _series(values: dict[str, float], uuid: str, gpu: str, extra: dict[str, str]) -> list[str]:
    base = {
        "gpu": gpu,
        "UUID": uuid,
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA H200",
        "Hostname": "dcgm-exporter-x1",
        **extra,
    }
    lab = ",".join(f'{k}="{v}"' for k, v in base.items())
    return [f"{name}{{{lab}}} {val:.6f}" for name, val in values.items()]


def exposition(state: dict) -> str:
    lines = []
    for m in prom_mod.METRICS:
        lines += [f"# HELP {m.name} {m.help}", f"# TYPE {m.name} gauge"]
    a = {
        "DCGM_FI_PROF_SM_ACTIVE": state["sm_a"],
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE": 0.5,
        "DCGM_FI_PROF_DRAM_ACTIVE": 0.25,
        "DCGM_FI_DEV_FB_USED": 1000,
        "DCGM_FI_DEV_POWER_USAGE": state["power_a"],
        "DCGM_FI_DEV_SM_CLOCK": 1980,
        "DCGM_FI_DEV_GPU_UTIL": 100,
    }
    for pod in ("bench-0", "bench-1"):
        lines += _series(a, GPU_A, "0", {"container": "replica", "namespace": "kubeflow", "pod": pod})
    for gi, sm, fb in (("1", state["sm_b1"], 100), ("2", state["sm_b2"], 300)):
        lines += _series(
            {"DCGM_FI_PROF_SM_ACTIVE": sm, "DCGM_FI_DEV_FB_USED": fb},
            GPU_B,
            "1",
            {"GPU_I_PROFILE": "1g.18gb", "GPU_I_ID": gi},
        )
    lines += _series({"DCGM_FI_DEV_POWER_USAGE": 200, "DCGM_FI_DEV_SM_CLOCK": 1755}, GPU_B, "1", {})
    # a body grouped by metric name, as exporters write it
    body = sorted((ln for ln in lines if not ln.startswith("#")), key=lambda s: s.split("{")[0])
    return "\n".join([ln for ln in lines if ln.startswith("#")] + body) + "\n"


class _Exporter:
    def __init__(self, state: dict):
        self.state = state
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = exposition(outer.state).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(fn, timeout_s: float, what: str):
    t_end = time.time() + timeout_s
    while time.time() < t_end:
        got = fn()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """A real Prometheus scraping two exporters; yields (client, windows) after two phases."""
    tmp = tmp_path_factory.mktemp("prom")
    node1 = _Exporter({"sm_a": 0.8, "power_a": 300.0, "sm_b1": 0.6, "sm_b2": 0.2})
    node2 = _Exporter({"sm_a": 0.99, "power_a": 999.0, "sm_b1": 0.99, "sm_b2": 0.99})
    port = _free_port()
    (tmp / "prometheus.yml").write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: dcgm-exporter
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["127.0.0.1:{node1.port}"]
        labels: {{node: gpu-node-1}}
      - targets: ["127.0.0.1:{node2.port}"]
        labels: {{node: gpu-node-2}}
""")
    with open(tmp / "prometheus.log", "w") as log:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            client = Prometheus(f"http://127.0.0.1:{port}", timeout_s=5)

            def ready():
                try:
                    return client.query(f'DCGM_FI_PROF_SM_ACTIVE{{node="gpu-node-1",UUID="{GPU_A}"}}')
                except UserError:
                    return None

            _wait(ready, 20, "Prometheus to scrape the exporter")
            t1 = time.time()
            time.sleep(2.6)
            t_switch = time.time()
            node1.state.update(sm_a=0.4, power_a=500.0)

            def phase2():
                r = client.query(f'DCGM_FI_PROF_SM_ACTIVE{{node="gpu-node-1",UUID="{GPU_A}"}}')
                return r and all(abs(float(s["value"][1]) - 0.4) < 1e-9 for s in r)

            _wait(phase2, 10, "the second phase to be scraped")
            t2 = time.time()
            time.sleep(2.6)
            t3 = time.time()
            yield client, {"phase1": (t1, t_switch - 0.3), "phase2": (t2, t3)}
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            node1.close()
            node2.close()


def _points(window) -> int:
    """Evaluation instants of a range query: start, start + step, … ≤ end, in Prometheus' ms."""
    start_ms, end_ms = (round(float(f"{t:.3f}") * 1000) for t in window)
    return (end_ms - start_ms) // round(STEP_S * 1000) + 1


@pytest.mark.parametrize("phase,sm,power", [("phase1", 0.8, 300.0), ("phase2", 0.4, 500.0)])
def test_one_time_sliced_gpu(scraped, phase, sm, power):
    client, windows = scraped
    start, end = windows[phase]
    s = cell_summary(client, start, end, node="gpu-node-1", gpu_uuid=GPU_A, step_s=STEP_S, mode="timeslice:2")
    assert_allclose(s["dcgm_sm_active_mean"], sm, rtol=1e-12)
    assert_allclose(s["dcgm_sm_active_max"], sm, rtol=1e-12)
    assert_allclose(s["dcgm_fp64_active_mean"], 0.5, rtol=1e-12)
    assert_allclose(s["dcgm_dram_active_mean"], 0.25, rtol=1e-12)
    assert_allclose(s["dcgm_fb_used_mib_mean"], 1000.0, rtol=1e-12)
    assert_allclose(s["dcgm_power_w_mean"], power, rtol=1e-12)
    assert_allclose(s["dcgm_sm_clock_mhz_mean"], 1980.0, rtol=1e-12)
    # trapezoids of a constant over the evaluation steps, counted once despite two pod copies
    assert_allclose(s["dcgm_energy_j"], power * (_points(windows[phase]) - 1) * STEP_S, rtol=1e-9)
    assert s["dcgm_copies"] == 1
    assert "1 device-level copies" in s["dcgm_note"]
    assert "timeslice:2: DCGM values are per GPU, shared by all replicas" in s["dcgm_note"]
    assert [i["uuid"] for i in s["instances"]] == [GPU_A]


def test_the_whole_node_with_mig_instances(scraped):
    client, windows = scraped
    start, end = windows["phase1"]
    s = cell_summary(client, start, end, node="gpu-node-1", step_s=STEP_S, mode="mig:1g")
    # three physical series with equal point counts: GPU-A, GPU-B GI 1, GPU-B GI 2
    assert_allclose(s["dcgm_sm_active_mean"], (0.8 + 0.6 + 0.2) / 3, rtol=1e-12)
    assert_allclose(s["dcgm_sm_active_max"], 0.8, rtol=1e-12)
    assert s["dcgm_mig_instances"] == 2
    mig = {i["gpu_instance_id"]: i for i in s["instances"] if i["gpu_instance_id"]}
    assert sorted(mig) == ["1", "2"]
    assert_allclose([mig["1"]["sm_active_mean"], mig["2"]["sm_active_mean"]], [0.6, 0.2], rtol=1e-12)
    assert_allclose([mig["1"]["fb_used_mib_mean"], mig["2"]["fb_used_mib_mean"]], [100.0, 300.0], rtol=1e-12)
    assert {i["profile"] for i in mig.values()} == {"1g.18gb"}
    # power per whole GPU: A 300 W + B 200 W
    assert_allclose(s["dcgm_energy_j"], 500.0 * (_points(windows["phase1"]) - 1) * STEP_S, rtol=1e-9)
    assert "MIG: activity and memory per instance" in s["dcgm_note"]


def test_other_nodes_do_not_leak_in(scraped):
    client, windows = scraped
    s = cell_summary(client, *windows["phase2"], node="gpu-node-2", gpu_uuid=GPU_A, step_s=STEP_S)
    assert_allclose(s["dcgm_sm_active_mean"], 0.99, rtol=1e-12)
    absent = cell_summary(client, *windows["phase2"], node="no-such-node", step_s=STEP_S)
    assert absent["dcgm_sm_active_mean"] is None
    assert "DCGM_FI_PROF_SM_ACTIVE: no series" in absent["dcgm_note"]


def test_summarize_cells_records_failures_per_cell(scraped):
    client, windows = scraped
    rows = summarize_cells(
        client,
        [
            {
                "cell_id": "timeslice:2_p1_r1",
                "start": windows["phase1"][0],
                "end": windows["phase1"][1],
                "mode": "timeslice:2",
            },
            {"cell_id": "broken", "start": 10.0, "end": 5.0},
        ],
        node="gpu-node-1",
        gpu_uuid=GPU_A,
        step_s=STEP_S,
    )
    assert_allclose(rows[0]["dcgm_sm_active_mean"], 0.8, rtol=1e-12)
    assert rows[1]["dcgm_source"] == "none" and "empty time window" in rows[1]["dcgm_note"]


@pytest.mark.parametrize(
    "url,match",
    [
        ("localhost:9090", r"bad Prometheus URL 'localhost:9090'; allowed: http\(s\)://HOST\[:PORT\]"),
        ("", r"bad Prometheus URL ''"),
    ],
)
def test_bad_url_is_a_user_error(url, match):
    with pytest.raises(UserError, match=match):
        Prometheus(url)


def test_unreachable_prometheus_is_a_user_error():
    with pytest.raises(UserError, match=r"Prometheus at http://127.0.0.1:9 not reachable"):
        Prometheus("http://127.0.0.1:9", timeout_s=2).query("up")


def test_a_bad_query_names_prometheus_error(scraped):
    client, _ = scraped
    with pytest.raises(UserError, match=r"refused the query \(400\).*parse error"):
        client.query("DCGM_FI_PROF_SM_ACTIVE{")


def test_attach_to_a_results_folder_and_report(scraped, tmp_path, monkeypatch):
    """Cells whose tracking windows are the two phases: dcgm.csv holds each phase's values, the
    telemetry section shows them and takes the energy from DCGM (no NVML here), the bound follows."""
    client, windows = scraped
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
        device_class="gpu",
        backend="cuda",
        device_spec="cuda:0",
        device_name="NVIDIA H200",
        device_uuid=GPU_A,
        parent_uuid=GPU_A,
        warmup=False,
        repeat=1,
    )
    (s1, e1), (s2, e2) = windows["phase1"], windows["phase2"]
    rows = [
        dict(
            base,
            mode="exclusive",
            mode_kind="exclusive",
            replicas=1,
            replica=0,
            cell_id="ex",
            track_start=s1,
            track_end=e1,
            track_s=e1 - s1,
        )
    ]
    rows += [
        dict(
            base,
            mode="timeslice:2",
            mode_kind="timeslice",
            replicas=2,
            replica=i,
            cell_id="ts",
            track_start=s2,
            track_end=e2,
            track_s=e2 - s2,
        )
        for i in (0, 1)
    ]
    ResultsWriter(tmp_path).append(rows)
    df = prom_mod.attach_to_results(tmp_path, client.url, node="gpu-node-1", gpu_uuid=GPU_A, step_s=STEP_S)
    got = df.set_index("cell_id")
    assert_allclose(got.loc[["ex", "ts"], "dcgm_sm_active_mean"], [0.8, 0.4], rtol=1e-12)
    assert (tmp_path / DCGM_CSV).exists()

    cells = tel_analysis.cell_telemetry(tmp_path).set_index("cell_id")
    assert cells.loc["ex", "track_energy_source"] == "dcgm (Prometheus)"
    assert_allclose(cells.loc["ex", "track_energy_j"], got.loc["ex", "dcgm_energy_j"], rtol=1e-12)
    monkeypatch.delenv(tel_analysis.PRICE_ENV, raising=False)
    md = markdown([telemetry_section(tmp_path, analysis.analyse(tmp_path))], tmp_path)
    assert "DCGM SM active %" in md and "| 80.0 |" in md
    bound, evidence = prediction.bounds_from_telemetry(tel_analysis.cell_telemetry(tmp_path))[("gpu", 1000.0)]
    assert bound == "SM-bound" and evidence.startswith("DCGM: SM active 80.0%")
