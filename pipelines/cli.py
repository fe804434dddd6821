"""``sharebench compile``, ``sharebench submit``, ``sharebench runs``: the pipelines on a Kubeflow cluster.

Their options are in ``sharebench.pipelines.commands`` (light: ``--help`` and a bad option's usage error
never import kfp); this module, with kfp, is imported when one of the commands runs.

The CLI parses and validates; kfp.Client does the talking. Auth is what kfp.Client
offers: a bearer token (``--token``, e.g. a service-account token or an IAP/OIDC
token), a session cookie (``--cookies "authservice_session=…"`` from a browser logged
into the Kubeflow dashboard), or, with no ``--host``, the in-cluster defaults (a
notebook or pod inside the cluster).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import warnings
from pathlib import Path
from typing import Any

import kfp
import urllib3
import yaml
from kfp_server_api.exceptions import ApiException

from sharebench.errors import UserError
from sharebench.history import open_store
from sharebench.node.images import IMAGE_ALLOW_ENV, check_image
from sharebench.pipelines.commands import HERE, PIPELINE_FILES
from sharebench.pipelines.compile import compile_all
from sharebench.pipelines.fetch import Store, fetch_results
from sharebench.sweep.grid import REQUEST_KEYS, plan_grid
from sharebench.workloads import Workload

# KFP's recurring runs use robfig/cron with a seconds field first.
_CRON_FIELDS = (
    ("second", 0, 59, None),
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day of month", 1, 31, None),
    ("month", 1, 12, ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")),
    ("day of week", 0, 6, ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")),
)


# ------------------------------------------------------------------ validation
def validate_cron(expr: str) -> str:
    """A KFP cron expression (6 fields, seconds first), checked field by field; returns it normalised.

    A 5-field (crontab) expression is refused with its 6-field equivalent in the message.
    """
    fields = expr.split()
    if len(fields) == 5:
        raise UserError(
            f"cron {expr!r} has 5 fields; KFP cron has 6, seconds first: "
            f"use '0 {' '.join(fields)}' (second minute hour day-of-month month day-of-week)"
        )
    if len(fields) != 6:
        raise UserError(
            f"cron {expr!r} has {len(fields)} fields; KFP cron has 6, seconds first, "
            "e.g. '0 0 3 * * *' (daily at 03:00)"
        )
    for text, (name, lo, hi, names) in zip(fields, _CRON_FIELDS):
        _check_cron_field(expr, text, name, lo, hi, names)
    return " ".join(fields)


def _check_cron_field(expr: str, text: str, name: str, lo: int, hi: int, names: tuple[str, ...] | None) -> None:
    def value(v: str) -> int:
        if names and v.upper() in names:
            return names.index(v.upper()) + lo
        if not v.isdigit() or not lo <= int(v) <= hi:
            allowed = f"{lo}-{hi}" + (f" or {names[0]}-{names[-1]}" if names else "")
            raise UserError(
                f"cron {expr!r}: {name} field {text!r} is out of range; allowed: {allowed}, *, ranges a-b, "
                "lists a,b, steps */n"
            )
        return int(v)

    if text == "?" and name in ("day of month", "day of week"):
        return
    for part in text.split(","):
        base, _, step = part.partition("/")
        if step and (not step.isdigit() or int(step) < 1):
            raise UserError(
                f"cron {expr!r}: {name} field {text!r} has a bad step {step!r}; allowed: a positive integer"
            )
        if base == "*":
            continue
        a, dash, b = base.partition("-")
        if dash:
            if value(a) > value(b):
                raise UserError(f"cron {expr!r}: {name} range {base!r} runs backwards")
        else:
            value(a)


def pipeline_parameters(package: Path) -> dict[str, dict[str, Any]]:
    """name -> {parameterType, defaultValue} of a compiled pipeline's inputs."""
    try:
        spec = next(yaml.safe_load_all(package.read_text()))
    except (yaml.YAMLError, StopIteration) as exc:
        raise UserError(f"{package} is not a compiled pipeline YAML ({type(exc).__name__})") from None
    if not isinstance(spec, dict) or "root" not in spec:
        raise UserError(f"{package} is not a compiled KFP pipeline (no root); run `sharebench compile`")
    return dict(spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {}))


