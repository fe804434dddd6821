"""``sharebench run``, ``report``, ``cleanup``: the work, imported when one of them runs (their options:
``sharebench.cli.sweep``)."""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from sharebench import processes
from sharebench.cli.sweep import RunOptions, run_options
from sharebench.errors import UserError
from sharebench.modes import DEFAULT_MODES, as_modes, with_baseline
from sharebench.parse import DEFAULT_MAX_REPEATS, DEFAULT_PRECISION
from sharebench.report import build_report, end_screen
from sharebench.results import RESULTS_CSV, SWEEP_JSON, sweeps_warning
from sharebench.sharing import stop_orphans
from sharebench.sweep import (
    DEFAULT_PARTICLES,
    DEFAULT_TURNS,
    Stopped,
    SweepConfig,
    parse_particles,
    run_sweep,
    stop_on_signals,
    validate,
)
from sharebench.sweep.budget import RECORDED_ROOT, BudgetOptions, plan_recorded
from sharebench.sweep.capacity import CapacityOptions, folder_options
from sharebench.sweep.compose import dry_run, search_done
from sharebench.sweep.request import SweepRequest, sweep_config
from sharebench.sweep.resume import check_same_work, identity, measured_cells
from sharebench.telemetry.disturbance import Disturbed, check_quiet, strict_guard
from sharebench.workloads.protocol import check_command


def budget_options(opts: RunOptions) -> BudgetOptions | None:
    """The budget of ``--budget/--precision/--max-repeats`` (checked by ``run_options``); None without one."""
    b = opts.budget
    if b is None:
        return None
    precision = b.precision if b.precision is not None else DEFAULT_PRECISION
    return BudgetOptions(b.budget_s, precision, b.max_repeats if b.max_repeats is not None else DEFAULT_MAX_REPEATS)


def capacity_options(opts: RunOptions) -> CapacityOptions | None:
    """The search of ``--capacity`` (or --modes naming a family without N); None for a sweep of its modes."""
    s = opts.search
    return None if s is None else CapacityOptions(s.families, s.users, s.min_repeats, s.max_repeats)


def recorded_plan(opts: RunOptions, budget: BudgetOptions) -> str:
    """``--dry-run --budget --gpu-model``: the plan from the model's recorded rates, no device resolved."""
    assert opts.gpu_model is not None
    modes = with_baseline(list(opts.modes or as_modes(DEFAULT_MODES)))
    sizes = parse_particles(opts.particles) if opts.particles else DEFAULT_PARTICLES["gpu"]
    turns = opts.turns if opts.turns is not None else DEFAULT_TURNS["gpu"]
    warm = opts.warmup_repeats if opts.warmup_repeats is not None else 1
    root = opts.recorded or RECORDED_ROOT
    if not root.is_dir():
        raise UserError(f"--recorded {root}: no such folder; give the folder that holds recorded results folders")
    plan = plan_recorded(budget, opts.gpu_model, root, modes, sizes, turns, warm)
    return "\n".join(
        [
            f"device:    a GPU {opts.gpu_model} (not this machine's: nothing resolved or measured here)",
            f"particles: {', '.join(f'{p:,}' for p in sizes)} per replica, {turns} turn{'s' if turns != 1 else ''}",
            plan.describe(),
        ]
    )


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


def search_of(request: SweepRequest) -> CapacityOptions | None:
    """The capacity search the run continues or starts: ``--capacity``'s, else on ``--resume`` the one the
    folder ran (its families, users and cells per N, from its ``sweep.json``)."""
    if request.capacity is not None or not request.resume:
        return request.capacity
    return folder_options(request.out)


def finished(cfg: SweepConfig, out: Path, search: CapacityOptions) -> bool:
    """A resumed capacity search with every answer found: says so (nothing is run or written)."""
    lines = search_done(cfg, out, search)
    if lines is None:
        return False
    print(f"nothing to do: the capacity search in {out} is finished; report: {out}/report.html")
    print("\n".join(f"  capacity: {line}" for line in lines))
    return True


def nothing_left(cfg: SweepConfig, out: Path, search: CapacityOptions | None, budget: BudgetOptions | None) -> bool:
    """A resume with nothing to run (said on stdout): a capacity search with every answer, or (no budget)
    a sweep whose every cell is measured."""
    if search is not None:
        return finished(cfg, out, search)
    return budget is None and nothing_to_do(cfg, out)


