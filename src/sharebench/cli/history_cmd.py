"""``sharebench history add|show|check|accept``: the work, imported when one of them runs (their options:
``sharebench.cli.history``)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from sharebench.cli.history import check_options
from sharebench.errors import UserError
from sharebench.history import (
    accept,
    add,
    check,
    load_runs,
    newest_rows,
    open_store,
)
from sharebench.history.check import RATE_BASIS
from sharebench.history.push import push
from sharebench.history.show import ShowFilter, plot, plot_into, provenance_changes, select, table, write_csv
from sharebench.modes import parse_mode
from sharebench.parse import whole_number


def _report(verdicts: list[Any]) -> int:
    changes = [v for v in verdicts if v.changed]
    for v in changes:
        print(f"changed: {v.line()}")
    judged = [v for v in verdicts if v.status in ("changed", "same")]
    by_rate = sum(v.basis == RATE_BASIS for v in judged)
    rated = f" ({by_rate} by the rate per particle-turn: sizes differ)" if by_rate else ""
    print(f"{len(changes)} change(s) in {len(verdicts)} cell(s); {len(judged)} had a baseline to compare with{rated}")
    return 1 if changes else 0


def cmd_add(args: argparse.Namespace) -> int:
    opts = check_options(args)  # every value checked before this module loaded (cli.history.check_values)
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
        write_csv(t, Path(args.csv))
        print(f"written: {args.csv}")
    where = [str(p) for p in plot(runs, Path(args.plot))] if args.plot else plot_into(runs, store)
    print("written: " + "  ".join(where))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    opts = check_options(args)
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
