"""``sharebench advise``: from a site's GPU usage and the measured costs to a pool layout.

``usage`` reads the trace (CSV or Prometheus), with each pod's presence, and infers each class's
pattern; ``costs`` reads the measured slowdowns of results folders of the pool's GPU model as surfaces
over load; ``replay`` packs each class onto the GPUs of one option by presence and replays the trace;
``advice`` picks the layout and writes advice.md/html/json and assignment.csv; ``check`` fits on the
first part of a window and replays the choice on the rest; ``synthetic`` makes usage to test it on.
"""

from sharebench.advise.advice import Advice, Layout, advise, node_commands, to_json, write_advice
from sharebench.advise.check import CheckOptions, CheckResult, check, write_check
from sharebench.advise.costs import Cost, Costs, Surface, read_costs
from sharebench.advise.replay import Option, Outcome, class_options, pack, replay
from sharebench.advise.usage import (
    Usage,
    Window,
    class_patterns,
    infer_pattern,
    parse_class_overrides,
    parse_time,
    read_prometheus,
    read_usage_csv,
    sanity,
    usage_from_rows,
)

__all__ = [
    "Advice",
    "CheckOptions",
    "CheckResult",
    "Cost",
    "Costs",
    "Layout",
    "Option",
    "Outcome",
    "Surface",
    "Usage",
    "Window",
    "advise",
    "check",
    "class_options",
    "class_patterns",
    "infer_pattern",
    "node_commands",
    "pack",
    "parse_class_overrides",
    "parse_time",
    "read_costs",
    "read_prometheus",
    "read_usage_csv",
    "replay",
    "sanity",
    "to_json",
    "usage_from_rows",
    "write_advice",
    "write_check",
]
