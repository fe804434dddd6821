"""A sweep planned as separate tasks (sharebench.sweep.plan.plan_grid): validation, cell numbering, and
the check of a cell whose replicas ran as separate pods (sharebench.sweep.cell.check_cell)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharebench.errors import UserError
from sharebench.modes import parse_mode
from sharebench.sweep import cell_id, cell_of, check_cell, plan_grid
from sharebench.sweep.plan import PIPELINE_MODES, resolve_mode


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
    return plan_grid(**{**kw, **change})


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
    ],
)
def test_plan_refuses_bad_input_in_one_line(change, message):
    with pytest.raises(UserError) as exc:
        plan(**change)
    assert message in str(exc.value) and "\n" not in str(exc.value)


# ------------------------------------------------------------------ cells
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
    # KFP hands list items over JSON: numbers may come back as floats
    assert [cell_of(float(c), [100.0, 200.0], 2.0, float(warmup)) for c in grid.cells] == cells


@given(
    counts=st.lists(st.integers(1, 10**8), min_size=1, max_size=5, unique=True),
    repeats=st.integers(1, 6),
    warmup=st.integers(0, 3),
)
def test_every_size_and_repeat_is_one_cell_in_order(counts, repeats, warmup):
    grid = plan(modes=["exclusive"], particle_counts=counts, repeats=repeats, warmup_repeats=warmup)
    cells = [cell_of(c, counts, repeats, warmup) for c in grid.cells]
    assert cells == [(n, r) for n in counts for r in range(1 - warmup, repeats + 1)]
    with pytest.raises(UserError, match=rf"cell {len(cells)} is outside 0\.\.{len(cells) - 1}"):
        cell_of(len(cells), counts, repeats, warmup)


def test_a_cell_id_names_the_mode_size_and_repeat():
    assert cell_id(parse_mode("TimeSlice:2"), 10_000, 1) == "timeslice:2_p10000_r1"
    assert cell_id(parse_mode("mps:2@50"), 300, 0) == "mps:2@50_p300_r0"


# ------------------------------------------------------------------ a cell of several pods
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


@pytest.mark.parametrize(
    "rows, cell_status, cell_error",
    [
        ([_row(0), _row(1)], "ok", ""),
        ([_row(0), _row(1, uuid="GPU-b")], "failed", "replicas ran on different devices: GPU-a, GPU-b"),
        ([_row(0), _row(1, status="failed")], "failed", "replica 1: boom"),
        ([_row(0, mode="mig:1g.18gb", uuid="MIG-1"), _row(1, mode="mig:1g.18gb", uuid="MIG-2")], "ok", ""),
        ([_row(0, cell_status="failed", cell_error="overran"), _row(1)], "failed", "overran"),
    ],
)
def test_check_cell_fails_a_cell_as_a_whole(rows, cell_status, cell_error):
    out = check_cell(rows)
    assert {r["cell_status"] for r in out} == {cell_status}
    assert {r["cell_error"] for r in out} == {cell_error}


def test_check_cell_of_no_rows_is_no_rows():
    assert check_cell([]) == []
