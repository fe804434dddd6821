"""Does ``sharebench run --budget`` finish within its budget? One timed run, recorded as JSON with the machine.

Issue 24's check: on the CPU, ``sharebench run --device cpu --budget 90s`` finishes within 110% of its
budget, and its report states the plan, the time used and the precision reached. This runs the command
once in a fresh results folder, times it from the process's start to its exit (what a site pays), and
writes ``budget_check.json``: the command, exit status, wall time, budget, their ratio, whether it is
within the limit, the budget lines of the report (``report.md`` lines naming the budget, the plan, the
time used and the precision), and the machine (CPU model, usable cores, load average before and after).

    python -m tools.budget_check [--budget 90s] [--precision 1] [--max-repeats 10] [--device cpu]
                                 [--out DIR] [--json budget_check.json] [-- EXTRA sharebench run ARGS]

Exit status 0 when the run succeeded within the limit, 1 when it overran or failed, 2 for bad options.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sharebench.devices import host
from sharebench.errors import UserError
from sharebench.sweep.budget import parse_duration

LIMIT = 1.10  # the "within 110% of its budget"
REPORT_WORDS = ("budget", "plan", "used", "precision", "stopped", "repeat(s)")


def budget_lines(out: Path) -> list[str]:
    """The report's lines about the budget (report.md; notes.txt when the report is missing)."""
    for name in ("report.md", "notes.txt"):
        path = out / name
        if path.exists():
            return [
                line.strip()
                for line in path.read_text().splitlines()
                if "budget" in line.lower() or any(w in line for w in REPORT_WORDS[1:])
            ]
    return []


def machine() -> dict[str, Any]:
    return {"cpu_model": host.cpu_model(), "usable_cpus": len(host.usable_cpus()), "host_id": host.host_id()}


def run_check(args: argparse.Namespace, extra: list[str]) -> dict[str, Any]:
    budget_s = parse_duration(args.budget)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="budget-check-")) / "run"
    cmd = [
        sys.executable,
        "-m",
        "sharebench",
        "run",
        "--device",
        args.device,
        "--budget",
        args.budget,
        "--precision",
        str(args.precision),
        "--max-repeats",
        str(args.max_repeats),
        "--out",
        str(out),
        "--no-progress",
        *extra,
    ]
    load_before = host.load_average()
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall_s = time.monotonic() - t0
    return {
        "command": cmd[2:],
        "returncode": proc.returncode,
        "stderr_tail": proc.stderr[-2000:],
        "budget_s": budget_s,
        "wall_s": wall_s,
        "wall_over_budget": wall_s / budget_s,
        "limit": LIMIT,
        "within_limit": proc.returncode == 0 and wall_s <= LIMIT * budget_s,
        "report_lines": budget_lines(out),
        "out": str(out),
        "machine": machine(),
        "load_average_before": load_before,
        "load_average_after": host.load_average(),
        "finished_unix": time.time(),
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--budget", default="90s", help="the --budget to give (default 90s)")
    ap.add_argument("--precision", default="1", help="the --precision to give (default 1)")
    ap.add_argument("--max-repeats", default="10", help="the --max-repeats to give (default 10)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default=None, help="the results folder (default: a new temporary one)")
    ap.add_argument("--json", default="budget_check.json", help="where the record goes")
    ap.add_argument("--keep", action="store_true", help="keep the temporary results folder")
    args = ap.parse_args(argv)
    try:
        record = run_check(args, extra)
    except UserError as exc:
        print(f"budget_check: {exc}", file=sys.stderr)
        return 2
    Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    verdict = "within" if record["within_limit"] else "NOT within"
    print(
        f"budget_check: {record['wall_s']:.1f} s for a budget of {record['budget_s']:g} s "
        f"({100 * record['wall_over_budget']:.0f}%): {verdict} {100 * LIMIT:.0f}%; exit {record['returncode']}; "
        f"record in {args.json}"
    )
    if not args.out and not args.keep:
        shutil.rmtree(Path(record["out"]).parent, ignore_errors=True)
    return 0 if record["within_limit"] else 1


if __name__ == "__main__":
    sys.exit(main())
