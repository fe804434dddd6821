"""``sharebench run`` (a local sweep, then its report) and ``sharebench report`` (rebuild a report)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from sharebench.cli.workloads import add_exec_options, exec_options
from sharebench.errors import UserError
from sharebench.parse import whole_number
from sharebench.report import build_report
from sharebench.results import RESULTS_CSV
from sharebench.sweep import SweepConfig, describe_plan, run_sweep, validate


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    {"run": configure_run, "report": configure_report}[name](parser)


def configure_run(run: argparse.ArgumentParser) -> None:
    run.description = ("Run a sweep of sharing modes x particle counts x repeats on this machine, write results.csv "
                    "as it goes, then the tables, plots and report.md/report.html. With no options: the best device "
                    "found (auto), exclusive, timeslice:2, timeslice:4 and mps:2 where available (partition:2 on "
                       "the CPU), at sizes that finish in a few minutes.")
    run.add_argument("--device", default="auto", help="auto, cpu, cuda[:N], opencl[:P.D] (default: auto)")
    run.add_argument("--engine", default="simpletrack",
                     help="simpletrack (default), xtrack, or exec (any program: --exec)")
    run.add_argument("--modes", default=None,
                     help="comma-separated: exclusive, timeslice:N, mps:N[@PCT], mig:LAYOUT, partition:N "
                          "(default: exclusive,timeslice:2,timeslice:4 + mps:2 on an NVIDIA GPU "
                          "/ partition:2 on the CPU)")
    run.add_argument("--particles", "--work", dest="particles", default=None,
                     help="comma-separated particle counts (--engine exec: work sizes) per replica, e.g. 5e6,1e7 "
                          "(default: 500,1000 on the CPU; 1e6,2e6 on a GPU)")
    run.add_argument("--turns", default=None,
                     help="turns per run (default: 10)")
    run.add_argument("--repeats", default="3", help="measured repeats (default 3)")
    run.add_argument("--warmup-repeats", default="1",
                     help="discarded warm-up repeats before them (default 1)")
    run.add_argument("--lattice", default=None, help="Xsuite line JSON/JSON.gz (default: the generated LHC-like ring)")
    run.add_argument("--out", default=None,
                     help="results folder (default: sharebench-results/<UTC time>); must not hold results "
                          "unless --resume")
    run.add_argument("--resume", action="store_true",
                     help="continue an existing results folder: cells already measured are kept and skipped")
    run.add_argument("--ready-timeout", type=float, default=900.0, metavar="S",
                     help="longest a replica may take to build and warm up before the start barrier (s)")
    run.add_argument("--run-timeout", type=float, default=None, metavar="S",
                     help="longest a cell may track before its replicas are stopped and the cell marked failed (s)")
    run.add_argument("--stop-after", type=float, default=None, metavar="S",
                     help="start no new cell after S seconds (what is done is kept; continue with --resume)")
    run.add_argument("--dry-run", action="store_true",
                     help="check everything and print what would run (cells, replicas, cost), run nothing")
    run.add_argument("--no-telemetry", action="store_true", help="do not sample GPU/CPU telemetry")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_exec_options(run)
    run.set_defaults(func=cmd_run)


def configure_report(rep: argparse.ArgumentParser) -> None:
    rep.description = ("Rebuild tables/, plots/, report.md and report.html from DIR/results.csv; "
                       "with --compare, put a second results folder beside it.")
    rep.add_argument("dir", metavar="DIR", help="results folder (holds results.csv)")
    rep.add_argument("--compare", metavar="DIR2", default=None,
                     help="a second results folder (another GPU, or figures typed in from a publication in the "
                          "same CSV schema) shown beside the first")
    rep.set_defaults(func=cmd_report)


def cmd_run(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else Path("sharebench-results") / datetime.now(timezone.utc).strftime(
        "%Y%m%dT%H%M%SZ")
    turns = whole_number("--turns", args.turns, 1) if args.turns is not None else None
    repeats = whole_number("--repeats", args.repeats, 1)
    warmup = whole_number("--warmup-repeats", args.warmup_repeats, 0)
    if args.stop_after is not None and args.stop_after < 0:
        raise UserError(f"bad --stop-after {args.stop_after!r}; allowed: seconds >= 0")
    if args.run_timeout is not None and args.run_timeout <= 0:
        raise UserError(f"bad --run-timeout {args.run_timeout!r}; allowed: seconds > 0")
    if args.ready_timeout <= 0:
        raise UserError(f"bad --ready-timeout {args.ready_timeout!r}; allowed: seconds > 0")
    cfg = SweepConfig(
        modes=args.modes.split(",") if args.modes is not None else None,
        particles=args.particles, turns=turns, repeats=repeats, warmup_repeats=warmup,
        device=args.device, engine=args.engine, lattice=args.lattice, resume=args.resume,
        ready_timeout_s=args.ready_timeout, run_timeout_s=args.run_timeout,
        telemetry_interval_s=None if args.no_telemetry else 0.1,
        progress=not args.no_progress, command=list(sys.argv), stop_after_s=args.stop_after,
        run_options=exec_options(args),
    )
    if args.dry_run:
        print(describe_plan(validate(cfg)))
        return 0
    try:
        run_sweep(cfg, out)
        if (out / RESULTS_CSV).exists():
            build_report(out)
    except KeyboardInterrupt:
        print(f"sharebench: interrupted; the cells finished so far are in {out}/results.csv "
              f"(continue with --resume --out {out}, or `sharebench report {out}`)", file=sys.stderr)
        return 130
    print(f"results: {out}/results.csv\nreport:  {out}/report.html  ({out}/report.md)")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    paths = build_report(Path(args.dir), compare=Path(args.compare) if args.compare else None)
    print(f"report: {paths['html']}  ({paths['markdown']})")
    return 0
