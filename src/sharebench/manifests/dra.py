"""Dynamic Resource Allocation: the sharing of a cell as a ResourceClaim for NVIDIA's DRA driver.

With DRA (``resource.k8s.io/v1``, GA in Kubernetes 1.34) sharing is configured per claim, not per
node: a cell's replica pods share one ResourceClaim for one GPU (device class ``gpu.nvidia.com``)
whose opaque config, for driver ``gpu.nvidia.com``, is a ``GpuConfig``
(``resource.nvidia.com/v1beta1``) carrying the mode's sharing:

* ``exclusive``: no sharing config (one pod holds the claim);
* ``timeslice:N[/INTERVAL]``: ``strategy: TimeSlicing``, ``timeSlicingConfig.interval`` =
  Default/Short/Medium/Long when the mode names one (the driver applies it with
  ``nvidia-smi compute-policy --set-timeslice``);
* ``mps:N[@PCT]``: ``strategy: MPS``, ``mpsConfig.defaultActiveThreadPercentage`` (PCT, else
  100) and ``defaultPinnedDeviceMemoryLimit`` = the GPU's memory / N when the GPU model is known;
* ``mig:LAYOUT`` (one profile): a MIG device of device class ``mig.nvidia.com`` selected by its
  ``profile`` attribute; each replica pod gets its own claim from the template.

The driver's TimeSlicingSettings and MPSSupport feature gates are alpha and off by default, and
its GPU kubelet plugin is off by default: :func:`helm_values` turns them on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sharebench.errors import UserError
from sharebench.gpus import gpu_model, layout_profiles
from sharebench.manifests.names import NODE_ACCESS, RUN_NAMESPACE, SERVICE_ACCOUNT, metadata
from sharebench.modes import BASELINE, KINDS, Mode, parse_mode

API_VERSION = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
CONFIG_API = "resource.nvidia.com/v1beta1"
REQUEST = "gpu"
# the account a run's pods use in agent mode: a Kubeflow profile's runs run as its ``default-editor``
# (``sharebench submit --service-account`` another one: render with ``run_account`` set to it)
RUN_ACCOUNT = "default-editor"
CLAIMS_ROLE = "sharebench-claims"
FEATURE_GATES = {"TimeSlicingSettings": True, "MPSSupport": True}
# the claim templates manifests/dra/ carries: the modes a DRA sweep is expected to use
TEMPLATE_MODES = (
    BASELINE,
    *(f"timeslice:{n}{i}" for n in (2, 4, 8) for i in ("", "/default", "/short", "/medium", "/long")),
    "mps:2",
    "mps:4",
)


def _mode(mode: Mode | str) -> Mode:
    return parse_mode(mode) if isinstance(mode, str) else mode


def timeslice_sharing(m: Mode, gpu: str) -> dict[str, Any]:
    """``strategy: TimeSlicing``, with the mode's interval when it names one."""
    sharing: dict[str, Any] = {"strategy": "TimeSlicing"}
    if m.interval is not None:
        sharing["timeSlicingConfig"] = {"interval": m.interval.capitalize()}
    return sharing


def mps_sharing(m: Mode, gpu: str) -> dict[str, Any]:
    """``strategy: MPS``: the thread share (else 100) and, the GPU known, its memory / N each."""
    mps: dict[str, Any] = {"defaultActiveThreadPercentage": m.thread_pct or 100}
    if gpu:
        share_mib = int(gpu_model(gpu).mem_gb * 1024) // int(m.replicas or 1)
        mps["defaultPinnedDeviceMemoryLimit"] = f"{share_mib}Mi"
    return {"strategy": "MPS", "mpsConfig": mps}


# the GpuConfig sharing of each device-plugin sharing strategy (KindSpec.plugin_sharing)
DRA_SHARING: dict[str, Callable[[Mode, str], dict[str, Any]]] = {
    "time-slicing": timeslice_sharing,
    "mps": mps_sharing,
}


def check_dra_mode(m: Mode) -> None:
    """A one-line UserError for a kind the dra placement cannot claim (a local-only one)."""
    spec = m.spec
    if spec.local_only or not (spec.plugin_sharing in DRA_SHARING or spec.family in ("baseline", "instances")):
        cpu = "CPU-only " if spec.device_class == "cpu" else ""
        takes = ", ".join(s.grammar for s in KINDS.values() if not s.local_only)
        raise UserError(f"{m.label} is a {cpu}local mode; the dra placement takes {takes} (MIG: one profile)")


def gpu_config(mode: Mode | str, gpu: str = "") -> dict[str, Any] | None:
    """The ``GpuConfig`` opaque parameters of a mode (None: the mode needs no sharing config)."""
    m = _mode(mode)
    check_dra_mode(m)
    strategy = m.spec.plugin_sharing
    if not strategy:  # the baseline and MIG: the claim itself is the whole device or instance
        return None
    return {"apiVersion": CONFIG_API, "kind": "GpuConfig", "sharing": DRA_SHARING[strategy](m, gpu)}


