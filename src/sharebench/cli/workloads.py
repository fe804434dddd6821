"""``sharebench run --engine exec``: the options that run any program as the replicas (the replica
protocol, ``sharebench.workloads.protocol``), and the Workload keys the run command's options give, checked
(light: before the library loads)."""

from __future__ import annotations

import argparse
from typing import Any, Protocol

from sharebench.errors import UserError
from sharebench.parse import check_exec_timing


class Options(Protocol):
    """What options are added to: a parser, or one of its argument groups."""

    def add_argument(self, *names: str, **kw: Any) -> argparse.Action: ...


def add_exec_options(run: Options) -> None:
    """--exec, --exec-timing, --exec-name on the run command."""
    run.add_argument(
        "--exec",
        dest="exec_command",
        default=None,
        metavar="CMD",
        help="--engine exec: the program each replica runs, e.g. 'python3 my_job.py' (POSIX quoting, "
        "no shell); it follows the replica protocol (README, 'Any workload') and gets the "
        "--work size as SHAREBENCH_WORK",
    )
    run.add_argument(
        "--exec-timing",
        default="protocol",
        metavar="HOW",
        help="--engine exec: protocol (the program reports its timed window; default) or process "
        "(the whole process, started at the barrier instant, for programs without the protocol)",
    )
    run.add_argument(
        "--exec-name",
        default=None,
        metavar="NAME",
        help="--engine exec: the workload's name in the tables (default: from the command)",
    )


def exec_options(args: argparse.Namespace, engine: str | None = None) -> dict[str, Any]:
    """The Workload keys the exec options give (command, timing, name; none for the trackers, and none
    when a resumed exec sweep takes its own from the folder); UserError on a bad combination. ``engine``:
    the run's engine (default: ``args.engine``; None there: the default, simpletrack)."""
    given = args.exec_command is not None or args.exec_name is not None or args.exec_timing != "protocol"
    engine = str(engine or args.engine or "simpletrack").strip().lower()
    if engine != "exec":
        if given:
            raise UserError(f"--exec, --exec-timing and --exec-name need --engine exec; the engine is {engine!r}")
        return {}
    if args.exec_command is None or not args.exec_command.strip():
        if getattr(args, "resume", False) and not given:
            return {}  # the folder's own command (sweep.json)
        raise UserError("--engine exec needs a command: --exec 'CMD ARGS'")
    opts: dict[str, Any] = {"command": args.exec_command, "timing": check_exec_timing(args.exec_timing)}
    if args.exec_name:
        opts["name"] = args.exec_name
    return opts


def given_workload(args: argparse.Namespace) -> dict[str, Any]:
    """The Workload keys the run command's options give (None where an option was not given: a resumed
    run takes those from its folder, ``sharebench.sweep.inherit_options``)."""
    return {"engine": args.engine, "device": args.device, "lattice": args.lattice, **exec_options(args)}
