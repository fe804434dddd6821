"""``sharebench run --engine exec``: the options that run any program as the replicas (the replica
protocol, ``sharebench.workloads.protocol``)."""

from __future__ import annotations

import argparse


def add_exec_options(run: argparse.ArgumentParser) -> None:
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
