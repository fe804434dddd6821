"""Running the sweep pipeline from a notebook: locally through kfp.local, or on a cluster.

``notebooks/sharing_experiment.ipynb`` uses these; they are plain functions so scripts can too::

    from sharebench.pipelines.notebook import run_local
    out = run_local("kfp-root", modes=["exclusive", "timeslice:2"], particle_counts=[500], turns=10,
                    repeats=3, placement="processes", workload={"device": "cpu"})
    out.results_dir, out.report_html, out.metrics, out.log

kfp.local streams every task's executor input, logs and outputs to stdout and warns once per task that
the image is not used (a 2,000-particle sweep printed 187,472 characters). :func:`run_local` writes all of
that to ``<run>/kfp-local.log`` and shows one line per replica run; when the run fails, the failed task's
own log lines are shown before the error.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import kfp
import pandas as pd
from kfp import local

from sharebench.analysis import Tables, analyse
from sharebench.analysis.compare import differing_settings
from sharebench.cli.compare_cmd import compare_two
from sharebench.errors import UserError
from sharebench.pipelines.cli import HERE, PIPELINE_FILES, check_workload, parse_params, pipeline_parameters
from sharebench.pipelines.sweep_pipeline import SWEEP_NAME, sweep_pipeline

LOG_NAME = "kfp-local.log"
# what kfp.local warns of every task of a SubprocessRunner run: true, and nothing to act on here
KFP_LOCAL_NOISE = (
    "You may be attemping to run a task that uses custom or non-Python base image",
    "have no effect in the current local runner",
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
REPLICA_LINE = re.compile(r"^\s*sharebench: (\S+ replica \d+: .*)$")
TASK_START = re.compile(r" - INFO - Executing task '([^']+)'")
TASK_END = re.compile(r" - [A-Z]+ - Task '([^']+)' finished with status (\w+)")
FAILED_TAIL_LINES = 80


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
    log: Path | None = None  # kfp.local's whole output (run_local)
    seconds: float = 0.0  # the run's wall time (run_local)
    tasks: int = 0  # the tasks kfp.local ran (run_local)


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


class QuietStream(io.TextIOBase):
    """kfp.local's stdout: every line to ``log`` (without colour codes); on ``screen`` only each replica run's one line
    (``sharebench: <cell> replica <i>: ok track_s=…``). Keeps the lines of the task running now, so a
    failure can show them."""

    def __init__(self, log: TextIO, screen: TextIO):
        self.log, self.screen = log, screen
        self.partial = ""
        self.task_lines: list[str] = []
        self.tasks = 0
        self.failed: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        text = ANSI.sub("", s)  # kfp.local colours task names and states
        self.log.write(text)
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            self.line(line)
        return len(s)

    def line(self, text: str) -> None:
        if TASK_START.search(text):
            self.task_lines = []
        self.task_lines.append(text)
        end = TASK_END.search(text)
        if end:
            self.tasks += 1
            if end.group(2) != "SUCCESS":
                self.failed += self.task_lines[-FAILED_TAIL_LINES:]
        replica = REPLICA_LINE.match(text)
        if replica:
            self.screen.write(f"  {replica.group(1)}\n")
            self.screen.flush()

    def flush(self) -> None:
        self.log.flush()


@contextlib.contextmanager
def quiet_kfp_local(log_path: Path, screen: TextIO) -> Iterator[QuietStream]:
    """kfp.local's output into ``log_path``, its per-task warnings into the log too (other warnings
    still shown); on an error, the failing task's lines go to ``screen`` first."""
    with log_path.open("w") as log:
        stream = QuietStream(log, screen)
        try:
            with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(stream):
                warnings.simplefilter("default")
                try:
                    yield stream
                finally:
                    for w in caught:
                        log.write(f"{w.category.__name__}: {w.message}\n")
                        if not any(n in str(w.message) for n in KFP_LOCAL_NOISE):
                            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        except BaseException:
            lines = stream.failed or stream.task_lines[-FAILED_TAIL_LINES:]
            screen.write("\n".join(["kfp.local: the failed task's log:", *lines, ""]))
            screen.flush()
            raise


