"""``sharebench node apply|restore|status``: a GPU node through the gpu-operator."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sharebench.manifests.names import DEVICE_PLUGIN_CONFIGMAP, OPERATOR_NAMESPACE
from sharebench.node import (
    ReconfigureOptions,
    check_times,
    make_api_client,
    preview,
    reconfigure,
    restore,
    status,
)


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
        "mode", metavar="MODE", help="exclusive, timeslice:N, mps:N, mig:LAYOUT (7g, 1g, 1g.18gb, all-disabled)"
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
    ap.set_defaults(func=cmd_apply)

    rp = nsub.add_parser("restore", help="put NODE back as before sharebench's first change (idempotent)")
    common(rp)
    waits(rp)
    rp.add_argument("--holder", help="restore only if this run holds the node's Lease (default: a person's restore)")
    rp.add_argument(
        "--force",
        action="store_true",
        help="restore although a live run holds the node's Lease (that run stops at its next renewal)",
    )
    rp.set_defaults(func=cmd_restore)

    sp = nsub.add_parser("status", help="what NODE advertises, its GPU pods and any recorded prior state")
    common(sp)
    sp.add_argument("--namespace", default=OPERATOR_NAMESPACE, help="gpu-operator namespace (default gpu-operator)")
    sp.set_defaults(func=cmd_status)
    node.set_defaults(func=lambda _args: _help(node))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _print(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True, default=str))
        return
    for key, value in result.items():
        if key in ("previous", "prior_state", "labels"):
            continue
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items()) or "none"
        elif isinstance(value, list):
            value = ", ".join(map(str, value)) or "none"
        print(f"{key}: {value}")
    prior = result.get("previous", result.get("prior_state"))
    if prior:
        labels = ", ".join(f"{k}={'(absent)' if v is None else v}" for k, v in prior.get("labels", {}).items())
        print(f"prior state (recorded {prior.get('recorded_at')}): {labels}")


def cmd_apply(args: argparse.Namespace) -> int:
    check_times(args.timeout, args.poll, ("--timeout", "--poll"))
    options = ReconfigureOptions(
        gpu_model=args.gpu_model,
        namespace=args.namespace,
        configmap=args.configmap,
        timeout_s=args.timeout,
        poll_s=args.poll,
        force=args.force,
        cordon=args.cordon,
        rename_shared=args.rename_shared,
        holder=args.holder,
    )
    if args.dry_run:
        _print(
            preview(args.node, args.mode, options, api_client=make_api_client(args.kubeconfig, args.context)), args.json
        )
        return 0
    res = reconfigure(
        args.node, args.mode, options, api_client=make_api_client(args.kubeconfig, args.context), progress=_progress
    )
    _print(res, args.json)
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    check_times(args.timeout, args.poll, ("--timeout", "--poll"))
    res = restore(
        args.node,
        api_client=make_api_client(args.kubeconfig, args.context),
        timeout_s=args.timeout,
        progress=_progress,
        poll_s=args.poll,
        holder=args.holder,
        force=args.force,
    )
    _print(res, args.json)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    _print(
        status(args.node, api_client=make_api_client(args.kubeconfig, args.context), namespace=args.namespace),
        args.json,
    )
    return 0
