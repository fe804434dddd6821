"""Benchmark: ``sharebench advise --check`` on a synthetic month of 100 GPUs, its time and memory recorded.

    python -m tools.advise_replay [--days 30] [--results DIR ...] [--keep DIR] [--record FILE]

Builds the usage of :func:`sharebench.advise.synthetic.month100` (100 GPUs at once: churned inference
services and notebooks, a few training jobs; 1-minute steps), writes it as the usage CSV (not timed),
then runs the whole command as a site runs it, in a process of its own: reading the CSV (streamed),
the advice (every option of every class packed by presence and replayed, every pod's p95) and the check
(fit on the first half, replay on the second), with the committed H200 results (default: results/h200).
Its wall and CPU seconds and peak memory (the child's maximum resident set) go to ``--record``
(default docs/advise-example/month.json), with the machine's cores and load, and what the command
printed; ``python -m tools.advise_examples`` renders the documentation's month paragraph from it. The
documentation's target: under 60 s and 1.5 GB on 2 idle cores.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "advise-example" / "month.json"
# the usage is made in a process of its own: this one stays small (a child's peak memory counts its parent's
# at the fork), and its own numbers are printed as JSON
MAKE = """
import json, sys
from sharebench.advise.synthetic import month100, synthetic_usage
df = synthetic_usage(month100(), float(sys.argv[1]), seed=100)
df.to_csv(sys.argv[2], index=False)
print(json.dumps({"rows": len(df), "pods": int(df["pod"].nunique())}))
"""


def run_timed(command: list[str], where: Path) -> dict:
    """The command in a child process: its exit code, output, wall and CPU seconds and peak memory (bytes),
    from its own resource usage (``wait4``)."""
    out, err = where / "stdout.txt", where / "stderr.txt"
    with out.open("w") as o, err.open("w") as e:
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, stdout=o, stderr=e, cwd=ROOT, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "rc": proc.returncode,
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_bytes": int(usage.ru_maxrss) * 1024,  # Linux: kilobytes
        "stdout": out.read_text(),
        "stderr": err.read_text()[-2000:],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--days", type=float, default=30.0)
    ap.add_argument("--results", nargs="+", default=["results/h200"])
    ap.add_argument("--keep", help="write the usage CSV and the advice here instead of a temporary folder")
    ap.add_argument("--record", default=str(RECORD), help="the benchmark record (JSON); '' none")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(args.keep or tmp)
        where.mkdir(parents=True, exist_ok=True)
        usage = where / "usage.csv"
        made = subprocess.run([sys.executable, "-c", MAKE, str(args.days), str(usage)], capture_output=True, text=True)
        if made.returncode:
            raise SystemExit(made.stderr)
        size = json.loads(made.stdout)
        print(f"usage: {size['rows']:,} rows, {size['pods']} pods, {usage.stat().st_size / 1e6:.0f} MB (not timed)")
        out = where / "advice"
        command = ["advise", "--usage", str(usage), "--results", *args.results, "--out", str(out), "--check", "--force"]
        load = os.getloadavg()
        got = run_timed([sys.executable, "-m", "sharebench", *command], where)
        rows, pods = size["rows"], size["pods"]
        where_text = str(where)
    print(got["stdout"], got["stderr"], sep="")
    print(
        f"sharebench advise … --check: rc {got['rc']}, {got['wall_s']} s wall, {got['cpu_s']} s CPU, "
        f"peak {got['peak_rss_bytes'] / 1e9:.2f} GB, on {os.cpu_count()} cores (load {load[0]:.1f} before)"
    )
    if args.record:
        record = {
            "kind": "advise-benchmark",
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
            "command": f"python -m tools.advise_replay --days {args.days:g} --results {' '.join(args.results)}",
            "days": args.days,
            "rows": rows,
            "pods": pods,
            "cores": os.cpu_count(),
            "load_before": round(load[0], 2),
            **{k: got[k] for k in ("rc", "wall_s", "cpu_s", "peak_rss_bytes")},
            "printed": [
                line.replace(where_text, "/tmp") for line in got["stdout"].splitlines() if not line.startswith("wrote ")
            ],
        }
        Path(args.record).write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.record}")


if __name__ == "__main__":
    main()
