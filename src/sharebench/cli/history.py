"""``sharebench history add|show|check|accept``: a results history with regression alarms (issue 25).

Options only, light (``--help`` imports no library stack); every value is checked here
(:func:`check_values`, through ``cli.lazy``) before the work, ``sharebench.cli.history_cmd``, loads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sharebench.cli import lazy
from sharebench.errors import UserError
from sharebench.history_settings import CheckOptions, check_url, parse_since, store_location
from sharebench.modes import parse_mode
from sharebench.parse import DEFAULT_ALPHA, DEFAULT_BASELINE_RUNS, DEFAULT_THRESHOLD_PTS, whole_number

STORE_HELP = "a local folder or s3://bucket/prefix (credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--s3-endpoint", default=None, help="S3 API endpoint of an s3:// store (MinIO: http://HOST:9000)")


def _check_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD_PTS,
        help=f"a change must be larger than this, in loss points, or in percent of the rate per particle-turn "
        f"where the newest run's size is new (default {DEFAULT_THRESHOLD_PTS:g})",
    )
    p.add_argument(
        "--alpha",
        type=float,
        default=DEFAULT_ALPHA,
        help=f"significance level of Welch's t-test on the repeats (default {DEFAULT_ALPHA:g})",
    )
    p.add_argument(
        "--baseline",
        default=str(DEFAULT_BASELINE_RUNS),
        metavar="N",
        help=f"runs before the newest that form its baseline (default {DEFAULT_BASELINE_RUNS}), "
        "none older than the last accepted change",
    )
    p.add_argument(
        "--pushgateway",
        default=None,
        metavar="URL",
        help="also push the losses and the check's result to this Prometheus Pushgateway",
    )


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Keep the results of scheduled runs in a store (a folder or s3://bucket/prefix), show the loss of "
        "each node x mode x size over time, and check the newest run against its baseline."
    )
    sub = parser.add_subparsers(dest="history_command", metavar="ACTION")
    a = sub.add_parser("add", help="add a results folder to a store (one immutable file; twice is a no-op)")
    a.add_argument("results", metavar="RESULTS_DIR", help="a results folder written by `sharebench run`")
    a.add_argument("--to", required=True, metavar="STORE", help=STORE_HELP)
    a.add_argument("--check", action="store_true", help="then check the run's node (exit 1 on a change)")
    _check_options(a)
    _common(a)
    a.set_defaults(func=lazy("sharebench.cli.history_cmd:cmd_add", check=check_values))
    s = sub.add_parser("show", help="the series as a table and a plot")
    s.add_argument("store", metavar="STORE", help=STORE_HELP)
    s.add_argument("--node", default=None, help="only this node")
    s.add_argument("--mode", default=None, help="only this mode, e.g. timeslice:2")
    s.add_argument("--since", default=None, help="only runs at or after this UTC date/time, e.g. 2026-12-01")
    s.add_argument(
        "--plot",
        default=None,
        metavar="PATH",
        help="write the plot as PATH.png and PATH.svg (default: into the store, STORE/plots/history.png and .svg)",
    )
    s.add_argument("--csv", default=None, metavar="PATH", help="also write the table as CSV")
    _common(s)
    s.set_defaults(func=lazy("sharebench.cli.history_cmd:cmd_show", check=check_values))
    c = sub.add_parser("check", help="newest run against its baseline per cell: exit 1 and a line per change")
    c.add_argument("store", metavar="STORE", help=STORE_HELP)
    c.add_argument("--node", default=None, help="only this node's cells")
    _check_options(c)
    _common(c)
    c.set_defaults(func=lazy("sharebench.cli.history_cmd:cmd_check", check=check_values))
    ac = sub.add_parser("accept", help="accept a change: a new baseline starts at the newest (or a given) run")
    ac.add_argument("store", metavar="STORE", help=STORE_HELP)
    ac.add_argument("--node", default=None, help="the node (default: every node)")
    ac.add_argument("--mode", default=None, help="the mode (default: every mode)")
    ac.add_argument("--particles", default=None, help="the size (default: every size)")
    ac.add_argument("--run", default=None, metavar="RUN_ID", help="start the baseline at this run (default: newest)")
    _common(ac)
    ac.set_defaults(func=lazy("sharebench.cli.history_cmd:cmd_accept", check=check_values))
    parser.set_defaults(func=lambda _args: _help(parser))


def check_options(args: argparse.Namespace) -> CheckOptions:
    """``--threshold``, ``--alpha``, ``--baseline`` checked (a one-line UserError naming the bad one)."""
    baseline = whole_number("--baseline", args.baseline, 1)
    return CheckOptions(float(args.threshold), float(args.alpha), baseline).validated()


def check_values(args: argparse.Namespace) -> None:
    """Every value of a history command checked before its work loads: the store's form (a folder that
    exists, or s3://), a results folder to add, the check's options, the filters, the Pushgateway URL."""
    verb = args.history_command
    if verb == "add":
        results = Path(args.results)
        if not results.is_dir():
            raise UserError(f"results folder {results} does not exist; give a folder written by `sharebench run`")
        if not (results / "results.csv").is_file():
            raise UserError(f"results folder {results} has no results.csv; give a folder written by `sharebench run`")
    store_location(args.to if verb == "add" else args.store, create=verb == "add")
    if verb in ("add", "check"):
        check_options(args)
        if args.pushgateway:
            check_url(args.pushgateway)
    if getattr(args, "mode", None):
        parse_mode(args.mode)
    if getattr(args, "since", None):
        parse_since(args.since)
    if getattr(args, "particles", None):
        whole_number("--particles", args.particles, 1)


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2
