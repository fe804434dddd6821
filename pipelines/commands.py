"""The Kubeflow Pipelines command group of ``sharebench``: ``compile``, ``submit``, ``runs``.

The sharebench CLI finds this module through the entry point ``sharebench.commands``
(pyproject.toml). It holds the commands' options and imports neither kfp nor the library stack, so
``sharebench submit --help`` and a bad option's usage error answer at once; ``sharebench.pipelines.cli``
(and with it kfp) is imported only when a command runs. Without the KFP SDK the commands say how to
install it.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from sharebench.cli import Command, lazy
from sharebench.errors import UserError

HELP = {
    "compile": "compile the pipelines to YAML (committed under pipelines/)",
    "submit": "run a pipeline on a Kubeflow cluster, once or on a schedule",
    "runs": "list runs and recurring runs on a Kubeflow cluster",
}
# command -> (module with configure(name, parser), one-line help), as sharebench.cli.COMMANDS
COMMANDS = {name: (__name__, text) for name, text in HELP.items()}
HAVE_KFP = importlib.util.find_spec("kfp") is not None
HERE = Path(__file__).resolve().parent
PIPELINE_FILES = {"sweep": "sharebench_sweep.yaml", "multi-node": "sharebench_multi_node.yaml"}


def command(function: str) -> Command:
    """``sharebench.pipelines.cli``'s ``function``, imported when it runs; without kfp, :func:`needs_kfp`."""
    return lazy(f"sharebench.pipelines.cli:{function}") if HAVE_KFP else needs_kfp


def needs_kfp(args: argparse.Namespace) -> int:
    raise UserError(
        f"sharebench {args.command} needs the Kubeflow Pipelines SDK; install it with pip install 'sharebench[kfp]'"
    )


def auth_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host",
        help="KFP API URL, e.g. http://localhost:8080 (port-forward of ml-pipeline-ui) or "
        "https://kubeflow.example.org/pipeline; omitted: kfp.Client's in-cluster default",
    )
    p.add_argument("--token", help="bearer token (kfp.Client existing_token)")
    p.add_argument("--cookies", help="session cookie(s), e.g. 'authservice_session=…' (kfp.Client cookies)")
    p.add_argument("--namespace", help="Kubeflow profile namespace (multi-user deployments)")
    p.add_argument("--experiment", default="sharebench", help="experiment name (default: sharebench)")


def configure(name: str, p: argparse.ArgumentParser) -> None:
    """The options of ``sharebench compile|submit|runs``; each runs ``sharebench.pipelines.cli``'s function."""
    {"compile": configure_compile, "submit": configure_submit, "runs": configure_runs}[name](p)


def configure_compile(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default=str(HERE), help=f"output folder (default: {HERE})")
    p.set_defaults(func=command("cmd_compile"))


def configure_submit(p: argparse.ArgumentParser) -> None:
    auth_options(p)
    p.add_argument(
        "--pipeline", choices=sorted(PIPELINE_FILES), default="sweep", help="which compiled pipeline (default: sweep)"
    )
    p.add_argument("--package", help="a compiled pipeline YAML instead of the packaged one")
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="pipeline argument, repeatable: --param node_name=gpu-1 --param modes=exclusive,mps:2",
    )
    p.add_argument(
        "--schedule",
        metavar="CRON",
        help="make a recurring run; KFP cron has 6 fields, seconds first: '0 0 3 * * *' = daily 03:00",
    )
    p.add_argument("--run-name", help="display name of the run or recurring run")
    p.add_argument("--service-account", help="Kubernetes service account of the run's pods (RBAC for the node steps)")
    p.add_argument("--wait", type=float, metavar="SECONDS", help="wait up to SECONDS for the run to finish")
    p.set_defaults(func=command("cmd_submit"))


def configure_runs(p: argparse.ArgumentParser) -> None:
    auth_options(p)
    p.set_defaults(experiment=None)
    p.add_argument("--limit", type=int, default=20, help="at most this many of each (default: 20)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=command("cmd_runs"))
    sub = p.add_subparsers(dest="runs_command", metavar="fetch", title="subcommand (none: list the runs)")
    f = sub.add_parser(
        "fetch",
        help="copy a run's results folder(s) from the object store KFP uses",
        description="Copy a run's collect-results results folder(s) from the object store of the "
        "KFP deployment (S3 API; credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY) "
        "into --out, for `sharebench report`.",
    )
    auth_options(f)
    f.add_argument("run_id", metavar="RUN_ID", help="the run's id (sharebench runs lists them)")
    f.add_argument("--out", required=True, help="local folder; the multi-node pipeline's nodes go to node-1, node-2, …")
    f.add_argument(
        "--s3-endpoint",
        help="S3 API URL of the object store, e.g. http://localhost:9000 "
        "(kubectl -n kubeflow port-forward svc/minio-service 9000:9000); "
        "omitted: AWS S3",
    )
    f.add_argument("--s3-bucket", default="mlpipeline", help="bucket (default: mlpipeline, KFP's default)")
    f.add_argument(
        "--s3-root",
        default="v2/artifacts",
        help="the pipeline root inside the bucket (default: v2/artifacts, KFP's default)",
    )
    f.set_defaults(func=command("cmd_fetch"))
