"""The dra placement's claims (sharebench.node.claims) against the simulated API server and DRA driver,
through the official kubernetes client: one claim per cell shared by its pods, the mode's sharing
applied to one GPU, and the claims gone after success, failure and Ctrl-C."""

from __future__ import annotations

import time

import pytest

from sharebench.node.claims import ClaimError, cell_claims, claim_names, create_claims, delete_claims, read_claim
from support.dra_sim import SimDraDriver
from support.k8s_sim import SIM_WAIT_S, SimCluster

NS = "sharebench"


@pytest.fixture
def sim(tmp_path):
    with SimCluster(tmp_path, delay_s=0.01) as s:
        s.add_node("gpu-node-a")
        SimDraDriver(s, node="gpu-node-a", gpus=2)
        yield s


def claims_in(sim) -> list[str]:
    return sorted(name for (r, _, name) in sim.objects if r == "resourceclaims")


def wait_for(cond, timeout_s: float = 5.0):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_cell_shares_one_claim_with_the_interval(sim):
    client = sim.api_client()
    said: list[str] = []
    with cell_claims(
        "timeslice:2/long", "timeslice:2/long_p1000_r1", pods=2, namespace=NS, api_client=client, progress=said.append
    ) as names:
        assert len(names) == 1 and claims_in(sim) == names
        for i in range(2):  # the cell's two replica pods, as the pod-spec patch makes them
            sim.dra.claim_pod(NS, f"replica-{i}", names[0])
        wait_for(
            lambda: (
                len((read_claim(names[0], namespace=NS, api_client=client).get("status") or {}).get("reservedFor", []))
                == 2
            )
        )
        status = read_claim(names[0], namespace=NS, api_client=client)["status"]
        result = status["allocation"]["devices"]["results"][0]
        assert result["driver"] == "gpu.nvidia.com" and result["device"] == "gpu-0"
        assert [r["name"] for r in status["reservedFor"]] == ["replica-0", "replica-1"]
        applied = sim.dra.applied[-1]
        assert applied.sharing == {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}
        assert sim.dra.timeslice["gpu-0"] == 3  # nvidia-smi compute-policy --set-timeslice=3 on that GPU
    assert claims_in(sim) == []
    wait_for(lambda: sim.dra.released == names)
    assert said[0].startswith("timeslice:2/long_p1000_r1: created ResourceClaim sharebench/sharebench-")
    assert said[-1].startswith("timeslice:2/long_p1000_r1: deleted ResourceClaim(s) sharebench-")


def test_mps_claim_carries_thread_percentage_and_pinned_memory(sim):
    client = sim.api_client()
    with cell_claims(
        "mps:4@25", "mps:4@25_p1000_r1", pods=4, namespace=NS, gpu_model="H200", api_client=client
    ) as names:
        sim.dra.claim_pod(NS, "replica-0", names[0])
        wait_for(lambda: sim.dra.applied)
        assert sim.dra.applied[-1].sharing == {
            "strategy": "MPS",
            "mpsConfig": {"defaultActiveThreadPercentage": 25, "defaultPinnedDeviceMemoryLimit": "36096Mi"},
        }
    assert claims_in(sim) == []


def test_claims_deleted_when_the_cell_fails(sim):
    client = sim.api_client()
    with (
        pytest.raises(RuntimeError, match="replica failed"),
        cell_claims("timeslice:4", "timeslice:4_p1000_r2", pods=4, namespace=NS, api_client=client),
    ):
        assert len(claims_in(sim)) == 1
        raise RuntimeError("replica failed")
    assert claims_in(sim) == []


def test_claims_deleted_on_ctrl_c(sim):
    client = sim.api_client()
    with (
        pytest.raises(KeyboardInterrupt),
        cell_claims("exclusive", "exclusive_p1000_r1", namespace=NS, api_client=client),
    ):
        raise KeyboardInterrupt
    assert claims_in(sim) == []


def test_mig_cell_gets_one_claim_per_pod(sim):
    names = create_claims(
        "mig:1g", "mig:1g.18gb_p1000_r1", pods=3, namespace=NS, gpu_model="H200", api_client=sim.api_client()
    )
    assert len(names) == 3 and claims_in(sim) == sorted(names)
    assert delete_claims("mig:1g.18gb_p1000_r1", namespace=NS, api_client=sim.api_client()) == names
    assert claims_in(sim) == []


def test_leftover_claim_of_an_interrupted_run_is_replaced(sim):
    client = sim.api_client()
    first = create_claims("timeslice:2", "cell-a", namespace=NS, api_client=client)
    uid = sim.get("resourceclaims", NS, first[0])["metadata"]["uid"]
    again = create_claims("timeslice:2/short", "cell-a", namespace=NS, api_client=client)
    assert again == first
    claim = sim.get("resourceclaims", NS, first[0])
    assert claim["metadata"]["uid"] != uid
    assert claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"]["timeSlicingConfig"] == {
        "interval": "Short"
    }
    assert delete_claims("cell-a", namespace=NS, api_client=client) == first
    assert delete_claims("cell-a", namespace=NS, api_client=client) == []  # idempotent


