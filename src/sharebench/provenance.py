"""Provenance: what ran where, one ``provenance.json`` per results folder.

``collect(device_info, command, config)`` gathers, without ever failing a sweep
(anything it cannot learn is recorded as ``None`` with the reason under ``notes``):

* the device the replicas used (kind, backend, name, UUID, OpenCL platform),
* the GPU through NVML: model, UUID, driver, CUDA driver version, MIG mode and the
  MIG instances that exist (UUID, GPU instance id, SMs, memory, profile name),
* software: sharebench version and git commit (when run from a checkout), Python,
  xsuite / xtrack / xobjects / xpart / numpy / pyopencl / cupy versions,
* the host: name, CPU model, cores, memory, OS,
* on a cluster: node and pod from the Downward API environment (``NODE_NAME``,
  ``POD_NAME``, ``POD_NAMESPACE``), and when a Kubernetes API is reachable
  (in-cluster, or ``SHAREBENCH_KUBECONFIG``) the node's NVIDIA labels and the
  gpu-operator, device-plugin and dcgm-exporter image versions,
* the command and a stable hash of the sweep config (SHA-256 of its canonical JSON).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import html
import json
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from sharebench import __version__
from sharebench.errors import UserError
from sharebench.telemetry.cpu import cpu_model
from sharebench.telemetry.sampler import device_field

SCHEMA = "sharebench.provenance/1"
FILENAME = "provenance.json"
LIBRARIES = ("xsuite", "xtrack", "xobjects", "xpart", "xfields", "numpy", "scipy", "pyopencl",
             "pocl-binary-distribution", "cupy-cuda13x", "cupy-cuda12x", "nvidia-ml-py", "kfp",
             "kubernetes")
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


def _git(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"commit": None, "dirty": None}
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=10)
        if top.returncode != 0:
            return out
        # only our own checkout counts (not a repository that happens to contain site-packages)
        if not (Path(top.stdout.strip()) / "src" / "sharebench").is_dir():
            return out
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode == 0:
            out["commit"] = head.stdout.strip()
        st = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True, timeout=10)
        if st.returncode == 0:
            out["dirty"] = bool(st.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    return out


def _versions() -> dict[str, str | None]:
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def host_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "cpu_logical": os.cpu_count(),
    }
    try:
        import psutil

        info["cpu_physical"] = psutil.cpu_count(logical=False)
        info["mem_bytes"] = psutil.virtual_memory().total
    except Exception:  # noqa: BLE001 - psutil is optional for this part
        info["cpu_physical"] = info["mem_bytes"] = None
    return info


def _cuda_version(v: int | None) -> str | None:
    """NVML's integer CUDA driver version (12040) as ``12.4``."""
    if not v:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def mig_profile_name(model_key: str | None, sms: int | None, memory_bytes: int | None) -> str | None:
    """The profile (``1g.18gb``) of a MIG instance from its SMs and memory, by sharebench.gpus."""
    if not model_key or not sms:
        return None
    from sharebench.gpus import GPU_MODELS

    model = GPU_MODELS.get(model_key)
    if model is None:
        return None
    cands = [p for p in model.profiles if p.sms == sms]
    if len(cands) > 1 and memory_bytes:
        gb = memory_bytes / 1e9
        cands = [min(cands, key=lambda p: abs(p.mem_gb - gb))]
    return cands[0].name if len(cands) == 1 else None


def gpu_info(device_info: Any = None) -> dict[str, Any]:
    """What NVML says about the GPU the replicas used (``available: False`` + reason if nothing)."""
    from sharebench.telemetry.nvml import NvmlUnavailable, _text, find_handle, load, mig_instances

    try:
        nv = load()
    except NvmlUnavailable as exc:
        return {"available": False, "reason": str(exc)}
    out: dict[str, Any] = {"available": True}
    try:
        def get(fn, *args):
            try:
                return fn(*args)
            except nv.NVMLError:
                return None

        out["driver_version"] = _text(get(nv.nvmlSystemGetDriverVersion) or "") or None
        out["cuda_driver_version"] = _cuda_version(get(nv.nvmlSystemGetCudaDriverVersion))
        out["nvml_version"] = _text(get(nv.nvmlSystemGetNVMLVersion) or "") or None
        out["gpu_count"] = get(nv.nvmlDeviceGetCount)
        try:
            target, notes = find_handle(nv, device_info or {})
        except (nv.NVMLError, NvmlUnavailable) as exc:
            out["reason"] = f"device not found by NVML: {exc}"
            return out
        if notes:
            out["notes"] = notes
        is_mig = bool(get(nv.nvmlDeviceIsMigDeviceHandle, target))
        parent = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(target) if is_mig else target
        out["name"] = _text(get(nv.nvmlDeviceGetName, parent) or "") or None
        out["uuid"] = _text(get(nv.nvmlDeviceGetUUID, parent) or "") or None
        out["used_uuid"] = _text(get(nv.nvmlDeviceGetUUID, target) or "") or None
        mem = get(nv.nvmlDeviceGetMemoryInfo, parent)
        out["memory_bytes"] = int(mem.total) if mem is not None else None
        out["pci_bus_id"] = _text(getattr(get(nv.nvmlDeviceGetPciInfo, parent), "busId", b"") or "") or None
        try:
            from sharebench.gpus import gpu_model

            model = gpu_model(out["name"] or "")
            out["model_key"], out["sms"] = model.key, model.sms
        except UserError:
            out["model_key"] = out["sms"] = None
        mode = get(nv.nvmlDeviceGetMigMode, parent)
        out["mig_mode"] = None if mode is None else {
            "current": "enabled" if mode[0] == nv.NVML_DEVICE_MIG_ENABLE else "disabled",
            "pending": "enabled" if mode[1] == nv.NVML_DEVICE_MIG_ENABLE else "disabled"}
        out["mig_instances"] = [
            {k: v for k, v in inst.items() if k != "handle"}
            | {"profile": mig_profile_name(out["model_key"], inst.get("sms"), inst.get("memory_bytes"))}
            for inst in mig_instances(nv, parent)]
        return out
    finally:
        try:
            nv.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def _cuda_runtime(device_info: Any) -> str | None:
    """CUDA runtime of CuPy, only when the replicas used CUDA (importing CuPy is not free)."""
    if device_field(device_info, "backend") != "cuda" or ("cupy" not in sys.modules and not _has("cupy")):
        return None
    try:
        import cupy

        return _cuda_version(cupy.cuda.runtime.runtimeGetVersion())
    except Exception:  # noqa: BLE001 - no CUDA runtime usable here
        return None


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


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


