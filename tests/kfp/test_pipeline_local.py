"""The real pipeline, run with no cluster through kfp.local (SubprocessRunner, this Python).

Tiny sizes on the CPU OpenCL device (PoCL): placement 'processes' for the whole sweep, and
one cell in placement 'pods' (two replica tasks meeting at a start instant from upstream).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose

pytest.importorskip("kfp", reason="kfp not installed (pip install -e '.[kfp]')")

from kfp import local

from sharebench.components import steps
from sharebench.modes import parse_mode
from sharebench.results import load_results, read_provenance, write_provenance
from sharebench.sweep import Cell
from sharebench.sweep.grid import GridPlan, GridSettings, cell_value
from sharebench.workloads import Workload
from support.contexts import cpu_opencl_spec
from support.paths import ROOT

pytestmark = pytest.mark.slow  # kfp.local runs

MODES = ["exclusive", "timeslice:2"]


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory, lattice) -> Path:
    """The whole sweep pipeline at tiny sizes; returns its run folder under pipeline_root."""
    from sharebench.pipelines.sweep_pipeline import sweep_pipeline

    root = tmp_path_factory.mktemp("pipeline_root")
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root))
    sweep_pipeline(
        node_name="",
        gpu_model="",
        modes=MODES,
        particle_counts=[2000],
        repeats=1,
        turns=200,
        placement="processes",
        workload={"lattice": str(lattice), "device": cpu_opencl_spec()},
        start_delay_s=2.0,
    )
    (run,) = root.glob("sharebench-sweep-*")
    return run


def _outputs(task_dir: Path) -> dict:
    return json.loads((task_dir / "executor_output.json").read_text())


def test_local_sweep_writes_the_results_table(local_sweep):
    df = load_results(local_sweep / "collect-results" / "results")
    # 2 modes x 1 size x (warm-up + 1 repeat); exclusive has 1 replica, timeslice:2 has 2
    assert sorted(df["cell_id"].unique()) == [
        "exclusive_p2000_r0",
        "exclusive_p2000_r1",
        "timeslice:2_p2000_r0",
        "timeslice:2_p2000_r1",
    ]
    assert len(df) == 6
    assert set(df["status"]) == {"ok"} and set(df["cell_status"]) == {"ok"}
    assert df["sweep_id"].nunique() == 1 and df["sweep_id"].iloc[0]
    assert (df["warmup"] == (df["repeat"] == 0)).all()
    assert set(df["backend"]) == {"opencl"} and set(df["device_class"]) == {"cpu"}
    assert (df["particles"] == 2000).all() and (df["turns"] == 200).all() and (df["survived"] == 2000).all()
    ts = df[df["mode"] == "timeslice:2"]
    assert sorted(ts["replica"]) == [0, 0, 1, 1] and set(ts["replicas"]) == {2}


def test_local_sweep_loss_table_and_metrics_match_the_rows(local_sweep):
    import pandas as pd

    df = load_results(local_sweep / "collect-results" / "results")
    measured = df[~df["warmup"]]
    t1 = float(measured.loc[measured["mode"] == "exclusive", "track_s"].iloc[0])
    ts = measured[measured["mode"] == "timeslice:2"]
    t_n = float(ts["track_end"].max() - ts["track_start"].min())  # span of the 2 concurrent windows
    loss_pct = (t_n - 2 * t1) / (2 * t1) * 100
    overlap_pct = 100 * (ts["track_end"].min() - ts["track_start"].max()) / ts["track_s"].min()

    table = pd.read_csv(local_sweep / "collect-results" / "results" / "tables" / "timeslice.csv")
    row = table[(table["mode"] == "timeslice:2") & (table["particles"] == 2000)]
    assert len(row) == 1
    metrics = _outputs(local_sweep / "collect-results")["artifacts"]["metrics"]["artifacts"][0]["metadata"]
    md = (local_sweep / "collect-results" / "tables").read_text()
    assert "## Time-slicing" in md
    if overlap_pct >= 95:
        assert_allclose(row["loss_pct"].iloc[0], loss_pct, rtol=1e-9)
        assert set(metrics) == {"loss_pct/timeslice:2/p2000"}
        assert_allclose(metrics["loss_pct/timeslice:2/p2000"], round(loss_pct, 2), atol=1e-9)
        assert f"| {loss_pct:.2f} |" in md
    else:  # a loaded machine: the windows did not overlap enough; the analysis must leave the cell out
        assert np.isnan(row["loss_pct"].iloc[0]) and metrics == {}
        assert "overlap" in md


def test_local_sweep_report_artifacts(local_sweep):
    plot = local_sweep / "write-report"
    html = (plot / "report_html").read_text()
    md = (plot / "report_md").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "data:image/png;base64," in html
    assert "timeslice:2" in html and "timeslice:2" in md
    assert "loss" in md.lower()
    assert {p.name for p in (plot / "plots").iterdir()} >= {"loss_vs_particles.png", "loss_vs_particles.svg"}
    # the exit handler ran, and said it had nothing to restore
    assert _outputs(local_sweep / "restore-node")["parameterValues"]["Output"] == []


def test_pods_placement_cell_starts_replicas_at_the_upstream_instant(tmp_path, lattice):
    """Placement 'pods': one task per replica (kfp.local runs two at once), each sleeping
    until the start instant it was given, then check_cell gathers them."""
    from sharebench.components.image import IMAGE
    from sharebench.pipelines.sweep_pipeline import run_cell

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path))
    cell = Cell(parse_mode("timeslice:2"), 300, 1)
    workload = Workload(device=cpu_opencl_spec(), lattice=str(lattice))
    # the plan of a node's sweep as plan_sweep hands it on (built here: no node to put in the mode)
    plan = GridPlan("", "", "pods", (cell,), GridSettings(turns=2, workload=workload)).to_dict()
    placed = {"resource": "nvidia.com/gpu", "count": 1, "pods": [0, 1], "processes": 1, "replicas": 2}
    start_at = time.time() + 15.0  # both replica tasks start, build and warm up before it
    task = run_cell(
        image=IMAGE,
        plan=plan,
        cell={**cell_value(cell), "start_at": start_at},
        placed={**placed, "node_selector": {}},
        pods=[0, 1],
        resource="nvidia.com/gpu",
        resource_count=1,
        node_selector={},
    )
    rows = steps.read_rows([task.output.path])
    assert [r["replica"] for r in rows] == [0, 1]
    assert {r["mode"] for r in rows} == {"timeslice:2"} and {r["replicas"] for r in rows} == {2}
    assert {r["cell_id"] for r in rows} == {"timeslice:2_p300_r1"}
    assert {r["status"] for r in rows} == {"ok"} and {r["cell_status"] for r in rows} == {"ok"}
    starts = np.array([r["track_start"] for r in rows])
    assert (starts >= start_at).all()
    assert_allclose(starts, start_at, atol=2.0)  # both woke at the instant, not when their task began


def test_compare_nodes_report_puts_other_results_beside_the_first(local_sweep, tmp_path):
    """What compare_nodes does with the multi-node pipeline's results folders."""
    import shutil

    earlier = ROOT / "tests" / "data" / "results" / "cpu-example"
    if not (earlier / "results.csv").exists():
        pytest.skip(f"no second results folder at {earlier}")
    ours = local_sweep / "collect-results" / "results"
    third = tmp_path / "gpu-node-b"
    shutil.copytree(ours, third)
    prov = read_provenance(third)
    prov["device"]["node"] = "gpu-node-b"
    write_provenance(third, prov)
    html, md, plots = tmp_path / "r.html", tmp_path / "r.md", tmp_path / "plots"
    steps.write_report([str(ours), str(earlier), str(third)], str(html), str(md), str(plots))
    page = html.read_text()
    assert page.count("<body") == 1 and page.count("<h1>") == 2  # two comparisons, one page
    assert "cpu-example" in page and "gpu-node-b" in page
    assert md.read_text().count("\n# ") == 1  # the second comparison's heading
    assert any(plots.glob("loss_vs_particles.png"))


