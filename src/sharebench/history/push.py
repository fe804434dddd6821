"""Push a run's losses and the check's result to a Prometheus Pushgateway (``--pushgateway URL``).

Per cell of the run: ``sharebench_loss_percent`` and its interval bounds
(``sharebench_loss_ci_low_percent``, ``sharebench_loss_ci_high_percent``) labelled
``node, gpu_model, mode, pattern, particles`` (and ``turns, engine, backend``, so that two works never
share a series); per node: ``sharebench_history_check_changes`` (cells the last check found changed;
the PrometheusRule of ``manifests/monitoring`` alerts while it is > 0) and the check's time. One push
per node (grouping key ``job=sharebench-history, node=…``) replaces that node's previous push.
"""

from __future__ import annotations

import math
import time
import urllib.error

import pandas as pd
from prometheus_client import CollectorRegistry, Gauge, push_to_gateway

from sharebench.errors import UserError
from sharebench.history.check import Verdict
from sharebench.history_settings import check_url
from sharebench.manifests.monitoring import (
    HISTORY_CHANGES_METRIC,
    HISTORY_CHECK_TIME_METRIC,
    HISTORY_LABELS,
    HISTORY_LOSS_HIGH_METRIC,
    HISTORY_LOSS_LOW_METRIC,
    HISTORY_LOSS_METRIC,
    HISTORY_PUSH_JOB,
)


def node_registry(rows: pd.DataFrame, verdicts: list[Verdict] | None, node: str) -> CollectorRegistry:
    """The metrics of one node: its rows' losses and, when checked, the number of changed cells."""
    reg = CollectorRegistry()
    labels = list(HISTORY_LABELS)
    gauges = [
        (Gauge(HISTORY_LOSS_METRIC, "sharebench loss of a sharing mode, %", labels, registry=reg), "loss_pct"),
        (Gauge(HISTORY_LOSS_LOW_METRIC, "low end of the loss' 95% interval, %", labels, registry=reg), "loss_ci_low"),
        (
            Gauge(HISTORY_LOSS_HIGH_METRIC, "high end of the loss' 95% interval, %", labels, registry=reg),
            "loss_ci_high",
        ),
    ]
    for _, r in rows[rows["node"] == node].iterrows():
        values = [str(r[k]) for k in HISTORY_LABELS]
        for gauge, col in gauges:
            v = float(r[col])
            if math.isfinite(v):
                gauge.labels(*values).set(v)
    if verdicts is not None:
        changes = Gauge(
            HISTORY_CHANGES_METRIC, "cells whose loss changed at the last history check", ["node"], registry=reg
        )
        changes.labels(node).set(sum(v.changed for v in verdicts if v.cell["node"] == node))
        when = Gauge(HISTORY_CHECK_TIME_METRIC, "when the last history check ran (Unix time)", ["node"], registry=reg)
        when.labels(node).set(time.time())
    return reg


def push(url: str, rows: pd.DataFrame, verdicts: list[Verdict] | None = None) -> list[str]:
    """Push every node of ``rows``; returns the nodes pushed. UserError when the gateway cannot be reached."""
    check_url(url)
    nodes = sorted({str(n) for n in rows["node"]})
    for node in nodes:
        try:
            push_to_gateway(
                url,
                job=HISTORY_PUSH_JOB,
                registry=node_registry(rows, verdicts, node),
                grouping_key={"node": node},
                timeout=10,
            )
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise UserError(f"cannot push to the Pushgateway {url} ({reason}); check --pushgateway") from None
    return nodes
