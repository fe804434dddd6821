"""``sharebench run`` (a local sweep, then its report), ``report`` (rebuild a report) and ``cleanup``: their
options, light (``--help`` imports no library stack); the work is in ``sharebench.cli.sweep_cmd``.

``run``'s options come in four groups: what to run, how to share, pattern and capacity, budget and output.
:func:`run_options` parses and checks every one of them, and how they go together, with ``modes``,
``patterns`` and ``parse`` alone: ``cli.lazy`` runs it before ``sweep_cmd`` (and the library) loads, so a bad
value answers at once; ``sweep_cmd`` builds the sweep from the :class:`RunOptions` value it gives (the parsed
``args`` are never changed).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharebench.cli import lazy
from sharebench.cli.workloads import Options, add_exec_options, given_workload
from sharebench.devices.discovery import check_spec
from sharebench.errors import UserError
from sharebench.modes import ALLOWED, Mode, as_modes, families_of, family_mode, parse_users
from sharebench.parse import (
    MAX_REPEATS,
    MAX_TURNS,
    MIN_REPEATS,
    RUN_ENGINES,
    check_engine,
    check_precision,
    check_slo,
    counts,
    lattice_file,
    parse_duration,
    seconds,
    size_name,
    whole_number,
)
from sharebench.patterns import DEFAULT_SLO, MAX_BURSTS, MIN_WINDOW_S, PATTERNS, parse_pattern
from sharebench.patterns import help_text as pattern_help

CAPACITY_REPEATS = (1, 4)  # a capacity search's cells of each N (at least, at most while undecided) by default


@dataclass(frozen=True)
class Search:
    """``--capacity``: the families searched (modes without N), ``--users LO..HI``, the repeats of each N."""

    families: tuple[str, ...]
    users: tuple[int, int]
    min_repeats: int
    max_repeats: int


@dataclass(frozen=True)
class Budget:
    """``--budget`` (seconds, and as given), ``--precision`` and ``--max-repeats`` (None: the defaults)."""

    budget_s: float
    text: str
    precision: float | None = None
    max_repeats: int | None = None


@dataclass(frozen=True)
class RunOptions:
    """``sharebench run``'s options, each parsed and checked; None where not given (a resumed run takes
    those from its folder). ``modes``: those given with their N, a search's families at their first N after
    them; ``repeats``: a search's minimum repeats of each N under ``--capacity``."""

    modes: tuple[Mode, ...] | None = None
    particles: str | None = None  # checked; parsed by the sweep, which knows the workload's sizes (exec: work)
    turns: int | None = None
    repeats: int | None = None
    warmup_repeats: int | None = None
    workload: Mapping[str, Any] = field(default_factory=dict)  # the Workload keys given (None: not given)
    ready_timeout_s: float | None = None
    run_timeout_s: float | None = None
    stop_after_s: float | None = None
    slo: float | None = None
    search: Search | None = None
    budget: Budget | None = None
    gpu_model: str | None = None  # --dry-run --budget: plan for that GPU from its recorded results
    recorded: Path | None = None


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    {"run": configure_run, "report": configure_report, "cleanup": configure_cleanup}[name](parser)


def configure_run(run: argparse.ArgumentParser) -> None:
    run.description = (
        "Run a sweep of sharing modes x particle counts x repeats on this machine, write results.csv "
        "as it goes, then the tables, plots and report.md/report.html. With no options: the best device "
        "found (auto), exclusive, timeslice:2, timeslice:4 and mps:2 where available (partition:2 on "
        "the CPU), at sizes that finish in a few minutes."
    )
    add_work_options(run.add_argument_group("what to run"))
    add_sharing_options(run.add_argument_group("how to share"))
    add_pattern_options(run.add_argument_group("pattern and capacity"))
    add_budget_options(run.add_argument_group("budget and output"))
    run.set_defaults(func=lazy("sharebench.cli.sweep_cmd:cmd_run", check=run_options))


