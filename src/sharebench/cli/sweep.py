"""``sharebench run`` (a local sweep, then its report), ``report`` (rebuild a report) and ``cleanup``: their
options, light (``--help`` imports no library stack); the work is in ``sharebench.cli.sweep_cmd``."""

from __future__ import annotations

import argparse

from sharebench.cli import lazy
from sharebench.cli.workloads import add_exec_options
from sharebench.modes import ALLOWED
from sharebench.patterns import DEFAULT_BURSTS, DEFAULT_SLO, PATTERNS
from sharebench.patterns import help_text as pattern_help


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    {"run": configure_run, "report": configure_report, "cleanup": configure_cleanup}[name](parser)


def configure_run(run: argparse.ArgumentParser) -> None:
    run.description = (
        "Run a sweep of sharing modes x particle counts x repeats on this machine, write results.csv "
        "as it goes, then the tables, plots and report.md/report.html. With no options: the best device "
        "found (auto), exclusive, timeslice:2, timeslice:4 and mps:2 where available (partition:2 on "
        "the CPU), at sizes that finish in a few minutes."
    )
    run.add_argument("--device", default=None, help="auto, cpu, cuda[:N], opencl[:P.D] (default: auto)")
    run.add_argument("--engine", default=None, help="simpletrack (default), xtrack, or exec (any program: --exec)")
    run.add_argument(
        "--modes",
        default=None,
        help=f"comma-separated: {ALLOWED} "
        "(default: exclusive,timeslice:2,timeslice:4 + mps:2 on an NVIDIA GPU "
        "/ partition:2 on the CPU)",
    )
    run.add_argument(
        "--particles",
        "--work",
        dest="particles",
        default=None,
        help="comma-separated particle counts (--engine exec: work sizes) per replica, e.g. 5e6,1e7 "
        "(default: on the CPU one size calibrated for about 2 s of exclusive tracking; 1e6,2e6 "
        "on a GPU)",
    )
    run.add_argument("--turns", default=None, help="turns per run (default: 10)")
    run.add_argument("--repeats", default=None, help="measured repeats, 1..1000 (default 3)")
    run.add_argument("--warmup-repeats", default=None, help="discarded warm-up repeats before them (default 1)")
    run.add_argument("--lattice", default=None, help="Xsuite line JSON/JSON.gz (default: the generated LHC-like ring)")
    run.add_argument(
        "--out",
        default=None,
        help="results folder (default: sharebench-results/<UTC time>); must not hold results unless --resume",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue an existing results folder with its own options (those given must match "
        "it): cells already measured are kept and skipped",
    )
    add_limit_options(run)
    add_budget_options(run)
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="check everything and print what would run (cells, replicas, cost; with --budget the plan and its "
        "predicted time), run nothing; the CPU default's calibration runs, to show the size the run picks",
    )
    run.add_argument("--no-telemetry", action="store_true", help="do not sample GPU/CPU telemetry")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument(
        "--strict",
        action="store_true",
        help="refuse to start on a busy host, stop after a cell measured under disturbance (exit 1)",
    )
    add_exec_options(run)
    add_pattern_options(run)
    run.set_defaults(func=lazy("sharebench.cli.sweep_cmd:cmd_run"))


def add_pattern_options(run: argparse.ArgumentParser) -> None:
    """How the replicas use the device (sharebench.patterns, issue 23) and the latency target."""
    run.add_argument(
        "--pattern",
        default=None,
        metavar="P",
        help=f"{pattern_help()}; replica 0 follows it, its bursts' latency measured (tables/latency.csv)",
    )
    run.add_argument(
        "--neighbours",
        default=None,
        metavar="P",
        help=f"the pattern of the other replicas of each sharing cell, one of {', '.join(PATTERNS)} as --pattern "
        "spells it (default: --pattern); e.g. --pattern interactive --neighbours batch: a user beside saturating jobs",
    )
    run.add_argument(
        "--bursts",
        default=None,
        metavar="N",
        help=f"bursts (or requests) replica 0 runs per cell under a pattern (default {DEFAULT_BURSTS}); "
        "the neighbours work until it is done",
    )
    run.add_argument(
        "--slo",
        default=None,
        metavar="X",
        help=f"the p95 slowdown target (>= 1) of users per GPU: the most users whose p95 burst latency stays "
        f"within X times the same pattern alone (default {DEFAULT_SLO:g})",
    )
    run.add_argument(
        "--capacity",
        action="store_true",
        help="find the users per GPU at the --slo target by search: each family in --modes given without N "
        "(timeslice, mps, timeslice/long, mps@25) doubles N from --users LO until the p95 slowdown's interval "
        "lies above the target, then bisects; --repeats (default 2) to --max-repeats (default 4) per N; "
        "bounded by --budget; a pattern sweep whose --modes name a family without N implies it",
    )
    run.add_argument(
        "--users",
        default=None,
        metavar="LO..HI",
        help="with --capacity: the smallest N tried and the stated maximum (default 2..64); an answer at the "
        "maximum reads '>= HI users'",
    )


