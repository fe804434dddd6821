"""``sharebench campaign``: the work, imported when it runs (its options: ``sharebench.cli.campaign``)."""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from sharebench.campaign import (
    SMOKE_FAILED,
    CampaignStopped,
    Runner,
    check_plan,
    describe,
    load_plan,
    run_campaign,
    select,
)
from sharebench.cli.sweep_cmd import run_in_child
from sharebench.errors import UserError
from sharebench.kernel import RunConfig, run_replica
from sharebench.report import build_report


def report_quietly(folder: Path) -> None:
    """A sweep folder's report rebuilt, its chatter and a failure kept off the campaign's output (as
    ``sharebench report`` run with its output discarded: the folder's results stay what they are)."""
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        try:
            build_report(folder)
        except (UserError, OSError, ValueError) as exc:
            print(f"sharebench: report of {folder}: {exc}", file=sys.__stderr__)


def _warm(run: RunConfig) -> None:
    """A spawned process's body (:func:`warm_in_child`): the warm-up track, its output discarded."""
    with (
        open(os.devnull, "w") as null,
        contextlib.redirect_stdout(null),
        contextlib.redirect_stderr(null),
        contextlib.suppress(UserError, OSError, ValueError, RuntimeError),
    ):
        run_replica(run)


def warm_in_child(run: RunConfig) -> None:
    """The plan's untimed warm-up track in a process of its own (its device context ends with it), handed
    the run value; a failure is ignored, as the warm-up only brings the device out of idle."""
    process = multiprocessing.get_context("spawn").Process(target=_warm, args=(run,), name="sharebench-warm")
    process.start()
    process.join()


RUNNER = Runner(sweep=run_in_child, report=report_quietly, warm=warm_in_child)


def cmd_campaign(args: argparse.Namespace) -> int:
    plan = select(load_plan(args.plan), [s for s in args.steps.split(",") if s])
    if args.device is not None:
        plan = replace(plan, device=args.device)
    if args.lattice is not None:
        plan = replace(plan, lattice=None if args.lattice == "none" else args.lattice)
    if args.budget is not None:
        if args.budget <= 0:
            raise UserError(f"bad --budget {args.budget:g}; allowed: seconds > 0")
        plan = replace(plan, budget_s=args.budget)
    if args.out is None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out = Path("campaign-results") / f"{plan.name}-{stamp}"
    else:
        out = Path(args.out)
    notes = check_plan(plan, here=not args.dry_run)  # the lattice, the modes on the device: before anything runs
    if args.dry_run:
        print("\n".join([*describe(plan, out), *notes]))
        return 0
    try:
        return run_campaign(plan, out, RUNNER)
    except CampaignStopped as exc:
        print(f"sharebench campaign: {exc}", file=sys.stderr)
        return SMOKE_FAILED
