"""manifests/: in sync with the render, valid Kubernetes objects, valid operator configs, least privilege."""

from __future__ import annotations

import json
import re

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import latest_version, major_minor

from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.gpus import GPU_MODELS, resolve_layout
from sharebench.manifests import access, names, operator, render
from support import operator_schemas as schemas
from support.paths import ROOT

MANIFESTS = ROOT / "manifests"
RENDER = render.render()
K8S_VERSIONS = ["1.33", major_minor(latest_version())]  # a current one, and the newest shipped (offline)
# ServiceMonitor is a CRD of kube-prometheus-stack: kubernetes-validate has no schema for it
# (test_monitoring_manifests checks it field by field)
CRD_GROUPS = ("monitoring.coreos.com/",)
# resource.k8s.io/v1 (DRA claim templates) is GA from 1.34: tests/manifests/test_dra_manifests.py checks them
# against >= 1.34 schemas
CRD_GROUPS += ("resource.k8s.io/",)
# Kubeflow's PodDefault (issue 46): test_the_agent_token_poddefault checks its volume and mount as a Pod's
CRD_GROUPS += ("kubeflow.org/",)
OBJECTS = [(rel, obj) for rel, obj in render.kubernetes_objects(RENDER) if not obj["apiVersion"].startswith(CRD_GROUPS)]


def load(rel: str):
    return yaml.safe_load(RENDER[rel])


DP_CM = load(f"operator/0100_configmap_{names.DEVICE_PLUGIN_CONFIGMAP}.yaml")
MIG_CM = load(f"operator/0200_configmap_{names.MIG_PARTED_CONFIGMAP}.yaml")
MIG_CFG = yaml.safe_load(MIG_CM["data"][operator.MIG_PARTED_KEY])
VALUES = load("helm/gpu-operator-values.yaml")


# ---------------------------------------------------------------- committed files
def test_committed_manifests_match_the_render():
    assert render.check(MANIFESTS) == [], "run: sharebench manifests render --out manifests"


def test_layout_one_object_per_numbered_file():
    for rel, text in RENDER.items():
        folder, name = rel.split("/")
        assert folder in render.OWNED_DIRS and name.endswith(".yaml")
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
        assert len(docs) == 1, rel
        if folder == "helm":
            continue
        m = re.fullmatch(r"(\d{4})_([a-z]+)_(.+)\.yaml", name)
        assert m, f"{rel}: want NNNN_<kind>_<name>.yaml"
        assert m.group(2) == docs[0]["kind"].lower() and m.group(3) == docs[0]["metadata"]["name"], rel


# ---------------------------------------------------------------- Kubernetes schemas
@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("rel, obj", OBJECTS, ids=[rel for rel, _ in OBJECTS])
def test_objects_validate_against_kubernetes_openapi(rel, obj, version):
    assert kubernetes_validate.validate(obj, version, strict=True) == version


@pytest.mark.parametrize(
    "broken, where",
    [
        ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": 1}}, "data.a"),
        (
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "x"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verb": ["get"]}],
            },
            "rules.0",
        ),
        ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x", "labelz": {}}}, "metadata"),
    ],
)
def test_kubernetes_validation_catches_broken_objects(broken, where):
    with pytest.raises(kubernetes_validate.ValidationError) as exc:
        kubernetes_validate.validate(broken, K8S_VERSIONS[0], strict=True)
    assert ".".join(str(p) for p in exc.value.path).startswith(where)


# ---------------------------------------------------------------- operator configs
def test_device_plugin_entries():
    entries = DP_CM["data"]
    assert sorted(entries) == sorted(
        f"sharebench-{e}" for e in ["exclusive", "timeslice-2", "timeslice-4", "timeslice-8", "mps-2", "mps-4", "mps-8"]
    )
    for name, text in entries.items():
        cfg = yaml.safe_load(text)
        schemas.validate("device-plugin config", cfg, name)
        if name == "sharebench-exclusive":
            assert cfg == {"version": "v1"}
            continue
        _, kind, n = name.split("-")
        key = {"timeslice": "timeSlicing", "mps": "mps"}[kind]
        assert cfg["sharing"][key]["resources"] == [{"name": "nvidia.com/gpu", "replicas": int(n)}]
        assert cfg["sharing"][key]["renameByDefault"] is False


