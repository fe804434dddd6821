"""``sharebench node apply|restore|status|agent``: a GPU node through the gpu-operator.

Options only, light (``--help`` imports no library stack); every value is checked here (:func:`check_values`)
before the work, ``sharebench.cli.node_cmd``, loads the Kubernetes client.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sharebench.cli import lazy
from sharebench.errors import UserError
from sharebench.gpus import gpu_model
from sharebench.manifests.names import DEVICE_PLUGIN_CONFIGMAP, OPERATOR_NAMESPACE
from sharebench.modes import grammar_list, parse_mode
from sharebench.parse import MIN_POLL_S, check_times


def configure(name: str, node: argparse.ArgumentParser) -> None:
    node.description = "Reconfigure a Kubernetes GPU node through the NVIDIA gpu-operator."
    nsub = node.add_subparsers(dest="node_command", metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("node", metavar="NODE", help="node name")
        p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
        p.add_argument("--context", help="kubeconfig context")
        p.add_argument("--json", action="store_true", help="print the result as JSON")

    def waits(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--timeout", type=float, default=600, metavar="S", help="seconds to wait for the operator (default 600)"
        )
        p.add_argument("--poll", type=float, default=2.0, metavar="S", help="seconds between checks (default 2)")

    ap = nsub.add_parser("apply", help="put NODE in MODE and wait until it advertises it")
    common(ap)
    ap.add_argument(
        "mode", metavar="MODE", help=f"{grammar_list(cluster=True, bare=True)} (LAYOUT: 7g, 1g, 1g.18gb, all-disabled)"
    )
    ap.add_argument("--force", action="store_true", help="proceed although pods outside sharebench use the node's GPUs")
    ap.add_argument("--cordon", action="store_true", help="cordon the node (restore uncordons it)")
    waits(ap)
    ap.add_argument("--namespace", default=OPERATOR_NAMESPACE, help="gpu-operator namespace (default gpu-operator)")
    ap.add_argument(
        "--configmap",
        default=DEVICE_PLUGIN_CONFIGMAP,
        help=f"device-plugin config ConfigMap (default {DEVICE_PLUGIN_CONFIGMAP})",
    )
    ap.add_argument("--gpu-model", help="GPU model when the node's product label is not in sharebench's table")
    ap.add_argument("--rename-shared", action="store_true", help="advertise shared GPUs as nvidia.com/gpu.shared")
    ap.add_argument(
        "--dry-run", action="store_true", help="print the label and ConfigMap changes it would make, and change nothing"
    )
    ap.add_argument(
        "--holder", help="who holds the node's Lease (a run id; default: this process, sharebench-cli@HOST:PID.START)"
    )
    ap.set_defaults(func=lazy("sharebench.cli.node_cmd:cmd_apply", check=check_values))

    rp = nsub.add_parser("restore", help="put NODE back as before sharebench's first change (idempotent)")
    common(rp)
    waits(rp)
    rp.add_argument("--holder", help="restore only if this run holds the node's Lease (default: a person's restore)")
    rp.add_argument(
        "--force",
        action="store_true",
        help="restore although a live run holds the node's Lease (that run stops at its next renewal)",
    )
    rp.set_defaults(func=lazy("sharebench.cli.node_cmd:cmd_restore", check=check_values))

    sp = nsub.add_parser("status", help="what NODE advertises, its GPU pods and any recorded prior state")
    common(sp)
    sp.add_argument("--namespace", default=OPERATOR_NAMESPACE, help="gpu-operator namespace (default gpu-operator)")
    sp.set_defaults(func=lazy("sharebench.cli.node_cmd:cmd_status", check=check_values))
    ag = nsub.add_parser(
        "agent",
        help="answer the sharing requests pipeline steps file (the node agent's Deployment runs this)",
        description="Answer sharing requests: the only holder of the node account (docs/readme/node.md, agent mode).",
    )
    ag.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    ag.add_argument("--context", help="kubeconfig context")
    waits(ag)
    ag.add_argument("--every", type=float, default=2.0, metavar="S", help="seconds between two rounds (default 2)")
    ag.add_argument("--once", action="store_true", help="answer what is waiting, then exit")
    ag.set_defaults(func=lazy("sharebench.cli.node_cmd:cmd_agent", check=check_values))
    node.set_defaults(func=lambda _args: _help(node))


def check_values(args: argparse.Namespace) -> None:
    """Every value of a node command checked before the Kubernetes client loads: the mode (one a node takes),
    the waits' seconds, the GPU model, the kubeconfig file."""
    if getattr(args, "mode", None) is not None:
        check_node_mode(args.node, args.mode)
    if getattr(args, "timeout", None) is not None:
        check_times(args.timeout, args.poll, ("--timeout", "--poll"), min_poll_s=MIN_POLL_S)
    if getattr(args, "every", None) is not None:
        check_times(args.every, args.every, ("--every", "--every"), min_poll_s=MIN_POLL_S)
    if getattr(args, "gpu_model", None):
        gpu_model(args.gpu_model)
    if args.kubeconfig is not None and not Path(args.kubeconfig).expanduser().is_file():
        path = str(Path(args.kubeconfig).expanduser())
        raise UserError(f"kubeconfig {path!r} does not exist; pass an existing file to --kubeconfig")


def check_node_mode(node: str, text: str) -> None:
    """``node apply``'s MODE: one a node takes; refused as the node's pre-flight refuses it (its one line)."""
    try:
        mode = parse_mode(text)
        if mode.spec.local_only:
            cpu = "CPU-only " if mode.spec.device_class == "cpu" else ""
            raise UserError(f"{mode.label} is a {cpu}local mode; a node takes {grammar_list(cluster=True, bare=True)}")
    except UserError as exc:
        raise UserError(f"node {node}, mode {text}, state pre-flight: {exc}") from None


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2