def add_budget_options(run: argparse.ArgumentParser) -> None:
    """A sweep within a node-time budget, with adaptive repeats (sharebench.sweep.budget, issue 24)."""
    run.add_argument(
        "--budget",
        default=None,
        metavar="DURATION",
        help="the node time the answer may cost, from the command's start to its report (90s, 10m, 1h30m): a "
        "calibration plans the modes x sizes x repeats that fit (headline modes and the largest size first), "
        "then cells repeat while unsettled; what is measured is kept when it is spent (continue with --resume)",
    )
    run.add_argument(
        "--precision",
        default=None,
        metavar="PTS",
        help="with --budget: repeat a cell while its 95%% interval is wider than +-PTS points of loss (%% of T_1 "
        "for exclusive) or straddles the Answer's 2%% gain threshold (default 1)",
    )
    run.add_argument(
        "--max-repeats",
        default=None,
        metavar="N",
        help="with --budget: the most repeats of a cell (at least 3, the minimum; default 10)",
    )
    run.add_argument(
        "--gpu-model",
        default=None,
        metavar="MODEL",
        help="with --dry-run and --budget: plan a GPU campaign on a machine without that GPU (H200, A100, ...), "
        "from the recorded results of that model under --recorded",
    )
    run.add_argument(
        "--recorded",
        default=None,
        metavar="DIR",
        help="with --gpu-model: the folder of recorded results folders (default: this checkout's results/)",
    )


def add_limit_options(run: argparse.ArgumentParser) -> None:
    """The run command's time limits and what it may change or keep between cells."""
    run.add_argument(
        "--ready-timeout",
        default=None,
        metavar="S",
        help="longest a replica may take to build and warm up before the start barrier (s)",
    )
    run.add_argument(
        "--run-timeout",
        default=None,
        metavar="S",
        help="longest a cell may track before its replicas are stopped and the cell marked failed (s; default: "
        "max(60, 20 x the exclusive run's track_s + setup_s) at its size; before one is measured, the same "
        "from a predicted track time, at most 3600)",
    )
    run.add_argument(
        "--stop-after",
        default=None,
        metavar="S",
        help="end the sweep S seconds after its first cell: a cell starts only if its predicted length fits, a "
        "patterned cell is stopped at the limit with its bursts kept and marked (continue with --resume)",
    )
    run.add_argument(
        "--allow-gpu-settings",
        action="store_true",
        help="let timeslice:N/INTERVAL set the GPU's time-slice interval (nvidia-smi compute-policy), "
        "put back after each cell; refused without it",
    )
    run.add_argument(
        "--fresh-replicas",
        action="store_true",
        help="start new replica processes for every cell (default: warm replicas, kept from cell to "
        "cell with their context, kernel and particles; see the README's 'Warm replicas')",
    )
    run.add_argument(
        "--no-probe",
        action="store_true",
        help="with a timeslice mode on an NVIDIA GPU: skip the time-slice probe (a few seconds before the "
        "cells) and the runs of one replica beside it (after them) that split each time-slicing loss; a "
        "sweep of replica patterns skips them anyway (they explain a batch loss)",
    )


def configure_report(rep: argparse.ArgumentParser) -> None:
    rep.description = "Rebuild tables/, plots/, report.md and report.html from DIR/results.csv."
    rep.add_argument("dir", metavar="DIR", help="results folder (holds results.csv)")
    rep.add_argument(
        "--compare",
        metavar="DIR2",
        default=None,
        help="refused: use `sharebench compare DIR DIR2`, which never overwrites DIR's report",
    )
    rep.set_defaults(func=lazy("sharebench.cli.sweep_cmd:cmd_report"))


def configure_cleanup(cleanup: argparse.ArgumentParser) -> None:
    cleanup.description = (
        "Stop the MPS daemons a killed sweep left on this machine (their folders "
        "$TMPDIR/sbmps-* name a sweep pid that is gone) and remove their folders. "
        "The next MPS cell does the same on its own."
    )
    cleanup.set_defaults(func=lazy("sharebench.cli.sweep_cmd:cmd_cleanup"))
