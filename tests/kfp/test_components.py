"""The KFP components: their specs, and the glue their bodies call (sharebench.components.steps: planning,
rows handed between tasks, node reconfiguration against the simulated cluster, in-process and as a
kfp.local task). The library functions behind them are tested in tests/sweep/test_grid.py,
tests/node/test_placement.py and tests/report/test_combine.py."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("kfp", reason="kfp not installed (pip install -e '.[kfp]')")

from sharebench.components import COMPONENTS, load, steps
from sharebench.components.image import IMAGE
from sharebench.errors import UserError
from sharebench.sweep.grid import GridPlan
from support.k8s_sim import SIM_WAIT_S, SimCluster

NODE = "gpu-node-1"


# ------------------------------------------------------------------ specs
@pytest.mark.parametrize("name", COMPONENTS)
def test_component_spec_is_documented_and_runs_in_the_project_image(name):
    comp = load()[name]
    spec = comp.component_spec
    assert re.fullmatch(r"[a-z]+_[a-z_]+", name), "components are named verb_noun"
    assert spec.name == name.replace("_", "-")
    assert spec.description and not spec.description.startswith("Args")
    for arg, inp in (spec.inputs or {}).items():
        if arg != "status":  # PipelineTaskFinalStatus is filled in by KFP
            assert inp.description, f"{name}: input {arg} has no description"
    for out, o in (spec.outputs or {}).items():
        assert o.description, f"{name}: output {out} has no description"
    container = spec.implementation.container
    assert container.image == IMAGE
    # the image has kfp and sharebench installed: nothing is pip-installed when a task starts
    assert "pip install" not in " ".join(container.command)
    # the body calls the KFP-free steps module, nothing else of sharebench
    source = container.command[-1]
    assert "from sharebench.components import steps" in source
    assert not re.search(r"^\s*(try|except)\b", source, re.M), "a failure must show as a failed task"


def test_image_is_named_in_one_place():
    assert re.fullmatch(r"[a-z0-9./-]+/sharebench:[0-9A-Za-z._-]+", IMAGE)


# ------------------------------------------------------------------ planning (sharebench.sweep.grid)
REQUEST = dict(modes=["exclusive", "mig:1g"], gpu_model="", particle_counts=[5e6, 1e7], repeats=3.0, turns=10,
               placement="pods")  # fmt: skip


def test_check_step_checks_every_node_and_hands_the_request_on(capsys):
    assert steps.check_sweep(REQUEST, ["n1=H200", "n2=A100-40GB"]) == REQUEST
    assert "sharebench: request checked for n1=H200, n2=A100-40GB" in capsys.readouterr().out
    with pytest.raises(UserError, match=r"^mode 'mig:1g' needs gpu_model \(e\.g\. H200, A100-40GB\)"):
        steps.check_sweep(REQUEST, ["n1=H200", "n2"])  # n2's GPU model unknown: its MIG layout cannot resolve
    with pytest.raises(UserError, match=r"^unknown sweep parameter\(s\) node; allowed: modes, gpu_model"):
        steps.check_sweep({**REQUEST, "node": "n1"}, ["n1=H200"])


def test_plan_step_hands_kfp_one_plan_value_and_logs_the_plan(capsys):
    plan = steps.plan_sweep(request=REQUEST, node_name="n1=H200")
    assert (plan["modes"], plan["node_name"], plan["gpu_model"]) == (["exclusive", "mig:1g.18gb"], "n1", "H200")
    assert [c["id"] for c in plan["cells"][:5]] == [
        "exclusive_p5000000_r0", "exclusive_p5000000_r1", "exclusive_p5000000_r2", "exclusive_p5000000_r3",
        "exclusive_p10000000_r0",
    ]  # fmt: skip
    assert len(plan["cells"]) == 2 * 2 * (3 + 1) and plan["budget_plan"] == {}  # no budget: every cell
    assert (plan["turns"], plan["placement"], plan["node_access"]) == (10, "pods", "agent")
    assert GridPlan.from_dict(plan).to_dict() == plan and json.loads(json.dumps(plan)) == plan
    assert "sharebench: plan: 2 mode(s) exclusive, mig:1g.18gb; 8 cell(s) per mode; placement pods; node n1" in (
        capsys.readouterr().out
    )
    with pytest.raises(UserError, match="placement 'pod' is not allowed"):
        steps.plan_sweep(request={**REQUEST, "placement": "pod"}, node_name="n1=H200")


@pytest.mark.parametrize(
    "budget, message",
    [
        ("10 minutes", "bad budget '10 minutes'; allowed: a duration such as 90s, 10m, 1h30m"),
        ("600", "bad budget '600'; allowed: a duration such as 90s, 10m, 1h30m"),
        ("0s", "bad budget '0s'; allowed: a duration such as 90s, 10m, 1h30m (h, m, s; at most 30 days), more than 0"),
    ],
)
def test_plan_step_refuses_a_bad_budget_in_one_line(budget, message):
    request = dict(modes=["exclusive"], particle_counts=[1000], repeats=1, turns=1, placement="processes")
    with pytest.raises(UserError) as err:
        steps.plan_sweep(request={**request, "budget": budget})
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_budget_on_a_node_plans_from_the_recorded_rates_of_its_gpu_model(capsys):
    """The committed H200 campaigns (results/h200): at 90 s a cell (the start delay) the 10 M-particle
    sizes fit 10 minutes for the headline modes only; the plan says where its rates come from."""
    request = dict(modes=["exclusive", "timeslice:2", "mps:2", "timeslice:8"], particle_counts=[5e6, 1e7],
                   repeats=3, turns=10, placement="pods", budget="10m", start_delay_s=60)  # fmt: skip
    plan = steps.plan_sweep(request=request, node_name="gpu-a=H200")
    summary = plan["budget_plan"]
    assert summary["budget_s"] == 600 and summary["predicted_s"] <= 600
    assert summary["plan"][0].startswith("budget:    10m (600 s); planned from recorded rates of H200")
    # headline modes first: exclusive and timeslice:2 are planned whenever anything is
    assert plan["modes"][:2] == ["exclusive", "timeslice:2"]
    assert plan["modes"] == list(dict.fromkeys(c["mode"] for c in plan["cells"]))
    # every planned size of a mode runs the same repeats
    repeats = {(c["mode"], c["particles"]): [] for c in plan["cells"]}
    for c in plan["cells"]:
        repeats[(c["mode"], c["particles"])].append(c["repeat"])
    assert len({tuple(r) for r in repeats.values()}) == 1
    assert "sharebench: budget budget:    10m (600 s)" in capsys.readouterr().out
    with pytest.raises(UserError, match=r"^budget 10m on node 'gpu-a' is planned from the recorded rates of its GPU"):
        steps.plan_sweep(request={**request, "modes": ["exclusive"]}, node_name="gpu-a")
    with pytest.raises(UserError, match=r"^--budget 1m is too small for one cell of each mode at 5,000,000 particles"):
        steps.plan_sweep(
            request={**request, "modes": ["exclusive", "timeslice:2"], "particle_counts": [5e6], "budget": "1m"},
            node_name="gpu-a=H200",
        )


def test_pick_cells_gives_a_mode_its_planned_cells_as_values():
    plan = steps.plan_sweep(request={**REQUEST, "particle_counts": [100], "repeats": 1}, node_name="n1=H200")
    assert steps.pick_cells(plan=plan, mode="mig:1g.18gb") == [
        {"mode": "mig:1g.18gb", "particles": 100, "repeat": r, "id": f"mig:1g.18gb_p100_r{r}"} for r in (0, 1)
    ]
    with pytest.raises(UserError, match=r"^mode 'mps:2' is not in the plan; planned: exclusive, mig:1g.18gb$"):
        steps.pick_cells(plan=plan, mode="mps:2")


def test_schedule_start_is_in_the_future_and_keeps_the_cell():
    import time

    request = dict(modes=["timeslice:2"], particle_counts=[100, 200], repeats=1, turns=1, placement="processes",
                   start_delay_s=30)  # fmt: skip
    plan = steps.plan_sweep(request=request)
    cell = plan["cells"][3]
    before = time.time()
    c = steps.schedule_start(plan=plan, cell=cell, placed={"pods": [0], "processes": 2})
    assert {k: c[k] for k in cell} == cell and cell["id"] == "timeslice:2_p200_r1" and c["claims"] == []
    assert before + 30 <= c["start_at"] <= time.time() + 30


# ------------------------------------------------------------------ cells
def _row(replica, uuid="GPU-a", status="ok", mode="timeslice:2", **kw):
    row = dict(
        replica=replica,
        mode=mode,
        device_uuid=uuid,
        status=status,
        error="" if status == "ok" else "boom",
        cell_status="ok",
        cell_error="",
    )
    return {**row, **kw}


def test_merge_records_keeps_loop_order_and_checks_cells(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    steps.write_rows(a, [_row(0)])
    steps.write_rows(b, [_row(1, uuid="GPU-b")])
    assert steps.merge_records([str(a), str(b)], str(tmp_path / "m.json")) == 2
    assert [r["replica"] for r in steps.read_rows([str(tmp_path / "m.json")])] == [0, 1]
    doc = json.loads((tmp_path / "m.json").read_text())
    assert (doc["kind"], doc["schema_version"]) == ("rows", 1)  # the one document convention
    steps.merge_records([str(a), str(b)], str(tmp_path / "c.json"), cell=True)
    assert {r["cell_status"] for r in steps.read_rows([str(tmp_path / "c.json")])} == {"failed"}


# ------------------------------------------------------------------ node steps
def test_without_a_node_reconfigure_and_restore_are_no_ops_that_say_so(capsys):
    r = steps.reconfigure(node_name="", mode="timeslice:2", gpu_model="", placement="processes")
    assert (r["reconfigured"], r["node_selector"], r["pods"], r["processes"]) == (False, {}, [0], 2)
    assert steps.restore(node_names=[""]) == []
    out = capsys.readouterr().out
    assert "reconfigure to timeslice:2 is a no-op" in out and "restore is a no-op" in out


@pytest.fixture
def sim(tmp_path, monkeypatch):
    """The node engineer's simulated cluster (real HTTP API server + simulated gpu-operator)."""
    with SimCluster(tmp_path) as cluster:
        cluster.add_gpu_node(NODE, "H200", gpus=1)
        monkeypatch.setenv("KUBECONFIG", str(cluster.kubeconfig))
        yield cluster


