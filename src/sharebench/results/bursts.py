"""``bursts.csv``: one row per burst or request of a replica that followed a pattern (sharebench.patterns).

Written beside ``results.csv`` by the sweep, one cell at a time (appended, flushed and fsynced once per
cell, so a cell's bursts are all there or, after a crash mid-write, its torn last row is dropped on
reading). A folder of batch cells only, or one written before patterns existed, has no ``bursts.csv``:
:func:`load_bursts` gives an empty frame with :data:`BURST_CSV_COLUMNS`, never an error.

Columns (every row carries ``schema_version``; :data:`BURSTS_CSV_VERSION` is the one written and read):

* ``sweep_id``, ``cell_id``, ``mode``, ``repeat``, ``warmup``: the cell run, as in ``results.csv``;
* ``replica`` (0..N-1) and ``role``: ``victim`` (replica 0, which follows ``--pattern``) or ``neighbour``
  (the others, which follow ``--neighbours``);
* ``pattern``: the pattern's canonical label (``interactive:burst=10,think=0.5``);
* ``i``, ``arrival``, ``start``, ``end`` (epoch seconds), ``units``: the burst (sharebench.workloads.bursts).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.results.guard import complete_rows

if TYPE_CHECKING:
    import pandas as pd

BURSTS_CSV = "bursts.csv"
BURSTS_CSV_VERSION = 1
BURST_CSV_COLUMNS = (
    "schema_version",
    "sweep_id",
    "cell_id",
    "mode",
    "repeat",
    "warmup",
    "replica",
    "role",
    "pattern",
    "i",
    "arrival",
    "start",
    "end",
    "units",
)
NUMERIC = {"schema_version": "int", "repeat": "int", "replica": "int", "i": "int", "units": "int"}
NUMERIC.update(arrival="float", start="float", end="float")


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "" if value != value else repr(value)
    return str(value)


def ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def append_bursts(results_dir: Path | str, rows: Iterable[Mapping[str, Any]]) -> int:
    """Append one cell's burst rows to ``bursts.csv`` (header first when new), flushed and fsynced;
    the number of rows written. A row's keys must be :data:`BURST_CSV_COLUMNS` (``schema_version`` added)."""
    rows = list(rows)
    if not rows:
        return 0
    path = Path(results_dir) / BURSTS_CSV
    for row in rows:
        unknown = sorted(set(row) - set(BURST_CSV_COLUMNS))
        if unknown:
            raise ValueError(f"burst row has columns outside {BURSTS_CSV}'s: {unknown}")
    if path.exists() and path.stat().st_size and not ends_with_newline(path):
        # a cell's write cut short (a crash): its partial last row dropped, so the next starts on a clean line
        write_atomic(path, complete_rows(path.read_bytes())[0], fsync=True)
    new_file = not path.exists() or path.stat().st_size == 0
    text = io.StringIO()
    w = csv.writer(text)
    if new_file:
        w.writerow(BURST_CSV_COLUMNS)
    for row in rows:
        full = {**row, "schema_version": BURSTS_CSV_VERSION}
        w.writerow([format_value(full.get(k)) for k in BURST_CSV_COLUMNS])
    with path.open("a", newline="") as f:
        f.write(text.getvalue())
        f.flush()
        os.fsync(f.fileno())
    return len(rows)


def load_bursts(results: Path | str) -> pd.DataFrame:
    """The burst rows of a results folder (or of a ``bursts.csv``), typed; empty (with
    :data:`BURST_CSV_COLUMNS`) when there is none. UserError for a file of another version or unreadable."""
    import pandas as pd  # noqa: PLC0415 - slow to import; replicas import this package

    path = Path(results)
    if path.is_dir() or path.name != BURSTS_CSV:
        path = (path if path.is_dir() else path.parent) / BURSTS_CSV
    if not path.exists() or path.stat().st_size == 0:
        return pd.DataFrame(columns=list(BURST_CSV_COLUMNS))
    try:
        whole, _torn = complete_rows(path.read_bytes())
        df = pd.read_csv(io.BytesIO(whole), dtype=str, keep_default_na=False, encoding="utf-8")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"{path} is not a readable bursts CSV ({type(exc).__name__}); move it aside") from None
    missing = [c for c in BURST_CSV_COLUMNS if c not in df.columns]
    if missing:
        raise UserError(f"{path} lacks column(s) {', '.join(missing)}; not a sharebench bursts CSV")
    bad = sorted(set(df["schema_version"]) - {"", str(BURSTS_CSV_VERSION)})
    if bad:
        raise UserError(
            f"{path} has bursts schema version {bad[0]}; this sharebench reads version {BURSTS_CSV_VERSION}"
        )
    for c, kind in NUMERIC.items():
        num = pd.to_numeric(df[c].replace("", None), errors="coerce")
        df[c] = num.astype("float64") if kind == "float" or num.isna().any() else num.astype("int64")
    df["warmup"] = df["warmup"].str.lower().isin(["true", "1", "yes"])
    return df