def test_multi_node_pipeline_runs_locally_and_compares(tmp_path, lattice):
    """The multi-node pipeline with two 'nodes' that are both this machine (kfp.local runs the two
    sweeps side by side): each node's sweep, then one comparison report, then the exit task."""
    from sharebench.pipelines.sweep_pipeline import multi_node_pipeline

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path))
    multi_node_pipeline(
        nodes=["", ""],
        modes=["exclusive"],
        particle_counts=[300],
        turns=2,
        repeats=1,
        warmup_repeats=0,
        placement="processes",
        workload={"lattice": str(lattice), "device": cpu_opencl_spec()},
        start_delay_s=1.0,
    )
    (run,) = tmp_path.glob("sharebench-multi-node-*")
    for i in (0, 1):
        (results,) = (run / f"for-loop-nodes-iteration-{i}").glob("**/collect-results/results")
        df = load_results(results)
        assert list(df["cell_id"]) == ["exclusive_p300_r1"] and list(df["status"]) == ["ok"]
    page = (run / "compare-nodes" / "report_html").read_text()
    assert "results-1 (" in page and "data:image/png;base64," in page  # the second node, beside the first
    assert _outputs(run / "restore-node")["parameterValues"]["Output"] == []


# ------------------------------------------------------------------ a budget (issue 24, item 1)
BUDGET = "4m"


