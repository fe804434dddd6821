"""Combine the results folders of several workloads into one and build its report (the workloads
comparison): a folder is resumed only with its own workload, so each workload has its own.

    python -m tools.combine_workloads OUT_DIR DIR1 DIR2 [...] [--rebuild]

``--rebuild`` (what a campaign that is continued over several calls wants): OUT_DIR is removed first and
the folders that hold no results yet (a workload not reached) are left out.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from sharebench.analysis.workloads import combine_workloads
from sharebench.errors import UserError
from sharebench.report import build_report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.combine_workloads", description=__doc__.splitlines()[0])
    ap.add_argument("out", metavar="OUT_DIR")
    ap.add_argument("dirs", metavar="DIR", nargs="+")
    ap.add_argument("--rebuild", action="store_true", help="remove OUT_DIR first; leave out folders without results")
    args = ap.parse_args(argv)
    dirs = [Path(d) for d in args.dirs]
    if args.rebuild:
        shutil.rmtree(args.out, ignore_errors=True)
        dirs = [d for d in dirs if (d / "results.csv").is_file()]
    try:
        out = combine_workloads(dirs, args.out)
        paths = build_report(out)
    except UserError as exc:
        print(f"combine_workloads: error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {paths['html']}  ({paths['markdown']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
