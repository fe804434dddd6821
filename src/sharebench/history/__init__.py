"""A results history with regression alarms (issue 25): scheduled runs added to a store that needs no
server (a folder, or ``s3://bucket/prefix``), the loss of each node × mode × size over time, and a check
that says when it changed.

* ``records``: a results folder as history rows (loss, interval, per-repeat losses, provenance);
* ``store``: the local and S3 stores, one immutable file per run;
* ``check``: the newest run against its baseline (Welch's t-test and a threshold in points; when the
  sizes differ, the rate per unit of work and a threshold in percent);
* ``rates``: what a row keeps besides the loss: its rate per unit of work, trust and disturbance;
* ``show``: the series as a table and a plot; ``push``: the losses and the check to a Pushgateway;
* ``api``: ``add``, ``check``, ``accept`` and ``add_and_check`` (the pipeline's step).
"""

from sharebench.history.api import AddCheckResult, accept, add, add_and_check, check, newest_rows
from sharebench.history.check import (
    Verdict,
    check_history,
    compare_rates,
    compare_repeats,
    false_alarm_rate,
)
from sharebench.history.records import CELL_KEYS, HISTORY_COLUMNS, RunRows, run_rows
from sharebench.history.store import LocalStore, S3Store, Store, load_accepts, load_runs, open_store
from sharebench.history_settings import CheckOptions
from sharebench.parse import DEFAULT_ALPHA, DEFAULT_BASELINE_RUNS, DEFAULT_THRESHOLD_PTS

__all__ = [
    "CELL_KEYS",
    "DEFAULT_ALPHA",
    "DEFAULT_BASELINE_RUNS",
    "DEFAULT_THRESHOLD_PTS",
    "HISTORY_COLUMNS",
    "AddCheckResult",
    "CheckOptions",
    "LocalStore",
    "RunRows",
    "S3Store",
    "Store",
    "Verdict",
    "accept",
    "add",
    "add_and_check",
    "check",
    "check_history",
    "compare_rates",
    "compare_repeats",
    "false_alarm_rate",
    "load_accepts",
    "load_runs",
    "newest_rows",
    "open_store",
    "run_rows",
]
