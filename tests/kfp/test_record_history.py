"""The pipelines' history step (issue 25, item 4): the record_history component run through kfp.local
against a local store, on real results folders (the committed H200 run, and the same run with its
timeslice:2 windows stretched: a real step in the loss), and `sharebench submit`'s checks of its
parameters."""

# no `from __future__ import annotations`: KFP reads the test pipeline's annotations as types

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("kfp", reason="kfp not installed (pip install -e '.[kfp]')")

from kfp import dsl, local
from kfp.dsl import Dataset

from sharebench.components.record_history import record_history
from sharebench.errors import UserError
from sharebench.history import load_runs, open_store
from sharebench.pipelines.cli import check_arguments, pipeline_parameters
from support.paths import ROOT

pytestmark = pytest.mark.slow  # kfp.local runs

TEMPLATE = ROOT / "tests" / "data" / "results" / "h200" / "warm" / "warm-10M-1turn"
MODE = "timeslice:2"
NODE = "gpu-node-1"


def results_folder(tmp: Path, name: str, day: int, stretch: float) -> Path:
    """The template run on NODE, dated ``day`` December 2026, every timeslice:2 tracking window
    ``stretch`` times as long (so its loss grows; 1.0: the committed run's losses)."""
    out = tmp / name
    out.mkdir(parents=True)
    df = pd.read_csv(TEMPLATE / "results.csv")
    sel = df["mode"] == MODE
    span = df.loc[sel, "track_end"] - df.loc[sel, "track_start"]
    df.loc[sel, "track_end"] = df.loc[sel, "track_start"] + span * stretch
    df.loc[sel, "track_s"] = df.loc[sel, "track_s"] * stretch
    df.to_csv(out / "results.csv", index=False)
    prov = json.loads((TEMPLATE / "provenance.json").read_text())
    prov["created_utc"] = f"2026-12-{day:02d}T03:00:00+00:00"
    prov["cluster"]["node"] = NODE
    (out / "provenance.json").write_text(json.dumps(prov))
    return out


@dsl.pipeline(name="record-history-test")
def record_pipeline(results_dir: str, store: str):
    """The results folder imported as the Dataset collect_results would hand over, then the step."""
    imported = dsl.importer(artifact_uri=results_dir, artifact_class=Dataset, reimport=False)
    record_history(results=imported.output, store=store).set_caching_options(False)


@pytest.fixture
def local_root(tmp_path) -> Path:
    root = tmp_path / "pipeline_root"
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root))
    return root


def test_step_passes_without_a_change_and_fails_on_a_step(tmp_path, local_root, capfd):
    store = tmp_path / "store"
    first = results_folder(tmp_path, "first", 1, 1.0)
    same = results_folder(tmp_path, "same", 2, 1.0)
    step = results_folder(tmp_path, "step", 3, 1.05)  # +5% timeslice:2 span: several loss points more

    record_pipeline(results_dir=str(first), store=str(store))  # raises if the task failed
    record_pipeline(results_dir=str(same), store=str(store))
    out = capfd.readouterr().out
    assert "0 change(s) in 2 cell(s)" in out, out
    assert f"same: node {NODE} {MODE} batch 10,000,000 particles" in out

    with pytest.raises(RuntimeError, match="record-history"):
        record_pipeline(results_dir=str(step), store=str(store))
    out = capfd.readouterr()
    text = out.out + out.err
    assert "1 cell(s) of 2 changed" in text, text
    (line,) = [x for x in text.splitlines() if "changed: node" in x]
    assert f"node {NODE} {MODE} batch 10,000,000 particles x 1 turns" in line
    assert "mps:2" not in line
    # the changed run is in the store all the same: the next check judges against it once accepted
    assert sorted(load_runs(open_store(str(store)))["time_utc"].str[:10].unique()) == [
        "2026-12-01",
        "2026-12-02",
        "2026-12-03",
    ]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"history": "gs://bucket/history"}, "--param history: history store 'gs://bucket/history' is not a folder"),
        ({"history": "s3://"}, "--param history: history store 's3://' names no bucket"),
        ({"pushgateway": "pushgateway:9091"}, "--param pushgateway='pushgateway:9091' is not an http(s) URL"),
    ],
)
def test_submit_refuses_a_bad_store_or_pushgateway_in_one_line(given, message):
    params = pipeline_parameters(ROOT / "pipelines" / "sharebench_sweep.yaml")
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")) as err:
        check_arguments(params, given)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", ["sharebench_sweep.yaml", "sharebench_multi_node.yaml"])
def test_submit_takes_a_folder_or_s3_store_and_an_http_pushgateway(name, tmp_path):
    params = pipeline_parameters(ROOT / "pipelines" / name)
    assert params["history"]["defaultValue"] == ""
    for store in ("s3://mlpipeline/sharebench/history", str(tmp_path / "history")):
        check_arguments(params, {"history": store, "pushgateway": "http://pushgateway.monitoring:9091"})
