"""Provenance: what ran where; the document ``provenance.json`` of a results folder.

``collect(device, command, config)`` gathers, without ever failing a sweep (anything it cannot
learn is recorded as ``None``, with the reason where there is one):

* the device the replicas used (kind, backend, name, UUID, OpenCL platform),
* the NVIDIA driver and every GPU NVML lists (``nvidia``), and the GPU the replicas used
  (``gpu``): model, UUID, MIG mode and the MIG instances that exist (UUID, GPU instance id,
  SMs, memory, profile name); the CUDA runtime (CuPy's for a CUDA run, else nvcc's),
* software: sharebench version and git commit (when run from a checkout), Python,
  xsuite / xtrack / xobjects / xpart / numpy / pyopencl / cupy versions,
* the host: name, CPU model, cores (logical, physical, usable), memory, OS, load average,
* on a cluster: node and pod from the Downward API environment (``NODE_NAME``,
  ``POD_NAME``, ``POD_NAMESPACE``), and when a Kubernetes API is reachable
  (in-cluster, or ``SHAREBENCH_KUBECONFIG``) the node's NVIDIA labels and the
  gpu-operator, device-plugin and dcgm-exporter image versions,
* the machine state that can move a loss between machines of one model (``machine_state``,
  :func:`machine_state`): the GPU's power limits, VBIOS, application and maximum clocks, memory, PCIe link
  generation and width, persistence mode (``devices.nvml.gpu_state``), the driver, the host's CPU model,
  cores, memory and load; every field present, a value or None, and for each None the reason
  (``machine_state["unavailable"]``: no GPU, NVML unavailable, not supported),
* the code that ran: the git commit and whether the tree was dirty, and always a SHA-256 over the
  installed ``sharebench`` package's source files (:func:`source_hash`) with, for a dirty tree, the files
  that differ from the commit (``diff_files``): :func:`code_line` says whether the code can be named,
* the command and a stable hash of the sweep config (SHA-256 of its canonical JSON),
* for a sweep with a ``timeslice:N`` mode, the GPU's time slices as probes see them (``timeslice_probe``,
  :func:`timeslice_probe_entry`: slice and switch of 2 and 4 probe processes, a few seconds), or one line
  saying why the probe did not run (CPU, PoCL, non-NVIDIA device, MPS active, no CuPy, ``--no-probe``).

The document's schema and its history are in ``sharebench.results.schema``.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.util
import json
import math
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil

from sharebench import __version__
from sharebench.devices import DeviceInfo, as_device, nvml
from sharebench.devices.host import cpu_model, load_average, usable_cpus
from sharebench.errors import UserError, one_line
from sharebench.gpus import gpu_model, profile_name
from sharebench.modes import time_sliced
from sharebench.telemetry.timeslice_probe import cuda_ordinal, probe_for_sweep, unavailable_reason

LIBRARIES = (
    "xsuite",
    "xtrack",
    "xobjects",
    "xpart",
    "xfields",
    "numpy",
    "scipy",
    "pandas",
    "pyopencl",
    "pocl-binary-distribution",
    "cupy-cuda13x",
    "cupy-cuda12x",
    "nvidia-ml-py",
    "kfp",
    "kubernetes",
)
# Downward API / env names for the cluster context (first one set wins)
NODE_ENV = ("NODE_NAME", "KUBERNETES_NODE_NAME", "SHAREBENCH_NODE")
OPERAND_IMAGES = {  # component -> substrings of container image names in the operator namespace
    "gpu_operator": ("gpu-operator:", "/gpu-operator@", "gpu-operator/gpu-operator"),
    "device_plugin": ("k8s-device-plugin",),
    "dcgm_exporter": ("dcgm-exporter",),
    "driver": ("/driver:", "/driver@"),
    "mig_manager": ("k8s-mig-manager",),
}


def config_hash(config: Any) -> str:
    """SHA-256 of the config's canonical JSON (sorted keys, no whitespace): the same
    sweep settings give the same hash whatever the key order or Python session."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


