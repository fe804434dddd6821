"""Node reconfiguration through the NVIDIA gpu-operator: move a GPU node between exclusive,
time-slicing, MPS and MIG with the official kubernetes client, wait until it advertises the
mode, and put it back as it was.

Modules, each importing only those above it:

* ``client``: credentials (:func:`make_api_client`), the errors (:class:`NodeError`,
  :class:`NodeTimeout`, :class:`PermissionDenied`, :class:`Conflict` for HTTP 409), :func:`check_times`,
  and the per-operation ``Session`` whose ``call`` turns API failures into one-line errors;
* ``facts``: the gpu-operator's labels, allocatable GPU resources, GPU model and physical GPU
  count of a node, the pods that use its GPUs, the device-plugin pods on it;
* ``prior``: the node's state before the first change, kept as the annotation :data:`ANNOTATION`;
* ``lease``: one reconfiguration per node, a ``coordination.k8s.io`` Lease per node in
  ``sharebench-system`` (:func:`renew_lease` before each cell of a run);
* ``operands``: the device-plugin ConfigMap entries, restarting the device plugin, the MIG
  manager's state, and the one polling loop every wait goes through;
* ``targets``: what a mode requires of a node and the check that it advertises it;
* ``reconfiguration``: :func:`reconfigure` (with :class:`ReconfigureOptions`), :func:`preview`
  (``--dry-run``), :func:`restore` and :func:`status`.
* ``agent``: the node agent (``sharebench node agent``), the only holder of the node account in agent
  mode, answering the sharing requests pipeline steps file (``file_request``, ``wait_request``).

The manifests that set up the cluster for this (RBAC, ConfigMaps, Helm values) are in
``sharebench.manifests``; see docs/architecture.md (Node) and docs/readme/node.md.
"""

from __future__ import annotations

from sharebench.node.client import (
    MIN_POLL_S,
    Conflict,
    NodeError,
    NodeTimeout,
    PermissionDenied,
    check_times,
    make_api_client,
)
from sharebench.node.lease import renew as renew_lease
from sharebench.node.prior import ANNOTATION
from sharebench.node.reconfiguration import (
    ReconfigureOptions,
    preview,
    reconfigure,
    restore,
    status,
)

__all__ = [
    "ANNOTATION",
    "MIN_POLL_S",
    "Conflict",
    "NodeError",
    "NodeTimeout",
    "PermissionDenied",
    "ReconfigureOptions",
    "check_times",
    "make_api_client",
    "preview",
    "reconfigure",
    "renew_lease",
    "restore",
    "status",
]
