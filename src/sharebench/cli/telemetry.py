"""``sharebench telemetry sample|dcgm|annotate``: this machine's telemetry for a few seconds (a check
that NVML answers on a new GPU node), DCGM metrics from Prometheus attached to a results folder, and a
results folder's cells as Grafana annotations.

Options only, light (``--help`` imports no library stack); every value is checked here (:func:`check_values`)
before the work, ``sharebench.cli.telemetry_cmd``, loads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sharebench.cli import lazy
from sharebench.errors import UserError
from sharebench.parse import DEFAULT_NODE_LABEL, check_http_url, seconds
from sharebench.results import DCGM_CSV


def configure(name: str, tel: argparse.ArgumentParser) -> None:
    tel.description = "Telemetry outside a sweep: sample this machine, attach DCGM metrics, annotate Grafana."
    tsub = tel.add_subparsers(dest="telemetry_command", metavar="ACTION")
    sp = tsub.add_parser("sample", help="sample this machine for a few seconds and print the summary")
    sp.add_argument("--device", default="cpu", help="cpu, cuda[:N] or a GPU UUID (GPU-…/MIG-…)")
    sp.add_argument("--seconds", type=float, default=2.0)
    sp.add_argument("--interval", type=float, default=0.1, help="sampling interval (s)")
    sp.add_argument("--out", help="raw samples CSV")
    sp.set_defaults(func=lazy("sharebench.cli.telemetry_cmd:cmd_sample", check=check_values))

    dp = tsub.add_parser(
        "dcgm", help=f"attach DCGM metrics from Prometheus to each cell of a results folder (writes {DCGM_CSV} there)"
    )
    dp.add_argument("results", help="results folder (results.csv)")
    dp.add_argument("--url", required=True, help="Prometheus base URL, e.g. http://prometheus.monitoring:9090")
    dp.add_argument("--node", help="node name (the ServiceMonitor's node label)")
    dp.add_argument("--node-label", default=DEFAULT_NODE_LABEL)
    dp.add_argument("--gpu-uuid", help="only this GPU (UUID label)")
    dp.add_argument("--step", type=float, default=1.0, help="query step (s)")
    dp.set_defaults(func=lazy("sharebench.cli.telemetry_cmd:cmd_dcgm", check=check_values))

    an = tsub.add_parser("annotate", help="write a results folder's cells to Grafana as annotations")
    an.add_argument("results", help="results folder (results.csv)")
    an.add_argument("--grafana", required=True, help="Grafana base URL, e.g. http://grafana.monitoring")
    an.add_argument(
        "--token-env",
        default="GRAFANA_TOKEN",
        help="environment variable holding a service-account token (default GRAFANA_TOKEN)",
    )
    an.add_argument("--run", help="a run label added as tag run:<label>")
    an.set_defaults(func=lazy("sharebench.cli.telemetry_cmd:cmd_annotate", check=check_values))
    tel.set_defaults(func=lambda _args: _help(tel))


MAX_SAMPLE_S = 3600.0  # `telemetry sample --seconds`: a check of a node, not a recording


def sample_kind(text: str) -> str:
    """What ``telemetry sample --device`` names: ``cpu``, ``cuda`` (an index) or ``uuid`` (a GPU/MIG UUID)."""
    dev = text.strip()
    if dev == "cpu":
        return "cpu"
    if dev.startswith("cuda"):
        return "cuda"
    if dev.upper().startswith(("GPU-", "MIG-")):
        return "uuid"
    raise UserError(f"unknown device {dev!r}; allowed: cpu, cuda[:N], GPU-…/MIG-… UUID")


def check_values(args: argparse.Namespace) -> None:
    """Every value of a telemetry command checked before the sampler and pandas load."""
    verb = args.telemetry_command
    if verb == "sample":
        sample_kind(args.device)
        seconds("--seconds", args.seconds, 0.0, MAX_SAMPLE_S)
        seconds("--interval", args.interval, 0.01, 3600)
        return
    results = Path(args.results) / "results.csv"
    if not results.is_file():
        raise UserError(f"no results file at {results}; run `sharebench run --out DIR` first")
    if verb == "dcgm":
        check_http_url("Prometheus URL", args.url)
        seconds("--step", args.step, 0.001, 3600)
    else:
        check_http_url("Grafana URL", args.grafana)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2