def test_mig_parted_config_covers_every_layout_of_every_model():
    schemas.validate("mig-parted config", MIG_CFG)
    assert schemas.mig_parted_problems(MIG_CFG) == []
    configs = MIG_CFG["mig-configs"]
    assert configs["all-disabled"] == [{"devices": "all", "mig-enabled": False}]
    for model in GPU_MODELS.values():
        for short in ("1g", "2g", "3g", "4g", "7g"):
            layout = resolve_layout(model, short)
            items = [i for i in configs[layout] if operator.PCI_DEVICE_IDS[model.key][0] in i["device-filter"]]
            assert len(items) == 1, (model.key, layout)
            prof = model.profile(layout[4:])
            assert items[0]["mig-devices"] == {prof.name: prof.max_count}


@pytest.mark.parametrize(
    "model, devices",
    [
        ("A100-40GB", {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
        ("H100-80GB", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
        ("H200", {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}),
    ],
)
def test_mixed_profile_layouts_beside_the_single_ones(model, devices):
    items = [
        i for i in MIG_CFG["mig-configs"]["all-balanced"] if operator.PCI_DEVICE_IDS[model][0] in i["device-filter"]
    ]
    assert [i["mig-devices"] for i in items] == [devices]  # and mig_parted_problems found it fits


def test_shared_layout_name_has_one_item_per_model():
    counts = {tuple(i["device-filter"]): i["mig-devices"]["1g.10gb"] for i in MIG_CFG["mig-configs"]["all-1g.10gb"]}
    assert counts == {
        operator.PCI_DEVICE_IDS["A100-40GB"]: 4,
        operator.PCI_DEVICE_IDS["A100-80GB"]: 7,
        operator.PCI_DEVICE_IDS["H100-80GB"]: 7,
    }


def test_helm_values_change_none_of_the_sites_defaults():
    schemas.validate("gpu-operator Helm values", VALUES)
    assert VALUES["mig"]["strategy"] == "mixed"
    # no repointing: a `helm upgrade --reuse-values -f` keeps the site's ConfigMaps and default entries
    assert "config" not in VALUES.get("devicePlugin", {}) and "config" not in VALUES["migManager"]
    text = (MANIFESTS / "helm/gpu-operator-values.yaml").read_text()
    assert f"--version {operator.GPU_OPERATOR_CHART_VERSION}" in text and operator.GPU_OPERATOR_CHART in text


def test_helm_values_point_dcgm_exporter_at_the_monitoring_metrics():
    """dcgm-exporter must read the metrics ConfigMap in manifests/monitoring/ (profiling metrics on)."""
    metrics_cm = yaml.safe_load(next((ROOT / "manifests" / "monitoring").glob("*configmap*dcgm*.yaml")).read_text())
    dcgm = VALUES["dcgmExporter"]
    assert dcgm["config"]["name"] == metrics_cm["metadata"]["name"]
    env = {e["name"]: e["value"] for e in dcgm["env"]}
    csv_file = env["DCGM_EXPORTER_COLLECTORS"].rsplit("/", 1)[1]
    assert csv_file in metrics_cm["data"] and "DCGM_FI_PROF_SM_ACTIVE" in metrics_cm["data"][csv_file]
    assert int(env["DCGM_EXPORTER_INTERVAL"]) <= 1000


@pytest.mark.parametrize(
    "kind, doc, problem",
    [
        ("device-plugin config", {"version": "v2"}, "version: 'v1' was expected"),
        (
            "device-plugin config",
            {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 0}]}}},
            "sharing.timeSlicing.resources.0.replicas: 0 is less than the minimum of 1",
        ),
        (
            "device-plugin config",
            {"version": "v1", "sharing": {"timeslicing": {"resources": []}}},
            "sharing: Additional properties",
        ),
        (
            "device-plugin config",
            {
                "version": "v1",
                "sharing": {
                    "timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]},
                    "mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]},
                },
            },
            "sharing: ",
        ),
        (
            "device-plugin config",
            {"version": "v1", "sharing": {"mps": {"resources": [{"name": "amd.com/gpu", "replicas": 2}]}}},
            "sharing.mps.resources.0.name: 'amd.com/gpu' does not match",
        ),
        (
            "device-plugin config",
            {
                "version": "v1",
                "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2, "devices": "some"}]}},
            },
            "sharing.mps.resources.0.devices",
        ),
        (
            "mig-parted config",
            {
                "version": "v1",
                "mig-configs": {"x": [{"devices": "all", "mig-enabled": False, "mig-devices": {"1g.5gb": 7}}]},
            },
            "mig-configs.x.0",
        ),
        (
            "mig-parted config",
            {"version": "v1", "mig-configs": {"x": [{"devices": "all", "mig-enabled": True}]}},
            "'mig-devices' is a required property",
        ),
        (
            "mig-parted config",
            {
                "version": "v1",
                "mig-configs": {
                    "x": [
                        {
                            "device-filter": "20B010DE",
                            "devices": "all",
                            "mig-enabled": True,
                            "mig-devices": {"1g.5gb": 7},
                        }
                    ]
                },
            },
            "mig-configs.x.0.device-filter",
        ),
        (
            "mig-parted config",
            {
                "version": "v1",
                "mig-configs": {"x": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g": 7}}]},
            },
            "mig-configs.x.0.mig-devices",
        ),
        (
            "gpu-operator Helm values",
            {**operator.helm_values(), "mig": {"strategy": "none"}},
            "mig.strategy: 'none' is not one of",
        ),
        (
            "gpu-operator Helm values",
            {**operator.helm_values(), "devicePlugin": {"config": {"name": "x"}}},
            "devicePlugin.config: 'default' is a required property",
        ),
    ],
)
def test_operator_schemas_reject_bad_configs(kind, doc, problem):
    with pytest.raises(UserError) as exc:
        schemas.validate(kind, doc)
    assert str(exc.value).startswith(f"invalid {kind}: ") and problem in str(exc.value)


