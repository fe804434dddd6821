"""``sharebench campaign PLAN.toml``: run a campaign plan (``sharebench.campaign``), or print it."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from sharebench.campaign import SMOKE_FAILED, CampaignStopped, describe, load_plan, run_campaign, select
from sharebench.errors import UserError


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a campaign: the steps of a plan file (TOML; benchmarks/plans/ holds the committed ones), "
        "each a sweep into its own folder of OUT or a command. A smoke step whose cell failed stops the "
        "campaign (exit 3)."
    )
    parser.add_argument("plan", metavar="PLAN.toml", help="the plan file")
    parser.add_argument("--out", default=None, help="the campaign folder (default: campaign-results/<plan>-<UTC>)")
    parser.add_argument("--steps", default="", help="comma-separated step names or tags to run (default: all)")
    parser.add_argument("--device", default=None, help="overrides the plan's device (e.g. cpu for a dry run)")
    parser.add_argument("--lattice", default=None, help="overrides the plan's lattice: a line file, or none")
    parser.add_argument("--budget", type=float, default=None, metavar="S", help="overrides the plan's budget_s")
    parser.add_argument("--dry-run", action="store_true", help="print the commands the plan runs, run nothing")
    parser.set_defaults(func=cmd_campaign)


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
    if args.dry_run:
        print("\n".join(describe(plan, out)))
        return 0
    try:
        return run_campaign(plan, out)
    except CampaignStopped as exc:
        print(f"sharebench campaign: {exc}", file=sys.stderr)
        return SMOKE_FAILED
