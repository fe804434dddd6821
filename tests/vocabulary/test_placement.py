"""The placement words (sharebench.placement): how a cell's replicas are laid out in pods, a node's
NAME=GPU_MODEL, the node steps' access, and the patterns a placement can run; no Kubernetes client."""

from __future__ import annotations

import pytest

from sharebench.errors import UserError
from sharebench.placement import (
    NODE_ACCESS,
    PLACEMENTS,
    PodRequest,
    check_node_access,
    check_pattern_placement,
    pod_request,
    split_node,
)


@pytest.mark.parametrize(
    "mode, gpu, placement, want",
    [
        ("exclusive", "H200", "pods", ("nvidia.com/gpu", 1, (0,), 1)),
        ("timeslice:4", "H200", "pods", ("nvidia.com/gpu", 1, (0, 1, 2, 3), 1)),
        ("timeslice:4", "H200", "processes", ("nvidia.com/gpu", 1, (0,), 4)),
        ("mps:2", "H200", "pods", ("nvidia.com/gpu", 1, (0, 1), 1)),
        ("mig:1g.18gb", "H200", "pods", ("nvidia.com/mig-1g.18gb", 1, tuple(range(7)), 1)),
        ("mig:1g.18gb", "H200", "processes", ("nvidia.com/mig-1g.18gb", 7, (0,), 7)),
        ("mig:7g.40gb", "A100-40GB", "pods", ("nvidia.com/mig-7g.40gb", 1, (0,), 1)),
        ("mig:3g.20gb", "A100-40GB", "pods", ("nvidia.com/mig-3g.20gb", 1, (0, 1), 1)),
        ("partition:2", "", "processes", ("", 0, (0,), 2)),
        # dra: no extended resource, the cell's ResourceClaim gives the GPU
        ("timeslice:4/short", "H200", "dra", ("", 0, (0, 1, 2, 3), 1)),
        ("mps:2@50", "H200", "dra", ("", 0, (0, 1), 1)),
        ("mig:1g", "H200", "dra", ("", 0, tuple(range(7)), 1)),
    ],
)
def test_pod_request_per_mode_and_placement(mode, gpu, placement, want):
    r = pod_request(mode, gpu, placement)
    assert (r.resource, r.count, r.pods, r.processes) == want
    assert r.to_dict() == {"resource": want[0], "count": want[1], "pods": list(want[2]), "processes": want[3]}


def test_pod_request_uses_what_the_node_advertises():
    r = pod_request("timeslice:2", "H200", "pods", resource="nvidia.com/gpu.shared")
    assert r == PodRequest("nvidia.com/gpu.shared", 1, (0, 1), 1)


@pytest.mark.parametrize(
    "args, message",
    [
        (("exclusive", "H200", "pod"), "placement 'pod' is not allowed; allowed: pods, processes, dra"),
        (("mig:1g.18gb", "", "pods"), "mode 'mig:1g.18gb' needs gpu_model to know the MIG instances"),
        (("spatial:2", "H200", "pods"), "unknown sharing mode 'spatial:2'"),
    ],
)
def test_pod_request_refuses_in_one_line(args, message):
    with pytest.raises(UserError) as exc:
        pod_request(*args)
    assert message in str(exc.value) and "\n" not in str(exc.value)
    assert PLACEMENTS == ("pods", "processes", "dra")


@pytest.mark.parametrize(
    "node, gpu, want",
    [
        ("gpu-a=A100-40GB", "", ("gpu-a", "A100-40GB")),
        (" gpu-a = H200 ", "A100-40GB", ("gpu-a", "H200")),  # the node's own model wins
        ("gpu-a", "H200", ("gpu-a", "H200")),
        ("", "H200", ("", "H200")),
    ],
)
def test_split_node(node, gpu, want):
    assert split_node(node, gpu) == want


@pytest.mark.parametrize("node", ["=H200", "gpu-a=", " = "])
def test_split_node_refuses_half_a_spec(node):
    with pytest.raises(UserError, match="write NAME or NAME=GPU_MODEL"):
        split_node(node)


@pytest.mark.parametrize("placement", ["pods", "dra"])
def test_other_neighbours_need_the_replicas_in_one_pod(placement):
    """Neighbours stop at the cell's stop file when replica 0 is done; pods of one cell share no folder."""
    check_pattern_placement("processes", "interactive:burst=10,think=0.5", "batch")
    check_pattern_placement(placement, "interactive:burst=10,think=0.5", "interactive:burst=10,think=0.5")
    with pytest.raises(UserError, match=f"placement '{placement}' runs each replica in its own pod: neighbours "):
        check_pattern_placement(placement, "interactive:burst=10,think=0.5", "batch")


def test_node_access_is_agent_or_direct():
    assert [check_node_access(a) for a in NODE_ACCESS] == ["agent", "direct"]
    with pytest.raises(UserError, match=r"^node_access 'admin': allowed agent, direct$"):
        check_node_access("admin")