NODE_LABELS = ("nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory",
               "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy", "nvidia.com/mig.config",
               "nvidia.com/mig.config.state", "nvidia.com/mig.strategy", "nvidia.com/cuda.driver.major",
               "nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver.rev", "nvidia.com/cuda.runtime.major",
               "nvidia.com/cuda.runtime.minor", "nvidia.com/device-plugin.config",
               "nvidia.com/gpu.deploy.mig-manager", "nvidia.com/gfd.timestamp")


def node_facts(node: Any) -> dict[str, Any]:
    """The NVIDIA labels and capacity of a ``V1Node`` (what GPU feature discovery published)."""
    labels = dict(node.metadata.labels or {})
    facts = {"labels": {k: labels[k] for k in NODE_LABELS if k in labels}}
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
    out: dict[str, str | None] = {k: None for k in OPERAND_IMAGES}
    for pod in pods:
        containers = list(pod.spec.containers or []) + list(pod.spec.init_containers or [])
        for c in containers:
            image = c.image or ""
            for comp, needles in OPERAND_IMAGES.items():
                if out[comp] is None and any(n in image for n in needles):
                    out[comp] = image_tag(image)
    return out


def cluster_from_api(node_name: str | None, api_client: Any = None,
                     namespace: str = "gpu-operator") -> dict[str, Any]:
    """Ask the Kubernetes API (in-cluster config, or SHAREBENCH_KUBECONFIG) about the node and
    the operator's pods. Returns what it learned, with ``error`` when the API refused."""
    try:
        from kubernetes import client, config as kconfig
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
        return {"error": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"}


def collect(device_info: Any = None, command: Any = None, config: Any = None, *,
            api_client: Any = None) -> dict[str, Any]:
    """Everything known about this run's context (see the module docstring)."""
    cfg = config if config is not None else {}
    pkg_root = Path(__file__).resolve().parent
    git = _git(pkg_root)
    device = {k: (v if v is None or isinstance(v, (str, int, float, bool)) else str(v))
              for k in ("spec", "kind", "backend", "name", "uuid", "platform", "memory_bytes")
              for v in [device_field(device_info, k)]}
    prov: dict[str, Any] = {
        "schema": SCHEMA,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": command if isinstance(command, (list, tuple, str)) or command is None else str(command),
        "config": json.loads(json.dumps(cfg, default=str)),
        "config_hash": config_hash(cfg),
        "sharebench": {"version": __version__, "git_commit": git["commit"], "git_dirty": git["dirty"]},
        "libraries": _versions(),
        "host": host_info(),
        "device": device,
        "gpu": None,
        "opencl": None,
        "cuda_runtime_version": None,
        "cluster": cluster_from_env(),
    }
    if device["kind"] == "gpu" or device["backend"] == "cuda":
        prov["gpu"] = gpu_info(device_info)
        prov["cuda_runtime_version"] = _cuda_runtime(device_info)
    if device["backend"] == "opencl":
        prov["opencl"] = {"platform": device["platform"], "device": device["name"],
                          "icd_vendors": os.environ.get("OCL_ICD_VENDORS")}
    cl = prov["cluster"]
    if cl["in_cluster"] or os.environ.get("SHAREBENCH_KUBECONFIG") or api_client is not None:
        api = cluster_from_api(cl["node"], api_client=api_client)
        cl["api"] = api
        ops = api.get("operands") or {}
        cl["gpu_operator_version"] = cl["gpu_operator_version"] or ops.get("gpu_operator")
        cl["device_plugin_version"] = cl["device_plugin_version"] or ops.get("device_plugin")
    return prov


def write(results_dir: str | Path, prov: dict[str, Any]) -> Path:
    path = Path(results_dir) / FILENAME
    path.write_text(json.dumps(prov, indent=2, sort_keys=False, default=str) + "\n")
    return path


def load(results_dir: str | Path) -> dict[str, Any] | None:
    """The provenance of a results folder (None if it has none); a foreign schema is a UserError."""
    path = Path(results_dir) / FILENAME
    if not path.exists():
        return None
    try:
        prov = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}); re-run the sweep "
                        "or delete the file") from exc
    schema = prov.get("schema") if isinstance(prov, dict) else None
    if schema != SCHEMA:
        raise UserError(f"{path} has schema {schema!r}; this sharebench reads {SCHEMA!r}: "
                        "rebuild it with a matching sharebench version")
    return prov


