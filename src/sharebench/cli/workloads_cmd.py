"""``sharebench run --engine exec``: the Workload its options give (the options: ``sharebench.cli.workloads``)."""

from __future__ import annotations

import argparse
from typing import Any

from sharebench.errors import UserError
from sharebench.workloads import Workload
from sharebench.workloads.protocol import check_exec_timing


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


def make_workload(given: dict[str, Any]) -> Workload:
    """The Workload of the keys given (the others take their defaults)."""
    return Workload.from_dict({k: v for k, v in given.items() if v is not None})
