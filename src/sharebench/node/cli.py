"""``sharebench node apply|restore|status`` and ``sharebench manifests render|check``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sharebench.node import manifests as mf


def register(sub: argparse._SubParsersAction) -> None:
    node = sub.add_parser("node", help="reconfigure a GPU node through the gpu-operator (exclusive, timeslice, mps, mig)",
                          description="Reconfigure a Kubernetes GPU node through the NVIDIA gpu-operator.")
    nsub = node.add_subparsers(dest="node_command", metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("node", metavar="NODE", help="node name")
        p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
        p.add_argument("--context", help="kubeconfig context")
        p.add_argument("--json", action="store_true", help="print the result as JSON")

    ap = nsub.add_parser("apply", help="put NODE in MODE and wait until it advertises it")
    common(ap)
    ap.add_argument("mode", metavar="MODE", help="exclusive, timeslice:N, mps:N, mig:LAYOUT (7g, 1g, 1g.18gb, all-disabled)")
    ap.add_argument("--force", action="store_true", help="proceed although pods outside sharebench use the node's GPUs")
    ap.add_argument("--cordon", action="store_true", help="cordon the node (restore uncordons it)")
    ap.add_argument("--timeout", type=float, default=600, metavar="S", help="seconds to wait for the operator (default 600)")
    ap.add_argument("--poll", type=float, default=2.0, metavar="S", help="seconds between checks (default 2)")
    ap.add_argument("--namespace", default=mf.OPERATOR_NAMESPACE, help="gpu-operator namespace (default gpu-operator)")
    ap.add_argument("--configmap", default=mf.DEVICE_PLUGIN_CONFIGMAP,
                    help=f"device-plugin config ConfigMap (default {mf.DEVICE_PLUGIN_CONFIGMAP})")
    ap.add_argument("--gpu-model", help="GPU model when the node's product label is not in sharebench's table")
    ap.add_argument("--rename-shared", action="store_true", help="advertise shared GPUs as nvidia.com/gpu.shared")
    ap.set_defaults(func=_apply)

    rp = nsub.add_parser("restore", help="put NODE back as before sharebench's first change (idempotent)")
    common(rp)
    rp.add_argument("--timeout", type=float, default=600, metavar="S", help="seconds to wait for the operator (default 600)")
    rp.add_argument("--poll", type=float, default=2.0, metavar="S", help="seconds between checks (default 2)")
    rp.set_defaults(func=_restore)

    sp = nsub.add_parser("status", help="what NODE advertises, its GPU pods and any recorded prior state")
    common(sp)
    sp.add_argument("--namespace", default=mf.OPERATOR_NAMESPACE, help="gpu-operator namespace (default gpu-operator)")
    sp.set_defaults(func=_status)
    node.set_defaults(func=lambda a: _help(node))

    man = sub.add_parser("manifests", help="render or check the Kubernetes manifests sharebench deploys",
                         description="Render manifests/ from the library's single source of truth, or check it is in sync.")
    msub = man.add_subparsers(dest="manifests_command", metavar="ACTION")
    rd = msub.add_parser("render", help="write the manifests (default: every known GPU model) under --out")
    rd.add_argument("--gpu", action="append", default=[], metavar="MODEL",
                    help="limit the mig-parted config to this GPU model (repeatable; e.g. H200, A100-40GB)")
    rd.add_argument("--mig-strategy", default=mf.DEFAULT_MIG_STRATEGY, choices=mf.MIG_STRATEGIES,
                    help=f"gpu-operator MIG strategy (default {mf.DEFAULT_MIG_STRATEGY})")
    rd.add_argument("--operator-namespace", default=mf.OPERATOR_NAMESPACE,
                    help=f"namespace of the gpu-operator (default {mf.OPERATOR_NAMESPACE})")
    rd.add_argument("--run-namespace", default=mf.RUN_NAMESPACE,
                    help=f"namespace of the pipeline's pods and service account (default {mf.RUN_NAMESPACE})")
    rd.add_argument("--out", default="manifests", help="output folder (default ./manifests)")
    rd.set_defaults(func=_render)
    ck = msub.add_parser("check", help="exit 1 if the committed manifests differ from the render")
    ck.add_argument("--dir", default="manifests", help="manifests folder (default ./manifests)")
    ck.set_defaults(func=_check)
    man.set_defaults(func=lambda a: _help(man))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _client(args):
    from sharebench.node.reconfiguration import make_api_client
    return make_api_client(args.kubeconfig, args.context)


def _print(result: dict, as_json: bool) -> None:
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


def _check_times(args) -> None:
    from sharebench.errors import UserError
    if not args.timeout > 0:
        raise UserError(f"--timeout must be > 0 seconds (got {args.timeout:g})")
    if not args.poll > 0:
        raise UserError(f"--poll must be > 0 seconds (got {args.poll:g})")


def _apply(args) -> int:
    from sharebench.node.reconfiguration import reconfigure
    _check_times(args)
    res = reconfigure(args.node, args.mode, gpu_model=args.gpu_model, namespace=args.namespace,
                      timeout_s=args.timeout, force=args.force, cordon=args.cordon, api_client=_client(args),
                      progress=_progress, configmap=args.configmap, rename_shared=args.rename_shared, poll_s=args.poll)
    _print(res, args.json)
    return 0


def _restore(args) -> int:
    from sharebench.node.reconfiguration import restore
    _check_times(args)
    res = restore(args.node, api_client=_client(args), timeout_s=args.timeout, progress=_progress, poll_s=args.poll)
    _print(res, args.json)
    return 0


def _status(args) -> int:
    from sharebench.node.reconfiguration import status
    _print(status(args.node, api_client=_client(args), namespace=args.namespace), args.json)
    return 0


def _render(args) -> int:
    written = mf.write(args.out, mf.RenderOptions(gpus=tuple(args.gpu), mig_strategy=args.mig_strategy,
                                                  operator_namespace=args.operator_namespace,
                                                  run_namespace=args.run_namespace))
    for path in written:
        print(path)
    return 0


def _check(args) -> int:
    problems = mf.check(Path(args.dir))
    if problems:
        for line in problems:
            print(line, file=sys.stderr)
        print(f"sharebench: manifests in {args.dir} are out of sync; run 'sharebench manifests render --out {args.dir}'",
              file=sys.stderr)
        return 1
    print(f"manifests in {args.dir} match the render")
    return 0
