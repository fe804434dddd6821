"""``sharebench run`` (a local sweep, then its report) and ``sharebench report`` (rebuild a report)."""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sharebench.analysis.latency import DEFAULT_SLO, check_slo
from sharebench.cli.workloads import add_exec_options, given_workload, make_workload
from sharebench.errors import UserError
from sharebench.modes import parse_modes
from sharebench.parse import seconds, whole_number
from sharebench.report import build_report, end_screen
from sharebench.results import RESULTS_CSV, SWEEP_JSON
from sharebench.sharing import stop_orphans
from sharebench.sweep import (
    DEFAULT_PARTICLES,
    DEFAULT_TURNS,
    MAX_REPEATS,
    MAX_TURNS,
    Stopped,
    SweepConfig,
    SweepPlan,
    describe_plan,
    inherit_options,
    parse_particles,
    run_sweep,
    stop_on_signals,
    validate,
)
from sharebench.sweep.budget import RECORDED_ROOT, BudgetOptions, budget_options, plan_budget, plan_recorded
from sharebench.sweep.calibrate import auto_sized, calibrate, folder_sizes
from sharebench.sweep.plan import plan_header
from sharebench.sweep.resume import check_same_work, identity, measured_cells
from sharebench.telemetry.disturbance import Disturbed, check_quiet, strict_guard
from sharebench.workloads.workload import DEFAULT_BURSTS, MAX_BURSTS


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
        help="comma-separated: exclusive, timeslice:N[/INTERVAL], mps:N[@PCT], mig:LAYOUT, "
        "mig-emulated:LAYOUT, partition:N "
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
    run.set_defaults(func=cmd_run)


