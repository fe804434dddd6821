"""``sharebench devices``, ``lattice``, ``track``, ``bench``: the work, imported when one of them runs (their
options: ``sharebench.cli.kernel``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys

from sharebench.devices import list_devices, resolve_device
from sharebench.kernel import BenchConfig, RunConfig, check_engine, run_bench, run_replica
from sharebench.kernel.bench import to_markdown
from sharebench.kernel.lattice import describe, get_line_cached
from sharebench.results import write_json


def run_options(args: argparse.Namespace) -> dict:
    """The RunConfig options the commands share, from their flags."""
    return dict(
        lattice=args.lattice,
        seed=args.seed,
        nemitt_x=args.nemitt_x,
        nemitt_y=args.nemitt_y,
        sigma_z=args.sigma_z,
        sigma_delta=args.sigma_delta,
        warmup_turns=args.warmup_turns,
        mem_limit_bytes=args.mem_limit_bytes,
        cpus=args.cpus,
        optimize=not args.no_optimize,
        block_size=args.block_size,
    )


def command_line() -> str:
    """How this command was typed, for the records."""
    return (
        "sharebench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        if sys.argv and "sharebench" in sys.argv[0]
        else " ".join(shlex.quote(a) for a in sys.argv)
    )


def cmd_devices(args: argparse.Namespace) -> int:
    devs = list_devices()
    auto = resolve_device("auto")
    if args.json:
        print(json.dumps({"devices": [d.to_dict() for d in devs], "auto": auto.spec}, indent=1))
        return 0
    print(f"{'spec':<12} {'kind':<4} {'memory':>10}  {'name':<40} {'platform':<34} uuid")
    for d in devs:
        mark = " (auto)" if d.spec == auto.spec else ""
        print(
            f"{d.spec:<12} {d.kind:<4} {d.memory_bytes / 2**30:8.1f} GiB  {d.name[:40]:<40} {d.platform[:34]:<34} "
            f"{d.uuid}{mark}"
        )
    return 0


def cmd_lattice(args: argparse.Namespace) -> int:
    with contextlib.redirect_stdout(sys.stderr):  # xtrack's chatter
        info = describe(get_line_cached(args.lattice), twiss=not args.no_twiss)
    info = {"lattice": args.lattice or "generated LHC-like ring", **info}
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"lattice         {info['lattice']}")
    print(f"elements        {info['elements']:,}  " + ", ".join(f"{k} {v:,}" for k, v in info["element_types"].items()))
    print("multipoles      orders " + ", ".join(f"{k}: {v:,}" for k, v in info["multipole_orders"].items()))
    print(f"circumference   {info['circumference_m']:.4f} m")
    print(
        f"reference       p0c {info['p0c_ev'] / 1e12:g} TeV, mass {info['mass0_ev'] / 1e6:.3f} MeV, q0 {info['q0']:g}"
    )
    if "qx" in info:
        print(f"tunes (6d)      Qx {info['qx']:.4f}  Qy {info['qy']:.4f}  Qs {info['qs']:.5f}")
        print(f"chromaticities  Q'x {info['dqx']:.2f}  Q'y {info['dqy']:.2f}")
    return 0


def cmd_track(args: argparse.Namespace) -> int:
    check_engine(args.engine)  # a tracker: the exec engine runs under `sharebench run`
    with contextlib.redirect_stdout(sys.stderr):  # xtrack's chatter
        rec = run_replica(
            RunConfig(
                engine=args.engine, device=args.device, particles=args.particles, turns=args.turns, **run_options(args)
            )
        )
    d = rec.to_dict()
    if args.out:
        write_json(args.out, "record", d)
    if args.json:
        print(json.dumps(d, indent=1))
    else:
        for k, v in d.items():
            if isinstance(v, float):
                v = f"{v:.6g}" if k not in ("track_start", "track_end") else f"{v:.6f}"
            print(f"{k:<22} {v}")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    config = BenchConfig(
        engines=args.engines,
        devices=args.devices or args.device,
        particles=args.particles,
        turns=args.turns,
        repeats=args.repeats,
        out_dir=args.out,
        command=command_line(),
        **run_options(args),
    )
    print(to_markdown(run_bench(config)))
    return 0
