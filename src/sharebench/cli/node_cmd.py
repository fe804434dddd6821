"""``sharebench node apply|restore|status|agent``: the work, imported when one of them runs (their options:
``sharebench.cli.node``)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sharebench.node import (
    MIN_POLL_S,
    ReconfigureOptions,
    check_times,
    make_api_client,
    preview,
    reconfigure,
    restore,
    status,
)
from sharebench.node.agent import AgentOptions, serve, serve_once


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
    check_times(args.timeout, args.poll, ("--timeout", "--poll"), min_poll_s=MIN_POLL_S)
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
    check_times(args.timeout, args.poll, ("--timeout", "--poll"), min_poll_s=MIN_POLL_S)
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


def cmd_agent(args: argparse.Namespace) -> int:
    check_times(args.timeout, args.poll, ("--timeout", "--poll"), min_poll_s=MIN_POLL_S)
    check_times(args.every, args.every, ("--every", "--every"), min_poll_s=MIN_POLL_S)
    api = make_api_client(args.kubeconfig, args.context)
    options = AgentOptions(timeout_s=args.timeout, poll_s=args.poll)
    if args.once:
        print(f"answered {serve_once(api, options, _progress)} request(s)")
        return 0
    _progress("node agent: answering sharing requests (Ctrl-C to stop)")
    serve(api, options, every_s=args.every, progress=_progress)
    return 0
