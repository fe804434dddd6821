"""``sharebench advise``: a site's GPU usage and the measured costs in, a pool layout out (never applied).

Options only, light (``--help`` imports no library stack); every value is checked here
(:func:`check_options`) before the work's module loads and before anything is read or written; the work:
``sharebench.cli.advise_cmd``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from sharebench.advise.options import (
    CLASS_GRAMMAR,
    DEFAULT_HEADROOM,
    check_fraction,
    check_headroom,
    check_out,
    parse_classes,
)
from sharebench.cli import lazy
from sharebench.errors import UserError
from sharebench.gpus import gpu_model
from sharebench.parse import check_slo
from sharebench.patterns import DEFAULT_SLO, PATTERNS


def check_options(args: argparse.Namespace) -> None:
    """Every option, before anything is read or written: a bad one is a one-line UserError."""
    check_slo(args.slo)
    args.check = check_fraction(args.check, "--check")
    args.memory_headroom = check_headroom(args.memory_headroom)
    if not (math.isfinite(args.step) and args.step > 0):
        raise UserError(f"bad --step {args.step!r}; allowed: seconds > 0")
    for name in (args.gpu_model, args.usage_gpu_model):
        if name:
            gpu_model(name)
    choices = parse_classes(args.classes)
    if not args.results and not any(c.results for c in choices.values()):
        raise UserError(
            "no costs given: --results DIR (results folders of the pool's GPU model), or results=DIR in a --class"
        )
    for folder in args.results or []:
        if not Path(folder).is_dir():
            raise UserError(f"--results {folder}: no such folder")
    if args.out:
        check_out(Path(args.out), args.force)


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Replay a site's GPU usage (a CSV or dcgm-exporter's per-pod series in Prometheus) on candidate "
        "layouts (whole GPUs, timeslice:N, mps:N, MIG) with the slowdowns measured in results folders, each "
        "cell decided by interval, scaled by each pod's load and its neighbours', and recommend the layout with "
        "the fewest GPUs that keeps every pod's p95 slowdown within --slo. Pods are counted and packed by "
        "presence; classes whose modes agree share GPUs. Says what each mode does not isolate, how each class is "
        "costed, and whether memory sets the count. Writes advice.md, advice.html, advice.json and "
        "assignment.csv; applies nothing."
    )
    usage_options(parser)
    cost_options(parser)
    parser.add_argument(
        "--check",
        nargs="?",
        const=0.5,
        type=float,
        metavar="FRACTION",
        help="also fit on the first FRACTION of the window (default 0.5) and replay the choice on the rest: "
        "predicted against replayed worst pod per class (check.json); exit 1 when a pod leaves the target or "
        "the GPUs overflow",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="write into an --out that holds other files or an advice; advise memory that cannot be bytes",
    )
    parser.add_argument("--slo", default=str(DEFAULT_SLO), help="p95 slowdown target of every pod (default 2)")
    parser.add_argument("--out", help="output folder (default: sharebench-advice/<UTC timestamp>)")
    parser.set_defaults(func=lazy("sharebench.cli.advise_cmd:cmd_advise", check=check_options))


def usage_options(parser: argparse.ArgumentParser) -> None:
    """Where the usage comes from, and what its classes are."""
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--usage", metavar="FILE", help="CSV: time,gpu,pod,class,busy,memory_bytes[,gpu_model]")
    src.add_argument("--prometheus", metavar="URL", help="Prometheus with dcgm-exporter's per-pod series")
    parser.add_argument("--since", help="window start (epoch s or ISO 8601; Prometheus; default: --until - 1 day)")
    parser.add_argument("--until", help="window end (epoch s or ISO 8601; Prometheus; default: now)")
    parser.add_argument(
        "--step", type=float, default=60.0, metavar="S", help="seconds per step (Prometheus; default 60)"
    )
    parser.add_argument(
        "--class-label", default="namespace", help="the series label naming a class (default namespace)"
    )
    parser.add_argument(
        "--class",
        dest="classes",
        action="append",
        metavar=CLASS_GRAMMAR,
        help=f"what a class is: its pattern ({', '.join(PATTERNS)}) instead of the inferred one, the results folder "
        "of its own workload (its costs then come from there), isolation=required (only whole GPUs or MIG); "
        "repeatable",
    )


def cost_options(parser: argparse.ArgumentParser) -> None:
    """Where the costs come from, and the pool's GPU model."""
    parser.add_argument(
        "--results",
        nargs="+",
        metavar="DIR",
        help="results folders of the pool's GPU model, or folders holding them (searched recursively)",
    )
    parser.add_argument(
        "--gpu-model",
        help="the pool's GPU model (default: the usage's); with costs of another model (--allow-other-model) "
        "their MIG points map to its profiles by compute share, and pods pack to its memory",
    )
    parser.add_argument(
        "--usage-gpu-model", help="the GPU model the usage ran on (default: the CSV's gpu_model, modelName label)"
    )
    parser.add_argument(
        "--allow-other-model",
        action="store_true",
        help="use costs measured on another GPU model than the pool's (a warning in every output)",
    )
    parser.add_argument(
        "--memory-headroom",
        type=float,
        default=DEFAULT_HEADROOM,
        metavar="F",
        help=f"the share of each GPU's (or MIG instance's) memory kept free where pods share it (default {DEFAULT_HEADROOM:g})",
    )