SOURCE_SUFFIXES = (".py", ".c", ".cl", ".cu", ".h")  # what the package runs: Python and the kernels' sources
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def source_hash(package: Path = PACKAGE_DIR) -> str:
    """SHA-256 over the package's source files (:data:`SOURCE_SUFFIXES`), each as its path relative to the
    package and its bytes, in path order: the same source gives the same hash wherever it is installed (a
    checkout, a wheel, a copy on a lent machine); from a checkout, ``python -c "from
    sharebench.telemetry.provenance import source_hash; print(source_hash())"`` at a candidate commit."""
    h = hashlib.sha256()
    files = sorted(
        p for p in package.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file() and "__pycache__" not in p.parts
    )
    for p in files:
        h.update(p.relative_to(package).as_posix().encode() + b"\0")
        h.update(p.read_bytes() + b"\0")
    return h.hexdigest()


def _lines(root: Path, *args: str) -> list[str] | None:
    """The output lines of ``git -C root ARGS`` (None when git fails)."""
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)
    return [x for x in done.stdout.splitlines() if x.strip()] if done.returncode == 0 else None


def _git(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"commit": None, "dirty": None, "diff_files": None}
    try:
        top = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=10
        )
        if top.returncode != 0:
            return out
        # only our own checkout counts (not a repository that happens to contain site-packages)
        if not (Path(top.stdout.strip()) / "src" / "sharebench").is_dir():
            return out
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            out["commit"] = head.stdout.strip()
        st = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if st.returncode == 0:
            out["dirty"] = bool(st.stdout.strip())
        if out["dirty"]:  # the files that differ from the commit, and the package's untracked sources
            changed = _lines(root, "diff", "--name-only", "HEAD") or []
            untracked = _lines(root, "ls-files", "--others", "--exclude-standard", "--", "src") or []
            out["diff_files"] = sorted({*changed, *untracked})
    except (OSError, subprocess.TimeoutExpired):
        pass
    return out


def code_line(prov: dict[str, Any] | None) -> tuple[bool, str]:
    """(whether the code that ran can be named, one line saying what names it or why nothing does): a
    commit of a clean tree names it; a dirty tree with its source hash is named by the commit, the files
    that differed and the hash; no commit, or a dirty tree without a source hash, cannot be named."""
    sb = (prov or {}).get("sharebench") or {}
    commit, dirty, src = sb.get("git_commit"), sb.get("git_dirty"), sb.get("source_sha256")
    files = sb.get("diff_files") or []
    hashed = f"source hash {src[:16]}" if src else ""
    if commit and dirty is False:
        return True, f"commit {commit[:12]}" + (f", {hashed}" if hashed else "")
    if commit and dirty and src:
        changed = f" in {len(files)} file(s): {', '.join(files[:6])}{' …' if len(files) > 6 else ''}" if files else ""
        return True, f"commit {commit[:12]} with uncommitted changes{changed}; {hashed}"
    if commit and dirty:
        return False, (
            f"cannot be named: commit {commit[:12]} with uncommitted changes, and no source hash was recorded "
            "(a sharebench before issue 45): the code that ran is that commit plus changes no record names"
        )
    if commit:
        return False, f"cannot be named: commit {commit[:12]}, but whether the tree was clean was not recorded"
    return False, "cannot be named: no git commit recorded (not run from a checkout)" + (
        f"; {hashed}: check it against a checkout" if hashed else ""
    )


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def host_info() -> dict[str, Any]:
    """Host name, CPU, cores (logical, physical, usable by this process), memory, OS, load average."""
    load = load_average()
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_logical": os.cpu_count(),
        "cpu_physical": psutil.cpu_count(logical=False),
        "usable_cores": len(usable_cpus()),
        "mem_bytes": int(psutil.virtual_memory().total),
        "load_avg_1m_5m_15m": list(load) if load else None,
    }


