"""A sweep planned as separate tasks (sharebench.sweep.grid): the request checked in one line, the modes
resolved for the GPU model, and the plan the pipeline's tasks share, every cell as a value."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharebench.errors import UserError
from sharebench.modes import parse_mode
from sharebench.sweep import Cell
from sharebench.sweep.grid import (
    GRID_DEFAULTS,
    PIPELINE_MODES,
    REQUEST_KEYS,
    GridPlan,
    GridSettings,
    cell_from_value,
    cell_value,
    plan_grid,
    resolve_mode,
)
from sharebench.workloads import Workload


def plan(**change):
    kw = dict(
        modes=["exclusive", "timeslice:2"],
        gpu_model="H200",
        particle_counts=[1000],
        repeats=1,
        turns=1,
        placement="pods",
        node_name="n1",
    )
    return plan_grid({**kw, **change})


def as_kfp(value):
    """A value as KFP hands it to the next task: through JSON (google.protobuf.Struct), numbers as floats."""
    if isinstance(value, dict):
        return {k: as_kfp(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_kfp(v) for v in value]
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


# ------------------------------------------------------------------ modes
@pytest.mark.parametrize(
    "gpu, modes, resolved",
    [
        (
            "H200",
            PIPELINE_MODES,
            ("exclusive", "timeslice:2", "timeslice:4", "timeslice:8", "mps:2", "mps:4", "mig:7g.141gb", "mig:1g.18gb"),
        ),
        ("A100-40GB", ["mig:7g", "mig:1g"], ("mig:7g.40gb", "mig:1g.5gb")),
        ("NVIDIA-H100-80GB-HBM3", ["MIG:all-3g.40gb", "Exclusive"], ("mig:3g.40gb", "exclusive")),
        ("", ["exclusive", "timeslice:2"], ("exclusive", "timeslice:2")),
    ],
)
def test_plan_resolves_modes_for_the_gpu_model(gpu, modes, resolved):
    grid = plan(modes=modes, gpu_model=gpu, particle_counts=[5e6, 1e7], repeats=3, turns=10)
    assert grid.labels == resolved and grid.modes == tuple(map(parse_mode, resolved))
    assert grid.cells == tuple(range(2 * (3 + 1)))
    assert grid.plan().modes == resolved


def test_resolve_mode_keeps_a_layout_without_a_gpu_model():
    assert resolve_mode("MIG:1g", "").label == "mig:1g"
    assert resolve_mode(parse_mode("mig:1g"), "A100-80GB").label == "mig:1g.10gb"


def test_plan_reads_name_equals_model_node_specs_and_describes_itself():
    grid = plan(modes="mig:1g,exclusive", gpu_model="", node_name=" gpu-a=A100-80GB ")
    assert (grid.node_name, grid.gpu_model, grid.labels) == ("gpu-a", "A100-80GB", ("mig:1g.10gb", "exclusive"))
    assert grid.describe() == ("plan: 2 mode(s) mig:1g.10gb, exclusive; 2 cell(s) per mode; placement pods; node gpu-a")
    assert plan(placement="processes", node_name="").describe().endswith("node (none: this machine)")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"placement": "pod"}, "placement 'pod' is not allowed; allowed: pods, processes, dra"),
        ({"modes": ["timeslice:0"]}, "replica count must be >= 1"),
        ({"modes": ["spatial:2"]}, "unknown sharing mode 'spatial:2'"),
        ({"modes": []}, "modes: empty"),
        ({"modes": ["partition:2"]}, "CPU-only local mode: it needs placement 'processes' and no node_name"),
        ({"modes": ["mig:1g"], "gpu_model": ""}, "needs gpu_model"),
        ({"modes": ["mig:5g"]}, "MIG layout '5g' has no profile on H200; allowed sizes: 1g, 2g, 3g, 4g, 7g"),
        ({"gpu_model": "T4"}, "unknown GPU model 'T4'"),
        ({"particle_counts": [0]}, "bad particle count 0; allowed: whole numbers > 0"),
        ({"particle_counts": ["many"]}, "bad particle count 'many'; allowed: whole numbers > 0"),
        ({"particle_counts": []}, "no particle count given"),
        ({"repeats": 0}, "bad repeats 0; allowed: a whole number >= 1"),
        ({"turns": 0}, "bad turns 0; allowed: a whole number >= 1"),
        ({"warmup_repeats": -1}, "bad warmup_repeats -1; allowed: a whole number >= 0"),
        ({"node_name": "=H200"}, "node '=H200': write NAME or NAME=GPU_MODEL"),
        # the Kubeflow UI's defaults (no node, placement pods): refused before any pod starts
        (
            {"node_name": "", "modes": ["exclusive", "mig:7g", "mig:1g"]},
            "mode 'mig:7g.141gb' with placement 'pods' needs node_name (NAME or NAME=GPU_MODEL)",
        ),
        ({"node_name": ""}, "mode 'timeslice:2' with placement 'pods' needs node_name"),
        ({"node_name": "", "modes": ["mps:2"], "gpu_model": ""}, "mode 'mps:2' with placement 'pods' needs node_name"),
        ({"modes": ["timeslice:2/long"]}, "sets the GPU's time-slice interval: in the pipeline only placement 'dra'"),
        ({"budget": "10 minutes"}, "bad budget '10 minutes'; allowed: a duration such as 90s, 10m, 1h30m"),
        # the settings every task reads, checked with the grid
        ({"start_delay_s": -1}, "bad start_delay_s -1; allowed: seconds 0..1e+07"),
        ({"reconfigure_timeout_s": "soon"}, "bad reconfigure_timeout_s 'soon'; allowed: seconds"),
        ({"node_access": "admin"}, "node_access 'admin': allowed agent, direct"),
        ({"force": "yes"}, "bad force 'yes'; allowed: true or false"),
        ({"workload": {"engin": "xtrack"}}, "unknown workload key(s) 'engin'"),
        ({"runs": 2}, "unknown sweep parameter(s) runs; allowed: modes, gpu_model, particle_counts,"),
        (
            {"workload": {"pattern": "interactive", "neighbours": "batch"}},
            "placement 'pods' runs each replica in its own pod: neighbours 'batch' beside pattern 'interactive",
        ),
    ],
)
def test_plan_refuses_bad_input_in_one_line(change, message):
    with pytest.raises(UserError) as exc:
        plan(**change)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_request_is_the_grid_and_the_settings_every_task_reads():
    """A request's keys: the grid's and GridSettings' (tests/kfp/test_pipeline.py checks that every one is a
    parameter of the pipelines, passed to check_sweep); the settings parsed as KFP hands them over."""
    assert set(REQUEST_KEYS) == set(GRID_DEFAULTS) | {f.name for f in dataclasses.fields(GridSettings)}
    settings = plan(turns=7.0, start_delay_s=2, force=False, node_access="direct").settings
    assert settings == GridSettings(turns=7, start_delay_s=2.0, node_access="direct")
    assert settings.workload == Workload() and GridSettings.from_dict(as_kfp(settings.to_dict())) == settings


# ------------------------------------------------------------------ cells as values
@pytest.mark.parametrize(
    "warmup, cells",
    [
        (1, [(100, 0), (100, 1), (100, 2), (200, 0), (200, 1), (200, 2)]),
        (0, [(100, 1), (100, 2), (200, 1), (200, 2)]),
        (2, [(100, -1), (100, 0), (100, 1), (100, 2), (200, -1), (200, 0), (200, 1), (200, 2)]),
    ],
)
def test_cells_cover_sizes_and_repeats_with_warmups_first(warmup, cells):
    grid = plan(modes=["exclusive"], gpu_model="", particle_counts=[100, 200], repeats=2, placement="processes",
                node_name="", warmup_repeats=warmup)  # fmt: skip
    got = grid.plan().cells_of("exclusive")
    assert [(c.particles, c.repeat) for c in got] == cells
    assert [c.id for c in got] == [f"exclusive_p{p}_r{r}" for p, r in cells]


@given(
    counts=st.lists(st.integers(1, 10**8), min_size=1, max_size=5, unique=True),
    repeats=st.integers(1, 6),
    warmup=st.integers(0, 3),
)
def test_every_mode_size_and_repeat_is_one_cell_in_order(counts, repeats, warmup):
    grid = plan(particle_counts=counts, repeats=repeats, warmup_repeats=warmup)
    modes = [parse_mode("exclusive"), parse_mode("timeslice:2")]
    want = [Cell(m, n, r) for m in modes for n in counts for r in range(1 - warmup, repeats + 1)]
    assert list(grid.plan().cells) == want


def test_a_budget_plan_lists_only_each_modes_planned_cells():
    """plan_budget_grid (sweep.budget) keeps some sizes of some modes: the plan lists those cells alone."""
    grid = plan(particle_counts=[100, 200], repeats=1)  # 2 sizes x (1 warm-up + 1 repeat): cells 0..3
    cut = dataclasses.replace(grid, cells_by_mode={"exclusive": (0, 1, 2, 3), "timeslice:2": (2, 3)})
    p = cut.plan({"budget_s": 600.0})
    assert [c.id for c in p.cells_of("timeslice:2")] == ["timeslice:2_p200_r0", "timeslice:2_p200_r1"]
    assert len(p.cells_of("exclusive")) == 4 and p.budget_plan == {"budget_s": 600.0}
    with pytest.raises(UserError, match=r"^mode 'mps:2' is not in the plan; planned: exclusive, timeslice:2$"):
        p.cells_of("mps:2")


def test_the_plan_value_survives_kfps_json_exactly():
    grid = plan(
        modes=["exclusive", "mig:1g"], particle_counts=[5e6, 1e7], repeats=2, node_name="gpu-a=H200",
        workload={"device": "cuda:0", "seed": 3}, start_delay_s=30, node_access="direct",
    )  # fmt: skip
    value = grid.plan({"budget_s": 90.0}).to_dict()
    assert value["modes"] == ["exclusive", "mig:1g.18gb"] and value["node_name"] == "gpu-a"
    assert value["cells"][0] == {
        "mode": "exclusive",
        "particles": 5_000_000,
        "repeat": 0,
        "id": "exclusive_p5000000_r0",
    }
    assert (value["turns"], value["start_delay_s"], value["node_access"]) == (1, 30.0, "direct")
    back = GridPlan.from_dict(json.loads(json.dumps(as_kfp(value))))
    assert back == grid.plan({"budget_s": 90.0}) and back.to_dict() == value


def test_a_cell_value_round_trips_and_a_missing_key_is_one_line():
    cell = Cell(parse_mode("mps:2@50"), 300, -1)
    assert cell_from_value(as_kfp(cell_value(cell))) == cell
    assert cell_from_value({**cell_value(cell), "start_at": 1.5}) == cell  # a scheduled cell's start_at is the caller's
    with pytest.raises(UserError, match=r"^a cell needs mode, particles, repeat, id; id missing in"):
        cell_from_value({"mode": "exclusive", "particles": 1, "repeat": 1})
