"""Kernel commands: ``devices``, ``lattice``, ``track``, ``bench``."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys


def _cpus(text: str) -> list[int]:
    """'0-3,6' -> [0, 1, 2, 3, 6]"""
    out: list[int] = []
    try:
        for part in text.split(","):
            part = part.strip()
            if "-" in part:
                a, b = part.split("-")
                out += list(range(int(a), int(b) + 1))
            elif part:
                out.append(int(part))
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad cpus {text!r}: allowed is a list like 0-3,6") from None
    if not out:
        raise argparse.ArgumentTypeError(f"bad cpus {text!r}: allowed is a list like 0-3,6")
    return out


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", default="simpletrack", help="simpletrack (default) or xtrack")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda[:N], opencl[:P.D] (default auto)")
    p.add_argument("--lattice", default=None, metavar="FILE", help="Xsuite line JSON/JSON.gz (default: the generated LHC-like ring)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--nemitt-x", type=float, default=2.5e-6, help="normalised emittance [m] (default 2.5e-6)")
    p.add_argument("--nemitt-y", type=float, default=2.5e-6)
    p.add_argument("--sigma-z", type=float, default=0.05, help="bunch length [m] (default 0.05)")
    p.add_argument("--sigma-delta", type=float, default=1e-4, help="momentum spread (default 1e-4)")
    p.add_argument("--warmup-turns", type=int, default=1)
    p.add_argument("--mem-limit-bytes", type=int, default=None, help="refuse runs that need more device memory")
    p.add_argument("--cpus", type=_cpus, default=None, help="pin to these cores, e.g. 0-3")
    p.add_argument("--block-size", type=int, default=128, help="GPU work-group size (simpletrack)")
    p.add_argument("--no-optimize", action="store_true", help="xtrack engine: skip optimize_for_tracking()")


def _config(args, particles: int, turns: int, engine=None, device=None):
    from sharebench.kernel.config import RunConfig

    return RunConfig(
        engine=engine or args.engine, device=device or args.device, lattice=args.lattice, particles=particles,
        turns=turns, seed=args.seed, nemitt_x=args.nemitt_x, nemitt_y=args.nemitt_y, sigma_z=args.sigma_z,
        sigma_delta=args.sigma_delta, warmup_turns=args.warmup_turns, mem_limit_bytes=args.mem_limit_bytes,
        cpus=args.cpus, optimize=not args.no_optimize, block_size=args.block_size,
    )


def cmd_devices(args) -> int:
    from sharebench.kernel.devices import list_devices, resolve_device

    devs = list_devices()
    auto = resolve_device("auto")
    if args.json:
        print(json.dumps({"devices": [d.to_dict() for d in devs], "auto": auto.spec}, indent=1))
        return 0
    print(f"{'spec':<12} {'kind':<4} {'memory':>10}  {'name':<40} {'platform':<34} uuid")
    for d in devs:
        mark = " (auto)" if d.spec == auto.spec else ""
        print(f"{d.spec:<12} {d.kind:<4} {d.memory_bytes / 2**30:8.1f} GiB  {d.name[:40]:<40} {d.platform[:34]:<34} {d.uuid}{mark}")
    return 0


def cmd_lattice(args) -> int:
    from sharebench.kernel.lattice import describe, get_line_cached

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
    print(f"reference       p0c {info['p0c_ev'] / 1e12:g} TeV, mass {info['mass0_ev'] / 1e6:.3f} MeV, q0 {info['q0']:g}")
    if "qx" in info:
        print(f"tunes (6d)      Qx {info['qx']:.4f}  Qy {info['qy']:.4f}  Qs {info['qs']:.5f}")
        print(f"chromaticities  Q'x {info['dqx']:.2f}  Q'y {info['dqy']:.2f}")
    return 0


def cmd_track(args) -> int:
    from sharebench.kernel.run import run_replica

    with contextlib.redirect_stdout(sys.stderr):  # xtrack's chatter
        rec = run_replica(_config(args, args.particles, args.turns))
    d = rec.to_dict()
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(d, fh, indent=1)
    if args.json:
        print(json.dumps(d, indent=1))
    else:
        for k, v in d.items():
            if isinstance(v, float):
                v = f"{v:.6g}" if k not in ("track_start", "track_end") else f"{v:.6f}"
            print(f"{k:<22} {v}")
    return 0


def cmd_bench(args) -> int:
    from sharebench.kernel.bench import run_bench

    run_bench(args)
    return 0


def register(sub) -> None:
    p = sub.add_parser("devices", help="list the devices a run can use")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("lattice", help="element mix, circumference, tunes and chromaticities of a lattice")
    p.add_argument("--lattice", default=None, metavar="FILE", help="Xsuite line JSON/JSON.gz (default: the generated ring)")
    p.add_argument("--no-twiss", action="store_true", help="skip xtrack's twiss (tunes, chromaticities)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_lattice)

    p = sub.add_parser("track", help="one tracking run; prints its record")
    _add_run_options(p)
    p.add_argument("--particles", type=int, default=10_000)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--json", action="store_true", help="print the record as JSON")
    p.add_argument("--out", default=None, metavar="FILE", help="also write the record as JSON")
    p.set_defaults(func=cmd_track)

    p = sub.add_parser("bench", help="speed benchmark: engines x devices, writes JSON and markdown")
    _add_run_options(p)
    p.add_argument("--engines", default="simpletrack", help="comma list (default simpletrack)")
    p.add_argument("--devices", default=None, help="comma list of device specs (default: --device)")
    p.add_argument("--particles", default="100000", help="comma list of particle counts")
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="sharebench-results/bench", help="folder for bench.json and bench.md")
    p.set_defaults(func=cmd_bench)


def main(argv: list[str] | None = None) -> int:
    """``python -m sharebench.kernel.cli COMMAND ...``: the same as ``sharebench COMMAND ...``."""
    from sharebench.cli import main as sharebench_main

    return sharebench_main(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
