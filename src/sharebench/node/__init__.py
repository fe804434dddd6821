"""Node reconfiguration through the NVIDIA gpu-operator, and the manifests sharebench deploys.

See docs/architecture.md (Node) and docs/readme/node.md. The kubernetes client is
imported on first use, so ``sharebench`` commands that do not touch a cluster stay fast.
"""

from __future__ import annotations

import importlib

__all__ = ["NodeError", "NodeTimeout", "PermissionDenied", "make_api_client", "reconfigure", "restore", "status"]


def __getattr__(name: str):
    if name in __all__:
        return getattr(importlib.import_module("sharebench.node.reconfiguration"), name)
    raise AttributeError(f"module 'sharebench.node' has no attribute {name!r}")
