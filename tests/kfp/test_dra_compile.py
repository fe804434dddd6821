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
        ("comp-schedule-start", {"plan", "placed", "claims_namespace"}),
        ("comp-check-cell", {"plan", "claims_namespace"}),
        ("comp-restore-node", {"placement", "claims_namespace"}),
    ],
)
def test_claim_steps_take_the_placement(component, names):
    """The cell's steps read the placement from the plan (and the pods that share a claim from the
    mode's placement); the exit task, outside every node's plan, takes it as a parameter."""
    assert names <= set(inputs(component))
    assert inputs(component)["claims_namespace"]["defaultValue"] == "sharebench"


def test_cells_pass_the_plan_and_the_placement_down():
    loop = SPEC["components"]["comp-for-loop-cells"]["dag"]["tasks"]
    start = loop["schedule-start"]["inputs"]["parameters"]
    assert start["plan"]["componentInputParameter"] == "pipelinechannel--plan"
    assert start["placed"]["componentInputParameter"] == "pipelinechannel--placed"
    cell = loop["sharebench-cell"]["inputs"]["parameters"]
    assert cell["plan"]["componentInputParameter"] == "pipelinechannel--plan"
    assert cell["cell"]["taskOutputParameter"] == {"outputParameterKey": "cell", "producerTask": "schedule-start"}
    check = SPEC["components"]["comp-sharebench-cell"]["dag"]["tasks"]["check-cell"]["inputs"]["parameters"]
    assert check["plan"]["componentInputParameter"] == "plan"
    exit_task = SPEC["root"]["dag"]["tasks"]["restore-node"]
    assert exit_task["inputs"]["parameters"]["placement"]["componentInputParameter"] == "placement"


def test_kfp_kubernetes_has_no_resource_claims_yet():
    """When kfp-kubernetes learns pod resource claims, wire the claim names into the replica pods
    (sharebench.node.claims.pod_patch) instead of relying on the documented gap."""
    fields = {f.name for f in k8s_pb2.KubernetesExecutorConfig.DESCRIPTOR.fields}
    assert not {f for f in fields if "claim" in f.lower()}, fields