def test_schemas_are_valid_json_schemas():
    for schema in schemas.SCHEMAS.values():
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(
    "item, problems",
    [
        (
            {"device-filter": ["0x233510DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 8}},
            ["8 x 1g.18gb > 7 on H200", "8 compute slices > 7 on H200"],
        ),
        (
            {
                "device-filter": "0x20B010DE",
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"4g.20gb": 1, "7g.40gb": 1},
            },
            ["11 compute slices > 7 on A100-40GB"],
        ),
        (
            {"device-filter": ["0x233010DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
            ["profile 1g.5gb does not exist on H100-80GB"],
        ),
        (
            {
                "device-filter": ["0x233010DE"],
                "devices": "all",
                "mig-enabled": True,
                "mig-devices": {"3g.40gb": 1, "4g.40gb": 1},
            },
            [],
        ),
    ],
    ids=["too-many", "too-many-slices", "foreign-profile", "fits"],
)
def test_mig_parted_semantics(item, problems):
    got = schemas.mig_parted_problems({"version": "v1", "mig-configs": {"bad": [item]}})
    assert got == [f"bad[0]: {p}" for p in problems]


# ---------------------------------------------------------------- RBAC
def test_rbac_least_privilege():
    rules = {
        obj["kind"]: obj.get("rules")
        for _, obj in access.rbac_objects()
        if obj["metadata"]["name"] == names.SERVICE_ACCOUNT
    }
    leases = [
        obj
        for _, obj in access.rbac_objects()
        if obj["kind"] == "Role"
        and obj["metadata"]["namespace"] == names.SYSTEM_NAMESPACE
        and obj["metadata"]["name"] != f"{names.SERVICE_ACCOUNT}-offer"
    ]
    # issue 27: no delete on Leases (a release empties the holder); the signing key read by name only
    assert [o["rules"] for o in leases] == [
        [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "create", "update"]}],
        [
            {
                "apiGroups": [""],
                "resources": ["secrets"],
                "resourceNames": [names.STATE_KEY_SECRET],
                "verbs": ["get"],
            },
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
        ],
    ]
    # no other rule anywhere grants secrets, and none binds the replica account
    for _, obj in access.rbac_objects():
        secret_rules = [r for r in obj.get("rules", []) if "secrets" in r["resources"]]
        assert not secret_rules or obj["metadata"]["namespace"] == names.SYSTEM_NAMESPACE
        assert names.REPLICA_SERVICE_ACCOUNT not in json.dumps(obj.get("subjects", []))
    assert rules["ClusterRole"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    ]
    assert rules["Role"] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [names.DEVICE_PLUGIN_CONFIGMAP],
            "verbs": ["get", "update"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]},
    ]
    for _, obj in OBJECTS:
        for rule in obj.get("rules", []):
            assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]


def test_requests_rbac_status_is_the_agents_alone():
    """Issue 46: the run's account files a SharingRequest and reads one by name (no list: another run's
    token stays unseen; no update or delete); only the node account writes its status, and reviews tokens."""
    rules = {o["metadata"]["name"]: o["rules"] for _, o in access.rbac_objects() if o["kind"].endswith("Role")}
    group, plural = names.REQUEST_GROUP, names.REQUEST_PLURAL
    assert rules[names.REQUESTER_ROLE] == [{"apiGroups": [group], "resources": [plural], "verbs": ["create", "get"]}]
    assert rules[f"{names.SERVICE_ACCOUNT}-requests"] == [
        {"apiGroups": [group], "resources": [plural], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [group], "resources": [f"{plural}/status"], "verbs": ["update", "patch"]},
    ]
    assert rules[f"{names.SERVICE_ACCOUNT}-token-reviews"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}
    ]
    granted = [r for _, o in access.rbac_objects() for r in o.get("rules", []) if f"{plural}/status" in r["resources"]]
    assert len(granted) == 1
    assert not [n for n, _ in access.rbac_objects(node_access="direct") if "token-reviews" in n]


