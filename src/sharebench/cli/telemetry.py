"""``sharebench telemetry sample|dcgm|annotate``: this machine's telemetry for a few seconds (a check
that NVML answers on a new GPU node), DCGM metrics from Prometheus attached to a results folder, and a
results folder's cells as Grafana annotations.

Options only, light (``--help`` imports no library stack); the work: ``sharebench.cli.telemetry_cmd``.
"""

from __future__ import annotations

import argparse
import sys

from sharebench.cli import lazy
from sharebench.parse import DEFAULT_NODE_LABEL
from sharebench.results import DCGM_CSV


def configure(name: str, tel: argparse.ArgumentParser) -> None:
    tel.description = "Telemetry outside a sweep: sample this machine, attach DCGM metrics, annotate Grafana."
    tsub = tel.add_subparsers(dest="telemetry_command", metavar="ACTION")
    sp = tsub.add_parser("sample", help="sample this machine for a few seconds and print the summary")
    sp.add_argument("--device", default="cpu", help="cpu, cuda[:N] or a GPU UUID (GPU-…/MIG-…)")
    sp.add_argument("--seconds", type=float, default=2.0)
    sp.add_argument("--interval", type=float, default=0.1, help="sampling interval (s)")
    sp.add_argument("--out", help="raw samples CSV")
    sp.set_defaults(func=lazy("sharebench.cli.telemetry_cmd:cmd_sample"))

    dp = tsub.add_parser(
        "dcgm", help=f"attach DCGM metrics from Prometheus to each cell of a results folder (writes {DCGM_CSV} there)"
    )
    dp.add_argument("results", help="results folder (results.csv)")
    dp.add_argument("--url", required=True, help="Prometheus base URL, e.g. http://prometheus.monitoring:9090")
    dp.add_argument("--node", help="node name (the ServiceMonitor's node label)")
    dp.add_argument("--node-label", default=DEFAULT_NODE_LABEL)
    dp.add_argument("--gpu-uuid", help="only this GPU (UUID label)")
    dp.add_argument("--step", type=float, default=1.0, help="query step (s)")
    dp.set_defaults(func=lazy("sharebench.cli.telemetry_cmd:cmd_dcgm"))

    an = tsub.add_parser("annotate", help="write a results folder's cells to Grafana as annotations")
    an.add_argument("results", help="results folder (results.csv)")
    an.add_argument("--grafana", required=True, help="Grafana base URL, e.g. http://grafana.monitoring")
    an.add_argument(
        "--token-env",
        default="GRAFANA_TOKEN",
        help="environment variable holding a service-account token (default GRAFANA_TOKEN)",
    )
    an.add_argument("--run", help="a run label added as tag run:<label>")
    an.set_defaults(func=lazy("sharebench.cli.telemetry_cmd:cmd_annotate"))
    tel.set_defaults(func=lambda _args: _help(tel))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2