def run_local(pipeline_root: Path | str, **arguments: Any) -> PipelineOutputs:
    """Run ``sharebench-sweep`` with kfp.local (SubprocessRunner in this Python, no cluster). A
    ``workload`` argument may name only some keys: it is checked and completed here. kfp.local's output
    goes to ``<run>/kfp-local.log`` (:func:`quiet_kfp_local`); one line per replica run is shown."""
    if "workload" in arguments:
        arguments = {**arguments, "workload": check_workload(arguments["workload"])}
    root = Path(pipeline_root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    before = set(root.glob(f"{SWEEP_NAME}-*"))
    log = root / f"{LOG_NAME}.{os.getpid()}"
    t0 = time.monotonic()
    failed = True
    try:
        with quiet_kfp_local(log, sys.stdout) as stream:
            local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root))
            sweep_pipeline(**arguments)
        failed = False
    finally:
        new = sorted(set(root.glob(f"{SWEEP_NAME}-*")) - before)
        if len(new) == 1:
            log = log.rename(new[0] / LOG_NAME)
        if failed:
            print(f"(all of kfp.local's output: {log})", flush=True)
    (run_dir,) = new
    out = local_outputs(run_dir)
    out.log, out.seconds, out.tasks = log, time.monotonic() - t0, stream.tasks
    return out


def answer_section(report_md: Path | str) -> tuple[str, list[Path]]:
    """The ``## Answer`` section of a report.md as Markdown without its images, and those images (PNG)
    as paths, for a notebook to display both (a Markdown image link would not travel with the notebook)."""
    path = Path(report_md)
    text = path.read_text()
    start = text.find("\n## Answer\n")
    if start < 0:
        raise UserError(f"{path} has no '## Answer' section; rebuild it with `sharebench report`")
    end = text.find("\n## ", start + 1)
    body = text[start + 1 : end if end > 0 else len(text)]
    images = [path.parent / m for m in re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", body)]
    kept = [ln for ln in body.splitlines() if not ln.startswith("![") and not ln.startswith("(also [SVG]")]
    return "\n".join(kept).strip() + "\n", images


def compare_folders(this: Path | str, earlier: Path | str) -> tuple[pd.DataFrame, str]:
    """This results folder against an earlier one, as ``sharebench compare EARLIER THIS`` prints it
    (:func:`sharebench.cli.compare_cmd.compare_two`): the rows, and Markdown holding the table, or, where no cell
    matched, why: the settings that differ, else the modes, else a folder with no measured cell."""
    a, b = analyse(earlier), analyse(this)
    labels = (Path(earlier).resolve().name, "this run")
    t, text = compare_two(a, b, (), labels)
    if t.empty and not differing_settings(a, b):
        text = f"{text} {why_unmatched(a, b, labels)}"
    return t, text


def why_unmatched(a: Tables, b: Tables, labels: tuple[str, str]) -> str:
    """Why two folders of the same work share no cell: one has no measured cell, or their modes differ."""
    good = [t.cells[~t.cells["warmup"].astype(bool) & ~t.cells["excluded"].astype(bool)] for t in (a, b)]
    for label, cells, tables in zip(labels, good, (a, b)):
        if cells.empty:
            return (
                f"{label} has no measured cell that is not flagged ({len(tables.cells)} cell(s) in all: see its flags)."
            )
    modes = [sorted({str(m) for m in cells["mode"]}) for cells in good]
    if not set(modes[0]) & set(modes[1]):
        return f"They measured different modes: {', '.join(modes[0])} in {labels[0]}, {', '.join(modes[1])} in {labels[1]}."
    return "Each work setting and mode occurs in both, but no cell has the same work and mode in both."


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