def add_work_options(group: Options) -> None:
    """What each replica runs, where, and how much of it."""
    group.add_argument("--device", default=None, help="auto, cpu, cuda[:N], opencl[:P.D] (default: auto)")
    group.add_argument("--engine", default=None, help="simpletrack (default), xtrack, or exec (any program: --exec)")
    add_exec_options(group)
    group.add_argument(
        "--lattice", default=None, help="Xsuite line JSON/JSON.gz (default: the generated LHC-like ring)"
    )
    group.add_argument(
        "--particles",
        "--work",
        dest="particles",
        default=None,
        help="comma-separated particle counts (--engine exec: work sizes) per replica, e.g. 5e6,1e7 "
        "(default: on the CPU one size calibrated for about 2 s of exclusive tracking; 1e6,2e6 "
        "on a GPU)",
    )
    group.add_argument("--turns", default=None, help="turns per run (default: 10)")
    group.add_argument("--repeats", default=None, help="measured repeats, 1..1000 (default 3)")
    group.add_argument("--warmup-repeats", default=None, help="discarded warm-up repeats before them (default 1)")


def add_sharing_options(group: Options) -> None:
    """The sharing modes, and what the run may change or keep between cells."""
    group.add_argument(
        "--modes",
        default=None,
        help=f"comma-separated: {ALLOWED} "
        "(default: exclusive,timeslice:2,timeslice:4 + mps:2 on an NVIDIA GPU "
        "/ partition:2 on the CPU)",
    )
    group.add_argument(
        "--allow-gpu-settings",
        action="store_true",
        help="let timeslice:N/INTERVAL set the GPU's time-slice interval (nvidia-smi compute-policy), "
        "put back after each cell; refused without it",
    )
    group.add_argument(
        "--fresh-replicas",
        action="store_true",
        help="start new replica processes for every cell (default: warm replicas, kept from cell to "
        "cell with their context, kernel and particles; see the README's 'Warm replicas')",
    )
    group.add_argument(
        "--no-probe",
        action="store_true",
        help="with a timeslice mode on an NVIDIA GPU: skip the time-slice probe (a few seconds before the "
        "cells) and the runs of one replica beside it (after them) that split each time-slicing loss; a "
        "sweep of replica patterns skips them anyway (they explain a batch loss)",
    )


def add_pattern_options(group: Options) -> None:
    """How the replicas use the device (sharebench.patterns, issue 23), the latency target, and the users
    per GPU found by search (sharebench.sweep.capacity)."""
    group.add_argument(
        "--pattern",
        default=None,
        metavar="P",
        help=f"{pattern_help()}; replica 0 follows it, its bursts' latency measured (tables/latency.csv)",
    )
    group.add_argument(
        "--neighbours",
        default=None,
        metavar="P",
        help=f"the pattern of the other replicas of each sharing cell, one of {', '.join(PATTERNS)} as --pattern "
        "spells it (default: --pattern); e.g. --pattern interactive --neighbours batch: a user beside saturating jobs",
    )
    group.add_argument(
        "--bursts",
        default=None,
        metavar="N",
        help="a cap: the most bursts (or requests) each user runs per cell under a pattern (default: until "
        "decided, at most 4 x the minimum); a cell stops as soon as every user's p95 is decided against "
        "--slo (the alone cell: once its p95 interval is precise), and the minimum per user follows from the "
        "p95, its 95%% confidence and the users (--dry-run shows it; 113 for 2 users); a service's cell lasts "
        f"the cap's seconds of arrivals at its rate, at least {MIN_WINDOW_S:g} s",
    )
    group.add_argument(
        "--awake-control",
        action="store_true",
        help="under a pattern: also run each alone cell beside a keep-awake process (a one-element kernel "
        "every 2 ms on the GPU, a spinning core on the CPU), recorded as a control (cell id ..._awake, a "
        "warm-up row: in no statistic), to tell whether an idle device waking slowly sets the baseline",
    )
    group.add_argument(
        "--slo",
        default=None,
        metavar="X",
        help=f"the p95 slowdown target (>= 1) of users per GPU: the most users whose p95 burst latency stays "
        f"within X times the same pattern alone (default {DEFAULT_SLO:g})",
    )
    group.add_argument(
        "--capacity",
        action="store_true",
        help="find the users per GPU at the --slo target by search: each family in --modes given without N "
        "(timeslice, mps, timeslice/long, mps@25) doubles N from --users LO while every user's p95 slowdown is "
        "within the target (decided by its interval), then bisects; the families take turns; an N still "
        "undecided gets another cell, --repeats (default 1) to --max-repeats (default 4) cells per N; a failed "
        "N is not measured again; bounded by --budget; --resume continues it; a pattern sweep whose --modes "
        "name a family without N implies it",
    )
    group.add_argument(
        "--users",
        default=None,
        metavar="LO..HI",
        help="with --capacity: the smallest N tried and the stated maximum (default 2..64); an answer at the "
        "maximum reads '>= HI'; one stopped short of its answer, 'between A and B' with why",
    )


