"""``sharebench compare A B [C …]``: per cell, B (C …) against A, printed and optionally written to a folder.

Options only, light (``--help`` imports no library stack); every value is checked here (:func:`check_compare`)
before the work, ``sharebench.cli.compare_cmd``, loads.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sharebench.cli import lazy
from sharebench.errors import UserError
from sharebench.parse import check_ignore


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Compare results folders cell by cell: for each (work, mode) measured in A and in B, "
        "the change of the cell time with its 95% interval and a verdict (same within noise / "
        "faster / slower), each folder's loss with its interval and the between-run spread. "
        "Two runs whose particle counts or turns differ (calibrated runs pick their own) are compared per "
        "particle-turn, and the settings that differ are named. Never writes into A or B."
    )
    parser.add_argument("dirs", metavar="DIR", nargs="+", help="results folders: A, then B [C …] compared with A")
    parser.add_argument("--out", default=None, help="also write compare.md and compare.csv into this folder")
    parser.add_argument(
        "--ignore",
        default="",
        help="work keys not to match on, comma-separated (engine, backend, lattice, device_class)",
    )
    parser.set_defaults(func=lazy("sharebench.cli.compare_cmd:cmd_compare", check=check_compare))


def check_compare(args: argparse.Namespace) -> None:
    """Two folders or more, each with its results.csv; ``--out`` a folder of its own; ``--ignore`` work keys."""
    if len(args.dirs) < 2:
        raise UserError(f"compare needs at least two results folders, got {len(args.dirs)}: {args.dirs[0]}")
    dirs = [Path(d) for d in args.dirs]
    for d in dirs:
        if not (d / "results.csv").is_file():
            raise UserError(f"results folder {d} has no results.csv; give folders written by `sharebench run`")
    out = Path(args.out) if args.out else None
    if out is not None and any(out.resolve() == d.resolve() for d in dirs):
        raise UserError(f"--out {out} is one of the compared folders; give a folder of its own")
    if out is not None and out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a folder; give a folder (it is created if missing)")
    check_ignore(args.ignore)
