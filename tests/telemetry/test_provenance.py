"""Provenance: the record of what ran where, its config hash, cluster facts, the report section."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

import pytest
from kubernetes import client

from sharebench import __version__
from sharebench.devices import resolve_device
from sharebench.errors import UserError
from sharebench.gpus import profile_name
from sharebench.report.render import html_page, markdown
from sharebench.report.sections import provenance_section
from sharebench.results import DOCUMENTS, PROVENANCE_JSON, read_provenance, write_provenance
from sharebench.telemetry import nvml_status, provenance
from support.paths import ROOT

NVML_OK, NVML_REASON = nvml_status()
DEVICES = {
    "cpu": {"kind": "cpu", "backend": "cpu", "name": "host CPU", "uuid": None, "spec": "cpu"},
    "pocl": {
        "kind": "cpu",
        "backend": "opencl",
        "name": "cpu-haswell-AMD EPYC",
        "uuid": None,
        "spec": "opencl:0.0",
        "platform": "Portable Computing Language",
    },
    "cuda": {"kind": "gpu", "backend": "cuda", "name": "NVIDIA H200", "uuid": None, "spec": "cuda:0"},
}


@pytest.mark.parametrize("name", DEVICES)
def test_collect_records_software_host_and_device(name, tmp_path):
    dev = DEVICES[name]
    prov = provenance.collect(dev, ["sharebench", "run", "--device", dev["spec"]], {"particles": [1000]})
    assert "schema" not in prov  # the store adds kind and version (one convention for every document)
    assert prov["sharebench"]["version"] == __version__
    for lib in ("xsuite", "xtrack", "xobjects", "xpart"):
        assert prov["libraries"][lib] == metadata.version(lib)
    assert prov["host"]["cpu_logical"] >= 1 and prov["host"]["hostname"]
    assert prov["device"]["backend"] == dev["backend"]
    assert prov["command"][-1] == dev["spec"]
    if name == "pocl":
        assert prov["opencl"]["platform"] == "Portable Computing Language"
    if name == "cuda":
        if NVML_OK:
            assert prov["gpu"]["available"] and prov["nvidia"]["driver_version"]
        else:  # the stated reason, not invented numbers
            assert prov["gpu"] == {"available": False, "reason": NVML_REASON}
    else:
        assert prov["gpu"] is None
    # round trip through the results folder
    write_provenance(tmp_path, prov)
    assert json.loads((tmp_path / PROVENANCE_JSON).read_text())["schema_version"] == DOCUMENTS["provenance"]
    assert read_provenance(tmp_path) == json.loads(json.dumps(prov))


def test_git_commit_is_the_checkout_head():
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not running from a git checkout")
    prov = provenance.collect(DEVICES["cpu"], "sharebench run", {})
    assert prov["sharebench"]["git_commit"] == head.stdout.strip()


CONFIG = {
    "modes": ["exclusive", "timeslice:2"],
    "particles": [5_000_000, 10_000_000],
    "turns": 10,
    "repeats": 3,
    "lattice": None,
}


def test_config_hash_is_stable_and_sensitive():
    same_other_order = dict(reversed(list(CONFIG.items())))
    assert provenance.config_hash(CONFIG) == provenance.config_hash(same_other_order)
    assert len(provenance.config_hash(CONFIG)) == 64
    # a fresh interpreter (another hash seed) gives the same hash
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json,sys; from sharebench.telemetry.provenance import config_hash; "
            "print(config_hash(json.loads(sys.argv[1])))",
            json.dumps(CONFIG),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin"}
        | {k: v for k, v in __import__("os").environ.items() if k in ("PATH", "VIRTUAL_ENV")},
    )
    assert out.stdout.strip() == provenance.config_hash(CONFIG)
    assert provenance.config_hash(CONFIG | {"turns": 11}) != provenance.config_hash(CONFIG)


@pytest.mark.parametrize(
    "env,expected",
    [
        ({}, {"in_cluster": False, "node": None}),
        (
            {
                "KUBERNETES_SERVICE_HOST": "10.0.0.1",
                "NODE_NAME": "gpu-node-1",
                "POD_NAME": "bench-x",
                "POD_NAMESPACE": "kubeflow",
            },
            {"in_cluster": True, "node": "gpu-node-1", "pod": "bench-x", "namespace": "kubeflow"},
        ),
        (
            {"SHAREBENCH_NODE": "n2", "SHAREBENCH_GPU_OPERATOR_VERSION": "v25.3.0"},
            {"node": "n2", "gpu_operator_version": "v25.3.0"},
        ),
    ],
)
def test_cluster_context_from_the_downward_api(env, expected):
    got = provenance.cluster_from_env(env)
    for k, v in expected.items():
        assert got[k] == v, k


def test_node_facts_and_operand_versions_from_kubernetes_objects():
    node = client.V1Node(
        metadata=client.V1ObjectMeta(
            name="gpu-node-1",
            labels={
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
                "nvidia.com/mig.config": "all-1g.5gb",
                "nvidia.com/mig.strategy": "single",
                "kubernetes.io/os": "linux",
            },
        ),
        status=client.V1NodeStatus(
            capacity={"nvidia.com/gpu": "7", "cpu": "64"},
            node_info=client.V1NodeSystemInfo(
                kubelet_version="v1.31.2",
                container_runtime_version="containerd://1.7.22",
                architecture="amd64",
                boot_id="b",
                kernel_version="6",
                kube_proxy_version="v",
                machine_id="m",
                operating_system="linux",
                os_image="Ubuntu",
                system_uuid="s",
            ),
        ),
    )
    facts = provenance.node_facts(node)
    assert facts["labels"] == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "nvidia.com/mig.config": "all-1g.5gb",
        "nvidia.com/mig.strategy": "single",
    }
    assert facts["gpu_resources"] == {"nvidia.com/gpu": "7"}
    assert facts["kubelet_version"] == "v1.31.2"

    def pod(*images):
        return client.V1Pod(
            spec=client.V1PodSpec(
                containers=[client.V1Container(name=f"c{i}", image=im) for i, im in enumerate(images)]
            )
        )

    pods = [
        pod("nvcr.io/nvidia/gpu-operator:v25.3.0"),
        pod("nvcr.io/nvidia/k8s-device-plugin:v0.17.1", "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"),
        pod("nvcr.io/nvidia/driver@sha256:abc"),
    ]
    assert provenance.operand_versions(pods) == {
        "gpu_operator": "v25.3.0",
        "device_plugin": "v0.17.1",
        "dcgm_exporter": "4.2.3-4.1.3-ubuntu22.04",
        "driver": "sha256:abc",
        "mig_manager": None,
    }


def test_unreachable_api_is_recorded_not_raised():
    api = client.ApiClient(client.Configuration(host="http://127.0.0.1:9"))  # nothing listens on port 9
    api.configuration.retries = False
    prov = provenance.collect(DEVICES["cpu"], "x", {}, api_client=api)
    assert "error" in prov["cluster"]["api"]
    assert prov["cluster"]["gpu_operator_version"] is None


@pytest.mark.parametrize(
    "model,sms,mem,want",
    [
        ("A100-40GB", 14, 5 * 2**30, "1g.5gb"),
        ("A100-40GB", 14, 10 * 2**30, "1g.10gb"),
        ("H200", 16, 18 * 10**9, "1g.18gb"),
        ("H200", 132, 141 * 10**9, "7g.141gb"),
        ("H200", 17, 18 * 10**9, None),
        (None, 16, 1, None),
    ],
)
def test_mig_profile_from_sms_and_memory(model, sms, mem, want):
    assert profile_name(model, sms, mem) == want


def test_report_section(tmp_path):
    prov = provenance.collect(DEVICES["cuda"], ["sharebench", "run"], CONFIG)
    write_provenance(tmp_path, prov)
    sec = provenance_section(read_provenance(tmp_path))
    md, page = markdown([sec], tmp_path), html_page("", [sec])
    assert sec.title == "Provenance"
    assert prov["config_hash"] in md and prov["config_hash"] in page
    assert "xtrack" in md and metadata.version("xtrack") in md
    if not NVML_OK:
        assert "NVML Shared Library Not Found" in md or NVML_REASON in md
    empty = provenance_section(read_provenance(tmp_path / "nothing"))
    assert "not recorded" in markdown([empty], tmp_path)


@pytest.mark.parametrize(
    "content,match",
    [
        ("{not json", r"is not valid JSON"),
        ('{"schema": "sharebench.provenance/99"}', r"has provenance schema version 99; this sharebench reads up to 2"),
    ],
)
def test_a_bad_provenance_file_is_a_user_error(tmp_path, content, match):
    (tmp_path / PROVENANCE_JSON).write_text(content)
    with pytest.raises(UserError, match=match):
        read_provenance(tmp_path)


@pytest.mark.parametrize("spec", ["cpu", "opencl"])
def test_collect_with_the_kernels_real_device(spec):
    """A DeviceInfo from sharebench.devices (the CPU, and PoCL's OpenCL device where present)."""
    try:
        dev = resolve_device(spec)
    except UserError as exc:
        pytest.skip(f"{spec} device not available here: {exc}")
    prov = provenance.collect(dev, ["sharebench", "run"], {})
    assert prov["device"]["name"] == dev.name and prov["device"]["uuid"] == dev.uuid
    assert prov["device"]["memory_bytes"] == dev.memory_bytes
    if dev.backend == "opencl":
        assert prov["opencl"] == {
            "platform": dev.platform,
            "device": dev.name,
            "icd_vendors": __import__("os").environ.get("OCL_ICD_VENDORS"),
        }
    json.dumps(prov)  # all of it is JSON