def add_budget_options(group: Options) -> None:
    """A sweep within a node-time budget, with adaptive repeats (sharebench.sweep.budget, issue 24); its time
    limits; where it writes and what it prints."""
    group.add_argument(
        "--budget",
        default=None,
        metavar="DURATION",
        help="the node time the answer may cost, from the command's start to its report (90s, 10m, 1h30m): a "
        "calibration plans the modes x sizes x repeats that fit (headline modes and the largest size first), "
        "then cells repeat while unsettled; what is measured is kept when it is spent (continue with --resume)",
    )
    group.add_argument(
        "--precision",
        default=None,
        metavar="PTS",
        help="with --budget: repeat a cell while its 95%% interval is wider than +-PTS points of loss (%% of T_1 "
        "for exclusive) or straddles the Answer's 2%% gain threshold (default 1)",
    )
    group.add_argument(
        "--max-repeats",
        default=None,
        metavar="N",
        help="with --budget: the most repeats of a cell (at least 3, the minimum; default 10)",
    )
    group.add_argument(
        "--gpu-model",
        default=None,
        metavar="MODEL",
        help="with --dry-run and --budget: plan a GPU campaign on a machine without that GPU (H200, A100, ...), "
        "from the recorded results of that model under --recorded",
    )
    group.add_argument(
        "--recorded",
        default=None,
        metavar="DIR",
        help="with --gpu-model: the folder of recorded results folders (default: this checkout's results/)",
    )
    add_limit_options(group)
    add_output_options(group)


def add_output_options(group: Options) -> None:
    """Where the run writes, and what it prints."""
    group.add_argument(
        "--out",
        default=None,
        help="results folder (default: sharebench-results/<UTC time>); must not hold results unless --resume",
    )
    group.add_argument(
        "--resume",
        action="store_true",
        help="continue an existing results folder with its own options (those given must match "
        "it): cells already measured are kept and skipped",
    )
    group.add_argument(
        "--dry-run",
        action="store_true",
        help="check everything and print what would run (cells, replicas, cost) and its predicted seconds with their "
        "basis (with --budget the plan), measure nothing: a short calibration on this machine gives the seconds (the "
        "CPU default's own, which also shows the size the run picks; a program's: one exclusive cell per size)",
    )
    group.add_argument("--no-telemetry", action="store_true", help="do not sample GPU/CPU telemetry")
    group.add_argument("--no-progress", action="store_true", help="no progress bar")
    group.add_argument(
        "--strict",
        action="store_true",
        help="refuse to start on a busy host, stop after a cell measured under disturbance (exit 1)",
    )


