"""Node reconfiguration through the NVIDIA gpu-operator, and the manifests sharebench deploys.

See docs/architecture.md (Node) and docs/readme/node.md.
"""

from sharebench.node.reconfigure import (
    NodeError,
    NodeTimeout,
    PermissionDenied,
    make_api_client,
    reconfigure,
    restore,
    status,
)

__all__ = ["NodeError", "NodeTimeout", "PermissionDenied", "make_api_client", "reconfigure", "restore", "status"]
