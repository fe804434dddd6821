"""``sharebench advise``: from a site's GPU usage and the measured costs to a pool layout.

``usage`` reads the trace (CSV or Prometheus) and infers each class's pattern; ``costs`` reads the
per-pattern slowdowns of results folders of the pool's GPU model; ``replay`` packs each class onto the
GPUs of one option and replays the trace; ``advice`` picks the layout and writes advice.md/html/json.
"""

from sharebench.advise.advice import Advice, Layout, advise, node_commands, to_json, write_advice
from sharebench.advise.costs import Cost, Costs, read_costs
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
)

__all__ = [
    "Advice",
    "Cost",
    "Costs",
    "Layout",
    "Option",
    "Outcome",
    "Usage",
    "Window",
    "advise",
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
    "to_json",
    "write_advice",
]
