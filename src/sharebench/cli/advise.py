"""``sharebench advise``: a site's GPU usage and the measured costs in, a pool layout out (never applied).

Options only, light (``--help`` imports no library stack); the work: ``sharebench.cli.advise_cmd``.
"""

from __future__ import annotations

import argparse

from sharebench.cli import lazy
from sharebench.patterns import DEFAULT_SLO, PATTERNS


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Replay a site's GPU usage (a CSV or dcgm-exporter's per-pod series in Prometheus) on candidate "
        "layouts (whole GPUs, timeslice:N, mps:N, MIG) with the slowdowns measured in results folders of the "
        "pool's GPU model, scaled by each pod's load and its neighbours', and recommend the layout with the "
        "fewest GPUs that keeps every class's p95 slowdown within --slo. Pods are counted and packed by "
        "presence. Writes advice.md, advice.html, advice.json and assignment.csv; applies nothing."
    )
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--usage", metavar="FILE", help="CSV: time,gpu,pod,class,busy,memory_bytes")
    src.add_argument("--prometheus", metavar="URL", help="Prometheus with dcgm-exporter's per-pod series")
    parser.add_argument("--since", help="window start (epoch s or ISO 8601; Prometheus; default: --until - 1 day)")
    parser.add_argument("--until", help="window end (epoch s or ISO 8601; Prometheus; default: now)")
    parser.add_argument("--step", type=float, default=60.0, metavar="S", help="seconds per step (default 60)")
    parser.add_argument(
        "--class-label", default="namespace", help="the series label naming a class (default namespace)"
    )
    parser.add_argument(
        "--class",
        dest="classes",
        action="append",
        metavar="NAME=PATTERN",
        help=f"set a class's pattern ({', '.join(PATTERNS)}) instead of inferring it; repeatable",
    )
    parser.add_argument(
        "--results",
        nargs="+",
        required=True,
        metavar="DIR",
        help="results folders of the pool's GPU model, or folders holding them (searched recursively)",
    )
    parser.add_argument("--gpu-model", help="the pool's GPU model (default: the results folders')")
    parser.add_argument(
        "--usage-gpu-model", help="the GPU model the usage ran on (default: the CSV's gpu_model, modelName label)"
    )
    parser.add_argument(
        "--allow-other-model",
        action="store_true",
        help="use costs measured on another GPU model than the usage's (a warning in every output)",
    )
    parser.add_argument(
        "--check",
        nargs="?",
        const=0.5,
        type=float,
        metavar="FRACTION",
        help="also fit on the first FRACTION of the window (default 0.5) and replay the choice on the rest: "
        "predicted against replayed p95 per class (check.json)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an advice already in --out")
    parser.add_argument("--slo", default=str(DEFAULT_SLO), help="p95 slowdown target per class (default 2)")
    parser.add_argument("--out", help="output folder (default: sharebench-advice/<UTC timestamp>)")
    parser.set_defaults(func=lazy("sharebench.cli.advise_cmd:cmd_advise"))
