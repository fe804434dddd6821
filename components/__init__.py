"""KFP components: thin verb_noun wrappers over the sharebench library (installed as sharebench.components).

Each component body imports :mod:`sharebench.components.steps` and calls one function;
``steps`` calls the library and knows nothing of KFP. Importing this package does not
import kfp; import the component modules (``sharebench.components.run_simpletrack``)
or :func:`load` for the components themselves.
"""

import importlib

COMPONENTS = (
    "check_sweep",
    "plan_sweep",
    "pick_cells",
    "reconfigure_node",
    "schedule_start",
    "run_simpletrack",
    "check_cell",
    "merge_records",
    "collect_results",
    "write_report",
    "compare_nodes",
    "record_history",
    "advise_pool",
    "restore_node",
)


def load() -> dict:
    """name -> component, for every component (imports kfp)."""
    return {name: getattr(importlib.import_module(f"sharebench.components.{name}"), name) for name in COMPONENTS}
