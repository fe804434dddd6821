"""Issue 33, item 7: the advise step of the sweep pipeline, compiled and run on a real Prometheus.

The compiled pipeline holds ``advise-pool`` under a condition on ``prometheus_url`` ('' by default: the
step does not run) with Markdown, HTML and Dataset outputs; ``steps.advise_pool`` (what the component
calls) reads a small committed results folder (``tests/data/results/advise-h200``: provenance and
tables/latency.csv as ``sharebench report`` leaves them) and Debian's Prometheus backfilled with a
synthetic dcgm-exporter trace, and writes advice.md/html/json.
"""

# no `from __future__ import annotations`: KFP reads the test pipeline's annotations as types

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml
from advise.test_advise import PROM_CLASSES, PROMETHEUS, PROMTOOL, free_port, needs_prometheus, openmetrics
from kfp import dsl, local
from kfp.dsl import Dataset

from sharebench.advise import Window, read_prometheus
from sharebench.advise.synthetic import synthetic_trace
from sharebench.components import steps
from sharebench.components.advise_pool import advise_pool
from sharebench.errors import UserError
from support.paths import ROOT

RESULTS = ROOT / "tests" / "data" / "results" / "advise-h200"
SWEEP_YAML = ROOT / "pipelines" / "sharebench_sweep.yaml"
STEPS = 360  # six hours of one-minute samples


def _spec() -> dict:
    return next(yaml.safe_load_all(SWEEP_YAML.read_text()))


