"""The dra placement's steps without a cluster: planning, no node change, no claims elsewhere (the pods of
a cell under dra: tests/node/test_placement.py)."""

from __future__ import annotations

import pytest

from sharebench.components import steps
from sharebench.errors import UserError


def plan(**kw):
    request = dict(
        modes=["exclusive", "timeslice:2/long"],
        gpu_model="H200",
        particle_counts=[1000],
        repeats=1,
        placement="dra",
        turns=1,
    )
    return steps.plan_sweep(request={**request, **kw})


def test_interval_modes_plan_only_with_dra():
    assert plan()["modes"] == ["exclusive", "timeslice:2/long"]
    for placement in ("pods", "processes"):
        with pytest.raises(UserError) as err:
            plan(placement=placement)
        assert str(err.value).startswith(
            "mode 'timeslice:2/long' sets the GPU's time-slice interval: in the pipeline only placement 'dra' can"
        )


def test_partition_is_refused_under_dra():
    with pytest.raises(UserError, match="needs placement 'processes'"):
        plan(modes=["partition:2"])


def test_reconfigure_under_dra_leaves_the_node_alone(capsys):
    # a node name and no cluster at all: the step must not try to reach one
    r = steps.reconfigure(node_name="gpu-node-a", mode="timeslice:2/long", gpu_model="H200", placement="dra")
    assert r["reconfigured"] is False and r["advertised"] == {}
    assert r["node_selector"] == {"kubernetes.io/hostname": "gpu-node-a"} and r["pods"] == [0, 1]
    assert "the node is not reconfigured" in capsys.readouterr().out


def test_claim_steps_are_no_ops_elsewhere(tmp_path):
    assert steps.claim_cell(placement="pods", mode="timeslice:2", cell_id="c", pods=2) == []
    assert steps.release_all(placement="processes") == []
    rows = tmp_path / "rows.json"
    steps.write_rows(rows, [{"cell_id": "c"}])
    assert steps.release_cell(placement="pods", rows_path=str(rows)) == []
