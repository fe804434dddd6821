"""Command line: parses, validates and dispatches; library modules do the work.

Each feature area registers its own subcommands through a ``register(sub)``
function that adds parsers whose ``func`` attribute takes the parsed args and
returns an exit status. Areas whose optional dependencies are missing (for
example kfp) are skipped and their commands say so.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from sharebench import __version__
from sharebench.errors import UserError

# module path -> what it provides; each has register(subparsers)
_AREAS = [
    "sharebench.kernel.cli",      # devices, lattice, track, bench
    "sharebench.sweep_cli",       # run, report
    "sharebench.node.cli",        # node ..., manifests ...
    "sharebench.pipelines.cli",   # compile, submit, runs (needs kfp)
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sharebench",
        description="Measure what GPU sharing (time-slicing, MPS, MIG) costs the Simpletrack workload.",
    )
    parser.add_argument("--version", action="version", version=f"sharebench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _AREAS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # an area not built yet, or an optional dependency missing
            if exc.name and (exc.name == name or name.startswith(exc.name + ".") or exc.name in ("kfp",)):
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"sharebench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sharebench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