def test_the_request_crd_keeps_status_apart_and_spec_immutable():
    crd = load(f"agent/0050_customresourcedefinition_{names.REQUEST_PLURAL}.{names.REQUEST_GROUP}.yaml")
    (version,) = crd["spec"]["versions"]
    assert version["name"] == names.REQUEST_VERSION and version["subresources"] == {"status": {}}
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "a sharing request is immutable: file a new one"}
    ]
    assert set(spec["required"]) == {"action", "node", "image", "attempt", "token"}
    assert crd["spec"]["names"]["kind"] == names.REQUEST_KIND and crd["spec"]["scope"] == "Namespaced"


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_the_agent_token_poddefault(version):
    """Issue 46: the PodDefault mounts a projected token with the agent's audience into the node steps
    (label sharebench.io/node-step); its volume and mount are a valid Pod's."""
    pd = load(f"agent/0300_poddefault_{names.AGENT_TOKEN_PODDEFAULT}.yaml")
    assert pd["apiVersion"] == "kubeflow.org/v1alpha1" and pd["metadata"]["namespace"] == names.RUN_NAMESPACE
    assert pd["spec"]["selector"] == {"matchExpressions": [{"key": names.NODE_STEP_LABEL, "operator": "Exists"}]}
    (volume,) = pd["spec"]["volumes"]
    ((source,),) = [volume["projected"]["sources"]]
    assert source["serviceAccountToken"]["audience"] == names.AGENT_AUDIENCE
    assert 600 <= source["serviceAccountToken"]["expirationSeconds"] <= 86400  # the API server's bounds
    container = {"name": "step", "image": "x", "volumeMounts": pd["spec"]["volumeMounts"]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [container], "volumes": [volume]},
    }
    assert kubernetes_validate.validate(pod, version, strict=True) == version
    assert pd["spec"]["volumeMounts"][0]["mountPath"] == names.AGENT_TOKEN_DIR


def test_replica_account_has_no_token_and_no_rights():
    accounts = {o["metadata"]["name"]: o for _, o in access.rbac_objects() if o["kind"] == "ServiceAccount"}
    replica = accounts[names.REPLICA_SERVICE_ACCOUNT]
    assert replica["automountServiceAccountToken"] is False
    assert replica["metadata"]["namespace"] == names.RUN_NAMESPACE
    assert "automountServiceAccountToken" not in accounts[names.SERVICE_ACCOUNT]
    # issue 37, agent mode: the node account lives in sharebench's own namespace, no token of it anywhere
    assert accounts[names.SERVICE_ACCOUNT]["metadata"]["namespace"] == names.SYSTEM_NAMESPACE
    assert not [o for _, o in access.rbac_objects() if o["kind"] == "Secret"]
    # direct mode (a single-admin cluster): its token, for the pipeline's node steps to mount
    (token,) = [o for _, o in access.rbac_objects(node_access="direct") if o["kind"] == "Secret"]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["name"] == names.NODE_TOKEN_SECRET
    assert token["metadata"]["namespace"] == names.RUN_NAMESPACE
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": names.SERVICE_ACCOUNT}


def test_rbac_bindings_point_at_the_service_account():
    objs = {obj["kind"]: obj for _, obj in access.rbac_objects() if obj["metadata"]["name"] == names.SERVICE_ACCOUNT}
    sa = objs["ServiceAccount"]["metadata"]
    assert sa["namespace"] == names.SYSTEM_NAMESPACE
    for kind, role in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        b = objs[kind]
        assert b["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role,
            "name": objs[role]["metadata"]["name"],
        }
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}]
    assert (
        objs["Role"]["metadata"]["namespace"]
        == objs["RoleBinding"]["metadata"]["namespace"]
        == names.OPERATOR_NAMESPACE
    )


