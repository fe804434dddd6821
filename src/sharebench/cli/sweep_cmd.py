"""``sharebench run``, ``report``, ``cleanup``: the work, imported when one of them runs (their options:
``sharebench.cli.sweep``)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import multiprocessing
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from sharebench import processes
from sharebench.analysis.latency import check_slo
from sharebench.cli.workloads_cmd import given_workload
from sharebench.errors import UserError
from sharebench.modes import DEFAULT_MODES, with_baseline
from sharebench.parse import seconds, whole_number
from sharebench.report import build_report, end_screen
from sharebench.results import RESULTS_CSV, SWEEP_JSON, sweeps_warning
from sharebench.sharing import stop_orphans
from sharebench.sweep import (
    DEFAULT_PARTICLES,
    DEFAULT_TURNS,
    MAX_REPEATS,
    MAX_TURNS,
    Stopped,
    SweepConfig,
    SweepPlan,
    as_modes,
    describe_plan,
    parse_particles,
    run_sweep,
    stop_on_signals,
    validate,
)
from sharebench.sweep.budget import (
    RECORDED_ROOT,
    BudgetOptions,
    budget_options,
    plan_budget,
    plan_recorded,
    predicted_line,
)
from sharebench.sweep.calibrate import auto_sized, calibrate, folder_particles
from sharebench.sweep.capacity import CapacityOptions, capacity_dry_run, families_of, parse_users
from sharebench.sweep.plan import plan_header
from sharebench.sweep.request import SweepRequest, sweep_config
from sharebench.sweep.resume import check_same_work, identity, measured_cells
from sharebench.telemetry.disturbance import Disturbed, check_quiet, strict_guard
from sharebench.workloads.protocol import check_command
from sharebench.workloads.workload import MAX_BURSTS


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
    modes = with_baseline(list(as_modes(args.modes or DEFAULT_MODES)))
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
        bp = plan_budget(plan, opts, folder_particles(resumed) if auto_sized(plan) else ())
        plan = plan.with_particles(bp.particles)
        return "\n".join([*plan_header(plan), bp.describe(), *(f"note: {n}" for n in plan.notes)])
    if auto_sized(plan):
        plan, note = calibrate(plan, resumed)
        plan = plan.with_notes(note)
        if resumed is None or not folder_particles(resumed):
            plan = plan.with_notes(
                "the run calibrates again at its start, the same way (the machine's noise may move the size)"
            )
    patterned = plan.config.workload.patterned  # its seconds are not N exclusive runs (analysis.cost)
    return describe_plan(plan) + ("\n" + predicted_line(plan) if patterned else "")


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


def request_of(args: argparse.Namespace, out: Path, budget: BudgetOptions | None) -> SweepRequest:
    """The run command's options, each parsed here (the command line is their boundary); ``budget``:
    :func:`budget_of`'s."""
    bursts = whole_number("--bursts", args.bursts, 1, MAX_BURSTS) if args.bursts is not None else None
    return SweepRequest(
        out=out,
        modes=as_modes(args.modes) if args.modes is not None else None,
        particles=args.particles,  # parsed by the SweepConfig, which knows the workload's sizes (exec: work)
        turns=whole_number("--turns", args.turns, 1, MAX_TURNS) if args.turns is not None else None,
        repeats=whole_number("--repeats", args.repeats, 1, MAX_REPEATS) if args.repeats is not None else None,
        warmup_repeats=(
            whole_number("--warmup-repeats", args.warmup_repeats, 0, MAX_REPEATS)
            if args.warmup_repeats is not None
            else None
        ),
        # None where not given (resume: the folder's)
        workload={**given_workload(args), "pattern": args.pattern, "neighbours": args.neighbours, "bursts": bursts},
        ready_timeout_s=seconds("--ready-timeout", args.ready_timeout, 0.001) if args.ready_timeout else None,
        run_timeout_s=seconds("--run-timeout", args.run_timeout, 0.001) if args.run_timeout is not None else None,
        stop_after_s=seconds("--stop-after", args.stop_after) if args.stop_after is not None else None,
        slo=check_slo(args.slo) if args.slo is not None else None,
        resume=args.resume,
        budget=budget,
        telemetry=not args.no_telemetry,
        progress=not args.no_progress,
        allow_gpu_settings=args.allow_gpu_settings,
        fresh_replicas=args.fresh_replicas,
        timeslice_probe=not args.no_probe,
        strict=args.strict,
        dry_run=args.dry_run,
        command=tuple(sys.argv),
    )


def capacity_of(args: argparse.Namespace) -> CapacityOptions | None:
    """``--capacity`` (or --modes naming a family without N): the searches, ``--users``, the repeats of each
    N; the families taken out of ``args.modes`` and the repeats out of ``args`` (a search plans its own)."""
    fams, rest = families_of(str(args.modes or "").split(","))
    if not fams and not args.capacity:
        if args.users is not None:
            raise UserError("--users LO..HI goes with --capacity (users per GPU by search)")
        return None
    if not fams:
        raise UserError("--capacity needs a mode family without N in --modes (e.g. --modes timeslice,mps)")
    low = whole_number("--repeats", args.repeats, 1, MAX_REPEATS) if args.repeats is not None else 2
    high = whole_number("--max-repeats", args.max_repeats, 1, MAX_REPEATS) if args.max_repeats is not None else 4
    options = CapacityOptions(tuple(fams), parse_users(args.users), low, max(low, high))
    args.modes = ",".join([*rest, *(m.label for m in options.start_modes())])
    args.repeats, args.max_repeats = low, None
    return options


def cmd_run(args: argparse.Namespace) -> int:
    t_start = time.monotonic()  # the budget's clock: start-up, calibration, the cells and the report
    capacity = capacity_of(args)
    saved = args.repeats
    if capacity is not None:  # the search's repeats per N, not a budget plan's
        args.repeats = None
    budget = budget_of(args)
    args.repeats = saved
    if budget is not None and args.gpu_model is not None:
        print(recorded_plan(args, budget))
        return 0
    request = request_of(args, results_folder(args), budget)
    return run_request(dataclasses.replace(request, capacity=capacity), t_start)


def program_found(cfg: SweepConfig) -> None:
    """A program workload's program is there: else one line, before any folder is made."""
    if cfg.workload.is_program:
        check_command(cfg.workload.command)


def run_request(request: SweepRequest, t_start: float | None = None) -> int:
    """Run (or with ``dry_run`` describe) the sweep ``request`` asks for, then its report and end screen;
    the exit status. The command line and a campaign's sweep steps both run here."""
    t_start = time.monotonic() if t_start is None else t_start
    out, budget = request.out, request.budget
    cfg = sweep_config(request)
    if request.dry_run:
        plan = validate(cfg)
        print(capacity_dry_run(plan, request.capacity) if request.capacity else dry_run(plan, budget, out))
        return 0
    program_found(cfg)
    if request.resume and budget is None and nothing_to_do(cfg, out):
        return 0
    if request.strict:
        check_quiet()
    try:
        with stop_on_signals() as watch, processes.subreaper():  # every descendant ends with the sweep

            def on_cell(rows: list[dict]) -> None:
                watch.check()
                if request.strict:
                    strict_guard(rows)

            run_sweep(cfg, out, on_cell=on_cell, budget=budget, t_start=t_start, capacity=request.capacity)
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
    warning = sweeps_warning(args.dir)  # said once the rows proved readable
    if warning is not None:
        print(f"sharebench: {warning}", file=sys.stderr)
    return 0
