"""manifests/dra/ and the DRA driver's Helm values: valid resource.k8s.io/v1 objects (Kubernetes >= 1.34
schemas, kubernetes-validate, offline), GpuConfig parameters valid against the driver's API types
(support/dra_schemas.py), the sharing each mode asks for, and least-privilege RBAC for claims."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version, major_minor

from sharebench.errors import UserError
from sharebench.manifests import dra, render
from support.dra_schemas import gpu_config_problems
from support.paths import ROOT

RENDER = render.render()
DRA = {rel: yaml.safe_load(text) for rel, text in RENDER.items() if rel.startswith("dra/")}
VERSIONS = ["1.34", major_minor(latest_version())]  # DRA's resource.k8s.io/v1 is GA from 1.34


def test_committed_dra_manifests_match_the_render():
    assert [p for p in render.check(ROOT / "manifests") if "dra" in p] == []
    assert yaml.safe_load(RENDER["helm/dra-driver-values.yaml"]) == dra.helm_values()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("rel", sorted(DRA), ids=sorted(DRA))
def test_dra_objects_validate_against_kubernetes(rel, version):
    assert kubernetes_validate.validate(DRA[rel], version, strict=True) == version


def test_validation_catches_a_broken_claim_template():
    t = dra.claim_template("timeslice:2/long")
    t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClass"] = "gpu.nvidia.com"  # misspelt field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(t, VERSIONS[0], strict=True)


def test_every_template_carries_a_valid_gpu_config():
    templates = [o for o in DRA.values() if o["kind"] == "ResourceClaimTemplate"]
    assert len(templates) == len(dra.TEMPLATE_MODES)
    for t in templates:
        devices = t["spec"]["spec"]["devices"]
        assert devices["requests"] == [
            {
                "name": "gpu",
                "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1},
            }
        ]
        for c in devices.get("config", []):
            assert c["requests"] == ["gpu"] and c["opaque"]["driver"] == "gpu.nvidia.com"
            assert gpu_config_problems(c["opaque"]["parameters"]) == [], t["metadata"]["name"]


@pytest.mark.parametrize(
    "mode, sharing",
    [
        ("exclusive", None),
        ("timeslice:2", {"strategy": "TimeSlicing"}),
        ("timeslice:4/long", {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}),
        ("timeslice:8/short", {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Short"}}),
        (
            "mps:4@25",
            {
                "strategy": "MPS",
                "mpsConfig": {
                    "defaultActiveThreadPercentage": 25,
                    "defaultPinnedDeviceMemoryLimit": f"{141 * 1024 // 4}Mi",
                },
            },
        ),
    ],
)
def test_sharing_of_each_mode(mode, sharing):
    config = dra.gpu_config(mode, "H200")
    assert (config or {}).get("sharing") == sharing
    if config:
        assert gpu_config_problems(config) == []


def test_mig_claims_a_profile():
    spec = dra.claim_spec("mig:1g", "H200")
    exactly = spec["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "mig.nvidia.com"
    assert exactly["selectors"] == [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.18gb'"}}]
    assert "config" not in spec["devices"]
    assert kubernetes_validate.validate(dra.claim("mig:1g", "cell-1", gpu="H200"), VERSIONS[0], strict=True)


@pytest.mark.parametrize(
    "mode, message",
    [
        ("partition:2", "partition:2 is a CPU-only local mode; the dra placement takes"),
        ("mig:1g", "mig:1g needs gpu_model to know the MIG profile to claim"),
    ],
)
def test_refusals_are_one_line(mode, message):
    with pytest.raises(UserError) as err:
        dra.claim_spec(mode)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "doc, problem",
    [
        (
            {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "GpuConfig",
                "sharing": {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Forever"}},
            },
            "Forever",
        ),
        (
            {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "GpuConfig",
                "sharing": {"strategy": "TimeSlicing", "mpsConfig": {}},
            },
            "should not be valid",
        ),
        (
            {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "GpuConfig",
                "sharing": {"strategy": "MPS", "mpsConfig": {"defaultPinnedDeviceMemoryLimit": "512Ki"}},
            },
            "below 1 MiB",
        ),
        ({"apiVersion": "resource.nvidia.com/v1", "kind": "GpuConfig"}, "resource.nvidia.com/v1beta1"),
    ],
)
def test_gpu_config_schema_rejects(doc, problem):
    assert any(problem in p for p in gpu_config_problems(doc))


def test_driver_values_turn_on_the_gates_and_the_gpu_plugin():
    v = dra.helm_values()
    assert v["featureGates"] == {"TimeSlicingSettings": True, "MPSSupport": True}
    assert v["resources"]["gpus"]["enabled"] is True and v["gpuResourcesEnabledOverride"] is True


def test_claim_rbac_is_namespaced_and_minimal():
    role = next(o for o in DRA.values() if o["kind"] == "Role")
    assert role["metadata"]["namespace"] == "sharebench"
    verbs = {r["resources"][0]: set(r["verbs"]) for r in role["rules"]}
    assert verbs == {
        "resourceclaims": {"create", "get", "list", "watch", "delete"},
        "resourceclaimtemplates": {"get", "list"},
    }
    binding = next(o for o in DRA.values() if o["kind"] == "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def _claims_binding(files: dict[str, str]) -> dict:
    docs = [yaml.safe_load(t) for rel, t in files.items() if rel.startswith("dra/")]
    return next(o for o in docs if o["kind"] == "RoleBinding")


def _accounts(files: dict[str, str], namespace: str) -> set[str]:
    docs = [yaml.safe_load(t) for rel, t in files.items() if rel.startswith("rbac/")]
    return {
        o["metadata"]["name"] for o in docs if o["kind"] == "ServiceAccount" and o["metadata"]["namespace"] == namespace
    }


def test_agent_mode_binds_claims_to_the_runs_account_not_the_node_account():
    binding = _claims_binding(RENDER)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": dra.RUN_ACCOUNT, "namespace": "sharebench"}]
    # the node account is not in the run namespace in agent mode: a binding to it would grant nobody
    assert "sharebench-node" not in _accounts(RENDER, "sharebench")
    assert binding["subjects"][0]["name"] != "sharebench-node"


def test_direct_mode_binds_claims_to_the_node_account_the_run_is_submitted_as():
    files = render.render(render.RenderOptions(node_access="direct", run_namespace="team-a"))
    binding = _claims_binding(files)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sharebench-node", "namespace": "team-a"}]
    assert "sharebench-node" in _accounts(files, "team-a")


def test_claims_binding_names_the_given_run_account_and_refuses_a_bad_access():
    subject = dra.rbac_objects("team-b", "agent", run_account="runner")[1][1]["subjects"]
    assert subject == [{"kind": "ServiceAccount", "name": "runner", "namespace": "team-b"}]
    with pytest.raises(UserError, match="node access 'sideways' is not one of agent, direct"):
        dra.rbac_objects("team-b", "sideways")
