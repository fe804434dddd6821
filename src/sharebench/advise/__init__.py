"""``sharebench advise``: from a site's GPU usage and the measured costs to a pool layout.

``options`` checks what a site says (``--class``, ``--out``; light, before anything is read);
``reading`` streams the usage CSV (header first, time unit, samples outside the window, duplicates);
``usage`` holds the frame, each pod's presence, pattern inference and Prometheus; ``decided`` decides
each measured cell by interval (``sharebench.analysis.tail``); ``costread`` reads results folders and
``costs`` turns the decided cells of one workload into surfaces over load; ``classes`` picks the workload that costs each class (its own
``results=``, or a borrowed one, said, with the command that measures its own); ``replay`` packs pods
onto GPUs of one option by presence and replays the trace, every pod's p95 with its interval;
``layout`` lets classes whose modes agree share GPUs and says why a layout needs more GPUs than
today; ``isolation`` says what each mode does not isolate; ``advice`` writes advice.md/html/json and
assignment.csv; ``check`` fits on the first part of a window and replays the choice on the rest;
``synthetic`` makes usage to test it on.

The names below load their modules when first used (SPEC 1, lazy loading, as scientific Python packages
do), so that ``sharebench advise``'s options are checked before numpy, pandas or matplotlib load. The
functions named as their modules (``check.check``, ``replay.replay``) are imported from the modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sharebench.advise.advice import Advice, AdviseOptions, advise
    from sharebench.advise.check import CheckOptions, CheckResult, write_check
    from sharebench.advise.costread import read_costs
    from sharebench.advise.costs import Cost, Costs, Surface
    from sharebench.advise.layout import Layout
    from sharebench.advise.options import ClassChoice, parse_class_overrides, parse_classes
    from sharebench.advise.prometheus import Window, read_prometheus
    from sharebench.advise.reading import read_usage_csv, usage_from_rows
    from sharebench.advise.render import node_commands, to_json, write_advice
    from sharebench.advise.replay import Option, Outcome, class_options, pack
    from sharebench.advise.usage import Usage, class_patterns, infer_pattern, memory_problems, parse_time

WHERE = {
    "advice": ("Advice", "AdviseOptions", "advise"),
    "render": ("node_commands", "to_json", "write_advice"),
    "check": ("CheckOptions", "CheckResult", "write_check"),
    "costs": ("Cost", "Costs", "Surface"),
    "costread": ("read_costs",),
    "layout": ("Layout",),
    "options": ("ClassChoice", "parse_class_overrides", "parse_classes"),
    "reading": ("read_usage_csv", "usage_from_rows"),
    "replay": ("Option", "Outcome", "class_options", "pack"),
    "usage": ("Usage", "class_patterns", "infer_pattern", "memory_problems", "parse_time"),
    "prometheus": ("Window", "read_prometheus"),
}
MODULE_OF = {name: module for module, names in WHERE.items() for name in names}

__all__ = [
    "Advice",
    "AdviseOptions",
    "CheckOptions",
    "CheckResult",
    "ClassChoice",
    "Cost",
    "Costs",
    "Layout",
    "Option",
    "Outcome",
    "Surface",
    "Usage",
    "Window",
    "advise",
    "class_options",
    "class_patterns",
    "infer_pattern",
    "memory_problems",
    "node_commands",
    "pack",
    "parse_class_overrides",
    "parse_classes",
    "parse_time",
    "read_costs",
    "read_prometheus",
    "read_usage_csv",
    "to_json",
    "usage_from_rows",
    "write_advice",
    "write_check",
]


def __getattr__(name: str) -> Any:
    module = MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