def add_limit_options(group: Options) -> None:
    """How long a replica may set up, a cell may track, and the sweep may go on."""
    group.add_argument(
        "--stop-after",
        default=None,
        metavar="S",
        help="end the sweep S seconds after its first cell: a cell starts only if its predicted length fits, a "
        "patterned cell is stopped at the limit with its bursts kept and marked (continue with --resume)",
    )
    group.add_argument(
        "--ready-timeout",
        default=None,
        metavar="S",
        help="longest a replica may take to build and warm up before the start barrier (s)",
    )
    group.add_argument(
        "--run-timeout",
        default=None,
        metavar="S",
        help="longest a cell may track before its replicas are stopped and the cell marked failed (s; default: "
        "max(60, 20 x the exclusive run's track_s + setup_s) at its size; before one is measured, the same "
        "from a predicted track time, at most 3600)",
    )


# ----------------------------------------------------------------- the run command's options, checked


def run_options(args: argparse.Namespace) -> RunOptions:
    """Every option of ``sharebench run`` parsed and checked, and how they go together; a one-line UserError
    naming the first bad one. Light: modes, patterns and parse only (no library stack, no device found)."""
    search = search_of(args)
    budget = budget_of(args, search)
    recorded = recorded_of(args) if budget is not None and args.gpu_model is not None else None
    return RunOptions(
        modes=modes_of(args, search),
        particles=particles_of(args),
        turns=number("--turns", args.turns, 1, MAX_TURNS),
        repeats=search.min_repeats if search is not None else number("--repeats", args.repeats, 1, MAX_REPEATS),
        warmup_repeats=number("--warmup-repeats", args.warmup_repeats, 0, MAX_REPEATS),
        workload=workload_of(args),
        ready_timeout_s=seconds("--ready-timeout", args.ready_timeout, 0.001) if args.ready_timeout else None,
        run_timeout_s=seconds("--run-timeout", args.run_timeout, 0.001) if args.run_timeout is not None else None,
        stop_after_s=seconds("--stop-after", args.stop_after) if args.stop_after is not None else None,
        slo=check_slo(args.slo) if args.slo is not None else None,
        search=search,
        budget=budget,
        gpu_model=args.gpu_model,
        recorded=recorded,
    )


def number(name: str, value: str | None, lo: int, hi: int) -> int | None:
    """A whole number option (None: not given)."""
    return whole_number(name, value, lo, hi) if value is not None else None


def search_of(args: argparse.Namespace) -> Search | None:
    """``--capacity`` (or --modes naming a family without N): the families, ``--users``, the repeats of each
    N (``--repeats``, default 2, to ``--max-repeats``, default 4); None for a sweep of the modes given."""
    families, _ = families_of(str(args.modes or "").split(","))
    if not families and not args.capacity:
        if args.users is not None:
            raise UserError("--users LO..HI goes with --capacity (users per GPU by search)")
        return None
    if not families:
        raise UserError("--capacity needs a mode family without N in --modes (e.g. --modes timeslice,mps)")
    low = number("--repeats", args.repeats, 1, MAX_REPEATS) or CAPACITY_REPEATS[0]
    high = number("--max-repeats", args.max_repeats, 1, MAX_REPEATS) or CAPACITY_REPEATS[1]
    return Search(tuple(families), parse_users(args.users), low, max(low, high))


def budget_of(args: argparse.Namespace, search: Search | None) -> Budget | None:
    """``--budget``/``--precision``/``--max-repeats`` (one-line errors); None without ``--budget``. A search
    takes ``--repeats`` and ``--max-repeats`` as its own (per N)."""
    max_repeats = None if search is not None else args.max_repeats
    if args.budget is None:
        given = {"--precision": args.precision, "--max-repeats": max_repeats, "--gpu-model": args.gpu_model}
        extra = [o for o, v in {**given, "--recorded": args.recorded}.items() if v is not None]
        if extra:
            verb = "goes" if len(extra) == 1 else "go"
            raise UserError(
                f"{', '.join(extra)} {verb} with --budget DURATION (adaptive repeats within a node-time budget)"
            )
        return None
    if args.repeats is not None and search is None:
        raise UserError(
            f"--repeats {args.repeats} goes without --budget: a budget plans its repeats (at least 3, then while "
            "unsettled up to --max-repeats)"
        )
    if args.gpu_model is not None and not args.dry_run:
        raise UserError(f"--gpu-model {args.gpu_model} plans a campaign for another machine: it goes with --dry-run")
    budget_s = parse_duration(args.budget)
    precision = check_precision(args.precision) if args.precision is not None else None
    return Budget(budget_s, args.budget, precision, number("--max-repeats", max_repeats, MIN_REPEATS, MAX_REPEATS))