def test_advise_step_runs_only_under_a_prometheus_url():
    spec = _spec()
    root = spec["root"]["inputDefinitions"]["parameters"]
    assert root["prometheus_url"]["defaultValue"] == ""
    assert root["advise_window"]["defaultValue"] == "24h"
    assert root["advise_slo"]["defaultValue"] == steps.DEFAULT_ADVISE_QUERY["slo"]
    for p in ("prometheus_url", "advise_window", "advise_step_s", "advise_class_label", "advise_slo"):
        assert root[p]["description"], f"parameter {p} has no description"
    comps = spec["components"]
    holders = [
        (name, task)
        for name, comp in comps.items()
        for task in comp.get("dag", {}).get("tasks", {}).values()
        if task["taskInfo"]["name"] == "advise"
    ]
    ((parent, cond),) = holders
    assert cond["triggerPolicy"]["condition"] == "inputs.parameter_values['pipelinechannel--prometheus_url'] != ''"
    assert cond["dependentTasks"] == ["sharebench-node"]  # after the sweep's results are collected
    (step,) = comps[cond["componentRef"]["name"]]["dag"]["tasks"].values()
    assert step["componentRef"]["name"] == "comp-advise-pool"
    assert step["inputs"]["artifacts"]["results"]["componentInputArtifact"] == "pipelinechannel--sharebench-node-Output"
    query = step["inputs"]["parameters"]["query"]["runtimeValue"]["constant"]
    assert set(query) == {"prometheus_url", "window", "step_s", "class_label", "slo"} <= set(steps.DEFAULT_ADVISE_QUERY)
    assert query["prometheus_url"] == "{{$.inputs.parameters['pipelinechannel--prometheus_url']}}"
    outputs = comps["comp-advise-pool"]["outputDefinitions"]["artifacts"]
    kinds = {name: o["artifactType"]["schemaTitle"] for name, o in outputs.items()}
    assert kinds == {"advice_md": "system.Markdown", "advice_html": "system.HTML", "advice": "system.Dataset"}
    # the multi-node pipeline is unchanged: no advise step there
    multi = next(yaml.safe_load_all((ROOT / "pipelines" / "sharebench_multi_node.yaml").read_text()))
    assert "comp-advise-pool" not in multi["components"]
    assert parent == "comp-exit-handler-1"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory) -> Iterator[tuple[str, float]]:
    """Debian's Prometheus serving a backfilled synthetic trace of 16 GPUs: (url, the trace's last time)."""
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip("prometheus/promtool not installed (apt-get install prometheus)")
    tmp = tmp_path_factory.mktemp("prom")
    start = float(int(time.time() // 60 * 60) - (STEPS + 30) * 60)
    df = synthetic_trace(PROM_CLASSES, STEPS, start=start, seed=7)
    df["memory_bytes"] = np.where(df["busy"] > 0, df["memory_bytes"] // 2**20 * 2**20, 0)  # whole MiB
    (tmp / "om.txt").write_text(openmetrics(df))
    cmd = [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(tmp / "om.txt"), str(tmp / "data")]
    subprocess.run(cmd, check=True, capture_output=True)
    port = free_port()
    (tmp / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\n")
    with open(tmp / "prometheus.log", "w") as log:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=10y",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url, end = f"http://127.0.0.1:{port}", start + (STEPS - 1) * 60
    try:
        deadline = time.time() + 30
        while True:
            try:
                read_prometheus(url, Window(start, end, 60.0), "namespace")
                break
            except UserError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        yield url, end
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@needs_prometheus
def test_advise_pool_writes_the_advice_from_prometheus_and_the_results(prometheus, tmp_path):
    url, end = prometheus
    query = {"prometheus_url": url, "window": "6h", "until": str(end), "step_s": "60", "slo": "2.0"}
    copies = {"md": str(tmp_path / "ui" / "advice_md"), "html": str(tmp_path / "ui" / "advice_html")}
    paths = steps.advise_pool(str(RESULTS), query, str(tmp_path / "advice"), copies)
    assert {Path(paths[k]).name for k in ("md", "html", "json")} == {"advice.md", "advice.html", "advice.json"}
    advice = json.loads(Path(paths["json"]).read_text())
    rec = advice["recommended"]
    assert rec is not None and rec["gpus"] < 16  # the idle notebook and serving pods are packed
    assert sorted(advice["patterns"]) == sorted(PROM_CLASSES)
    assert Path(copies["md"]).read_text() == Path(paths["md"]).read_text()
    assert Path(copies["html"]).read_text().startswith("<!doctype html>")
    assert "data:image/png;base64," in Path(copies["html"]).read_text()


@dsl.pipeline(name="advise-pool-test")
def advise_pipeline(results_dir: str, prometheus_url: str, until: str):
    """The results folder imported as the Dataset collect_results would hand over, then the step under
    the sweep pipeline's condition; query values as strings, as the compiled placeholders give them."""
    imported = dsl.importer(artifact_uri=results_dir, artifact_class=Dataset, reimport=False)
    with dsl.If(prometheus_url != "", name="advise"):
        query = {"prometheus_url": prometheus_url, "window": "6h", "until": until, "step_s": "60.0", "slo": "2.0"}
        advise_pool(results=imported.output, query=query).set_caching_options(False)


@needs_prometheus
def test_advise_pool_runs_as_a_kfp_local_task(prometheus, tmp_path):
    url, end = prometheus
    root = tmp_path / "root"
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root))
    advise_pipeline(results_dir=str(RESULTS), prometheus_url=url, until=str(end))  # raises if the task failed
    md, html, folder = (next(root.rglob(name)) for name in ("advice_md", "advice_html", "advice"))
    assert md.read_text() == (folder / "advice.md").read_text()
    gpus = json.loads((folder / "advice.json").read_text())["recommended"]["gpus"]
    assert f"**Recommended: {gpus} GPUs** (today 16; frees {16 - gpus})" in md.read_text()
    assert html.read_text().startswith("<!doctype html>")
    assert gpus < 16
    assert (folder / "assignment.csv").read_text().startswith("pod,")


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ({"windw": "6h"}, r"unknown advise query key\(s\) windw; allowed: prometheus_url, window"),
        ({"window": "6 days"}, r"bad advise window '6 days'"),
        ({"step_s": "fast"}, r"bad advise step_s 'fast'"),
        ({"until": "yesterday"}, r"bad advise until 'yesterday'"),
    ],
)
def test_bad_query_is_a_one_line_error(query, match, tmp_path):
    with pytest.raises(UserError, match=match) as err:
        steps.advise_pool(str(RESULTS), {"prometheus_url": "http://127.0.0.1:9", **query}, str(tmp_path), {})
    assert "\n" not in str(err.value)
    assert not (tmp_path / "advice.json").exists()
