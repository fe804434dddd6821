"""The ``sharebench`` command: parses, validates and dispatches; the library does the work.

One light module per command group (``cli/kernel.py``: devices, lattice, track, bench; ``cli/sweep.py``:
run, report, cleanup; ``cli/node.py``; ...), each with a ``configure(name, parser)`` that adds a
command's options and its ``func``; the work is in the group's ``*_cmd.py`` module, which ``func``
(a :func:`lazy` reference) imports only when the command runs. So ``sharebench COMMAND --help`` and a
bad option's usage error import argparse and a few constants, never pandas, scipy, matplotlib, kfp or
the Kubernetes client (tests/cli/test_help_imports.py); a command whose options need more than argparse
checks them in its options module too (``lazy(..., check=...)``), so that a bad value answers before the
work's module loads. A group is imported only when one of its commands is parsed; other packages add
command groups through the entry-point group
``sharebench.commands`` (the KFP pipelines add ``compile``, ``submit`` and ``runs`` that way, so the
library never imports kfp).

The one error boundary: a :class:`~sharebench.errors.UserError` prints one line and exits 2;
Ctrl-C exits 130; anything else keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from types import ModuleType

from sharebench import __version__
from sharebench.errors import UserError
from sharebench.modes import kinds_where

# command -> (module, one-line help), in the order `sharebench --help` lists them
COMMANDS: dict[str, tuple[str, str]] = {
    "devices": ("sharebench.cli.kernel", "list the devices a run can use"),
    "lattice": ("sharebench.cli.kernel", "element mix, circumference, tunes and chromaticities of a lattice"),
    "track": ("sharebench.cli.kernel", "one tracking run; prints its record"),
    "bench": ("sharebench.cli.kernel", "speed benchmark: engines x devices, writes JSON and markdown"),
    "run": (
        "sharebench.cli.sweep",
        "measure every sharing mode on this machine (a local sweep) and write tables, plots, report",
    ),
    "report": ("sharebench.cli.sweep", "rebuild tables, plots and report.md/report.html of a results folder"),
    "compare": ("sharebench.cli.compare", "differences between results folders, per cell, with intervals and verdicts"),
    "cleanup": ("sharebench.cli.sweep", "stop MPS daemons (and remove their folders) that a killed sweep left behind"),
    "node": (
        "sharebench.cli.node",
        f"reconfigure a GPU node through the gpu-operator ({', '.join(kinds_where(local_only=False))})",
    ),
    "manifests": ("sharebench.cli.manifests", "render or check the Kubernetes manifests sharebench deploys"),
    "telemetry": ("sharebench.cli.telemetry", "sample this machine, attach DCGM metrics, annotate Grafana"),
    "history": ("sharebench.cli.history", "a results history: add runs to a store, show the trend, check for changes"),
    "campaign": ("sharebench.cli.campaign", "run a campaign plan (TOML): its sweeps and tools, in order, on a budget"),
    "advise": ("sharebench.cli.advise", "recommend a GPU pool layout from a site's usage and the measured costs"),
    "probe": ("sharebench.cli.probe", "measure the GPU's time slices and split a time-slicing loss into its causes"),
}
PLUGIN_GROUP = "sharebench.commands"
Command = Callable[[argparse.Namespace], int]


class Lazy:
    """A command's ``func`` named ``"module:function"``: the module is imported when the command runs,
    not when its parser is built (``--help`` and usage errors stay light). ``check``: the options module's
    own check of the parsed options, run first, so that a bad value is refused before the module loads."""

    def __init__(self, module: str, function: str, check: Callable[[argparse.Namespace], object] | None = None) -> None:
        self.module, self.function, self.check = module, function, check

    def resolve(self) -> Command:
        """The function itself (its module imported)."""
        func: Command = getattr(importlib.import_module(self.module), self.function)
        return func

    def __call__(self, args: argparse.Namespace) -> int:
        if self.check is not None:
            self.check(args)
        return int(self.resolve()(args) or 0)

    def __repr__(self) -> str:
        return f"lazy({self.module}:{self.function})"


def lazy(target: str, check: Callable[[argparse.Namespace], object] | None = None) -> Command:
    """``lazy("sharebench.cli.sweep_cmd:cmd_run")``: a command function imported only when called;
    ``check``: a light check of its options run before the import (a UserError refuses them)."""
    module, sep, function = target.partition(":")
    if not (sep and module and function.isidentifier()):
        raise ValueError(f"lazy({target!r}): write 'package.module:function'")
    return Lazy(module, function, check)


def plugin_commands() -> dict[str, tuple[str, str]]:
    """Commands other installed packages add: each entry point of the group ``sharebench.commands``
    names a light module whose ``COMMANDS`` has the shape of :data:`COMMANDS`."""
    out: dict[str, tuple[str, str]] = {}
    for ep in entry_points(group=PLUGIN_GROUP):
        out.update(importlib.import_module(ep.value).COMMANDS)
    return out


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; the options of ``command`` (its group's module imported) when one is given."""
    parser = argparse.ArgumentParser(
        prog="sharebench",
        description="Measure what GPU sharing (time-slicing, MPS, MIG) costs the Simpletrack workload.",
    )
    parser.add_argument("--version", action="version", version=f"sharebench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in {**COMMANDS, **plugin_commands()}.items():
        # the one-line help is also the command's description (its --help), unless configure() gives a longer one
        p = sub.add_parser(name, help=help_text, description=help_text[:1].upper() + help_text[1:] + ".")
        if name == command:
            module: ModuleType = importlib.import_module(module_name)
            module.configure(name, p)
    return parser


def _command(argv: list[str]) -> str | None:
    """The command named in argv (its first word that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def check_utf8(argv: list[str]) -> None:
    """Every word given is valid UTF-8 (a name from a non-UTF-8 file system arrives with surrogates):
    sharebench writes names into UTF-8 files (results.csv, sweep.json, the report), so one that is
    not is refused here, in one line, before anything runs (issue 37)."""
    for i, word in enumerate(argv):
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            shown = word.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            option, _, value = shown.partition("=") if shown.startswith("--") else ("", "", shown)
            if not option and i > 0 and argv[i - 1].startswith("-"):
                option = argv[i - 1]
            raise UserError(
                f"{option + ' ' if option else ''}'{value}' is not valid UTF-8; sharebench writes names into UTF-8 "
                "files: give one in UTF-8"
            ) from None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        check_utf8(argv)
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"sharebench: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sharebench: interrupted", file=sys.stderr)
        return 130