def nvidia_info() -> dict[str, Any]:
    """The NVIDIA driver and every GPU NVML lists (``available: False`` and the reason without NVML)."""
    try:
        with nvml.session() as nv:

            def get(fn: Callable[..., Any], *args: Any) -> Any:
                try:
                    return fn(*args)
                except nv.NVMLError:
                    return None

            gpus = []
            for i in range(get(nv.nvmlDeviceGetCount) or 0):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                mem = get(nv.nvmlDeviceGetMemoryInfo, h)
                mode = get(nv.nvmlDeviceGetMigMode, h)
                gpus.append(
                    {
                        "index": i,
                        "name": nvml.text(get(nv.nvmlDeviceGetName, h) or ""),
                        "uuid": nvml.text(get(nv.nvmlDeviceGetUUID, h) or ""),
                        "memory_bytes": int(mem.total) if mem is not None else None,
                        "mig_mode": "unsupported" if mode is None else "enabled" if mode[0] else "disabled",
                    }
                )
            return {
                "available": True,
                "reason": None,
                "driver_version": nvml.text(get(nv.nvmlSystemGetDriverVersion) or "") or None,
                "cuda_driver_version": nvml.cuda_version(get(nv.nvmlSystemGetCudaDriverVersion)),
                "nvml_version": nvml.text(get(nv.nvmlSystemGetNVMLVersion) or "") or None,
                "gpus": gpus,
            }
    except nvml.NvmlUnavailable as exc:
        return {
            "available": False,
            "reason": str(exc),
            "driver_version": None,
            "cuda_driver_version": None,
            "nvml_version": None,
            "gpus": [],
        }


def gpu_info(device: DeviceInfo) -> dict[str, Any]:
    """What NVML says about the GPU the replicas used (``available: False`` + reason if nothing)."""
    try:
        nv = nvml.start()
    except nvml.NvmlUnavailable as exc:
        return {"available": False, "reason": str(exc)}
    out: dict[str, Any] = {"available": True}
    try:

        def get(fn: Callable[..., Any], *args: Any) -> Any:
            try:
                return fn(*args)
            except nv.NVMLError:
                return None

        try:
            target, notes = nvml.find_handle(nv, device)
        except (nv.NVMLError, nvml.NvmlUnavailable) as exc:
            out["reason"] = f"device not found by NVML: {exc}"
            return out
        if notes:
            out["notes"] = notes
        is_mig = bool(get(nv.nvmlDeviceIsMigDeviceHandle, target))
        parent = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(target) if is_mig else target
        out["name"] = nvml.text(get(nv.nvmlDeviceGetName, parent) or "") or None
        out["uuid"] = nvml.text(get(nv.nvmlDeviceGetUUID, parent) or "") or None
        out["used_uuid"] = nvml.text(get(nv.nvmlDeviceGetUUID, target) or "") or None
        mem = get(nv.nvmlDeviceGetMemoryInfo, parent)
        out["memory_bytes"] = int(mem.total) if mem is not None else None
        out["pci_bus_id"] = nvml.text(getattr(get(nv.nvmlDeviceGetPciInfo, parent), "busId", b"") or "") or None
        try:
            model = gpu_model(out["name"] or "")
            out["model_key"], out["sms"] = model.key, model.sms
        except UserError:
            out["model_key"] = out["sms"] = None
        out["state"], out["state_unavailable"] = nvml.gpu_state(nv, parent)
        mode = get(nv.nvmlDeviceGetMigMode, parent)
        out["mig_mode"] = (
            None
            if mode is None
            else {
                "current": "enabled" if mode[0] == nv.NVML_DEVICE_MIG_ENABLE else "disabled",
                "pending": "enabled" if mode[1] == nv.NVML_DEVICE_MIG_ENABLE else "disabled",
            }
        )
        out["mig_instances"] = [
            {k: v for k, v in inst.items() if k not in ("handle", "name")}
            | {"profile": profile_name(out["model_key"], inst.get("sms"), inst.get("memory_bytes"))}
            for inst in nvml.mig_devices(nv, parent)
        ]
        return out
    finally:
        nvml.shutdown(nv)


HOST_STATE_FIELDS = ("driver_version", "cpu_model", "cpu_logical", "host_mem_bytes", "load_avg_1m")
MACHINE_STATE_FIELDS = (*nvml.GPU_STATE_FIELDS, *HOST_STATE_FIELDS)