@pytest.fixture(scope="module")
def budget_sweep(tmp_path_factory, lattice) -> Path:
    """The sweep pipeline with a budget: 2,000 particles fit it, 4,000,000 do not (200 turns of them: about
    150 s alone on PoCL on a 2-core AMD EPYC of 2026-12-04, where 400,000 took 15 s and fitted)."""
    from sharebench.pipelines.sweep_pipeline import sweep_pipeline

    root = tmp_path_factory.mktemp("pipeline_root")
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root))
    sweep_pipeline(
        node_name="",
        gpu_model="",
        modes=MODES,
        particle_counts=[2000, 4_000_000],
        repeats=1,
        turns=200,
        placement="processes",
        workload={"lattice": str(lattice), "device": cpu_opencl_spec()},
        start_delay_s=2.0,
        budget=BUDGET,
    )
    (run,) = root.glob("sharebench-sweep-*")
    return run


def test_a_budget_plans_what_fits_and_runs_within_it(budget_sweep):
    plan = _outputs(budget_sweep / "plan-sweep")["parameterValues"]["plan"]
    assert {c["particles"] for c in plan["cells"]} == {2000} and plan["modes"] == MODES
    summary = plan["budget_plan"]
    assert summary["budget_s"] == 240 and summary["predicted_s"] <= 240
    assert any(
        line.startswith("left out:  exclusive at 4,000,000, timeslice:2 at 4,000,000") for line in summary["plan"]
    )
    df = load_results(budget_sweep / "collect-results" / "results")
    assert sorted(df["cell_id"].unique()) == [
        "exclusive_p2000_r0",
        "exclusive_p2000_r1",
        "timeslice:2_p2000_r0",
        "timeslice:2_p2000_r1",
    ]
    assert set(df["status"]) == {"ok"}
    # the report states the budget, the time used (from the plan step to the results) and the plan
    md = (budget_sweep / "write-report" / "report_md").read_text()
    used = re.search(r"budget: 4m \(240 s\); used ([0-9.]+) s \((\d+)%\) from the plan step to the results", md)
    assert used, md
    assert float(used.group(1)) <= 240
    assert "budget: ran 4 of 4 planned cell(s)" in md
    assert "budget plan: budget:    4m (240 s); calibrated on this machine" in md
