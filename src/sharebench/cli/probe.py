"""``sharebench probe timeslice|split``: the GPU's time slices, and why time-slicing costs a workload
what it costs.

    sharebench probe timeslice [--processes 2,4] [--seconds S] [--grid one|full] [--out FILE]
    sharebench probe split [--exec 'CMD' --work N | --lattice L --particles N --turns N] [--out FILE]
                           [--neighbour light,heavy:128] [--table CSV] [--dry-run] [--from FILE]

``split`` runs, on one CUDA GPU: probes alone (slice and switch), the workload alone and as N time-sliced
replicas (the measured loss, as the tables compute it), and one replica beside one probe (its GPU share
and its progress rate inside its own slices, beside the light probe and beside each heavy neighbour: issue 34's
evicted term). It prints the loss the probe pair alone implies (slice and switch, no workload) beside the
transfer (the in-slice rate of the workload's own time-sliced run beside the probe carried over to N
replicas), the terms the data cannot identify, and the loss predicted at other slice lengths, labelled
predicted. ``--out`` keeps everything the table is made of (the raw records beside each neighbour, the probe
pairs' percentiles, the provenance with the machine's state); ``--from`` recomputes from such a file.
Options only, light (``--help`` imports no library stack); every value is checked here (:func:`timeslice_options`,
:func:`split_options`) before the work, ``sharebench.cli.probe_cmd``, loads the probe and the workload.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from sharebench.cli import lazy
from sharebench.devices.discovery import check_spec
from sharebench.errors import UserError
from sharebench.parse import counts, lattice_file, seconds, whole_number
from sharebench.probe_settings import (
    DEFAULT_LENGTHS_MS,
    DEFAULT_NEIGHBOUR_MB,
    DEFAULT_SPLIT_NEIGHBOURS,
    DEFAULT_THRESHOLD_US,
    GRIDS,
    Neighbour,
    check_args,
    parse_neighbours,
)

NEIGHBOUR_HELP = (
    "comma list of what the probe runs: light (clock reads only), stream[:MB] (every SM streams over MB MiB, "
    f"default {DEFAULT_NEIGHBOUR_MB}: more than the L2), heavy[:MB] (the stream plus a full register file and "
    "shared memory)"
)


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.description = "Measure the GPU's time slices (a %globaltimer probe) and split a time-slicing loss."
    sub = parser.add_subparsers(dest="probe_command", metavar="ACTION")
    ts = sub.add_parser("timeslice", help="N probe processes side by side: slice length, switch idle, shares")
    ts.add_argument("--processes", default="2,4", help="comma list of process counts (default 2,4)")
    common(ts)
    ts.add_argument("--seconds", default="3", help="how long the probes spin (s)")
    ts.add_argument("--neighbour", default="light", help=NEIGHBOUR_HELP + " (default light)")
    ts.set_defaults(func=lazy("sharebench.cli.probe_cmd:cmd_timeslice", check=timeslice_options))

    sp = sub.add_parser("split", help="one workload: its time-slicing loss split into switch idle and refill")
    common(sp)
    sp.add_argument("--exec", dest="exec_command", help="a workload program (the replica protocol); else Simpletrack")
    sp.add_argument("--exec-name", help="the exec workload's name")
    sp.add_argument("--work", default="1", help="the exec workload's size (SHAREBENCH_WORK)")
    sp.add_argument("--lattice", help="Simpletrack: an Xsuite line (JSON); default the generated ring")
    sp.add_argument("--particles", default="1e6", help="Simpletrack: particles")
    sp.add_argument("--turns", default="1", help="Simpletrack: turns")
    sp.add_argument("--replicas", default="2", help="time-sliced replicas of the measured loss (default 2)")
    sp.add_argument("--repeats", default="3", help="repeats of each measurement (default 3)")
    sp.add_argument("--probe-seconds", default="5", help="how long the probes alone spin (s)")
    sp.add_argument(
        "--lengths", default=",".join(f"{x:g}" for x in DEFAULT_LENGTHS_MS), help="slice lengths (ms) to predict"
    )
    sp.add_argument(
        "--neighbour",
        default=DEFAULT_SPLIT_NEIGHBOURS,
        help=NEIGHBOUR_HELP
        + f"; the workload runs beside each (default {DEFAULT_SPLIT_NEIGHBOURS}; light is always added)",
    )
    sp.add_argument("--table", help="append the split's rows to this CSV (tables/timeslice_split.csv columns)")
    sp.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="recompute the split from a recorded --out document (no GPU); the work options as the original "
        "command gave them name its work where the document does not",
    )
    sp.add_argument("--dry-run", action="store_true", help="check the arguments and say what would run; run nothing")
    sp.set_defaults(func=lazy("sharebench.cli.probe_cmd:cmd_split", check=split_options))
    parser.set_defaults(func=lambda _args: usage(parser))


def usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cuda:0", help="a CUDA GPU (cuda[:N])")
    p.add_argument("--grid", choices=GRIDS, default="one", help="probe on one block or one block per SM")
    p.add_argument("--threshold-us", type=float, default=DEFAULT_THRESHOLD_US, help="switch-out threshold (us)")
    p.add_argument("--out", help="write the result as JSON here")


# ----------------------------------------------------------------- the values, checked before the probe loads
MAX_PROBE_S = 600.0  # as the probe's own check_args


def probe_device(args: argparse.Namespace) -> str:
    """``--device``: a CUDA GPU (the probe reads the GPU's %globaltimer)."""
    spec = check_spec(args.device)
    if not spec.startswith("cuda"):
        raise UserError(
            f"bad --device {args.device!r}: the time-slice probe needs an NVIDIA GPU through CUDA (cuda[:N])"
        )
    return spec


def checked(processes: int, probe_s: float, args: argparse.Namespace) -> None:
    bad = check_args(processes, probe_s, args.grid, args.threshold_us)
    if bad:
        raise UserError(bad)


@dataclass(frozen=True)
class TimesliceOptions:
    processes: tuple[int, ...]
    seconds: float
    neighbours: tuple[Neighbour, ...]


def timeslice_options(args: argparse.Namespace) -> TimesliceOptions:
    """``probe timeslice``'s values: the process counts, the seconds, the neighbours, the device."""
    probe_device(args)
    secs = seconds("--seconds", args.seconds, 0.05, MAX_PROBE_S)
    processes = tuple(counts("process count", args.processes, "2,4"))
    for n in processes:
        checked(n, secs, args)
    return TimesliceOptions(processes, secs, tuple(parse_neighbours(args.neighbour)))


@dataclass(frozen=True)
class SplitOptions:
    """``probe split``'s values: the workload's size (``work`` of a program; ``particles`` and ``turns`` of
    Simpletrack), the replicas, repeats, probe seconds, slice lengths and neighbours (light first)."""

    work: int
    particles: int
    turns: int
    replicas: int
    repeats: int
    probe_s: float
    lengths: tuple[float, ...]
    neighbours: tuple[Neighbour, ...]


def split_options(args: argparse.Namespace) -> SplitOptions:
    recorded = bool(getattr(args, "from_file", None))  # a recorded document is recomputed without a GPU,
    if not recorded:  # and its --lattice only names the work (the file may be on the measuring machine only)
        probe_device(args)
    work, particles, turns = 1, 0, 1
    if args.exec_command:
        work = whole_number("--work", args.work, 1)
    else:
        sizes = counts("particle count", args.particles, "1e7")
        if len(sizes) != 1:
            raise UserError(f"bad --particles {args.particles!r}: one particle count is allowed")
        particles, turns = sizes[0], whole_number("--turns", args.turns, 1)
        if args.lattice is not None and not recorded:
            lattice_file(args.lattice)
    probe_s = seconds("--probe-seconds", args.probe_seconds, 0.05, MAX_PROBE_S)
    checked(2, probe_s, args)
    neighbours = parse_neighbours(args.neighbour)
    if neighbours[0].kind != "light":
        neighbours.insert(0, Neighbour())  # every heavy term is against the light probe
    return SplitOptions(
        work,
        particles,
        turns,
        whole_number("--replicas", args.replicas, 2, 64),
        whole_number("--repeats", args.repeats, 1, 100),
        probe_s,
        tuple(seconds("--lengths", x, 0.01, 1000) for x in str(args.lengths).split(",") if x.strip()),
        tuple(neighbours),
    )