def request_of(args: argparse.Namespace, opts: RunOptions, out: Path) -> SweepRequest:
    """The sweep the run command asks for: its options as ``run_options`` parsed them, its flags, its folder."""
    return SweepRequest(
        out=out,
        modes=opts.modes,
        particles=opts.particles,  # parsed by the SweepConfig, which knows the workload's sizes (exec: work)
        turns=opts.turns,
        repeats=opts.repeats,
        warmup_repeats=opts.warmup_repeats,
        workload=opts.workload,  # None where not given (resume: the folder's)
        ready_timeout_s=opts.ready_timeout_s,
        run_timeout_s=opts.run_timeout_s,
        stop_after_s=opts.stop_after_s,
        slo=opts.slo,
        resume=args.resume,
        budget=budget_options(opts),
        telemetry=not args.no_telemetry,
        progress=not args.no_progress,
        allow_gpu_settings=args.allow_gpu_settings,
        fresh_replicas=args.fresh_replicas,
        timeslice_probe=not args.no_probe,
        awake_control=args.awake_control,
        strict=args.strict,
        dry_run=args.dry_run,
        command=tuple(sys.argv),
        capacity=capacity_options(opts),
    )


def cmd_run(args: argparse.Namespace) -> int:
    t_start = time.monotonic()  # the budget's clock: start-up, calibration, the cells and the report
    opts = run_options(args)  # checked before this module loaded (cli.lazy); the same value again
    budget = budget_options(opts)
    if budget is not None and opts.gpu_model is not None:
        print(recorded_plan(opts, budget))
        return 0
    return run_request(request_of(args, opts, results_folder(args)), t_start)


def program_found(cfg: SweepConfig) -> None:
    """A program workload's program is there: else one line, before any folder is made."""
    if cfg.workload.is_program:
        check_command(cfg.workload.command)


def run_request(request: SweepRequest, t_start: float | None = None) -> int:
    """Run (or with ``dry_run`` describe) the sweep ``request`` asks for, then its report and end screen;
    the exit status. The command line and a campaign's sweep steps both run here."""
    t_start = time.monotonic() if t_start is None else t_start
    out, budget, search = request.out, request.budget, search_of(request)
    cfg = sweep_config(request)
    if request.dry_run:
        print(dry_run(validate(cfg), out, budget, search))
        return 0
    program_found(cfg)
    if request.resume and nothing_left(cfg, out, search, budget):
        return 0
    if request.strict:
        check_quiet()
    try:
        with stop_on_signals() as watch, processes.subreaper():  # every descendant ends with the sweep

            def on_cell(rows: list[dict]) -> None:
                watch.check()
                if request.strict:
                    strict_guard(rows)

            run_sweep(cfg, out, on_cell=on_cell, budget=budget, t_start=t_start, capacity=search)
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


def _child(request: SweepRequest) -> None:
    """A spawned process's body (:func:`run_in_child`): the request run, its status the exit code."""
    try:
        status = run_request(request)
    except UserError as exc:
        print(f"sharebench: error: {exc}", file=sys.stderr)
        status = 2
    except KeyboardInterrupt:
        print("sharebench: interrupted", file=sys.stderr)
        status = 130
    sys.stdout.flush()
    sys.exit(status)


def run_in_child(request: SweepRequest) -> int:
    """:func:`run_request` in a process of its own, as ``sharebench run`` would run (a campaign's sweep
    steps: each sweep's device state, daemons and signals its own); the value crosses, not its argv."""
    process = multiprocessing.get_context("spawn").Process(target=_child, args=(request,), name="sharebench-run")
    process.start()
    try:
        process.join()
    except KeyboardInterrupt:  # the child got the same Ctrl-C: it stops its cell and keeps what is done
        with contextlib.suppress(KeyboardInterrupt):
            process.join()
        raise
    return int(process.exitcode if process.exitcode is not None else 1)


def cmd_report(args: argparse.Namespace) -> int:
    try:  # its values checked before this module loaded (cli.sweep.report_options)
        minutes = float(args.suggest_minutes) if args.suggest_minutes is not None else None
        paths = build_report(Path(args.dir), suggest_s=60 * minutes) if minutes else build_report(Path(args.dir))
    except OSError as exc:
        print(
            f"sharebench: error: cannot write {exc.filename or args.dir}: {exc.strerror or exc}; results.csv is "
            "unchanged (free space or fix the folder, then run sharebench report again)",
            file=sys.stderr,
        )
        return 1
    print(f"report: {paths['html']}  ({paths['markdown']})")
    warning = sweeps_warning(args.dir)  # said once the rows proved readable
    if warning is not None:
        print(f"sharebench: {warning}", file=sys.stderr)
    return 0
