"""``sharebench history add|show|check|accept``: a results history with regression alarms (issue 25)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from sharebench.errors import UserError
from sharebench.history import (
    DEFAULT_ALPHA,
    DEFAULT_BASELINE_RUNS,
    DEFAULT_THRESHOLD_PTS,
    CheckOptions,
    accept,
    add,
    check,
    load_runs,
    newest_rows,
    open_store,
)
from sharebench.history.push import push
from sharebench.history.show import ShowFilter, plot, provenance_changes, select, table
from sharebench.modes import parse_mode
from sharebench.parse import whole_number

STORE_HELP = "a local folder or s3://bucket/prefix (credentials: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--s3-endpoint", default=None, help="S3 API endpoint of an s3:// store (MinIO: http://HOST:9000)")


def _check_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD_PTS,
        help=f"a change must be larger than this, in loss points (default {DEFAULT_THRESHOLD_PTS:g})",
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
    a.set_defaults(func=cmd_add)
    s = sub.add_parser("show", help="the series as a table and a plot")
    s.add_argument("store", metavar="STORE", help=STORE_HELP)
    s.add_argument("--node", default=None, help="only this node")
    s.add_argument("--mode", default=None, help="only this mode, e.g. timeslice:2")
    s.add_argument("--since", default=None, help="only runs at or after this UTC date/time, e.g. 2026-12-01")
    s.add_argument(
        "--plot", default="history", metavar="PATH", help="write the plot as PATH.png and PATH.svg (default ./history)"
    )
    s.add_argument("--csv", default=None, metavar="PATH", help="also write the table as CSV")
    _common(s)
    s.set_defaults(func=cmd_show)
    c = sub.add_parser("check", help="newest run against its baseline per cell: exit 1 and a line per change")
    c.add_argument("store", metavar="STORE", help=STORE_HELP)
    c.add_argument("--node", default=None, help="only this node's cells")
    _check_options(c)
    _common(c)
    c.set_defaults(func=cmd_check)
    ac = sub.add_parser("accept", help="accept a change: a new baseline starts at the newest (or a given) run")
    ac.add_argument("store", metavar="STORE", help=STORE_HELP)
    ac.add_argument("--node", default=None, help="the node (default: every node)")
    ac.add_argument("--mode", default=None, help="the mode (default: every mode)")
    ac.add_argument("--particles", default=None, help="the size (default: every size)")
    ac.add_argument("--run", default=None, metavar="RUN_ID", help="start the baseline at this run (default: newest)")
    _common(ac)
    ac.set_defaults(func=cmd_accept)
    parser.set_defaults(func=lambda _args: _help(parser))


def _help(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def options(args: argparse.Namespace) -> CheckOptions:
    baseline = whole_number("--baseline", args.baseline, 1)
    return CheckOptions(
        threshold_pts=float(args.threshold), alpha=float(args.alpha), baseline_runs=baseline
    ).validated()


def _report(verdicts: list[Any]) -> int:
    changes = [v for v in verdicts if v.changed]
    for v in changes:
        print(f"changed: {v.line()}")
    judged = sum(v.status in ("changed", "same") for v in verdicts)
    print(f"{len(changes)} change(s) in {len(verdicts)} cell(s); {judged} had a baseline to compare with")
    return 1 if changes else 0


def cmd_add(args: argparse.Namespace) -> int:
    opts = options(args)
    if not Path(args.results).is_dir():
        raise UserError(f"results folder {args.results} does not exist; give a folder written by `sharebench run`")
    store = open_store(args.to, endpoint=args.s3_endpoint, create=True)
    run, added = add(args.results, store)
    print(
        f"{'added' if added else 'already in the store'}: run {run.run_id} ({run.node}, {run.time_utc}, "
        f"{len(run.rows)} cell(s)) -> {store.url}/runs/{run.file_name}"
    )
    verdicts = check(store, opts, node=run.node) if args.check else None
    if args.pushgateway:
        push(args.pushgateway, run.rows, verdicts)
        print(f"pushed to {args.pushgateway}")
    return _report(verdicts) if verdicts is not None else 0


def cmd_show(args: argparse.Namespace) -> int:
    mode = parse_mode(args.mode).label if args.mode else None
    store = open_store(args.store, endpoint=args.s3_endpoint)
    runs = select(load_runs(store), ShowFilter(node=args.node, mode=mode, since=args.since))
    if runs.empty:
        raise UserError(f"no run in {store.url} matches the filters (--node, --mode, --since)")
    t = table(runs)
    print(t.to_string(index=False, float_format=lambda x: f"{x:.2f}" if math.isfinite(x) else ""))
    for node, when, what in provenance_changes(runs):
        print(f"machine changed on {node} at {when}: {what}")
    if args.csv:
        t.to_csv(args.csv, index=False)
        print(f"written: {args.csv}")
    paths = plot(runs, Path(args.plot))
    print("written: " + "  ".join(str(p) for p in paths))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    opts = options(args)
    store = open_store(args.store, endpoint=args.s3_endpoint)
    verdicts = check(store, opts, node=args.node)
    if not verdicts:
        raise UserError(f"no run in {store.url}{f' for node {args.node}' if args.node else ''} to check")
    if args.pushgateway:
        push(args.pushgateway, newest_rows(store, verdicts), verdicts)
    return _report(verdicts)


def cmd_accept(args: argparse.Namespace) -> int:
    store = open_store(args.store, endpoint=args.s3_endpoint)
    cell: dict[str, Any] = {}
    if args.node:
        cell["node"] = args.node
    if args.mode:
        cell["mode"] = parse_mode(args.mode).label
    if args.particles:
        cell["particles"] = whole_number("--particles", args.particles, 1)
    doc = accept(store, cell, run_id=args.run)
    what = ", ".join(f"{k}={v}" for k, v in doc["cell"].items()) or "every cell"
    print(f"accepted: {what}; the baseline starts at run {doc['run_id']} ({doc['from_time_utc']})")
    return 0
