"""A mode placed on a node where no cluster is reached (placement dra, or no node), and a node put back
(sharebench.node.placement); the placement words themselves: tests/vocabulary/test_placement.py."""

from __future__ import annotations

import pytest

from sharebench.errors import UserError
from sharebench.node.placement import place_mode, restore_nodes
from sharebench.placement import PodRequest


def test_without_a_node_nothing_changes_and_it_says_so():
    said: list[str] = []
    p = place_mode("", "timeslice:2", "", "processes", progress=said.append)
    assert (p.reconfigured, p.node_selector, p.advertised) == (False, {}, {})
    assert p.request == PodRequest("nvidia.com/gpu", 1, (0,), 2)
    assert said == ["no node_name: running on this machine, no cluster; reconfigure to timeslice:2 is a no-op"]
    assert restore_nodes(["", ""], 30, progress=said.append) == []
    assert said[-1] == "no node_name: ran on this machine, no cluster; restore is a no-op"


def test_placement_dra_pins_the_pods_and_leaves_the_node_alone(monkeypatch, tmp_path):
    # a node name and no cluster at all (no kubeconfig): the call must not try to reach one
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    said: list[str] = []
    p = place_mode("gpu-node-a", "timeslice:2/long", "H200", "dra", progress=said.append)
    assert p.to_dict() == {
        "resource": "",
        "count": 0,
        "pods": [0, 1],
        "processes": 1,
        "node_selector": {"kubernetes.io/hostname": "gpu-node-a"},
        "advertised": {},
        "reconfigured": False,
    }
    assert "the node is not reconfigured" in said[0]


def test_a_pod_of_a_cell_with_other_neighbours_refuses_before_it_runs(tmp_path):
    """The run step of one pod of a cell (placement pods): the same one-line error, nothing run."""
    from sharebench.components import steps

    with pytest.raises(UserError, match="neighbours 'batch' beside pattern 'interactive"):
        steps.run_simpletrack(
            mode="timeslice:2",
            particles=100,
            turns=1,
            repeat=1,
            replica=1,
            replicas=2,
            processes=1,
            start_at=0.0,
            workload={"device": "cpu", "pattern": "interactive", "neighbours": "batch"},
            out_path=str(tmp_path / "rows.json"),
        )
    assert not (tmp_path / "rows.json").exists()
