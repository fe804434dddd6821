"""The results CSV: one row per replica run, versioned, written as it comes.

"Failed" and "not measured" are different things: a replica that ran and
crashed has a row with ``status = failed`` and its one-line ``error``; its
sibling replicas keep their numbers but carry ``cell_status = failed`` so the
analysis leaves the whole cell out. A number that was never measured (a cell
not reached because the sweep was interrupted, a MIG column on a non-MIG run,
telemetry where no sampler exists) is simply absent: no row, or an empty field.
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.parse import format_cpu_set
from sharebench.results.folder import RESULTS_CSV
from sharebench.results.guard import complete_rows
from sharebench.results.schema import COLUMN_NAMES, DTYPES, EXTRA_PREFIX, OPTIONAL_NAMES, SCHEMA_VERSION

if TYPE_CHECKING:
    import pandas as pd

NON_FINITE = ("nan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity")


def _fmt(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:  # NaN: not measured
            return ""
        return repr(value)
    if isinstance(value, (list, tuple)):
        return format_cpu_set(value)
    return " ".join(str(value).split()) if isinstance(value, str) else str(value)


class ResultsWriter:
    """Appends rows to results.csv, flushing and fsyncing after each batch.

    The header is the schema's columns plus any ``tel_*`` columns seen so far.
    A new ``tel_*`` column rewrites the file once with the wider header
    (atomically: temporary file + rename), so nothing written is lost.
    """

    def __init__(self, results_dir: Path | str):
        self.path = Path(results_dir) / RESULTS_CSV
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.header: list[str] = list(COLUMN_NAMES)
        if self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open("rb") as f:
                first = f.readline()
            try:
                existing = next(csv.reader([first.decode("utf-8")]), [])
            except (UnicodeDecodeError, csv.Error):
                raise UserError(
                    f"{self.path} is not a readable results CSV (its header is not UTF-8 CSV); restore it from "
                    "a copy, or move it aside and re-run the sweep"
                ) from None
            _check_header(existing, self.path)
            self.header = existing

    def append(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        for row in rows:
            unknown = [k for k in row if k not in DTYPES and not k.startswith(EXTRA_PREFIX)]
            if unknown:
                raise ValueError(f"results row has columns outside the schema: {unknown}")
        optional = [c for c in OPTIONAL_NAMES if c not in self.header and any(r.get(c) not in (None, "") for r in rows)]
        extra = optional + sorted({k for r in rows for k in r if k.startswith(EXTRA_PREFIX)} - set(self.header))
        if extra and self.path.exists() and self.path.stat().st_size > 0:
            self._widen(self.header + extra)
        elif extra:
            self.header = self.header + extra
        new_file = not self.path.exists() or self.path.stat().st_size == 0
        with self.path.open("a", newline="") as f:
            w = csv.writer(f)
            if new_file:
                w.writerow(self.header)
            for row in rows:
                full = {"schema_version": SCHEMA_VERSION, **row}
                w.writerow([_fmt(full.get(k)) for k in self.header])
            f.flush()
            os.fsync(f.fileno())

    def _widen(self, header: list[str]) -> None:
        with self.path.open(newline="") as f:
            old = list(csv.DictReader(f))
        text = io.StringIO()
        w = csv.DictWriter(text, fieldnames=header)
        w.writeheader()
        for r in old:
            w.writerow({k: r.get(k, "") for k in header})
        write_atomic(self.path, text.getvalue(), fsync=True)
        self.header = header


def _check_header(header: list[str], path: Path) -> None:
    if "schema_version" not in header:
        raise UserError(f"{path} is not a sharebench results CSV (no schema_version column)")


def load_results(results: Path | str) -> pd.DataFrame:
    """Load results.csv (a file or a results folder) as typed columns.

    A file written with another schema version fails with a message saying
    what to do; missing optional columns are not an error (older writers of
    the same version never leave any out).
    """
    import pandas as pd  # noqa: PLC0415 - slow to import; replicas and the sampler import this package

    path = Path(results)
    if path.is_dir():
        path = path / RESULTS_CSV
    if not path.exists():
        raise UserError(f"no results file at {path}; run `sharebench run --out DIR` first")
    try:
        whole, _torn = complete_rows(path.read_bytes())  # a torn last row is never parsed into results
        df = pd.read_csv(io.BytesIO(whole), dtype=str, keep_default_na=False, encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise UserError(f"{path} is empty; run `sharebench run --out DIR` first") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise UserError(
            f"{path} is not a readable results CSV ({type(exc).__name__}); restore it from a copy, "
            "or move it aside and re-run the sweep"
        ) from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    _check_header(list(df.columns), path)
    versions = sorted(set(df["schema_version"]) - {""})
    bad = [v for v in versions if v != str(SCHEMA_VERSION)]
    if bad:
        v = bad[0]
        try:
            newer = int(v) > SCHEMA_VERSION
        except ValueError:
            newer = False
        what = (
            "upgrade sharebench to read it"
            if newer
            else f"re-run the sweep, or convert it to schema {SCHEMA_VERSION} (columns: docs/reference/results-schema.md)"
        )
        raise UserError(
            f"{path} has results schema version {v}; this sharebench reads version {SCHEMA_VERSION}: {what}"
        )
    missing = [c for c in ("mode", "particles", "track_s", "replica", "cell_id") if c not in df.columns]
    if missing:
        raise UserError(f"{path} lacks required column(s) {', '.join(missing)}; see docs/reference/results-schema.md")
    for c in (*COLUMN_NAMES, *OPTIONAL_NAMES):
        if c not in df.columns:
            df[c] = ""
    reasons = parse_columns(df)
    return mark_duplicates(mark_unparsed(df, reasons.str.rstrip("; ")))


ROW_KEY = ("sweep_id", "cell_id", "replica")  # one measured row per replica of a cell run


def mark_duplicates(df: pd.DataFrame) -> pd.DataFrame:
    """Measured rows that share their key (:data:`ROW_KEY`: a row copied by hand, records merged twice)
    are failed, and so is their cell run, the reason in their errors: a row counted twice would change a
    mean and a count in silence. The report flags the cell (``failed``) and leaves it out; the rows stay
    in results.csv, for the copy to be removed (SQLite's discipline: a key is stored once)."""
    ok = df["status"] == "ok"
    if not ok.any():
        return df
    measured = df[ok]
    dup = measured.duplicated(list(ROW_KEY), keep=False)
    if not dup.any():
        return df
    for (sweep, cell, replica), rows in measured[dup].groupby(list(ROW_KEY), sort=False):
        reason = (
            f"duplicated row: replica {replica} of cell {cell} (sweep {sweep}) appears {len(rows)} times in "
            f"{RESULTS_CSV}; a row is recorded once: remove the copy"
        )
        df.loc[rows.index, ["status", "error"]] = ["failed", reason]
        run = (df["cell_id"] == cell) & (df["sweep_id"] == sweep)
        fresh = run & (df["cell_error"].astype(str).str.len() == 0)
        df.loc[run, "cell_status"] = "failed"
        df.loc[fresh, "cell_error"] = reason
    return df


def parse_columns(df: pd.DataFrame) -> pd.Series:
    """Type ``df``'s columns in place (numbers, booleans); returns each row's reasons to fail it: a
    schema number that does not parse, or one no measurement gives (:func:`impossible_value`)."""
    import pandas as pd  # noqa: PLC0415 - slow to import; replicas and the sampler import this package

    reasons = pd.Series("", index=df.index)
    ok = df["status"] == "ok"  # a failed row keeps its own error
    for c in df.columns:
        kind = DTYPES.get(c, "float" if c.startswith(EXTRA_PREFIX) else "str")
        if kind in ("int", "float"):
            num = pd.to_numeric(df[c].replace("", None), errors="coerce")
            if c.startswith(EXTRA_PREFIX):
                if num.isna().all() and (df[c] != "").any():
                    continue  # a text telemetry column (tel_source, tel_note)
            else:  # a schema number that does not parse, or cannot be measured: the row is failed
                for i in df.index[(df[c] != "") & (num.isna() | ok)]:
                    reasons[i] += impossible_value(c, df.at[i, c], num[i], measured=bool(ok[i]))
            df[c] = num.astype("float64") if kind == "float" or num.isna().any() else num.astype("int64")
        elif kind == "bool":
            df[c] = df[c].str.lower().isin(["true", "1", "yes"])
    for i in df.index[ok & (df["track_end"] < df["track_start"])]:
        end, start = float(df.at[i, "track_end"]), float(df.at[i, "track_start"])
        reasons[i] += f"track_end={end!r} is before track_start={start!r}; "
    return reasons


def impossible_value(column: str, text: str, number: float, *, measured: bool) -> str:
    """Why the field ``text`` of a schema number ``column`` (parsed: ``number``) cannot stand in a row,
    "; "-terminated, or "": not a number; and in a ``measured`` (ok) row, not finite (``nan``,
    ``inf``) or negative where no time, count or rate can be (``repeat`` can: warm-ups are <= 0)."""
    if text.lower() in NON_FINITE:
        return f"{column}={text[:40]!r} is not a finite number; " if measured else ""
    if number != number:
        return f"{column}={text[:40]!r} is not a number; "
    if not measured:
        return ""
    if number in (float("inf"), float("-inf")):
        return f"{column}={text[:40]!r} is not a finite number; "
    if number < 0 and column != "repeat":
        return f"{column}={text[:40]!r} is negative; "
    return ""


def mark_unparsed(df: pd.DataFrame, reasons: pd.Series) -> pd.DataFrame:
    """Rows whose numbers did not parse, or cannot be a measurement, are failed (and so is their cell
    run: the rows of the same cell id *and sweep*), the reason in their errors. A later sweep's run of
    the same cell (``--resume`` measures a failed cell again) is another run, and counts."""
    bad = reasons != ""
    if not bad.any():
        return df
    df.loc[bad, "status"] = "failed"
    df.loc[bad, "error"] = "unreadable row: " + reasons[bad]
    for sweep, cell in df.loc[bad, ["sweep_id", "cell_id"]].drop_duplicates().itertuples(index=False):
        rows = (df["cell_id"] == cell) & (df["sweep_id"] == sweep)
        df.loc[rows, "cell_status"] = "failed"
        df.loc[rows, "cell_error"] = "unreadable row: " + reasons[bad & rows].iloc[0]
    return df
