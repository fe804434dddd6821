"""The Kubeflow Pipelines command group of ``sharebench``: ``compile``, ``submit``, ``runs``.

The sharebench CLI finds this module through the entry point ``sharebench.commands``
(pyproject.toml) and imports ``sharebench.pipelines.cli`` (and with it kfp) only when one of these
commands runs. Without the KFP SDK the commands say how to install it.
"""

from __future__ import annotations

import argparse
import importlib.util

from sharebench.errors import UserError

HELP = {
    "compile": "compile the pipelines to YAML (committed under pipelines/)",
    "submit": "run a pipeline on a Kubeflow cluster, once or on a schedule",
    "runs": "list runs and recurring runs on a Kubeflow cluster",
}
MODULE = "sharebench.pipelines.cli" if importlib.util.find_spec("kfp") is not None else __name__
# command -> (module with configure(name, parser), one-line help), as sharebench.cli.COMMANDS
COMMANDS = {name: (MODULE, text) for name, text in HELP.items()}


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    """Without kfp: every command says what to install."""
    parser.set_defaults(func=needs_kfp)


def needs_kfp(args: argparse.Namespace) -> int:
    raise UserError(
        f"sharebench {args.command} needs the Kubeflow Pipelines SDK; install it with pip install 'sharebench[kfp]'"
    )
