"""The committed pipeline YAML carries the dra placement's wiring: the cell's claims are made before its
replicas (schedule_start), released after its rows (check_cell) and by the exit task (restore_node);
and kfp-kubernetes still has no way to put a ResourceClaim on a pod (the documented gap, docs/readme/dra.md)."""

from __future__ import annotations

import pytest
import yaml

pytest.importorskip("kfp", reason="kfp not installed (pip install -e '.[kfp]')")

from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s_pb2

from sharebench.components import steps
from support.paths import ROOT

SPEC = next(yaml.safe_load_all((ROOT / "pipelines" / "sharebench_sweep.yaml").read_text()))


def inputs(component: str) -> dict:
    return SPEC["components"][component]["inputDefinitions"]["parameters"]


def test_placement_dra_is_allowed_and_documented():
    assert "dra" in steps.PLACEMENTS
    assert "'dra'" in SPEC["root"]["inputDefinitions"]["parameters"]["placement"]["description"]


@pytest.mark.parametrize(
    "component, names",
    [
        ("comp-schedule-start", {"placement", "pods", "gpu_model", "claims_namespace"}),
        ("comp-check-cell", {"placement", "claims_namespace"}),
        ("comp-restore-node", {"placement", "claims_namespace"}),
    ],
)
def test_claim_steps_take_the_placement(component, names):
    assert names <= set(inputs(component))
    assert inputs(component)["placement"]["defaultValue"] == "pods"


def test_cells_pass_the_placement_down():
    loop = SPEC["components"]["comp-for-loop-cells"]["dag"]["tasks"]
    start = loop["schedule-start"]["inputs"]["parameters"]
    assert start["placement"]["componentInputParameter"] == "pipelinechannel--placement"
    assert start["pods"]["componentInputParameter"] == "pipelinechannel--pods"
    assert (
        loop["sharebench-cell"]["inputs"]["parameters"]["placement"]["componentInputParameter"]
        == "pipelinechannel--placement"
    )
    check = SPEC["components"]["comp-sharebench-cell"]["dag"]["tasks"]["check-cell"]["inputs"]["parameters"]
    assert check["placement"]["componentInputParameter"] == "placement"
    exit_task = SPEC["root"]["dag"]["tasks"]["restore-node"]
    assert exit_task["inputs"]["parameters"]["placement"]["componentInputParameter"] == "placement"


def test_kfp_kubernetes_has_no_resource_claims_yet():
    """When kfp-kubernetes learns pod resource claims, wire the claim names into the replica pods
    (sharebench.node.claims.pod_patch) instead of relying on the documented gap."""
    fields = {f.name for f in k8s_pb2.KubernetesExecutorConfig.DESCRIPTOR.fields}
    assert not {f for f in fields if "claim" in f.lower()}, fields
