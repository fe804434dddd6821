"""``sharebench telemetry sample|dcgm|annotate``: this machine's telemetry for a few seconds (a check
that NVML answers on a new GPU node), DCGM metrics from Prometheus attached to a results folder, and a
results folder's cells as Grafana annotations."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from sharebench.devices import DeviceInfo
from sharebench.errors import UserError
from sharebench.results import DCGM_CSV
from sharebench.telemetry import make_sampler
from sharebench.telemetry.grafana import post_annotations
from sharebench.telemetry.prometheus import DEFAULT_NODE_LABEL, attach_to_results, cell_windows


def configure(name: str, tel: argparse.ArgumentParser) -> None:
    tel.description = "Telemetry outside a sweep: sample this machine, attach DCGM metrics, annotate Grafana."
    tsub = tel.add_subparsers(dest="telemetry_command", metavar="ACTION")
    sp = tsub.add_parser("sample", help="sample this machine for a few seconds and print the summary")
    sp.add_argument("--device", default="cpu", help="cpu, cuda[:N] or a GPU UUID (GPU-…/MIG-…)")
    sp.add_argument("--seconds", type=float, default=2.0)
    sp.add_argument("--interval", type=float, default=0.1, help="sampling interval (s)")
    sp.add_argument("--out", help="raw samples CSV")
    sp.set_defaults(func=cmd_sample)

    dp = tsub.add_parser(
        "dcgm", help=f"attach DCGM metrics from Prometheus to each cell of a results folder (writes {DCGM_CSV} there)"
    )
    dp.add_argument("results", help="results folder (results.csv)")
    dp.add_argument("--url", required=True, help="Prometheus base URL, e.g. http://prometheus.monitoring:9090")
    dp.add_argument("--node", help="node name (the ServiceMonitor's node label)")
    dp.add_argument("--node-label", default=DEFAULT_NODE_LABEL)
    dp.add_argument("--gpu-uuid", help="only this GPU (UUID label)")
    dp.add_argument("--step", type=float, default=1.0, help="query step (s)")
    dp.set_defaults(func=cmd_dcgm)

    an = tsub.add_parser("annotate", help="write a results folder's cells to Grafana as annotations")
    an.add_argument("results", help="results folder (results.csv)")
    an.add_argument("--grafana", required=True, help="Grafana base URL, e.g. http://grafana.monitoring")
    an.add_argument(
        "--token-env",
        default="GRAFANA_TOKEN",
        help="environment variable holding a service-account token (default GRAFANA_TOKEN)",
    )
    an.add_argument("--run", help="a run label added as tag run:<label>")
    an.set_defaults(func=cmd_annotate)
    tel.set_defaults(func=lambda _args: _help(tel))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def sample_device(text: str) -> DeviceInfo:
    """What ``--device`` names for the sampler: the CPU, a CUDA index or a GPU/MIG UUID."""
    dev = text.strip()
    if dev == "cpu":
        return DeviceInfo.from_dict({"kind": "cpu", "backend": "cpu", "spec": "cpu"})
    if dev.startswith("cuda"):
        return DeviceInfo.from_dict({"kind": "gpu", "backend": "cuda", "spec": dev})
    if dev.upper().startswith(("GPU-", "MIG-")):
        return DeviceInfo.from_dict({"kind": "gpu", "backend": "cuda", "uuid": dev})
    raise UserError(f"unknown device {dev!r}; allowed: cpu, cuda[:N], GPU-…/MIG-… UUID")


def cmd_sample(args: argparse.Namespace) -> int:
    sampler = make_sampler(sample_device(args.device), interval_s=args.interval, out_path=args.out).start()
    time.sleep(max(0.0, args.seconds))
    print(json.dumps(sampler.stop(), indent=2))
    return 0


def cmd_dcgm(args: argparse.Namespace) -> int:
    df = attach_to_results(
        args.results, args.url, node=args.node, node_label=args.node_label, gpu_uuid=args.gpu_uuid, step_s=args.step
    )
    print(f"{len(df)} cells -> {args.results}/{DCGM_CSV}")
    return 0


def cmd_annotate(args: argparse.Namespace) -> int:
    ids = post_annotations(args.grafana, os.environ.get(args.token_env), cell_windows(args.results), run=args.run)
    print(f"{len(ids)} annotations written to {args.grafana}")
    return 0
