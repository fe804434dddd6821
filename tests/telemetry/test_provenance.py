"""Provenance: the record of what ran where, its config hash, cluster facts, the report section."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

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


# --- issue 45: the machine state that can move a loss, and the code that ran -------------------------------


def test_every_machine_state_field_is_recorded_or_its_absence_explained():
    """On the CPU: every field present; the GPU's None with why (no GPU used), the host's measured."""
    prov = provenance.collect(DEVICES["cpu"], "sharebench run", {})
    state = prov["machine_state"]
    assert set(provenance.MACHINE_STATE_FIELDS) <= set(state)
    for field in provenance.MACHINE_STATE_FIELDS:
        assert state[field] is not None or state["unavailable"][field], field
    assert state["unavailable"]["power_limit_w"] == "no NVIDIA GPU used: the device is cpu (cpu)"
    assert state["cpu_model"] and state["cpu_logical"] >= 1 and state["host_mem_bytes"] > 0


class RefusingNvml:
    """NVML as a driver answers on a GPU that supports some fields and refuses others."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2

    class NVMLError(Exception):
        pass

    def nvmlDeviceGetPowerManagementLimit(self, h):  # noqa: N802 - NVML's names
        return 700_000

    def nvmlDeviceGetEnforcedPowerLimit(self, h):  # noqa: N802
        return 700_000

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):  # noqa: N802
        return 700_000

    def nvmlDeviceGetVbiosVersion(self, h):  # noqa: N802
        return b"96.00.A5.00.01"

    def nvmlDeviceGetApplicationsClock(self, h, clock):  # noqa: N802
        raise self.NVMLError("Not Supported")

    def nvmlDeviceGetMaxClockInfo(self, h, clock):  # noqa: N802
        return 1980 if clock == self.NVML_CLOCK_SM else 3201

    def nvmlDeviceGetMemoryInfo(self, h):  # noqa: N802
        return type("M", (), {"total": 150_109_880_320})()

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):  # noqa: N802
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):  # noqa: N802
        return 16

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):  # noqa: N802
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):  # noqa: N802
        return 16

    # nvmlDeviceGetPersistenceMode missing: an older nvidia-ml-py


def test_a_field_nvml_refuses_is_none_with_its_reason():
    from sharebench.devices import nvml

    values, reasons = nvml.gpu_state(RefusingNvml(), object())
    assert values["power_limit_w"] == 700.0 and values["vbios"] == "96.00.A5.00.01"
    assert values["max_clock_sm_mhz"] == 1980 and values["pcie_max_gen"] == 5
    assert values["app_clock_sm_mhz"] is None and reasons["app_clock_sm_mhz"] == "NVML: Not Supported"
    assert values["persistence_mode"] is None and reasons["persistence_mode"].startswith("NVML: ")
    assert set(values) == set(nvml.GPU_STATE_FIELDS) and set(reasons) == {
        "app_clock_sm_mhz",
        "app_clock_mem_mhz",
        "persistence_mode",
    }


def test_the_source_hash_names_the_source_wherever_it_lies(tmp_path):
    import shutil

    copy = tmp_path / "sharebench"
    shutil.copytree(provenance.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert provenance.source_hash(copy) == provenance.source_hash()
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.py").write_text("# not source\n")
    assert provenance.source_hash(copy) == provenance.source_hash()
    target = copy / "kernel" / "engines" / "simpletrack.c"
    target.write_text(target.read_text() + "\n")
    assert provenance.source_hash(copy) != provenance.source_hash()


@pytest.mark.parametrize(
    ("sb", "named", "says"),
    [
        ({"git_commit": "a" * 40, "git_dirty": False}, True, "commit aaaaaaaaaaaa"),
        (
            {"git_commit": "b" * 40, "git_dirty": True, "source_sha256": "c" * 64, "diff_files": ["src/x.py"]},
            True,
            "commit bbbbbbbbbbbb with uncommitted changes in 1 file(s): src/x.py; source hash cccccccccccccccc",
        ),
        ({"git_commit": "4947242" + "0" * 33, "git_dirty": True}, False, "cannot be named: commit 494724200000 with"),
        ({"git_commit": None, "git_dirty": None}, False, "cannot be named: no git commit recorded"),
        ({"git_commit": "d" * 40, "git_dirty": None}, False, "cannot be named: commit dddddddddddd, but whether"),
    ],
)
def test_the_report_says_when_the_code_that_ran_cannot_be_named(sb, named, says):
    ok, line = provenance.code_line({"sharebench": sb})
    assert ok is named and line.startswith(says)
    text = markdown([provenance_section({"sharebench": {"version": "0.1.0", **sb}})], Path("."))
    assert ("The code that ran cannot be named" in text) is not named


def test_a_dirty_checkout_records_its_source_hash_and_changed_files():
    prov = provenance.collect(DEVICES["cpu"], "sharebench run", {})
    sb = prov["sharebench"]
    assert sb["source_sha256"] == provenance.source_hash()
    if sb["git_dirty"]:
        assert isinstance(sb["diff_files"], list)
    assert provenance.code_line(prov)[0] is bool(sb["git_commit"])