def mig_profile(mode: Mode, gpu: str) -> str:
    """The one MIG profile of a mig mode's layout (``1g.18gb``), or a one-line refusal."""
    if not gpu:
        raise UserError(f"{mode.label} needs gpu_model to know the MIG profile to claim")
    names = sorted({p.name for p in layout_profiles(gpu, mode.layout or "")})
    if len(names) != 1:
        raise UserError(
            f"{mode.label} on {gpu} mixes MIG profiles ({', '.join(names) or 'none'}); the dra "
            "placement claims one profile: use mig:1g, mig:7g or another one-profile layout"
        )
    return names[0]


def claim_spec(mode: Mode | str, gpu: str = "") -> dict[str, Any]:
    """The ResourceClaim ``spec`` of a mode: one device, and the mode's GpuConfig for it."""
    m = _mode(mode)
    check_dra_mode(m)
    exactly: dict[str, Any] = {"deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": 1}
    if m.spec.device_instances:
        profile = mig_profile(m, gpu)
        exactly = {
            "deviceClassName": MIG_CLASS,
            "allocationMode": "ExactCount",
            "count": 1,
            "selectors": [{"cel": {"expression": f"device.attributes['{DRIVER}'].profile == '{profile}'"}}],
        }
    spec: dict[str, Any] = {"devices": {"requests": [{"name": REQUEST, "exactly": exactly}]}}
    config = gpu_config(m, gpu)
    if config is not None:
        spec["devices"]["config"] = [{"requests": [REQUEST], "opaque": {"driver": DRIVER, "parameters": config}}]
    return spec


def object_name(mode: Mode | str) -> str:
    """A DNS-1123 name for a mode: ``timeslice:2/long`` -> ``sharebench-timeslice-2-long``."""
    label = _mode(mode).label
    return "sharebench-" + label.replace("@", "-at-").replace(":", "-").replace("/", "-").replace(".", "-")


def claim_template(mode: Mode | str, namespace: str = RUN_NAMESPACE, gpu: str = "") -> dict[str, Any]:
    m = _mode(mode)
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": metadata(object_name(m), namespace, **{"sharebench.io/mode": _label_value(m)}),
        "spec": {"spec": claim_spec(m, gpu)},
    }


def claim(
    mode: Mode | str, name: str, namespace: str = RUN_NAMESPACE, gpu: str = "", labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """The ResourceClaim one cell's replica pods share."""
    m = _mode(mode)
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": metadata(name, namespace, **{"sharebench.io/mode": _label_value(m), **(labels or {})}),
        "spec": claim_spec(m, gpu),
    }


def _label_value(m: Mode) -> str:
    """A label value for the mode (``timeslice-2-long``)."""
    return object_name(m).removeprefix("sharebench-")


def helm_values() -> dict[str, Any]:
    """NVIDIA DRA driver Helm values: the GPU kubelet plugin on, the sharing feature gates on."""
    return {
        "gpuResourcesEnabledOverride": True,  # the chart refuses GPU resources without it
        "resources": {"gpus": {"enabled": True}, "computeDomains": {"enabled": False}},
        "featureGates": dict(FEATURE_GATES),
    }


def claims_subject(run_namespace: str, node_access: str = "agent", run_account: str = RUN_ACCOUNT) -> dict[str, str]:
    """Who creates a dra cell's claims: the run's own account (its ``claim_cell`` step runs as it). In agent
    mode that is ``run_account`` (the node account does not exist in the run namespace); in direct mode
    the run is submitted as the node account itself."""
    if node_access not in NODE_ACCESS:
        raise UserError(f"node access {node_access!r} is not one of {', '.join(NODE_ACCESS)}")
    name = run_account if node_access == "agent" else SERVICE_ACCOUNT
    return {"kind": "ServiceAccount", "name": name, "namespace": run_namespace}


def rbac_objects(
    run_namespace: str = RUN_NAMESPACE, node_access: str = "agent", run_account: str = RUN_ACCOUNT
) -> list[tuple[str, dict]]:
    """The run's own service account may create, read and delete the claims of its cells (and read
    the templates they are made from) in the run namespace; nothing cluster-wide, no node right."""
    name = CLAIMS_ROLE
    subject = claims_subject(run_namespace, node_access, run_account)
    return [
        (
            f"0100_role_{name}.yaml",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": metadata(name, run_namespace),
                "rules": [
                    {
                        "apiGroups": ["resource.k8s.io"],
                        "resources": ["resourceclaims"],
                        "verbs": ["create", "get", "list", "watch", "delete"],
                    },
                    {
                        "apiGroups": ["resource.k8s.io"],
                        "resources": ["resourceclaimtemplates"],
                        "verbs": ["get", "list"],
                    },
                ],
            },
        ),
        (
            f"0110_rolebinding_{name}.yaml",
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": metadata(name, run_namespace),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [subject],
            },
        ),
    ]


def objects(
    run_namespace: str = RUN_NAMESPACE, gpu: str = "H200", node_access: str = "agent", run_account: str = RUN_ACCOUNT
) -> list[tuple[str, dict]]:
    """Everything under manifests/dra/: RBAC for the run's claims, then one claim template per mode."""
    out = rbac_objects(run_namespace, node_access, run_account)
    for i, label in enumerate(TEMPLATE_MODES):
        t = claim_template(label, run_namespace, gpu)
        out.append((f"{1000 + i:04d}_resourceclaimtemplate_{t['metadata']['name']}.yaml", t))
    return out
