"""Combine the results folders of several workloads into one and build its report (the workloads
comparison): a folder is resumed only with its own workload, so each workload has its own.

    python benchmarks/combine_workloads.py OUT_DIR DIR1 DIR2 [...]
"""

from __future__ import annotations

import sys

from sharebench.analysis.workloads import combine_workloads
from sharebench.errors import UserError
from sharebench.report import build_report


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python benchmarks/combine_workloads.py OUT_DIR DIR1 [DIR2 ...]", file=sys.stderr)
        return 2
    try:
        out = combine_workloads(argv[1:], argv[0])
        paths = build_report(out)
    except UserError as exc:
        print(f"combine_workloads: error: {exc}", file=sys.stderr)
        return 2
    print(f"report: {paths['html']}  ({paths['markdown']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