def parse_params(items: list[str], params: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``k=v`` strings → typed pipeline arguments, checked against the pipeline's parameters.

    Lists take JSON (``["exclusive","mps:2"]``) or commas (``exclusive,mps:2``); numbers
    take ``1e6``; booleans true/false.
    """
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UserError(f"--param {item!r}: write NAME=VALUE, e.g. --param node_name=gpu-node-1")
        if key not in params:
            raise UserError(
                f"--param {key!r} is not a parameter of this pipeline; allowed: {', '.join(sorted(params))}"
            )
        out[key] = _typed(key, raw.strip(), params[key].get("parameterType", "STRING"))
    if "workload" in out:
        out["workload"] = check_workload(out["workload"])
    return out


def check_workload(value: Any) -> dict[str, Any]:
    """A ``workload`` argument checked here, before the run exists (``Workload.from_dict``): the whole
    value the pipeline gets, every key filled in; a one-line UserError naming the bad key or value."""
    try:
        return Workload.from_dict(value).to_dict()
    except UserError as exc:
        raise UserError(f"--param workload: {exc}") from None


def check_arguments(params: dict[str, dict[str, Any]], given: dict[str, Any]) -> None:
    """A run's arguments (``given`` over the compiled defaults) checked here as the pipeline's own steps
    check them (``sharebench.sweep.grid.plan_grid``: every sweep parameter, per node of a multi-node
    run; the image against the site's allow-list, as the node step checks it): a bad value is a
    one-line UserError before the run exists, not a failed task on the cluster. A run that names no
    node is checked as if it named one (the cluster's answer to that is its own)."""
    values = {k: given.get(k, spec.get("defaultValue")) for k, spec in params.items()}
    check_history_arguments(values)
    if not {"modes", "particle_counts", "repeats", "turns", "placement"} <= set(values):
        return  # not a sweep pipeline: its parameters are checked by their types alone
    request = {k: v for k, v in values.items() if k in REQUEST_KEYS and k != "node_name"}
    nodes = values.get("nodes") if "nodes" in values else [values.get("node_name") or ""]
    try:
        for node in [str(n) or "node" for n in nodes or [""]]:
            plan_grid({**request, "node_name": node})
        if "image" in values:  # the site's allow-list, as the node step checks it (issue 27)
            check_image(
                str(values["image"] or ""),
                os.environ.get(IMAGE_ALLOW_ENV),
                str(params["image"].get("defaultValue") or ""),
            )
    except UserError as exc:
        raise UserError(f"--param: {exc}") from None


def check_history_arguments(values: dict[str, Any]) -> None:
    """The history step's store (a folder or s3://bucket/prefix; '' off) and Pushgateway (an http(s) URL;
    '' none), checked as the step checks them: a one-line UserError naming the bad value."""
    store = str(values.get("history") or "").strip()
    if store:
        try:
            open_store(store, create=True)
        except UserError as exc:
            raise UserError(f"--param history: {exc}") from None
    gateway = str(values.get("pushgateway") or "").strip()
    if gateway and not re.fullmatch(r"https?://[^\s/]+(/\S*)?", gateway):
        raise UserError(
            f"--param pushgateway={gateway!r} is not an http(s) URL; allowed: '' (none) or e.g. "
            "http://pushgateway.monitoring:9091"
        )


def _typed(key: str, raw: str, ptype: str) -> Any:
    try:
        if ptype == "LIST":
            if raw.startswith("["):
                value = json.loads(raw)
                if not isinstance(value, list):
                    raise ValueError
                return value
            items = [v.strip() for v in raw.split(",") if v.strip()]
            return [_number_or_str(v) for v in items]
        if ptype == "NUMBER_INTEGER":
            f = float(raw)
            if f != int(f):
                raise ValueError
            return int(f)
        if ptype == "NUMBER_DOUBLE":
            return float(raw)
        if ptype == "BOOLEAN":
            if raw.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return raw.lower() in ("true", "1", "yes")
        if ptype == "STRUCT":
            value = json.loads(raw)
            if not isinstance(value, dict):
                raise ValueError
            return value
    except ValueError:
        kinds = {
            "LIST": "a JSON list or comma-separated values",
            "NUMBER_INTEGER": "an integer (1e6 is fine)",
            "NUMBER_DOUBLE": "a number",
            "BOOLEAN": "true or false",
            "STRUCT": "a JSON object",
        }
        raise UserError(f"--param {key}={raw!r}: expected {kinds[ptype]}") from None
    return raw


def _number_or_str(v: str) -> Any:
    if re.fullmatch(r"[+-]?\d+(\.\d*)?([eE][+-]?\d+)?", v):
        f = float(v)
        return int(f) if f == int(f) else f
    return v


# ------------------------------------------------------------------ client
@contextlib.contextmanager
def _api_errors(args: argparse.Namespace):
    """Connection and API failures of the KFP server as one-line UserErrors."""

    where = args.host or "the in-cluster KFP API"
    try:
        yield
    except urllib3.exceptions.HTTPError as exc:
        reason = getattr(exc, "reason", None) or exc
        raise UserError(
            f"cannot reach {where}: {reason}; check --host (e.g. a port-forward of "
            "svc/ml-pipeline-ui to http://localhost:8080)"
        ) from None
    except TimeoutError as exc:  # kfp.Client's health check gave up (it retries 5 times)
        raise UserError(
            f"{where} did not answer its health check ({exc}); check --host and --token/--cookies"
        ) from None
    except ApiException as exc:
        hint = {
            401: "pass --token or --cookies",
            403: "your identity lacks access to this namespace/experiment",
            404: "is --host the KFP API (…/pipeline) and does the experiment exist?",
        }.get(exc.status, "")
        body = " ".join(str(exc.body or exc.reason).split())[:200]
        raise UserError(f"{where} answered HTTP {exc.status} ({body}){'; ' + hint if hint else ''}") from None


def make_client(args: argparse.Namespace):
    """kfp.Client from the auth options users already have."""
    kwargs: dict[str, Any] = {}
    if args.host:
        if not re.match(r"^https?://", args.host):
            raise UserError(f"--host {args.host!r}: give the KFP API URL with its scheme, e.g. http://localhost:8080")
        kwargs["host"] = args.host
    if args.token:
        kwargs["existing_token"] = args.token
    if args.cookies:
        kwargs["cookies"] = args.cookies
    if args.namespace:
        kwargs["namespace"] = args.namespace
    with warnings.catch_warnings():  # "This client only works with KFP v2.0.0-beta.2 and later": noise
        warnings.simplefilter("ignore", FutureWarning)
        return kfp.Client(**kwargs)


def _package(args: argparse.Namespace) -> Path:
    path = Path(args.package) if args.package else HERE / PIPELINE_FILES[args.pipeline]
    if not path.is_file():
        raise UserError(f"pipeline package {str(path)!r} does not exist; run `sharebench compile` or pass --package")
    return path


def submit(args: argparse.Namespace) -> dict[str, Any]:
    """Create a run (or a recurring run with ``--schedule``) of a compiled pipeline."""
    package = _package(args)
    known = pipeline_parameters(package)
    params = parse_params(args.param, known)
    check_arguments(known, params)
    cron = validate_cron(args.schedule) if args.schedule else None
    with _api_errors(args):
        return _submit(args, package, params, cron)


def _submit(args: argparse.Namespace, package: Path, params: dict[str, Any], cron: str | None) -> dict[str, Any]:
    client = make_client(args)
    namespace = args.namespace or None
    if cron:
        experiment = client.create_experiment(args.experiment, namespace=namespace)
        rr = client.create_recurring_run(
            experiment_id=experiment.experiment_id,
            job_name=args.run_name or f"{package.stem} ({cron})",
            cron_expression=cron,
            params=params,
            pipeline_package_path=str(package),
            max_concurrency=1,
            no_catchup=True,
            enabled=True,
            enable_caching=False,
            service_account=args.service_account,
        )
        return {
            "recurring_run_id": rr.recurring_run_id,
            "experiment_id": experiment.experiment_id,
            "cron": cron,
            "params": params,
        }
    result = client.create_run_from_pipeline_package(
        str(package),
        arguments=params,
        run_name=args.run_name,
        experiment_name=args.experiment,
        namespace=namespace,
        enable_caching=False,
        service_account=args.service_account,
    )
    if args.wait:
        run = client.wait_for_run_completion(result.run_id, timeout=args.wait)
        return {"run_id": result.run_id, "state": str(run.state), "params": params}
    return {"run_id": result.run_id, "params": params}


def list_runs(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    """Runs and recurring runs of the experiment (or of the namespace), newest first."""
    with _api_errors(args):
        return _list_runs(args)


def _list_runs(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    client = make_client(args)
    kw: dict[str, Any] = {"page_size": args.limit, "sort_by": "created_at desc"}
    if args.experiment:
        exp = client.get_experiment(experiment_name=args.experiment, namespace=args.namespace or None)
        kw["experiment_id"] = exp.experiment_id
    elif args.namespace:
        kw["namespace"] = args.namespace
    runs = client.list_runs(**kw).runs or []
    recurring = client.list_recurring_runs(**kw).recurring_runs or []
    return {
        "runs": [
            {"run_id": r.run_id, "name": r.display_name, "state": r.state, "created_at": str(r.created_at)}
            for r in runs
        ],
        "recurring_runs": [
            {
                "recurring_run_id": r.recurring_run_id,
                "name": r.display_name,
                "cron": (r.trigger.cron_schedule.cron if r.trigger and r.trigger.cron_schedule else None),
                "status": r.status,
            }
            for r in recurring
        ],
    }


def fetch(args: argparse.Namespace) -> list[Path]:
    """A run's results folder(s) from the deployment's object store into ``--out``
    (``sharebench.pipelines.fetch``); the KFP API names the run's pipeline and state."""
    with _api_errors(args):
        run = make_client(args).get_run(args.run_id)
    spec = run.pipeline_spec if isinstance(run.pipeline_spec, dict) else {}
    spec = spec.get("pipeline_spec") or spec  # with a platform spec (kfp-kubernetes), the two side by side
    name = (spec.get("pipelineInfo") or {}).get("name")
    store = Store(endpoint=args.s3_endpoint, bucket=args.s3_bucket, root=args.s3_root)
    return fetch_results(store, args.run_id, Path(args.out), pipeline_name=name, state=str(run.state))


# ------------------------------------------------------------------ commands
def cmd_compile(args: argparse.Namespace) -> int:
    for path in compile_all(args.out):
        print(path)
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    out = submit(args)
    if "recurring_run_id" in out:
        print(f"recurring run {out['recurring_run_id']} (cron {out['cron']}) in experiment {out['experiment_id']}")
    else:
        print(f"run {out['run_id']}" + (f" finished: {out['state']}" if "state" in out else ""))
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    out = list_runs(args)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{'run id':38} {'state':10} {'created':26} name")
    for r in out["runs"]:
        print(f"{r['run_id']:38} {str(r['state']):10} {r['created_at']:26} {r['name']}")
    if out["recurring_runs"]:
        print(f"\n{'recurring run id':38} {'status':10} {'cron':26} name")
        for r in out["recurring_runs"]:
            print(f"{r['recurring_run_id']:38} {str(r['status']):10} {str(r['cron']):26} {r['name']}")
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    for folder in fetch(args):
        print(f"{folder}   (sharebench report {folder})")
    return 0