def modes_of(args: argparse.Namespace, search: Search | None) -> tuple[Mode, ...] | None:
    """The modes given with their N (``--modes``), a search's families at their first N after them."""
    if search is None:
        return as_modes(args.modes) if args.modes is not None else None
    _, rest = families_of(str(args.modes).split(","))
    return as_modes([*rest, *(family_mode(f, search.users[0]) for f in search.families)])


def particles_of(args: argparse.Namespace) -> str | None:
    """``--particles``/``--work`` checked as the sweep will parse them (a resumed run whose engine is the
    folder's: checked there, named by it)."""
    if args.particles is None:
        return None
    if args.engine is not None or not args.resume:
        counts(size_name(args.engine), args.particles)
    return str(args.particles)


def workload_of(args: argparse.Namespace) -> dict[str, Any]:
    """The Workload keys the options give, checked (None where not given: a resumed run takes the folder's)."""
    if args.engine is not None:
        check_engine(args.engine, RUN_ENGINES)
    if args.device is not None:
        check_spec(args.device)
    if args.lattice is not None:
        lattice_file(args.lattice)
    for pattern in (args.pattern, args.neighbours):
        if pattern is not None:
            parse_pattern(pattern)
    bursts = number("--bursts", args.bursts, 1, MAX_BURSTS)
    return {**given_workload(args), "pattern": args.pattern, "neighbours": args.neighbours, "bursts": bursts}


def recorded_of(args: argparse.Namespace) -> Path | None:
    """``--recorded DIR``: a folder that holds recorded results folders (None: the checkout's results/)."""
    if args.recorded is None:
        return None
    root = Path(args.recorded)
    if not root.is_dir():
        raise UserError(f"--recorded {root}: no such folder; give the folder that holds recorded results folders")
    return root


def configure_report(rep: argparse.ArgumentParser) -> None:
    rep.description = "Rebuild tables/, plots/, report.md and report.html from DIR/results.csv."
    rep.add_argument("dir", metavar="DIR", help="results folder (holds results.csv)")
    rep.add_argument(
        "--compare",
        metavar="DIR2",
        default=None,
        help="refused: use `sharebench compare DIR DIR2`, which never overwrites DIR's report",
    )
    rep.add_argument(
        "--suggest-minutes",
        default=None,
        metavar="M",
        help="size the Answer's 'Measure it' commands to finish within M minutes on the machine that measured DIR "
        "(default 10)",
    )
    rep.set_defaults(func=lazy("sharebench.cli.sweep_cmd:cmd_report", check=report_options))


def report_options(args: argparse.Namespace) -> None:
    """``report``'s values, before the report's stack loads: the refused --compare, a folder that exists."""
    if args.compare:
        raise UserError(
            f"report --compare is gone: run `sharebench compare {args.dir} {args.compare}` "
            "(differences per cell, never overwriting a report)"
        )
    if not Path(args.dir).is_dir():
        raise UserError(f"results folder {args.dir} does not exist")
    if args.suggest_minutes is not None:
        seconds("--suggest-minutes", args.suggest_minutes, 0.1, 10**5)


def configure_cleanup(cleanup: argparse.ArgumentParser) -> None:
    cleanup.description = (
        "Stop the MPS daemons a killed sweep left on this machine (their folders "
        "$TMPDIR/sbmps-* name a sweep pid that is gone) and remove their folders. "
        "The next MPS cell does the same on its own."
    )
    cleanup.set_defaults(func=lazy("sharebench.cli.sweep_cmd:cmd_cleanup"))