def test_each_cell_renews_the_runs_lease_and_another_run_is_refused(sim):
    """The run holds the node for its whole length: schedule_start renews the Lease before every cell."""
    from kubernetes import client as k8s

    steps.reconfigure(
        node_name=NODE,
        mode="timeslice:2",
        gpu_model="H200",
        placement="pods",
        timeout_s=SIM_WAIT_S,
        run_id="run-a",
        node_access="direct",
    )
    leases = k8s.CoordinationV1Api(sim.api_client())

    def renewed():
        return leases.read_namespaced_lease(f"sharebench-node-{NODE}", "sharebench-system").spec.renew_time

    before = renewed()
    request = dict(modes=["timeslice:2"], gpu_model="H200", particle_counts=[100], repeats=1, turns=1,
                   placement="pods", start_delay_s=0, node_access="direct")  # fmt: skip
    plan = steps.plan_sweep(request=request, node_name=f"{NODE}=H200")
    placed = {"pods": [0, 1], "processes": 1}
    cell = steps.schedule_start(plan=plan, cell=plan["cells"][0], placed=placed, run_id="run-a")
    assert cell["particles"] == 100 and renewed() > before
    with pytest.raises(
        UserError, match=r"this run \(run-b\) no longer holds Lease .*: run-a holds it now; the run stops"
    ):
        steps.schedule_start(plan=plan, cell=plan["cells"][0], placed=placed, run_id="run-b")
    assert (
        steps.restore(node_names=[NODE], timeout_s=SIM_WAIT_S, run_id="run-a", node_access="direct")[0]["restored"]
        is True
    )