def machine_state(
    info: DeviceInfo, gpu: dict[str, Any] | None, nvidia: dict[str, Any], host: dict[str, Any]
) -> dict[str, Any]:
    """Every field of :data:`MACHINE_STATE_FIELDS`, a value or None, and ``unavailable``: the reason of each
    None (no GPU used, NVML unavailable or refusing the field, the OS not reporting it). The load is the
    host's 1-minute load average when provenance is collected (while the sweep's replicas set up)."""
    values: dict[str, Any] = {}
    why: dict[str, str] = {}
    state = (gpu or {}).get("state")
    if state is not None:
        values.update({f: state.get(f) for f in nvml.GPU_STATE_FIELDS})
        why.update((gpu or {}).get("state_unavailable") or {})
    else:
        reason = (
            f"no NVIDIA GPU used: the device is {info.spec or info.kind} ({info.backend})"
            if gpu is None
            else str(gpu.get("reason") or "NVML did not report the GPU")
        )
        values.update(dict.fromkeys(nvml.GPU_STATE_FIELDS))
        why.update(dict.fromkeys(nvml.GPU_STATE_FIELDS, reason))
    load = host.get("load_avg_1m_5m_15m")
    host_values = {
        "driver_version": nvidia.get("driver_version"),
        "cpu_model": host.get("cpu_model"),
        "cpu_logical": host.get("cpu_logical"),
        "host_mem_bytes": host.get("mem_bytes"),
        "load_avg_1m": float(load[0]) if load else None,
    }
    for k, v in host_values.items():
        values[k] = v
        if v is None:
            why[k] = str(nvidia.get("reason") or "NVML reported none") if k == "driver_version" else "not reported"
    return {**values, "unavailable": why}


def machine_state_text(prov: dict[str, Any] | None) -> str:
    """The recorded machine state in one line (``field value``, the unavailable ones counted), or that this
    folder's provenance predates it (issue 45): nothing recorded, not known."""
    state = (prov or {}).get("machine_state")
    if not isinstance(state, dict):
        return "not recorded (provenance before issue 45: power limit, VBIOS, clocks, PCIe link unknown)"
    known = [f"{k} {state[k]}" for k in MACHINE_STATE_FIELDS if state.get(k) is not None]
    missing = sorted((state.get("unavailable") or {}).items())
    reasons = sorted({why for _, why in missing})
    return "; ".join(known) + (
        f"; unavailable: {', '.join(k for k, _ in missing)} ({'; '.join(reasons)})" if missing else ""
    )


def cuda_runtime(device: DeviceInfo) -> str | None:
    """The CUDA runtime the replicas use: CuPy's when they ran through CUDA (importing CuPy is not
    free, so only then), else the toolkit's ``nvcc --version``, else None."""
    if device.backend == "cuda" and ("cupy" in sys.modules or importlib.util.find_spec("cupy") is not None):
        try:
            import cupy  # noqa: PLC0415 - optional and slow to import: only for a CUDA run

            version = nvml.cuda_version(int(cupy.cuda.runtime.runtimeGetVersion()))
            return f"CUDA runtime {version} (CuPy {cupy.__version__})"
        except Exception:  # noqa: BLE001 - no CUDA runtime usable here: fall back to the toolkit
            pass
    try:
        out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return next((line.strip() for line in out.stdout.splitlines() if "release" in line), None)


def cluster_from_env(env: dict[str, str] | None = None) -> dict[str, Any]:
    """Node, pod and namespace from the Downward API environment; ``in_cluster`` from the
    service-account environment Kubernetes sets in every pod."""
    env = dict(os.environ if env is None else env)
    node = next((env[k] for k in NODE_ENV if env.get(k)), None)
    return {
        "in_cluster": bool(env.get("KUBERNETES_SERVICE_HOST")),
        "node": node,
        "pod": env.get("POD_NAME") or None,
        "namespace": env.get("POD_NAMESPACE") or None,
        "gpu_operator_version": env.get("SHAREBENCH_GPU_OPERATOR_VERSION") or None,
        "device_plugin_version": env.get("SHAREBENCH_DEVICE_PLUGIN_VERSION") or None,
    }


NODE_LABELS = (
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.replicas",
    "nvidia.com/gpu.sharing-strategy",
    "nvidia.com/mig.config",
    "nvidia.com/mig.config.state",
    "nvidia.com/mig.strategy",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
    "nvidia.com/cuda.runtime.major",
    "nvidia.com/cuda.runtime.minor",
    "nvidia.com/device-plugin.config",
    "nvidia.com/gpu.deploy.mig-manager",
    "nvidia.com/gfd.timestamp",
)


