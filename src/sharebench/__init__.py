"""sharebench: what GPU sharing costs an LHC particle-tracking workload.

The library (kernel, sharing executors, node reconfiguration, analysis,
plots) knows nothing of Kubeflow; ``sharebench.components`` and
``sharebench.pipelines`` (the top-level ``components/`` and ``pipelines/``
folders) wrap it.
"""

__version__ = "0.1.0"

from sharebench.errors import UserError

__all__ = ["UserError", "__version__"]