def add_pattern_options(run: argparse.ArgumentParser) -> None:
    """How the replicas use the device (sharebench.patterns, issue 23) and the latency target."""
    run.add_argument(
        "--pattern",
        default=None,
        metavar="P",
        help="batch (default: saturated replicas, the study's), interactive[:burst=N,think=S] (bursts of N "
        "units, exponential think times of mean S s) or serve[:rate=R,size=N] (Poisson requests); "
        "replica 0 follows it, its bursts' latency measured (tables/latency.csv)",
    )
    run.add_argument(
        "--neighbours",
        default=None,
        metavar="P",
        help="the pattern of the other replicas of each sharing cell (default: --pattern); e.g. "
        "--pattern interactive --neighbours batch: a user beside saturating jobs",
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


def budget_of(args: argparse.Namespace) -> BudgetOptions | None:
    """--budget/--precision/--max-repeats checked (one-line errors); None without --budget."""
    if args.budget is None:
        extra = [o for o, v in (("--precision", args.precision), ("--max-repeats", args.max_repeats)) if v is not None]
        extra += [o for o, v in (("--gpu-model", args.gpu_model), ("--recorded", args.recorded)) if v is not None]
        if extra:
            what = ", ".join(extra)
            verb = "goes" if len(extra) == 1 else "go"
            raise UserError(f"{what} {verb} with --budget DURATION (adaptive repeats within a node-time budget)")
        return None
    if args.repeats is not None:
        raise UserError(
            f"--repeats {args.repeats} goes without --budget: a budget plans its repeats (at least 3, then while "
            "unsettled up to --max-repeats)"
        )
    if args.gpu_model is not None and not args.dry_run:
        raise UserError(f"--gpu-model {args.gpu_model} plans a campaign for another machine: it goes with --dry-run")
    kw = {k: v for k, v in (("precision", args.precision), ("max_repeats", args.max_repeats)) if v is not None}
    return budget_options(args.budget, **kw)


def recorded_plan(args: argparse.Namespace, opts: BudgetOptions) -> str:
    """``--dry-run --budget --gpu-model``: the plan from the model's recorded rates, no device resolved."""
    modes = parse_modes(args.modes.split(",") if args.modes else ["exclusive", "timeslice:2", "timeslice:4", "mps:2"])
    if not any(m.kind == "exclusive" for m in modes):
        modes = [*parse_modes(["exclusive"]), *modes]
    sizes = parse_particles(args.particles) if args.particles else DEFAULT_PARTICLES["gpu"]
    turns = whole_number("--turns", args.turns, 1, MAX_TURNS) if args.turns is not None else DEFAULT_TURNS["gpu"]
    warm = whole_number("--warmup-repeats", args.warmup_repeats, 0, MAX_REPEATS) if args.warmup_repeats else 1
    root = Path(args.recorded) if args.recorded else RECORDED_ROOT
    if not root.is_dir():
        raise UserError(f"--recorded {root}: no such folder; give the folder that holds recorded results folders")
    plan = plan_recorded(opts, args.gpu_model, root, modes, sizes, turns, warm)
    return "\n".join(
        [
            f"device:    a GPU {args.gpu_model} (not this machine's: nothing resolved or measured here)",
            f"particles: {', '.join(f'{p:,}' for p in sizes)} per replica, {turns} turn{'s' if turns != 1 else ''}",
            plan.describe(),
        ]
    )


def dry_run(plan: SweepPlan, opts: BudgetOptions | None, out: Path) -> str:
    """What the run would run: its calibration too, so that the sizes shown are the ones it picks."""
    resumed = out if plan.config.resume else None
    if opts is not None:
        bp = plan_budget(plan, opts, folder_sizes(resumed) if auto_sized(plan) else ())
        plan.particles = list(bp.sizes)
        return "\n".join([*plan_header(plan), bp.describe(), *(f"note: {n}" for n in plan.notes)])
    if auto_sized(plan):
        plan.notes.append(calibrate(plan, resumed))
        if resumed is None or not folder_sizes(resumed):
            plan.notes.append(
                "the run calibrates again at its start, the same way (the machine's noise may move the size)"
            )
    return describe_plan(plan)


def pattern_workload(args: argparse.Namespace) -> dict[str, Any]:
    """The Workload keys of --pattern, --neighbours and --bursts (None where not given)."""
    bursts = whole_number("--bursts", args.bursts, 1, MAX_BURSTS) if args.bursts is not None else None
    return {"pattern": args.pattern, "neighbours": args.neighbours, "bursts": bursts}


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
        "max(60, 20 x the exclusive run's track_s + setup_s) at its size, 3600 before one is measured)",
    )
    run.add_argument(
        "--stop-after",
        default=None,
        metavar="S",
        help="start no new cell after S seconds (what is done is kept; continue with --resume)",
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
        "cells) and the runs of one replica beside it (after them) that split each time-slicing loss",
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
    rep.set_defaults(func=cmd_report)


def configure_cleanup(cleanup: argparse.ArgumentParser) -> None:
    cleanup.description = (
        "Stop the MPS daemons a killed sweep left on this machine (their folders "
        "$TMPDIR/sbmps-* name a sweep pid that is gone) and remove their folders. "
        "The next MPS cell does the same on its own."
    )
    cleanup.set_defaults(func=cmd_cleanup)


def cmd_cleanup(args: argparse.Namespace) -> int:
    done = stop_orphans()
    print("\n".join(done) if done else "nothing to clean up: no MPS daemon folder of a sweep that is gone")
    return 0


DEFAULT_ROOT = Path("sharebench-results")  # where a run without --out writes (a folder per UTC start time)


def results_folder(args: argparse.Namespace) -> Path:
    """The run's results folder: --out; a new one under the default root; with --resume and no --out the
    newest folder there (said on stderr). A resume of a folder that holds no sweep is refused."""
    if not args.resume:
        return Path(args.out) if args.out else DEFAULT_ROOT / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    if args.out:
        out = Path(args.out)
        if not out.is_dir():
            raise UserError(f"--resume: no results folder at {out}; give an existing folder, or run without --resume")
    else:
        found = sorted(p for p in DEFAULT_ROOT.glob("*") if p.is_dir()) if DEFAULT_ROOT.is_dir() else []
        if not found:
            raise UserError(
                f"--resume without --out: there is no results folder under {DEFAULT_ROOT}/ to continue; give --out DIR"
            )
        out = found[-1]
        print(f"sharebench: --resume without --out: continuing the newest results folder, {out}", file=sys.stderr)
    if not (out / RESULTS_CSV).exists() and not (out / SWEEP_JSON).exists():
        raise UserError(
            f"--resume: {out} holds no sharebench sweep (no {RESULTS_CSV}, no {SWEEP_JSON}); "
            "give a results folder, or run without --resume"
        )
    if not (out / SWEEP_JSON).exists():
        print(
            f"sharebench: {out}/{SWEEP_JSON} is gone: continuing from what its {RESULTS_CSV} rows prove",
            file=sys.stderr,
        )
    return out


def nothing_to_do(cfg: SweepConfig, out: Path) -> bool:
    """A resume whose every cell is measured already: says so (nothing is run or written)."""
    plan = validate(cfg)
    cells = {c.id for c in plan.cells()}
    if not cells <= measured_cells(out, plan.workload, plan.device.backend):
        return False
    shared = identity(cfg, plan.turns, plan.workload)  # the same work, or refused as the run itself would
    check_same_work(out, shared, plan.workload, device_model=plan.device.name or plan.device.kind)
    print(
        f"nothing to do: every cell of this sweep in {out} is measured ({len(cells)} cells); report: {out}/report.html"
    )
    return True


def cmd_run(args: argparse.Namespace) -> int:
    t_start = time.monotonic()  # the budget's clock: start-up, calibration, the cells and the report
    budget = budget_of(args)
    if budget is not None and args.gpu_model is not None:
        print(recorded_plan(args, budget))
        return 0
    out = results_folder(args)
    given = {
        "turns": whole_number("--turns", args.turns, 1, MAX_TURNS) if args.turns is not None else None,
        "repeats": whole_number("--repeats", args.repeats, 1, MAX_REPEATS) if args.repeats is not None else None,
        "warmup_repeats": (
            whole_number("--warmup-repeats", args.warmup_repeats, 0, MAX_REPEATS)
            if args.warmup_repeats is not None
            else None
        ),
        "ready_timeout_s": seconds("--ready-timeout", args.ready_timeout, 0.001) if args.ready_timeout else None,
        "run_timeout_s": seconds("--run-timeout", args.run_timeout, 0.001) if args.run_timeout is not None else None,
        "modes": args.modes.split(",") if args.modes is not None else None,
        "particles": args.particles,
        "workload": {**given_workload(args), **pattern_workload(args)},  # None where not given (resume: the folder's)
        "slo": check_slo(args.slo) if args.slo is not None else None,
    }
    stop_after = seconds("--stop-after", args.stop_after) if args.stop_after is not None else None
    if args.resume:  # the folder's own sweep: what the user did not give comes from its sweep.json
        given = inherit_options(out, given)
    workload = make_workload(given.pop("workload"))
    cfg = SweepConfig(
        **{k: v for k, v in given.items() if v is not None},
        workload=workload,
        resume=args.resume,
        telemetry_interval_s=None if args.no_telemetry else 0.1,
        progress=not args.no_progress,
        command=list(sys.argv),
        stop_after_s=stop_after,
        allow_gpu_settings=args.allow_gpu_settings,
        fresh_replicas=args.fresh_replicas,
        timeslice_probe=not args.no_probe,
    )
    if args.dry_run:
        print(dry_run(validate(cfg), budget, out))
        return 0
    if args.resume and budget is None and nothing_to_do(cfg, out):
        return 0
    if args.strict:
        check_quiet()
    try:
        with stop_on_signals() as watch:

            def on_cell(rows: list[dict]) -> None:
                watch.check()
                if args.strict:
                    strict_guard(rows)

            run_sweep(cfg, out, on_cell=on_cell, budget=budget, t_start=t_start)
            watch.check()
            if (out / RESULTS_CSV).exists():
                build_report(out)
    except Disturbed as exc:
        build_report(out)  # what was measured is kept, its report too
        print(f"sharebench: {exc}; the cells measured so far are in {out}/results.csv", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(
            f"sharebench: interrupted; the cells finished so far are in {out}/results.csv "
            f"(continue with --resume --out {out}, or `sharebench report {out}`)",
            file=sys.stderr,
        )
        return exc.exit_status if isinstance(exc, Stopped) else 130
    except OSError as exc:  # disk full, read-only folder: what is on disk stays, the message names the file
        print(
            f"sharebench: error: cannot write {exc.filename or out}: {exc.strerror or exc}; the cells finished "
            f"so far are in {out}/results.csv (free space or fix the folder, then --resume --out {out})",
            file=sys.stderr,
        )
        return 1
    print(f"results: {out}/results.csv\nreport:  {out}/report.html  ({out}/report.md)")
    screen, status = end_screen(out)
    print(screen)
    return status


def cmd_report(args: argparse.Namespace) -> int:
    if args.compare:
        raise UserError(
            f"report --compare is gone: run `sharebench compare {args.dir} {args.compare}` "
            "(differences per cell, never overwriting a report)"
        )
    try:
        paths = build_report(Path(args.dir))
    except OSError as exc:
        print(
            f"sharebench: error: cannot write {exc.filename or args.dir}: {exc.strerror or exc}; results.csv is "
            "unchanged (free space or fix the folder, then run sharebench report again)",
            file=sys.stderr,
        )
        return 1
    print(f"report: {paths['html']}  ({paths['markdown']})")
    return 0
