"""collect_results: the results table, loss tables and KFP metrics of one node's sweep."""

# no `from __future__ import annotations`: KFP reads the annotations as types
from typing import List

from kfp import dsl
from kfp.dsl import Dataset, Input, Markdown, Metrics, Output

from sharebench.components.image import IMAGE


@dsl.component(base_image=IMAGE, install_kfp_package=False)
def collect_results(
    records: Input[List[Dataset]],
    results: Output[Dataset],
    tables: Output[Markdown],
    metrics: Output[Metrics],
    plan: dict,
    sweep_id: str = "",
):
    """Writes the sweep's results folder and its loss tables; logs loss per mode and size.

    Args:
        records: Results rows of each mode (JSON lists), in sweep order.
        plan: plan_sweep's plan: its node and GPU model are recorded; with a budget, the budget, the plan
            and the time used go into the results folder's notes, which the report shows.
        sweep_id: Identifier written into every row (the KFP run id); empty: the UTC time.

    Returns:
        results: A results folder (results.csv in the versioned schema, provenance.json,
            tables/*.csv) that `sharebench report` reads.
        tables: The loss tables (time-slicing, MPS, MIG, partition) as Markdown.
        metrics: Loss % per mode and particle count (e.g. loss_pct/timeslice:2/p10000).
    """
    from sharebench.components import steps

    out = steps.collect_results(
        [r.path for r in records],
        results.path,
        tables.path,
        plan=plan,
        sweep_id=sweep_id or None,
    )
    for name, value in out["metrics"].items():
        metrics.log_metric(name, value)
