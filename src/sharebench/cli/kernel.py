"""``sharebench devices``, ``lattice``, ``track``, ``bench``: the workload on this machine.

Options only, light (``--help`` imports no library stack); every value is checked here (``cli.lazy``'s
``check``) before the work, ``sharebench.cli.kernel_cmd``, loads the trackers.
"""

from __future__ import annotations

import argparse
import math

from sharebench.cli import lazy
from sharebench.devices.discovery import check_spec
from sharebench.errors import UserError
from sharebench.parse import ENGINES, check_engine, counts, cpu_set, lattice_file, whole_number


def cpus_option(text: str) -> list[int]:
    """``--cpus 0-3,6`` (argparse type: a bad list is argparse's usage error)."""
    try:
        return cpu_set(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", default="simpletrack", help="simpletrack (default) or xtrack")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda[:N], opencl[:P.D] (default auto)")
    p.add_argument(
        "--lattice",
        default=None,
        metavar="FILE",
        help="Xsuite line JSON/JSON.gz (default: the generated LHC-like ring)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--nemitt-x", type=float, default=2.5e-6, help="normalised emittance [m] (default 2.5e-6)")
    p.add_argument("--nemitt-y", type=float, default=2.5e-6)
    p.add_argument("--sigma-z", type=float, default=0.05, help="bunch length [m] (default 0.05)")
    p.add_argument("--sigma-delta", type=float, default=1e-4, help="momentum spread (default 1e-4)")
    p.add_argument("--warmup-turns", type=int, default=1)
    p.add_argument("--mem-limit-bytes", type=int, default=None, help="refuse runs that need more device memory")
    p.add_argument("--cpus", type=cpus_option, default=None, help="pin to these cores, e.g. 0-3")
    p.add_argument("--block-size", type=int, default=128, help="GPU work-group size (simpletrack)")
    p.add_argument("--no-optimize", action="store_true", help="xtrack engine: skip optimize_for_tracking()")


def configure(name: str, p: argparse.ArgumentParser) -> None:
    {"devices": configure_devices, "lattice": configure_lattice, "track": configure_track, "bench": configure_bench}[
        name
    ](p)


def configure_devices(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=lazy("sharebench.cli.kernel_cmd:cmd_devices"))


def configure_lattice(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lattice", default=None, metavar="FILE", help="Xsuite line JSON/JSON.gz (default: the generated ring)"
    )
    p.add_argument("--no-twiss", action="store_true", help="skip xtrack's twiss (tunes, chromaticities)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=lazy("sharebench.cli.kernel_cmd:cmd_lattice", check=check_lattice))


def configure_track(p: argparse.ArgumentParser) -> None:
    add_run_options(p)
    p.add_argument("--particles", type=int, default=10_000)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--json", action="store_true", help="print the record as JSON")
    p.add_argument("--out", default=None, metavar="FILE", help="also write the record as JSON")
    p.set_defaults(func=lazy("sharebench.cli.kernel_cmd:cmd_track", check=check_track))


def configure_bench(p: argparse.ArgumentParser) -> None:
    add_run_options(p)
    p.add_argument("--engines", default="simpletrack", help="comma list (default simpletrack)")
    p.add_argument("--devices", default=None, help="comma list of device specs (default: --device)")
    p.add_argument("--particles", default="100000", help="comma list of particle counts")
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--repeats", default="3", help="runs per cell (default 3)")
    p.add_argument("--out", default="sharebench-results/bench", help="folder for bench.json and bench.md")
    p.set_defaults(func=lazy("sharebench.cli.kernel_cmd:cmd_bench", check=check_bench))


# ----------------------------------------------------------------- the values, checked before the trackers load
def check_lattice(args: argparse.Namespace) -> None:
    if args.lattice is not None:
        lattice_file(args.lattice)


def check_run_values(args: argparse.Namespace) -> None:
    """What ``track`` and ``bench`` share: the lattice, the warm-up, the beam, the block size, the memory limit."""
    check_lattice(args)
    whole_number("--warmup-turns", args.warmup_turns, 0)
    whole_number("--block-size", args.block_size, 1)
    for name in ("nemitt_x", "nemitt_y", "sigma_z", "sigma_delta"):
        value = getattr(args, name)
        if not (math.isfinite(value) and value >= 0):
            raise UserError(f"bad --{name.replace('_', '-')} {value:g}; allowed: a number >= 0")
    if args.mem_limit_bytes is not None:
        whole_number("--mem-limit-bytes", args.mem_limit_bytes, 1)


def check_track(args: argparse.Namespace) -> None:
    check_engine(args.engine, ENGINES)  # a tracker: the exec engine runs under `sharebench run`
    check_spec(args.device)
    check_run_values(args)
    whole_number("--particles", args.particles, 1)
    whole_number("--turns", args.turns, 1)


def check_bench(args: argparse.Namespace) -> None:
    engines = [e for e in str(args.engines).split(",") if e.strip()]
    if not engines:
        raise UserError(f"no engines given; allowed: a comma-separated list of {', '.join(ENGINES)}")
    for engine in engines:
        check_engine(engine, ENGINES)
    for spec in str(args.devices or args.device).split(","):
        if spec.strip():
            check_spec(spec.strip())
    check_run_values(args)
    counts("particle counts", args.particles, "100000,1000000")
    whole_number("--turns", args.turns, 1)
    whole_number("--repeats", args.repeats, 1)