def node_facts(node: Any) -> dict[str, Any]:
    """The NVIDIA labels and capacity of a ``V1Node`` (what GPU feature discovery published)."""
    labels = dict(node.metadata.labels or {})
    facts: dict[str, Any] = {"labels": {k: labels[k] for k in NODE_LABELS if k in labels}}
    capacity = dict(getattr(node.status, "capacity", None) or {})
    facts["gpu_resources"] = {k: v for k, v in capacity.items() if k.startswith("nvidia.com/")}
    info = getattr(node.status, "node_info", None)
    facts["kubelet_version"] = getattr(info, "kubelet_version", None)
    facts["container_runtime"] = getattr(info, "container_runtime_version", None)
    return facts


def image_tag(image: str) -> str | None:
    """``nvcr.io/nvidia/k8s-device-plugin:v0.17.0`` → ``v0.17.0`` (digest-only images → the digest)."""
    if "@" in image:
        return image.split("@", 1)[1]
    last = image.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def operand_versions(pods: list[Any]) -> dict[str, str | None]:
    """gpu-operator / device-plugin / dcgm-exporter / driver / mig-manager image tags from pods."""
    out: dict[str, str | None] = dict.fromkeys(OPERAND_IMAGES)
    for pod in pods:
        containers = list(pod.spec.containers or []) + list(pod.spec.init_containers or [])
        for c in containers:
            image = c.image or ""
            for comp, needles in OPERAND_IMAGES.items():
                if out[comp] is None and any(n in image for n in needles):
                    out[comp] = image_tag(image)
    return out


def cluster_from_api(node_name: str | None, api_client: Any = None, namespace: str = "gpu-operator") -> dict[str, Any]:
    """Ask the Kubernetes API (in-cluster config, or SHAREBENCH_KUBECONFIG) about the node and
    the operator's pods. Returns what it learned, with ``error`` when the API refused."""
    try:
        from kubernetes import client  # noqa: PLC0415 - optional: only where a cluster is asked
        from kubernetes import config as kconfig  # noqa: PLC0415 - optional: only where a cluster is asked
    except ImportError as exc:
        return {"error": f"kubernetes client not installed ({exc})"}
    try:
        if api_client is None:
            if os.environ.get("SHAREBENCH_KUBECONFIG"):
                api_client = kconfig.new_client_from_config(config_file=os.environ["SHAREBENCH_KUBECONFIG"])
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                kconfig.load_incluster_config()
                api_client = client.ApiClient()
            else:
                return {"error": "no Kubernetes API configured (not in a pod, SHAREBENCH_KUBECONFIG unset)"}
        core = client.CoreV1Api(api_client)
        out: dict[str, Any] = {}
        if node_name:
            out["node_facts"] = node_facts(core.read_node(node_name))
        out["operands"] = operand_versions(core.list_namespaced_pod(namespace, _request_timeout=10).items)
        return out
    except Exception as exc:  # noqa: BLE001 - RBAC, network: provenance records, never fails the sweep
        return {"error": f"{type(exc).__name__}: {one_line(exc)[:300]}"}


