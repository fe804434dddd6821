"""``sharebench campaign``: the work, imported when it runs (its options: ``sharebench.cli.campaign``)."""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import signal
import sys
import tempfile
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from sharebench.campaign import (
    PREDICTION_STOPPED,
    SMOKE_FAILED,
    CampaignStopped,
    NoStepRuns,
    Runner,
    check_plan,
    describe,
    estimate_steps,
    load_plan,
    run_campaign,
    select,
)
from sharebench.cli.sweep_cmd import run_in_child, run_request
from sharebench.errors import UserError
from sharebench.kernel import RunConfig, run_replica
from sharebench.report import build_report
from sharebench.sweep.request import SweepRequest

STOP_GRACE_S = 10.0  # after SIGINT, the time a stopped dry run has to end its processes before SIGKILL


def report_quietly(folder: Path) -> None:
    """A sweep folder's report rebuilt, its chatter and a failure kept off the campaign's output (as
    ``sharebench report`` run with its output discarded: the folder's results stay what they are)."""
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        try:
            build_report(folder)
        except (UserError, OSError, ValueError) as exc:
            print(f"sharebench: report of {folder}: {exc}", file=sys.__stderr__)


def _warm(run: RunConfig) -> None:
    """A spawned process's body (:func:`warm_in_child`): the warm-up track, its output discarded."""
    with (
        open(os.devnull, "w") as null,
        contextlib.redirect_stdout(null),
        contextlib.redirect_stderr(null),
        contextlib.suppress(UserError, OSError, ValueError, RuntimeError),
    ):
        run_replica(run)


def warm_in_child(run: RunConfig) -> None:
    """The plan's untimed warm-up track in a process of its own (its device context ends with it), handed
    the run value; a failure is ignored, as the warm-up only brings the device out of idle."""
    process = multiprocessing.get_context("spawn").Process(target=_warm, args=(run,), name="sharebench-warm")
    process.start()
    process.join()


def _predict(request: SweepRequest, path: Path) -> None:
    """A spawned process's body (:func:`predict_in_child`): the dry run, its output (an error too) into
    ``path``, its status the exit code."""
    with open(path, "w") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        try:
            status = run_request(request)
        except UserError as exc:
            print(f"sharebench: error: {exc}")
            status = 2
        except KeyboardInterrupt:
            status = PREDICTION_STOPPED
    sys.exit(status)


def predict_in_child(request: SweepRequest, path: Path, timeout_s: float) -> int:
    """A sweep step's dry run in a process of its own (its calibration's device context and replicas end
    with it), its output into ``path``; after ``timeout_s`` it is interrupted (as Ctrl-C: its processes
    stop), then killed, and the file says so. Its exit status (124 when stopped)."""
    process = multiprocessing.get_context("spawn").Process(
        target=_predict, args=(request, path), name="sharebench-dry-run"
    )
    process.start()
    process.join(timeout_s)
    if process.is_alive() and process.pid is not None:
        os.kill(process.pid, signal.SIGINT)
        process.join(STOP_GRACE_S)
        if process.is_alive():
            process.kill()
            process.join()
        with open(path, "a") as fh:
            fh.write(f"sharebench campaign: the dry run was stopped after {timeout_s:g} s (the step's predict_s)\n")
        return PREDICTION_STOPPED
    return int(process.exitcode if process.exitcode is not None else 1)


RUNNER = Runner(sweep=run_in_child, report=report_quietly, warm=warm_in_child, predict=predict_in_child)


def cmd_campaign(args: argparse.Namespace) -> int:
    plan = select(load_plan(args.plan), [s for s in args.steps.split(",") if s])
    if args.device is not None:
        plan = replace(plan, device=args.device)
    if args.lattice is not None:
        plan = replace(plan, lattice=None if args.lattice == "none" else args.lattice)
    if args.budget is not None:
        if args.budget <= 0:
            raise UserError(f"bad --budget {args.budget:g}; allowed: seconds > 0")
        plan = replace(plan, budget_s=args.budget)
    if args.out is None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        out = Path("campaign-results") / f"{plan.name}-{stamp}"
    else:
        out = Path(args.out)
    try:
        notes = check_plan(plan, here=not args.dry_run)  # the lattice, the modes on the device: before anything runs
    except NoStepRuns as exc:  # a dry run on a device that runs none of its sweeps: the plan, then exit 2
        print("\n".join([*describe(plan, out), *exc.notes]))
        print(f"sharebench campaign: {exc.why}; give another --device, or --steps that run here", file=sys.stderr)
        return 2
    if args.dry_run:
        with tempfile.TemporaryDirectory(prefix="sharebench-campaign-dry-") as tmp:
            estimates = estimate_steps(plan, out, predict_in_child, Path(tmp))
        print("\n".join([*describe(plan, out, estimates=estimates), *notes]))
        return 0
    try:
        return run_campaign(plan, out, RUNNER)
    except CampaignStopped as exc:
        print(f"sharebench campaign: {exc}", file=sys.stderr)
        return SMOKE_FAILED
