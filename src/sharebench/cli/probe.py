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
Options only, light (``--help`` imports no library stack); the work: ``sharebench.cli.probe_cmd``.
"""

from __future__ import annotations

import argparse
import sys

from sharebench.cli import lazy
from sharebench.probe_settings import (
    DEFAULT_LENGTHS_MS,
    DEFAULT_NEIGHBOUR_MB,
    DEFAULT_SPLIT_NEIGHBOURS,
    DEFAULT_THRESHOLD_US,
    GRIDS,
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
    ts.set_defaults(func=lazy("sharebench.cli.probe_cmd:cmd_timeslice"))

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
    sp.set_defaults(func=lazy("sharebench.cli.probe_cmd:cmd_split"))
    parser.set_defaults(func=lambda _args: usage(parser))


def usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2


def common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cuda:0", help="a CUDA GPU (cuda[:N])")
    p.add_argument("--grid", choices=GRIDS, default="one", help="probe on one block or one block per SM")
    p.add_argument("--threshold-us", type=float, default=DEFAULT_THRESHOLD_US, help="switch-out threshold (us)")
    p.add_argument("--out", help="write the result as JSON here")