def summary_rows(prov: dict[str, Any]) -> list[tuple[str, str]]:
    """(what, value) rows for the report, in reading order; unknowns say why."""
    def v(x: Any) -> str:
        return "—" if x is None or x == "" else str(x)

    rows: list[tuple[str, str]] = []
    dev = prov.get("device") or {}
    rows.append(("device", f"{v(dev.get('name'))} ({v(dev.get('kind'))}, {v(dev.get('backend'))})"))
    gpu = prov.get("gpu")
    if gpu is not None:
        if not gpu.get("available"):
            rows.append(("GPU (NVML)", f"not available: {v(gpu.get('reason'))}"))
        else:
            rows += [("GPU model", f"{v(gpu.get('name'))} [{v(gpu.get('model_key'))}, {v(gpu.get('sms'))} SMs]"),
                     ("GPU UUID", v(gpu.get("uuid"))),
                     ("driver / CUDA (driver API)", f"{v(gpu.get('driver_version'))} / {v(gpu.get('cuda_driver_version'))}")]
            mig = gpu.get("mig_mode") or {}
            insts = gpu.get("mig_instances") or []
            layout = ", ".join(f"GI {i.get('gpu_instance_id')}: {v(i.get('profile'))} ({v(i.get('sms'))} SMs)"
                               for i in insts)
            rows.append(("MIG", f"{v(mig.get('current'))}" + (f"; {layout}" if layout else "")))
    if prov.get("cuda_runtime_version"):
        rows.append(("CUDA runtime (CuPy)", prov["cuda_runtime_version"]))
    if prov.get("opencl"):
        rows.append(("OpenCL platform / device", f"{v(prov['opencl'].get('platform'))} / {v(prov['opencl'].get('device'))}"))
    libs = prov.get("libraries") or {}
    rows.append(("xsuite / xtrack / xobjects / xpart",
                 " / ".join(v(libs.get(k)) for k in ("xsuite", "xtrack", "xobjects", "xpart"))))
    sb = prov.get("sharebench") or {}
    commit = sb.get("git_commit")
    rows.append(("sharebench", f"{v(sb.get('version'))}" + (f", commit {commit[:12]}" if commit else "")
                 + (" (uncommitted changes)" if sb.get("git_dirty") else "")))
    host = prov.get("host") or {}
    rows.append(("host", f"{v(host.get('hostname'))}: {v(host.get('cpu_model'))}, {v(host.get('cpu_logical'))} "
                 f"logical cores, {v(host.get('os'))}"))
    cl = prov.get("cluster") or {}
    if cl.get("in_cluster") or cl.get("node") or cl.get("api"):
        rows.append(("cluster node", v(cl.get("node"))))
        rows.append(("gpu-operator / device-plugin",
                     f"{v(cl.get('gpu_operator_version'))} / {v(cl.get('device_plugin_version'))}"))
        if (cl.get("api") or {}).get("error"):
            rows.append(("Kubernetes API", f"not read: {cl['api']['error']}"))
    cmd = prov.get("command")
    rows.append(("command", " ".join(map(str, cmd)) if isinstance(cmd, (list, tuple)) else v(cmd)))
    rows.append(("config hash (SHA-256)", v(prov.get("config_hash"))))
    rows.append(("recorded (UTC)", v(prov.get("created_utc"))))
    return rows


def report_section(results_dir: Path, tables: dict[str, Any]) -> dict[str, Any]:
    """Report section: where and with what this results folder was measured."""
    prov = load(results_dir)
    title = "Provenance"
    if prov is None:
        note = f"No {FILENAME} in this results folder: the run's context was not recorded."
        return {"title": title, "markdown": note + "\n", "html": f"<p>{html.escape(note)}</p>", "images": []}
    rows = summary_rows(prov)
    md = ["| what | value |", "|---|---|"]
    md += [f"| {k} | {val.replace('|', '/')} |" for k, val in rows]
    md.append("")
    md.append(f"Full record: `{FILENAME}`.")
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(val)}</td></tr>" for k, val in rows)
    h = (f"<table class=\"provenance\">{body}</table>"
         f"<p>Full record: <code>{FILENAME}</code>.</p>")
    return {"title": title, "markdown": "\n".join(md) + "\n", "html": h, "images": []}
