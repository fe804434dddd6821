"""The README of a workloads campaign folder (`sharebench campaign benchmarks/plans/workloads.toml`): when
and where it ran, the commands, the report's workloads section and the Nsight Compute profile, all from the
folder itself.

    python -m tools.workloads_readme OUT_DIR > OUT_DIR/README.md
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def section(markdown: str, title_start: str) -> str:
    """The '## title...' section of a Markdown report, up to the next '## '."""
    m = re.search(rf"^## {re.escape(title_start)}.*?(?=^## |\Z)", markdown, flags=re.M | re.S)
    return m.group(0).strip() if m else ""


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m tools.workloads_readme OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])

    def read(name: str) -> str:
        p = out / name
        return p.read_text().strip() if p.exists() else ""

    report = read("results/report.md")
    parts = [
        "# Workloads compared on one GPU",
        "",
        "Made by `sharebench campaign benchmarks/plans/workloads.toml`; every figure below comes from `results/` in this folder "
        "(per-replica `results.csv`, `tables/workloads.csv`, `report.md`).",
        "",
        "## Machine and date",
        "",
        "```",
        read("machine.txt") or "(machine.txt missing)",
        "```",
        "",
        "## Commands",
        "",
        "```",
        read("commands.txt") or "(commands.txt missing)",
        "```",
        "",
    ]
    workloads = section(report, "Workloads")
    parts += [("#" + workloads) if workloads else "No workloads section: the report was not built.", ""]
    if (out / "ncu" / "profile.md").exists():
        parts += ["## GPU profile per workload (Nsight Compute)", "", read("ncu/profile.md"), ""]
    print("\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