def test_reconfigure_step_on_the_simulated_cluster_then_restore(sim):
    r = steps.reconfigure(
        node_name=NODE,
        mode="mig:1g.18gb",
        gpu_model="H200",
        placement="pods",
        timeout_s=SIM_WAIT_S,
        node_access="direct",
    )
    assert r["reconfigured"] is True
    assert (r["resource"], r["count"], r["pods"], r["processes"]) == ("nvidia.com/mig-1g.18gb", 1, list(range(7)), 1)
    assert r["node_selector"] == {"kubernetes.io/hostname": NODE}
    assert r["advertised"]["resources"]["nvidia.com/mig-1g.18gb"] == 7
    (restored,) = steps.restore(node_names=[f"{NODE}=H200"], timeout_s=SIM_WAIT_S, node_access="direct")
    assert restored["restored"] is True
    assert {k: v for k, v in restored["resources"].items() if v} == {"nvidia.com/gpu": 1}
    # idempotent: a second restore changes nothing
    assert steps.restore(node_names=[NODE], timeout_s=SIM_WAIT_S, node_access="direct")[0]["restored"] is False


def test_reconfigure_node_component_runs_as_a_kfp_local_task(sim, tmp_path):
    from kfp import local

    from sharebench.components.reconfigure_node import reconfigure_node

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "root"))
    request = dict(modes=["timeslice:4"], gpu_model="H200", particle_counts=[100], repeats=1, turns=1,
                   placement="pods", reconfigure_timeout_s=SIM_WAIT_S, node_access="direct")  # fmt: skip
    plan = steps.plan_sweep(request=request, node_name=NODE)
    task = reconfigure_node(plan=plan, mode="timeslice:4")
    assert task.outputs["resource"] == "nvidia.com/gpu" and task.outputs["count"] == 1
    assert [int(p) for p in task.outputs["pods"]] == [0, 1, 2, 3]
    placed = task.outputs["placed"]
    assert placed["replicas"] == 4 and placed["processes"] == 1 and placed["reconfigured"] is True
    assert task.outputs["node_selector"] == placed["node_selector"] == {"kubernetes.io/hostname": NODE}
    assert placed["advertised"]["resources"] == {"nvidia.com/gpu": 4}
    steps.restore(node_names=[NODE], timeout_s=SIM_WAIT_S, node_access="direct")
