"""The names sharebench gives its Kubernetes objects, and the label that marks its pods."""

import re

from sharebench.errors import UserError

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # a namespace's name (RFC 1123 label)

OPERATOR_NAMESPACE = "gpu-operator"  # the NVIDIA gpu-operator's namespace
RUN_NAMESPACE = "sharebench"  # where the pipeline's pods and the service account live
SYSTEM_NAMESPACE = "sharebench-system"  # sharebench's own: the per-node Leases (one reconfiguration per node)
MONITORING_NAMESPACE = "monitoring"  # kube-prometheus-stack and its Grafana
# the node account: in agent mode (the default) it lives in SYSTEM_NAMESPACE and only the node agent
# (AGENT_DEPLOYMENT) runs as it; in direct mode (a single-admin cluster) it lives in the run namespace
SERVICE_ACCOUNT = "sharebench-node"
NODE_ACCESS = ("agent", "direct")
AGENT_DEPLOYMENT = "sharebench-node-agent"
# the site's offer, in SYSTEM_NAMESPACE (submitters cannot write there): keys node.<name> (a node offered),
# image-allow (prefixes) and run-namespaces (where the agent takes requests); the admission policy's params
OFFER_CONFIGMAP = "sharebench-offer"
OFFER_NODE_PREFIX = "node."
OFFER_IMAGE_ALLOW_KEY = "image-allow"
OFFER_RUN_NAMESPACES_KEY = "run-namespaces"
# where the agent takes requests: pods a run namespace holds that claim a run (KFP's label pipeline/runid)
# may be created only by these users (the workflow controller; the run-pods admission policy's params)
OFFER_POD_CREATORS_KEY = "run-pod-creators"
WORKFLOW_CONTROLLER = "system:serviceaccount:kubeflow:argo"  # Kubeflow's Argo workflow controller
RUN_LABEL = "pipeline/runid"  # KFP's label on every pod of a run
# a sharing request a pipeline step files in its run namespace: a SharingRequest (a CRD whose status
# subresource only the agent may write: the kubelet's and controllers' rule, status is the owner's)
REQUEST_GROUP = "sharebench.io"
REQUEST_VERSION = "v1alpha1"
REQUEST_PLURAL = "sharingrequests"
REQUEST_KIND = "SharingRequest"
# the role a site binds to its runs' account in the run namespace: file requests, read one by name
REQUESTER_ROLE = "sharebench-node-requester"
# the proof a request carries: a projected service-account token of the filing pod, with this audience
# (usable against the agent only), mounted by the PodDefault AGENT_TOKEN_PODDEFAULT into the pods that
# carry the label NODE_STEP_LABEL (its value: the one action the pod may request, apply or restore)
AGENT_AUDIENCE = "sharebench.io/node-agent"
AGENT_TOKEN_PODDEFAULT = "sharebench-agent-token"
AGENT_TOKEN_DIR = "/var/run/secrets/sharebench.io/agent"
AGENT_TOKEN_EXPIRATION_S = 3600
NODE_STEP_LABEL = "sharebench.io/node-step"
POD_NAME_ENV, POD_UID_ENV = "SHAREBENCH_POD_NAME", "SHAREBENCH_POD_UID"  # the downward API, in node steps
# on a node while a Lease holds it: the holder (the admission policy lets only such a node change)
NODE_CLAIM_ANNOTATION = "sharebench.io/claimed-by"
# the replica and analysis tasks' account: no API rights, no mounted token
REPLICA_SERVICE_ACCOUNT = "sharebench-replica"
# the node account's token as a Secret of the run namespace: only the node steps of a pipeline mount it
# (at NODE_TOKEN_DIR), so the run's other pods never hold node rights
NODE_TOKEN_SECRET = "sharebench-node-token"
NODE_TOKEN_DIR = "/var/run/secrets/sharebench/node"
DEVICE_PLUGIN_CONFIGMAP = "sharebench-device-plugin-config"
MIG_STRATEGIES = ("single", "mixed")  # the gpu-operator's MIG strategies (manifests.operator)
DEFAULT_MIG_STRATEGY = "mixed"  # explicit nvidia.com/mig-<profile> resources
MIG_PARTED_CONFIGMAP = "sharebench-mig-parted-config"
DCGM_METRICS_CONFIGMAP = "sharebench-dcgm-metrics"
PRIOR_STATE_ANNOTATION = "sharebench.io/prior-state"  # the node's state before sharebench's first change
# its HMAC-SHA256 under the key in the Secret STATE_KEY_SECRET (SYSTEM_NAMESPACE): restore applies only a signed state
PRIOR_STATE_SIGNATURE_ANNOTATION = "sharebench.io/prior-state-signature"
STATE_KEY_SECRET = "sharebench-state-key"
# on a released Lease (its holder emptied, never deleted): who held it last
LEASE_RELEASED_BY_ANNOTATION = "sharebench.io/released-by"
# the node labels sharebench sets: the device-plugin entry and the MIG layout (and the MIG
# manager's state label, which it drops when the layout changes)
SHARING_LABELS = ("nvidia.com/device-plugin.config", "nvidia.com/mig.config", "nvidia.com/mig.config.state")
MIG_STATE_LABEL = "nvidia.com/mig.config.state"  # the MIG manager's: sharebench only ever drops it
ENTRY_PREFIX = "sharebench-"  # sharebench's own entries in the site's device-plugin ConfigMap
# the label a site sets on the nodes sharebench may reconfigure (the admission policy refuses the others)
BENCHMARK_LABEL = ("sharebench.io/benchmark", "allowed")
# every object and pod of sharebench carries it; the node step spares pods that have it
PART_OF_LABEL = ("app.kubernetes.io/part-of", "sharebench")


def metadata(name: str, namespace: str | None = None, **labels: str) -> dict:
    """``metadata`` of a sharebench object: its name, namespace (if namespaced) and labels."""
    meta: dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {PART_OF_LABEL[0]: PART_OF_LABEL[1], **labels}
    return meta


def check_namespace(ns: str) -> str:
    """A namespace's name: a one-line UserError unless it is an RFC 1123 label."""
    if not DNS_LABEL.fullmatch(ns):
        raise UserError(
            f"namespace {ns!r} is not a valid Kubernetes name; allowed: lowercase letters, "
            "digits and '-', at most 63 characters"
        )
    return ns
