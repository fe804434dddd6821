"""The node agent's objects (agent mode): the site's offer and the agent's Deployment, both in
sharebench's own namespace, which submitters cannot write.

* ``agent/0100_configmap_sharebench-offer.yaml``: what the site offers. A key ``node.<name>`` per node
  sharebench may reconfigure (the admission policy's parameters, read by the API server), ``image-allow``
  (the prefixes of the images a run may use beside a reconfigured node) and ``run-namespaces`` (where the
  agent takes sharing requests). Rendered from ``sharebench manifests render --offer-node NODE
  --image-allow PREFIX``; a site changes it by rendering again, never by hand.
* ``agent/0200_deployment_sharebench-node-agent.yaml``: ``sharebench node agent``, one replica (two
  agents would race for nothing: every change goes through the node's Lease), running as the node
  account, the only holder of its token.
"""

from __future__ import annotations

from sharebench import __version__
from sharebench.manifests.names import (
    AGENT_DEPLOYMENT,
    OFFER_CONFIGMAP,
    OFFER_IMAGE_ALLOW_KEY,
    OFFER_NODE_PREFIX,
    OFFER_RUN_NAMESPACES_KEY,
    SERVICE_ACCOUNT,
    SYSTEM_NAMESPACE,
    metadata,
)

AGENT_IMAGE = f"ghcr.io/sharebench/sharebench:{__version__}"  # components/image.py names the same image
OFFERED = "offered"


def offer_configmap(run_namespaces: tuple[str, ...], nodes: tuple[str, ...], image_allow: tuple[str, ...]) -> dict:
    data = {f"{OFFER_NODE_PREFIX}{n}": OFFERED for n in sorted(set(nodes))}
    data[OFFER_IMAGE_ALLOW_KEY] = ",".join(image_allow)
    data[OFFER_RUN_NAMESPACES_KEY] = ",".join(run_namespaces)
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


def objects(
    run_namespaces: tuple[str, ...],
    nodes: tuple[str, ...] = (),
    image_allow: tuple[str, ...] = (),
    *,
    node_access: str = "agent",
    image: str = AGENT_IMAGE,
) -> list[tuple[str, dict]]:
    """(file name, object) of the offer and, in agent mode, the agent's Deployment."""
    out = [(f"0100_configmap_{OFFER_CONFIGMAP}.yaml", offer_configmap(run_namespaces, nodes, image_allow))]
    if node_access == "agent":
        out.append((f"0200_deployment_{AGENT_DEPLOYMENT}.yaml", deployment(image)))
    return out