def collect(
    device: DeviceInfo | dict[str, Any] | None = None,
    command: Any = None,
    config: Any = None,
    *,
    node: str | None = None,
    api_client: Any = None,
    timeslice_probe: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything known about this run's context (see the module docstring): the provenance document
    ``sharebench.results.write_provenance`` writes. ``device`` may carry extra keys (a KFP run's node
    and GPU model); they are kept. ``node``: the Kubernetes node the replicas ran on, when the process
    that collects is not on it (else the Downward API's). ``timeslice_probe``: the sweep's
    :func:`timeslice_probe_entry`, recorded as is (None: the sweep has no time-slicing mode)."""
    cfg = config if config is not None else {}
    info = as_device(device)
    extra = {k: v for k, v in device.items() if k not in info.to_dict()} if isinstance(device, dict) else {}
    git = _git(Path(__file__).resolve().parents[1])
    prov: dict[str, Any] = {
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command if isinstance(command, (list, tuple, str)) or command is None else str(command),
        "config": json.loads(json.dumps(cfg, default=str)),
        "config_hash": config_hash(cfg),
        "sharebench": {
            "version": __version__,
            "git_commit": git["commit"],
            "git_dirty": git["dirty"],
            "diff_files": git["diff_files"],
            "source_sha256": source_hash(),
        },
        "libraries": _versions(),
        "host": host_info(),
        "device": {
            **info.to_dict(),
            **{k: v if v is None or isinstance(v, (str, int, float, bool)) else str(v) for k, v in extra.items()},
        },
        "nvidia": nvidia_info(),
        "gpu": gpu_info(info) if info.kind == "gpu" or info.backend == "cuda" else None,
        "cuda_runtime": cuda_runtime(info),
        "opencl": (
            {"platform": info.platform, "device": info.name, "icd_vendors": os.environ.get("OCL_ICD_VENDORS")}
            if info.backend == "opencl"
            else None
        ),
        "cluster": cluster_from_env(),
    }
    prov["machine_state"] = machine_state(info, prov["gpu"], prov["nvidia"], prov["host"])
    if timeslice_probe is not None:
        prov["timeslice_probe"] = timeslice_probe
    cl = prov["cluster"]
    cl["node"] = node or cl["node"]
    if cl["in_cluster"] or os.environ.get("SHAREBENCH_KUBECONFIG") or api_client is not None:
        api = cluster_from_api(cl["node"], api_client=api_client)
        cl["api"] = api
        ops = api.get("operands") or {}
        cl["gpu_operator_version"] = cl["gpu_operator_version"] or ops.get("gpu_operator")
        cl["device_plugin_version"] = cl["device_plugin_version"] or ops.get("device_plugin")
    return prov


# ------------------------------------------------------------------ the GPU's time slices


NO_PROBE = "--no-probe"


def timeslice_probe_entry(device: DeviceInfo | dict[str, Any], modes: Any, *, enabled: bool = True) -> dict | None:
    """What provenance records of the GPU's time slices for a sweep of ``modes`` (labels or Modes): None
    without a ``timeslice`` mode; else ``status`` (``ok``, ``unavailable``, ``skipped``), ``reason`` (one
    line) and, when ok, the probes' ``runs`` (``probe_for_sweep``: 2 and 4 processes) with the 2-process
    run's median ``slice_ms`` and ``switch_ms`` and the GPU's ``uuid``. Never raises: a probe that cannot
    start is recorded, and the sweep goes on."""
    if not any(time_sliced(m) for m in modes):
        return None
    info = as_device(device)
    if not enabled:
        return {"status": "skipped", "reason": f"skipped ({NO_PROBE})", "device": info.spec}
    spec = info.spec if info.backend == "cuda" or cuda_ordinal(info.spec) is None else info.backend  # "auto" on OpenCL
    why = unavailable_reason(spec)
    if why:
        return {"status": "unavailable", "reason": why, "device": info.spec}
    try:
        runs = probe_for_sweep(info.spec)["timeslice_probe"]
    except Exception as exc:  # noqa: BLE001 - the probe never costs the sweep
        return {"status": "unavailable", "reason": f"the probe failed: {type(exc).__name__}: {one_line(exc)[:300]}"}
    bad = [r for r in runs if r.get("status") != "ok"]
    if bad:
        return {"status": "unavailable", "reason": str(bad[0].get("reason")), "device": info.spec, "runs": runs}
    two = runs[0]
    return {
        "status": "ok",
        "reason": "",
        "device": info.spec,
        "uuid": two.get("uuid"),
        "slice_ms": (two.get("slice_ms") or {}).get("p50"),
        "switch_ms": (two.get("switch_ms") or {}).get("p50"),
        "runs": runs,
    }


def probe_line(entry: dict[str, Any] | None) -> str | None:
    """The one line a sweep notes about its time-slice probe (None when it has no time-slicing mode)."""
    if not entry:
        return None
    if entry.get("status") == "skipped":
        return f"probe: {entry.get('reason')}"
    if entry.get("status") != "ok":
        return f"probe: cannot run here: {entry.get('reason')}"
    lines = []
    for r in entry.get("runs") or []:
        sl, sw = r.get("slice_ms") or {}, r.get("switch_ms") or {}
        lines.append(
            f"{r.get('processes')} processes slice {sl.get('p50', math.nan):.3f} ms, switch {sw.get('p50', math.nan):.3f} ms"
        )
    return f"probe: time slices of {entry.get('uuid')}: " + "; ".join(lines)