# ---------------------------------------------------------------- CLI
def test_cli_render_for_one_gpu_then_check(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["manifests", "render", "--gpu", "H200", "--out", str(out)]) == 0
    cfg = yaml.safe_load(
        yaml.safe_load((out / "operator/0200_configmap_sharebench-mig-parted-config.yaml").read_text())["data"][
            "config.yaml"
        ]
    )
    filters = {f for items in cfg["mig-configs"].values() for i in items for f in i.get("device-filter", [])}
    assert filters == set(operator.PCI_DEVICE_IDS["H200"])
    assert sorted(cfg["mig-configs"]) == sorted(
        ["all-disabled", *operator.MIXED_LAYOUTS, *operator.mig_layouts(GPU_MODELS["H200"])]
    )
    capsys.readouterr()
    assert main(["manifests", "check", "--dir", str(out)]) == 1  # narrower than the default render
    assert "differs: operator/0200_configmap_sharebench-mig-parted-config.yaml" in capsys.readouterr().err


def test_cli_check_reports_drift(tmp_path, capsys):
    out = tmp_path / "m"
    assert main(["manifests", "render", "--out", str(out)]) == 0
    assert main(["manifests", "check", "--dir", str(out)]) == 0
    (out / "rbac/0200_clusterrole_sharebench-node.yaml").write_text("# hand edit\n")
    (out / "rbac/0900_extra.yaml").write_text("kind: Secret\n")
    (out / "namespace/0120_namespace_sharebench-system.yaml").unlink()
    (out / "dashboards").mkdir()
    (out / "dashboards/0100_other_area.yaml").write_text("kind: ServiceMonitor\n")  # not ours: ignored
    capsys.readouterr()
    assert main(["manifests", "check", "--dir", str(out)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[:3] == [
        "missing: namespace/0120_namespace_sharebench-system.yaml",
        "differs: rbac/0200_clusterrole_sharebench-node.yaml",
        "not rendered (stale or hand-made): rbac/0900_extra.yaml",
    ]
    # a render brings it back in sync and leaves other areas' folders alone
    assert main(["manifests", "render", "--out", str(out)]) == 0
    assert main(["manifests", "check", "--dir", str(out)]) == 0
    assert (out / "dashboards/0100_other_area.yaml").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["manifests", "render", "--gpu", "V100"], "sharebench: error: unknown GPU model 'V100'; known: "),
        (
            ["manifests", "check", "--dir", "/nonexistent/m"],
            "sharebench: error: manifests folder '/nonexistent/m' does not exist",
        ),
    ],
)
def test_cli_manifest_errors(capsys, tmp_path, argv, message):
    assert main(argv + (["--out", str(tmp_path)] if argv[1] == "render" else [])) == 2
    assert capsys.readouterr().err.startswith(message)


def test_render_for_other_namespaces(tmp_path):
    files = render.render(render.RenderOptions(operator_namespace="nvidia-gpu", run_namespace="kubeflow-user-a"))
    objs = dict(render.kubernetes_objects(files))
    # the profile's namespace is the profile controller's: no Namespace object for it
    assert not any(o["kind"] == "Namespace" and o["metadata"]["name"] == "kubeflow-user-a" for o in objs.values())
    assert objs["rbac/0100_serviceaccount_sharebench-node.yaml"]["metadata"]["namespace"] == names.SYSTEM_NAMESPACE
    assert (
        objs["rbac/0300_clusterrolebinding_sharebench-node.yaml"]["subjects"][0]["namespace"] == names.SYSTEM_NAMESPACE
    )
    # the agent takes requests in the run namespace, and reads its offer there
    assert objs["rbac/0250_role_sharebench-node-requests.yaml"]["metadata"]["namespace"] == "kubeflow-user-a"
    offer = objs["agent/0100_configmap_sharebench-offer.yaml"]["data"]
    assert offer[names.OFFER_RUN_NAMESPACES_KEY] == "kubeflow-user-a"
    direct = dict(
        render.kubernetes_objects(
            render.render(render.RenderOptions(run_namespace="kubeflow-user-a", node_access="direct"))
        )
    )
    assert direct["rbac/0100_serviceaccount_sharebench-node.yaml"]["metadata"]["namespace"] == "kubeflow-user-a"
    assert "agent/0200_deployment_sharebench-node-agent.yaml" not in direct
    for rel in (
        "rbac/0210_role_sharebench-node.yaml",
        "rbac/0310_rolebinding_sharebench-node.yaml",
        "operator/0100_configmap_sharebench-device-plugin-config.yaml",
    ):
        assert objs[rel]["metadata"]["namespace"] == "nvidia-gpu"
    for obj in objs.values():
        if not obj["apiVersion"].startswith(CRD_GROUPS):
            kubernetes_validate.validate(obj, K8S_VERSIONS[0], strict=True)
    with pytest.raises(UserError, match=r"namespace 'Kubeflow' is not a valid Kubernetes name"):
        render.render(render.RenderOptions(run_namespace="Kubeflow"))
