"""Running the sweep pipeline from a notebook: locally through kfp.local, or on a cluster.

``notebooks/sharing_experiment.ipynb`` uses these; they are plain functions so scripts can too::

    from sharebench.pipelines.notebook import run_local
    out = run_local("kfp-root", modes=["exclusive", "timeslice:2"], particle_counts=[2000], turns=100,
                    repeats=1, placement="processes", workload={"device": "opencl:0.0"})
    out.results_dir, out.report_html, out.metrics
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kfp
from kfp import local

from sharebench.errors import UserError
from sharebench.pipelines.cli import HERE, PIPELINE_FILES, check_workload, parse_params, pipeline_parameters
from sharebench.pipelines.sweep_pipeline import SWEEP_NAME, sweep_pipeline


@dataclass
class PipelineOutputs:
    """Where a finished sweep's artifacts are, and its metrics."""

    run_dir: Path
    results_dir: Path  # collect_results' results folder (results.csv, provenance.json, tables/)
    tables_md: Path
    report_html: Path
    report_md: Path
    plots_dir: Path
    metrics: dict[str, float] = field(default_factory=dict)


def param(name: str, default: Any) -> Any:
    """A notebook parameter, overridable by ``SHAREBENCH_NB_<NAME>`` (JSON, or a plain string)."""
    raw = os.environ.get(f"SHAREBENCH_NB_{name.upper()}")
    if raw is None:
        return default
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def local_outputs(run_dir: Path | str) -> PipelineOutputs:
    """The artifacts of a kfp.local run of ``sharebench-sweep`` under its pipeline root."""
    run = Path(run_dir)
    collect, report = run / "collect-results", run / "write-report"
    if not (collect / "executor_output.json").exists() or not (report / "report_html").exists():
        raise UserError(f"{run} holds no finished sweep (no collect-results/write-report outputs)")
    out = json.loads((collect / "executor_output.json").read_text())
    metrics: dict[str, float] = {}
    for art in out.get("artifacts", {}).get("metrics", {}).get("artifacts", []):
        metrics.update(art.get("metadata", {}))
    return PipelineOutputs(
        run,
        collect / "results",
        collect / "tables",
        report / "report_html",
        report / "report_md",
        report / "plots",
        metrics,
    )


def run_local(pipeline_root: Path | str, **arguments: Any) -> PipelineOutputs:
    """Run ``sharebench-sweep`` with kfp.local (SubprocessRunner in this Python, no cluster). A
    ``workload`` argument may name only some keys: it is checked and completed here."""
    if "workload" in arguments:
        arguments = {**arguments, "workload": check_workload(arguments["workload"])}
    root = Path(pipeline_root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    before = set(root.glob(f"{SWEEP_NAME}-*"))
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root))
    sweep_pipeline(**arguments)
    (run_dir,) = set(root.glob(f"{SWEEP_NAME}-*")) - before
    return local_outputs(run_dir)


def submit_and_wait(
    host: str | None,
    arguments: dict[str, Any],
    *,
    experiment: str = "sharebench",
    token: str | None = None,
    cookies: str | None = None,
    namespace: str | None = None,
    service_account: str | None = None,
    timeout_s: float = 24 * 3600,
) -> dict[str, Any]:
    """Submit ``sharebench-sweep`` to a Kubeflow cluster and wait for it; returns the run's id and
    final state. Its report is the ``report_html`` artifact of the run's write-report task (the
    run's page in the Kubeflow UI shows it); its results folder is collect-results' ``results``."""
    package = HERE / PIPELINE_FILES["sweep"]
    known = pipeline_parameters(package)
    arguments = parse_params(
        [f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in arguments.items()], known
    )
    kw = {k: v for k, v in dict(host=host, existing_token=token, cookies=cookies).items() if v}
    if namespace:
        kw["namespace"] = namespace
    client = kfp.Client(**kw)
    run = client.create_run_from_pipeline_package(
        str(package),
        arguments=arguments,
        experiment_name=experiment,
        namespace=namespace,
        enable_caching=False,
        service_account=service_account,
    )
    done = client.wait_for_run_completion(run.run_id, timeout=timeout_s)
    return {"run_id": run.run_id, "state": str(done.state)}
