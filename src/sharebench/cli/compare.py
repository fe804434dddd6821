"""``sharebench compare A B [C …]``: per cell, B (C …) against A, printed and optionally written to a folder.

Options only, light (``--help`` imports no library stack); the work: ``sharebench.cli.compare_cmd``.
"""

from __future__ import annotations

import argparse

from sharebench.cli import lazy


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
    parser.set_defaults(func=lazy("sharebench.cli.compare_cmd:cmd_compare"))
