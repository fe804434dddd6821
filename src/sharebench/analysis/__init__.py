"""Statistics over results: the study's tables (``tables``), their Student-t confidence intervals
(``statistics``), how they print (``format``), telemetry per cell with energy and cost
(``telemetry``), and the loss each cell should show with no interference (``prediction``).

Everything here reads a results folder and returns DataFrames; nothing writes or plots.
"""

from sharebench.analysis.flags import FLAG_KINDS, Flag
from sharebench.analysis.format import (
    display_table,
    fmt_ci,
    fmt_int,
    fmt_interval,
    fmt_num,
    fmt_particles,
    fmt_pct,
    fmt_sec,
    fmt_spec,
    fmt_times,
    known_interval,
    significant,
    summary_table,
)
from sharebench.analysis.prediction import (
    bounds_from_telemetry,
    classify_bound,
    gpu_of,
    predict_cell,
    predicted_vs_measured,
    predicted_vs_measured_of,
)
from sharebench.analysis.statistics import (
    MIN_CI_REPEATS,
    cv_pct,
    mean_ci,
    positive_mean_ci,
    ratio_ci,
    ratio_loss_ci,
)
from sharebench.analysis.tables import TABLES, WORK_KEYS, Tables, analyse, build_tables, cell_summary
from sharebench.analysis.telemetry import cell_telemetry, energy_table, price_per_hour

__all__ = [
    "FLAG_KINDS",
    "MIN_CI_REPEATS",
    "TABLES",
    "Flag",
    "Tables",
    "WORK_KEYS",
    "analyse",
    "bounds_from_telemetry",
    "build_tables",
    "cell_summary",
    "cell_telemetry",
    "classify_bound",
    "cv_pct",
    "display_table",
    "energy_table",
    "fmt_ci",
    "fmt_int",
    "fmt_interval",
    "known_interval",
    "fmt_num",
    "fmt_particles",
    "fmt_pct",
    "fmt_sec",
    "fmt_spec",
    "fmt_times",
    "gpu_of",
    "mean_ci",
    "positive_mean_ci",
    "predict_cell",
    "predicted_vs_measured",
    "predicted_vs_measured_of",
    "price_per_hour",
    "ratio_ci",
    "ratio_loss_ci",
    "significant",
    "summary_table",
]