def test_denied_create_is_one_line(sim):
    sim.deny("create", "resourceclaims")
    with pytest.raises(ClaimError) as err:
        create_claims("timeslice:2", "cell-b", namespace=NS, api_client=sim.api_client())
    assert str(err.value).startswith("permission denied: cannot create ResourceClaim sharebench/sharebench-")
    assert "manifests/dra/" in str(err.value) and "\n" not in str(err.value)


def test_invalid_config_is_never_allocated(sim):
    client = sim.api_client()
    name = claim_names("timeslice:2", "cell-c", 1)[0]
    create_claims("timeslice:2/long", "cell-c", namespace=NS, api_client=client)

    def break_it(o):
        o["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"]["timeSlicingConfig"]["interval"] = "Eh"

    sim.edit("resourceclaims", NS, name, break_it)
    sim.dra.claim_pod(NS, "replica-0", name)
    wait_for(lambda: name in sim.dra.errors)
    assert "invalid GpuConfig" in sim.dra.errors[name]
    assert not (sim.get("resourceclaims", NS, name).get("status") or {}).get("allocation")


def test_templates_from_manifests_create_get_delete(sim):
    """The simulated API serves ResourceClaimTemplates: the committed manifests/dra/ ones go in and out
    through the official client's generic API."""
    import yaml
    from kubernetes import client as k8s

    from support.paths import ROOT

    api = k8s.CustomObjectsApi(sim.api_client())
    files = sorted((ROOT / "manifests" / "dra").glob("1*_resourceclaimtemplate_*.yaml"))
    assert files
    for f in files:
        api.create_namespaced_custom_object(
            "resource.k8s.io", "v1", NS, "resourceclaimtemplates", yaml.safe_load(f.read_text())
        )
    got = api.get_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaimtemplates", "sharebench-timeslice-4-long"
    )
    assert got["apiVersion"] == "resource.k8s.io/v1" and got["kind"] == "ResourceClaimTemplate"
    config = got["spec"]["spec"]["devices"]["config"][0]["opaque"]["parameters"]
    assert config["sharing"]["timeSlicingConfig"] == {"interval": "Long"}
    listed = api.list_namespaced_custom_object(
        "resource.k8s.io", "v1", NS, "resourceclaimtemplates", label_selector="sharebench.io/mode=mps-2"
    )
    assert [o["metadata"]["name"] for o in listed["items"]] == ["sharebench-mps-2"]
    for f in files:
        api.delete_namespaced_custom_object(
            "resource.k8s.io", "v1", NS, "resourceclaimtemplates", yaml.safe_load(f.read_text())["metadata"]["name"]
        )
    assert not [k for k in sim.objects if k[0] == "resourceclaimtemplates"]


def test_mig_claims_get_distinct_devices_of_the_profile(tmp_path):
    with SimCluster(tmp_path, delay_s=0.01) as s:
        migs = {"gpu-0-mig-0": "1g.18gb", "gpu-0-mig-1": "1g.18gb", "gpu-0-mig-2": "7g.141gb"}
        driver = SimDraDriver(s, node="gpu-node-a", gpus=1, mig_devices=migs)
        client = s.api_client()
        with cell_claims(
            "mig:1g", "mig:1g.18gb_p1000_r1", pods=2, namespace=NS, gpu_model="H200", api_client=client
        ) as names:
            for i, name in enumerate(names):
                driver.claim_pod(NS, f"replica-{i}", name)
            wait_for(lambda: len(driver.applied) == 2)
            assert sorted(a.device for a in driver.applied) == ["gpu-0-mig-0", "gpu-0-mig-1"]
            assert all(a.sharing is None for a in driver.applied)
        assert claims_in(s) == []


def test_device_plugin_path_refuses_an_interval_before_any_change(tmp_path):
    from sharebench.node import NodeError, ReconfigureOptions, reconfigure

    with SimCluster(tmp_path, delay_s=0.01) as s:
        s.add_gpu_node("gpu-a", "H200", gpus=1)
        before = s.node("gpu-a")["metadata"]["resourceVersion"]
        with pytest.raises(NodeError) as err:
            reconfigure(
                "gpu-a", "timeslice:2/long", ReconfigureOptions(timeout_s=SIM_WAIT_S), api_client=s.api_client()
            )
        assert str(err.value) == (
            "node gpu-a, mode timeslice:2/long, state pre-flight: the device plugin cannot set "
            "the time-slice interval; use timeslice:N here, or the pipeline's placement dra "
            "(the DRA driver sets it per claim)"
        )
        assert s.node("gpu-a")["metadata"]["resourceVersion"] == before
