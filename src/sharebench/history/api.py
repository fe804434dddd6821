"""The history's verbs as library functions: add a run, check, accept a change; the pipeline's step
calls :func:`add_and_check`."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from sharebench.errors import UserError
from sharebench.history.check import CheckOptions, Verdict, check_history
from sharebench.history.push import push
from sharebench.history.records import CELL_KEYS, RunRows, run_rows
from sharebench.history.store import Store, add_run, load_accepts, load_runs, open_store, put_accept


@dataclass(frozen=True)
class AddCheckResult:
    """What :func:`add_and_check` did: the run added (or already there), every cell's verdict.
    ``changed`` is what the pipeline step fails on."""

    run_id: str
    file_name: str
    added: bool
    verdicts: list[Verdict]

    @property
    def changes(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.changed]

    @property
    def changed(self) -> bool:
        return bool(self.changes)


def add(results_dir: Path | str, store: Store) -> tuple[RunRows, bool]:
    """Add a results folder to the store; (its rows, whether a file was written)."""
    run = run_rows(results_dir)
    return run, add_run(store, run)


def check(store: Store, opts: CheckOptions, *, node: str | None = None) -> list[Verdict]:
    """Every cell's newest run against its baseline (only ``node``'s cells when given)."""
    runs = load_runs(store)
    if node:
        runs = runs[runs["node"] == node]
    return check_history(runs, load_accepts(store), opts)


def newest_rows(store: Store, verdicts: list[Verdict]) -> pd.DataFrame:
    """The rows of the runs the verdicts judged (one per cell): what a check pushes."""
    runs = load_runs(store)
    keep = {(v.run_id, *(str(v.cell[k]) for k in CELL_KEYS)) for v in verdicts}
    mask = [(r["run_id"], *(str(r[k]) for k in CELL_KEYS)) in keep for _, r in runs.iterrows()]
    return runs[mask]


def add_and_check(
    results_dir: Path | str,
    store_url: str,
    opts: CheckOptions | None = None,
    *,
    pushgateway: str | None = None,
    s3_endpoint: str | None = None,
) -> AddCheckResult:
    """The pipeline's last step: add the run to the store, check its node, push when asked."""
    opts = (opts or CheckOptions()).validated()
    store = open_store(store_url, endpoint=s3_endpoint, create=True)
    run, added = add(results_dir, store)
    verdicts = check(store, opts, node=run.node)
    if pushgateway:
        push(pushgateway, run.rows, verdicts)
    return AddCheckResult(run.run_id, run.file_name, added, verdicts)


def accept(store: Store, cell: dict[str, Any], *, run_id: str | None = None) -> dict[str, Any]:
    """Start a new baseline for the cells matching ``cell`` (CELL_KEYS subset) at a run: ``run_id``, or the
    newest run of those cells. Written as one immutable file; returns what was written."""
    bad = [k for k in cell if k not in CELL_KEYS]
    if bad:
        raise UserError(f"cannot accept by {', '.join(bad)}; allowed: {', '.join(CELL_KEYS)}")
    runs = load_runs(store)
    for k, v in cell.items():
        runs = runs[runs[k].astype(str) == str(v)]
    if run_id:
        runs = runs[runs["run_id"] == run_id]
    if runs.empty:
        what = ", ".join(f"{k}={v}" for k, v in cell.items()) or "any cell"
        raise UserError(
            f"no run in {store.url} matches {what}{f' and run {run_id}' if run_id else ''}; "
            "see `sharebench history show`"
        )
    newest = runs.sort_values(["time_utc", "run_id"], kind="stable").iloc[-1]
    doc: dict[str, Any] = {
        "cell": {k: str(v) for k, v in cell.items()},
        "from_time_utc": str(newest["time_utc"]),
        "run_id": str(newest["run_id"]),
        "accepted_at": time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime()),
    }
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:12]
    put_accept(store, doc, f"{doc['accepted_at'].replace('-', '').replace(':', '')[:15]}Z_{digest}.json")
    return doc
