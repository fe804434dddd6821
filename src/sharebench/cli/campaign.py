"""``sharebench campaign PLAN.toml``: run a campaign plan (``sharebench.campaign``), or print it.

Options only, light (``--help`` imports no library stack); every value is checked here (:func:`check_values`:
the plan file is there and is TOML, the steps named are its own, the overrides) before the work,
``sharebench.cli.campaign_cmd``, loads the library.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from sharebench.cli import lazy
from sharebench.devices.discovery import check_spec
from sharebench.errors import UserError
from sharebench.parse import lattice_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


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
        "--dry-run",
        action="store_true",
        help="print the commands the plan runs and its total time, run none of them (a sweep step without budget_s, "
        "on a device here: its own dry run gives its seconds); exit 2 when no sweep of the plan runs on the device",
    )
    parser.set_defaults(func=lazy("sharebench.cli.campaign_cmd:cmd_campaign", check=check_values))


def raw_plan(path: str) -> dict[str, Any]:
    """The plan file as TOML (its values are ``sharebench.campaign.load_plan``'s to check)."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"plan {str(p)!r} does not exist; give a TOML plan file (see benchmarks/plans/)")
    try:
        return tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"plan {p}: not valid TOML: {exc}") from None


def check_values(args: argparse.Namespace) -> None:
    """The plan file, ``--steps`` (its step names and tags), ``--budget``, ``--device``, ``--lattice`` (a dry run
    plans for another machine: it notes a lattice missing here instead, ``campaign.check_plan``)."""
    data = raw_plan(args.plan)
    names = [n for n in args.steps.split(",") if n]
    steps = [s for s in data.get("step") or [] if isinstance(s, dict)]
    known = {str(s.get("name")) for s in steps} | {str(t) for s in steps for t in s.get("tags") or []}
    bad = [n for n in names if n not in known]
    if bad:
        name = data.get("name") or Path(args.plan).stem
        raise UserError(f"no step or tag {bad[0]!r} in plan {name}; allowed: {', '.join(sorted(known))}")
    if args.budget is not None and not (math.isfinite(args.budget) and args.budget > 0):
        raise UserError(f"bad --budget {args.budget:g}; allowed: seconds > 0")
    if args.device is not None:
        check_spec(args.device)
    if args.lattice is not None and args.lattice != "none" and not args.dry_run:  # a dry run notes it instead
        lattice_file(args.lattice)
