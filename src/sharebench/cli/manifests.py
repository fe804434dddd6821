"""``sharebench manifests render|check|dashboard``: the Kubernetes manifests sharebench deploys."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sharebench.manifests.monitoring import dashboard
from sharebench.manifests.names import OPERATOR_NAMESPACE, RUN_NAMESPACE
from sharebench.manifests.operator import DEFAULT_MIG_STRATEGY, MIG_STRATEGIES
from sharebench.manifests.render import RenderOptions, check, write


def configure(name: str, man: argparse.ArgumentParser) -> None:
    man.description = "Render manifests/ from the library's single source of truth, or check it is in sync."
    msub = man.add_subparsers(dest="manifests_command", metavar="ACTION")
    rd = msub.add_parser("render", help="write the manifests (default: every known GPU model) under --out")
    rd.add_argument(
        "--gpu",
        action="append",
        default=[],
        metavar="MODEL",
        help="limit the mig-parted config to this GPU model (repeatable; e.g. H200, A100-40GB)",
    )
    rd.add_argument(
        "--mig-strategy",
        default=DEFAULT_MIG_STRATEGY,
        choices=MIG_STRATEGIES,
        help=f"gpu-operator MIG strategy (default {DEFAULT_MIG_STRATEGY})",
    )
    rd.add_argument(
        "--operator-namespace",
        default=OPERATOR_NAMESPACE,
        help=f"namespace of the gpu-operator (default {OPERATOR_NAMESPACE})",
    )
    rd.add_argument(
        "--run-namespace",
        default=RUN_NAMESPACE,
        help=f"namespace of the pipeline's pods and service account (default {RUN_NAMESPACE})",
    )
    rd.add_argument("--out", default="manifests", help="output folder (default ./manifests)")
    rd.set_defaults(func=cmd_render)
    ck = msub.add_parser("check", help="exit 1 if the committed manifests differ from the render")
    ck.add_argument("--dir", default="manifests", help="manifests folder (default ./manifests)")
    ck.set_defaults(func=cmd_check)
    db = msub.add_parser("dashboard", help="print the Grafana dashboard as JSON (for a Grafana import)")
    db.set_defaults(func=cmd_dashboard)
    man.set_defaults(func=lambda _args: _help(man))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def cmd_render(args: argparse.Namespace) -> int:
    written = write(
        args.out,
        RenderOptions(
            gpus=tuple(args.gpu),
            mig_strategy=args.mig_strategy,
            operator_namespace=args.operator_namespace,
            run_namespace=args.run_namespace,
        ),
    )
    for path in written:
        print(path)
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    problems = check(Path(args.dir))
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        print(
            f"sharebench: manifests in {args.dir} are out of sync; run 'sharebench manifests render --out {args.dir}'",
            file=sys.stderr,
        )
        return 1
    print(f"manifests in {args.dir} match the render")
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    print(json.dumps(dashboard(), indent=2, sort_keys=True))
    return 0
