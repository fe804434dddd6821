"""The node agent's objects (agent mode): the sharing request's type, the site's offer and the agent's
Deployment (both in sharebench's own namespace, which submitters cannot write), and the PodDefault that
gives the pipeline's node steps the token that proves who they are.

* ``agent/0050_customresourcedefinition_sharingrequests.sharebench.io.yaml``: the ``SharingRequest``
  (``sharebench.io/v1alpha1``) a node step files in its run namespace. Its ``spec`` is immutable (a CEL
  rule of the CRD); its ``status`` is a subresource, so a create or an update of the request never sets
  it, and RBAC lets only the agent write it: the answer a step reads is the agent's (the kubelet's and
  controllers' rule: status is written by the owner of the object).
* ``agent/0100_configmap_sharebench-offer.yaml``: what the site offers. A key ``node.<name>`` per node
  sharebench may reconfigure (the admission policy's parameters, read by the API server), ``image-allow``
  (the prefixes of the images a run may use beside a reconfigured node), ``run-namespaces`` (where the
  agent takes sharing requests) and ``run-pod-creators`` (who may create a pod that claims a run: the
  workflow controller). Rendered from ``sharebench manifests render --offer-node NODE
  --image-allow PREFIX``; a site changes it by rendering again, never by hand.
* ``agent/0200_deployment_sharebench-node-agent.yaml``: ``sharebench node agent``, one replica (two
  agents would race for nothing: every change goes through the node's Lease), running as the node
  account, the only holder of its token.
* ``agent/0300_poddefault_sharebench-agent-token.yaml``: in the run namespace, Kubeflow's PodDefault
  (the admission webhook of a Kubeflow install, as its ``access-ml-pipeline`` PodDefault gives notebooks
  a token for the pipelines API) that mounts a projected service-account token with the agent's audience
  into every pod labelled ``sharebench.io/node-step`` (the pipeline's node steps). The kubelet issues it
  for that pod alone, bound to the pod (void once the pod is gone) and expiring; the agent reviews it
  with TokenReview, as Vault's Kubernetes auth does.
"""

from __future__ import annotations

from typing import Any

from sharebench import __version__
from sharebench.manifests.names import (
    AGENT_AUDIENCE,
    AGENT_DEPLOYMENT,
    AGENT_TOKEN_DIR,
    AGENT_TOKEN_EXPIRATION_S,
    AGENT_TOKEN_PODDEFAULT,
    NODE_STEP_LABEL,
    OFFER_CONFIGMAP,
    OFFER_IMAGE_ALLOW_KEY,
    OFFER_NODE_PREFIX,
    OFFER_POD_CREATORS_KEY,
    OFFER_RUN_NAMESPACES_KEY,
    REQUEST_GROUP,
    REQUEST_KIND,
    REQUEST_PLURAL,
    REQUEST_VERSION,
    SERVICE_ACCOUNT,
    SYSTEM_NAMESPACE,
    WORKFLOW_CONTROLLER,
    metadata,
)

AGENT_IMAGE = f"ghcr.io/sharebench/sharebench:{__version__}"  # components/image.py names the same image
OFFERED = "offered"


TOKEN_FILE = "token"  # in AGENT_TOKEN_DIR
TOKEN_VOLUME = "sharebench-agent-token"
ATTEMPT_PATTERN = "^[0-9a-f]{32}$"  # a request's attempt: a fresh 128-bit nonce in hex (its name says it too)


def served(run_namespaces: tuple[str, ...], node_access: str) -> tuple[str, ...]:
    """The run namespaces the agent serves: ``run_namespaces`` in agent mode, none in direct mode."""
    return run_namespaces if node_access == "agent" else ()


def offer_configmap(
    run_namespaces: tuple[str, ...],
    nodes: tuple[str, ...],
    image_allow: tuple[str, ...],
    pod_creators: tuple[str, ...] = (WORKFLOW_CONTROLLER,),
) -> dict:
    data = {f"{OFFER_NODE_PREFIX}{n}": OFFERED for n in sorted(set(nodes))}
    data[OFFER_IMAGE_ALLOW_KEY] = ",".join(image_allow)
    data[OFFER_RUN_NAMESPACES_KEY] = ",".join(run_namespaces)
    data[OFFER_POD_CREATORS_KEY] = ",".join(pod_creators)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(OFFER_CONFIGMAP, SYSTEM_NAMESPACE),
        "data": data,
    }


