"""``sharebench manifests render|check|dashboard``: the Kubernetes manifests sharebench deploys.

Options only, light (``--help`` imports no library stack); every value is checked here (:func:`check_values`)
before the work, ``sharebench.cli.manifests_cmd``, loads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sharebench.cli import lazy
from sharebench.errors import UserError
from sharebench.gpus import gpu_model
from sharebench.manifests.names import (
    DEFAULT_MIG_STRATEGY,
    MIG_STRATEGIES,
    NODE_ACCESS,
    OPERATOR_NAMESPACE,
    RUN_NAMESPACE,
    check_namespace,
)


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
    rd.add_argument(
        "--node-access",
        default="agent",
        choices=NODE_ACCESS,
        help="agent: the node agent alone holds the node account (default); direct: the pipeline's node steps "
        "mount its token (a single-admin cluster only)",
    )
    rd.add_argument(
        "--offer-node",
        action="append",
        default=[],
        metavar="NODE",
        help="a node the site offers to sharebench (repeatable; the offer ConfigMap in sharebench-system)",
    )
    rd.add_argument(
        "--image-allow",
        action="append",
        default=[],
        metavar="PREFIX",
        help="an image prefix a run may use (repeatable; default: sharebench's own image repository)",
    )
    rd.add_argument("--out", default="manifests", help="output folder (default ./manifests)")
    rd.set_defaults(func=lazy("sharebench.cli.manifests_cmd:cmd_render", check=check_values))
    ck = msub.add_parser("check", help="exit 1 if the committed manifests differ from the render")
    ck.add_argument("--dir", default="manifests", help="manifests folder (default ./manifests)")
    ck.set_defaults(func=lazy("sharebench.cli.manifests_cmd:cmd_check", check=check_values))
    db = msub.add_parser("dashboard", help="print the Grafana dashboard as JSON (for a Grafana import)")
    db.set_defaults(func=lazy("sharebench.cli.manifests_cmd:cmd_dashboard"))
    man.set_defaults(func=lambda _args: _help(man))


def check_values(args: argparse.Namespace) -> None:
    """``render``: the GPU models and namespaces; ``check``: the folder; before the render's modules load."""
    if args.manifests_command == "check":
        if not Path(args.dir).is_dir():
            raise UserError(f"manifests folder {args.dir!r} does not exist; run from the project root or pass --dir")
        return
    for name in args.gpu:
        gpu_model(name)
    check_namespace(args.operator_namespace)
    check_namespace(args.run_namespace)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a folder; give a folder (it is created if missing)")


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2
