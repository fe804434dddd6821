"""Summarise Nsight Compute CSVs (``ncu --metrics ... --csv``, one file per workload) as a Markdown table:
per workload, the kernels profiled, their total time, and the time-weighted registers per thread and
achieved occupancy (warps active, % of the peak), with the longest kernel.

    python -m tools.ncu_summary DIR      # DIR/<workload>.csv -> Markdown on stdout
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

REGS = "launch__registers_per_thread"
OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
TIME = "gpu__time_duration.sum"
TO_MS = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "s": 1e3, "second": 1e3}


def kernels(text: str) -> list[dict]:
    """One dict per profiled kernel launch: name, registers, occupancy %, time in ms."""
    rows = [ln for ln in text.splitlines() if ln.startswith('"')]  # ncu's CSV; the program's own output is not
    by_id: dict[str, dict] = {}
    for r in csv.DictReader(io.StringIO("\n".join(rows))):
        k = by_id.setdefault(r["ID"], {"name": r["Kernel Name"]})
        value = float(r["Metric Value"].replace(",", "")) if r["Metric Value"] else float("nan")
        if r["Metric Name"] == TIME:
            k["ms"] = value * TO_MS.get(r["Metric Unit"].strip().lower(), float("nan"))
        elif r["Metric Name"] == REGS:
            k["regs"] = value
        elif r["Metric Name"] == OCC:
            k["occ"] = value
    return [k for k in by_id.values() if {"ms", "regs", "occ"} <= set(k)]


def summary_row(name: str, ks: list[dict]) -> str:
    total = sum(k["ms"] for k in ks)
    if not ks or total <= 0:
        return f"| {name} | 0 | — | — | — | — |"
    regs = sum(k["regs"] * k["ms"] for k in ks) / total
    occ = sum(k["occ"] * k["ms"] for k in ks) / total
    top = max(ks, key=lambda k: k["ms"])
    short = top["name"] if len(top["name"]) <= 60 else top["name"][:57] + "..."
    return (
        f"| {name} | {len(ks)} | {total:.3f} | {regs:.0f} | {occ:.1f} | `{short}` ({top['ms']:.3f} ms, "
        f"{top['regs']:.0f} regs, {top['occ']:.1f}%) |"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: python -m tools.ncu_summary DIR (a folder of <workload>.csv from ncu --csv)", file=sys.stderr)
        return 2
    lines = [
        "| workload | kernels | kernel time (ms) | registers / thread | achieved occupancy % | longest kernel |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted(Path(argv[0]).glob("*.csv")):
        lines.append(summary_row(path.stem, kernels(path.read_text(errors="replace"))))
    print(
        f"Registers and occupancy are weighted by each kernel's time (Nsight Compute: `{REGS}`, `{OCC}`, `{TIME}`).\n"
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