def deployment(image: str = AGENT_IMAGE) -> dict:
    labels = {"app.kubernetes.io/name": AGENT_DEPLOYMENT}
    container = {
        "name": "agent",
        "image": image,
        "command": ["sharebench", "node", "agent"],
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(AGENT_DEPLOYMENT, SYSTEM_NAMESPACE, **labels),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": SERVICE_ACCOUNT,
                    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [container],
                },
            },
        },
    }


def _string(max_length: int, **more: Any) -> dict:
    return {"type": "string", "maxLength": max_length, **more}


def request_crd() -> dict:
    """The SharingRequest type: an immutable spec a step files, a status only the agent writes."""
    spec = {
        "type": "object",
        "required": ["action", "node", "image", "attempt", "token"],
        "properties": {
            "action": {"type": "string", "enum": ["apply", "restore"]},
            "node": _string(253),
            "mode": _string(64),
            "gpuModel": _string(63),
            "run": _string(63),
            "image": _string(512),
            "attempt": _string(32, pattern=ATTEMPT_PATTERN),
            "token": _string(16384),
        },
        "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "a sharing request is immutable: file a new one"}
        ],
    }
    status = {
        "type": "object",
        "properties": {
            "phase": {"type": "string", "enum": ["Applied", "Restored", "Refused", "Failed"]},
            "message": _string(2048),
            "attempt": _string(32),
            "pod": _string(253),
            "podUID": _string(64),
            "run": _string(63),
            "answeredAt": _string(32),
            "result": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    columns = [("Action", ".spec.action"), ("Node", ".spec.node"), ("Phase", ".status.phase")]
    version = {
        "name": REQUEST_VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec, "status": status}}},
        "subresources": {"status": {}},
        "additionalPrinterColumns": [{"name": n, "type": "string", "jsonPath": p} for n, p in columns],
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata(f"{REQUEST_PLURAL}.{REQUEST_GROUP}"),
        "spec": {
            "group": REQUEST_GROUP,
            "scope": "Namespaced",
            "names": {"plural": REQUEST_PLURAL, "singular": "sharingrequest", "kind": REQUEST_KIND},
            "versions": [version],
        },
    }


def token_poddefault(run_namespace: str) -> dict:
    """Kubeflow's PodDefault: the node steps' projected token for the agent (audience, expiry, pod-bound)."""
    token = {"path": TOKEN_FILE, "expirationSeconds": AGENT_TOKEN_EXPIRATION_S, "audience": AGENT_AUDIENCE}
    return {
        "apiVersion": "kubeflow.org/v1alpha1",
        "kind": "PodDefault",
        "metadata": metadata(AGENT_TOKEN_PODDEFAULT, run_namespace),
        "spec": {
            "desc": "sharebench node steps: a token that proves to the node agent which pod files a request",
            "selector": {"matchExpressions": [{"key": NODE_STEP_LABEL, "operator": "Exists"}]},
            "volumes": [{"name": TOKEN_VOLUME, "projected": {"sources": [{"serviceAccountToken": token}]}}],
            "volumeMounts": [{"name": TOKEN_VOLUME, "mountPath": AGENT_TOKEN_DIR, "readOnly": True}],
        },
    }


def objects(
    run_namespaces: tuple[str, ...],
    nodes: tuple[str, ...] = (),
    image_allow: tuple[str, ...] = (),
    *,
    node_access: str = "agent",
    image: str = AGENT_IMAGE,
) -> list[tuple[str, dict]]:
    """(file name, object) of the offer and, in agent mode, the request type, the agent's Deployment and
    the node steps' PodDefault in each run namespace."""
    out = [(f"0100_configmap_{OFFER_CONFIGMAP}.yaml", offer_configmap(run_namespaces, nodes, image_allow))]
    if node_access == "agent":
        out.insert(0, (f"0050_customresourcedefinition_{REQUEST_PLURAL}.{REQUEST_GROUP}.yaml", request_crd()))
        out.append((f"0200_deployment_{AGENT_DEPLOYMENT}.yaml", deployment(image)))
        for i, ns in enumerate(sorted(run_namespaces)):
            out.append((f"03{i}0_poddefault_{AGENT_TOKEN_PODDEFAULT}.yaml", token_poddefault(ns)))
    return out
