"""``sharebench campaign PLAN.toml``: run a campaign plan (``sharebench.campaign``), or print it.

Options only, light (``--help`` imports no library stack); the work: ``sharebench.cli.campaign_cmd``.
"""

from __future__ import annotations

import argparse

from sharebench.cli import lazy


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Run a campaign: the steps of a plan file (TOML; benchmarks/plans/ holds the committed ones), "
        "each a sweep into its own folder of OUT or a command; each step's wall time goes to OUT/walls.csv. "
        "A smoke step whose cell failed stops the campaign (exit 3)."
    )
    parser.add_argument("plan", metavar="PLAN.toml", help="the plan file")
    parser.add_argument("--out", default=None, help="the campaign folder (default: campaign-results/<plan>-<UTC>)")
    parser.add_argument("--steps", default="", help="comma-separated step names or tags to run (default: all)")
    parser.add_argument("--device", default=None, help="overrides the plan's device (e.g. cpu for a dry run)")
    parser.add_argument("--lattice", default=None, help="overrides the plan's lattice: a line file, or none")
    parser.add_argument("--budget", type=float, default=None, metavar="S", help="overrides the plan's budget_s")
    parser.add_argument(
        "--dry-run", action="store_true", help="print the commands the plan runs and its total time, run nothing"
    )
    parser.set_defaults(func=lazy("sharebench.cli.campaign_cmd:cmd_campaign"))
