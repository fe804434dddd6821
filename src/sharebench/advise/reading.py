"""The usage CSV, streamed: header first, then the body in chunks, refused in one line where it cannot be read.

Columns ``time,gpu,pod,class,busy,memory_bytes`` (optional ``gpu_model``). The header is read and checked
before any of the body (:func:`read_header`); the body is read :data:`CHUNK_ROWS` rows at a time into
compact arrays (pods, GPUs and classes as integer codes), so a month of a hundred GPUs holds its numbers,
not its text, in memory. The file is only read, never written.

What is refused, naming the data row (the n-th row after the header) and its value:

* a time that is neither a number nor ISO 8601 (text times are parsed as ISO 8601, a naive one as UTC);
* numeric times in no unit advise can tell (:data:`UNITS`: epoch seconds, milliseconds, microseconds or
  nanoseconds, told by their median); times in another unit than seconds are converted, with a warning;
* a sample far outside the window the others span (:func:`outside`: beyond twice the interquartile range
  of the distinct times from their quartiles, and at least a day), and a window of more than
  :data:`MAX_STEPS` steps or a frame of more than :data:`MAX_CELLS` pod-steps;
* a busy outside 0..1 (a percent column gets the hint), a memory that is no number of bytes >= 0.

Duplicates, merged by a stated rule with a warning: rows of one pod at the same time take the larger busy
and memory (the conservative reading of a sample written twice); samples of one pod at different times
that fall into one step of the grid (irregular sampling) are averaged (busy) and the larger kept (memory).
A pod named under two classes keeps the first, with a warning.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from sharebench.advise.usage import MODEL_COLUMN, USAGE_COLUMNS, Usage, usage_model
from sharebench.errors import UserError

CHUNK_ROWS = 200_000
MAX_STEPS = 5_000_000  # a year at 10-s steps is 3.2 million
MAX_CELLS = 400_000_000  # pods x steps of the busy frame (float32: 1.6 GB)
# a numeric time's unit, told by the median time: (lowest median, divisor to seconds, name)
UNITS = ((1e8, 1.0, "seconds"), (1e11, 1e3, "milliseconds"), (1e14, 1e6, "microseconds"), (1e17, 1e9, "nanoseconds"))
TOP_TIME = 1e20  # no epoch time in any unit of UNITS is this large
DAY_S = 86_400.0


def read_header(path: Path) -> list[str]:
    """The CSV's column names, read before the body; a missing column is a one-line UserError."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            first = f.readline()
    except FileNotFoundError:
        raise UserError(f"--usage {path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"--usage {path} is a folder; give the usage CSV") from None
    except UnicodeDecodeError:
        raise UserError(f"--usage {path}: not UTF-8 text; give the usage CSV ({','.join(USAGE_COLUMNS)})") from None
    names = next(csv.reader(io.StringIO(first)), [])
    names = [n.strip() for n in names]
    if not names:
        raise UserError(f"--usage {path} is empty; required columns: {','.join(USAGE_COLUMNS)}")
    check_columns(names, f"--usage {path}")
    return names


def check_columns(names: list[str], what: str) -> None:
    missing = [c for c in USAGE_COLUMNS if c not in names]
    if missing:
        shown = ",".join(names)[:80]
        raise UserError(
            f"{what} lacks column(s) {', '.join(missing)} (its first line reads {shown!r}); "
            f"required: {','.join(USAGE_COLUMNS)}"
        )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UserError(f"{what} names column(s) {', '.join(twice)} twice; give each column once")


@dataclass
class Codes:
    """Text values as integer codes, first seen first."""

    names: list[str] = field(default_factory=list)
    index: dict[str, int] = field(default_factory=dict)

    def encode(self, values: pd.Series) -> np.ndarray:
        codes, uniques = pd.factorize(values, sort=False)
        glob = np.empty(len(uniques), np.int64)
        for i, u in enumerate(uniques):
            key = str(u)
            if key not in self.index:
                self.index[key] = len(self.names)
                self.names.append(key)
            glob[i] = self.index[key]
        return glob[codes]


@dataclass
class Body:
    """The rows read so far, as arrays: time (seconds where ISO 8601, else as written), pod code, busy,
    memory; per pod its class and GPU (first seen)."""

    what: str
    rows: int = 0
    times: list[np.ndarray] = field(default_factory=list)
    iso: list[np.ndarray] = field(default_factory=list)
    pods: list[np.ndarray] = field(default_factory=list)
    busy: list[np.ndarray] = field(default_factory=list)
    memory: list[np.ndarray] = field(default_factory=list)
    pod_codes: Codes = field(default_factory=Codes)
    class_of: list[str] = field(default_factory=list)
    gpu_of: list[str] = field(default_factory=list)
    models: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)

    def feed(self, chunk: pd.DataFrame) -> None:
        """One chunk of rows (text columns as read)."""
        first_row = self.rows + 1
        times, iso = chunk_times(chunk["time"], self.what, first_row)
        busy = checked_busy(chunk["busy"], self.what, first_row)
        memory = checked_memory(chunk["memory_bytes"], self.what, first_row)
        pods = self.pod_codes.encode(chunk["pod"].astype(str))
        self.remember(pods, chunk)
        if MODEL_COLUMN in chunk:
            self.models.update(str(v) for v in chunk[MODEL_COLUMN].unique() if str(v).strip())
        self.times.append(times)
        self.iso.append(iso)
        self.pods.append(pods.astype(np.int32))
        self.busy.append(busy.astype(np.float32))
        self.memory.append(memory)
        self.rows += len(chunk)

    def remember(self, pods: np.ndarray, chunk: pd.DataFrame) -> None:
        """Each new pod's class and GPU (its first row's); a pod under a second class is warned about."""
        classes, gpus = chunk["class"].astype(str).to_numpy(), chunk["gpu"].astype(str).to_numpy()
        _, at = np.unique(pods, return_index=True)
        for j in at:
            p = int(pods[j])
            if p == len(self.class_of):
                self.class_of.append(str(classes[j]))
                self.gpu_of.append(str(gpus[j]))
        known = np.array(self.class_of, dtype=object)[pods]
        clash = np.flatnonzero(known != classes)
        if clash.size:
            j = int(clash[0])
            name = self.pod_codes.names[int(pods[j])]
            self.warnings.append(
                f"{self.what}: pod {name} is named under class {classes[j]} too (data row {self.rows + j + 1}); "
                f"its first class, {known[j]}, kept"
            )


def data_row(first_row: int, index: int) -> str:
    return f"data row {first_row + index}"


def chunk_times(col: pd.Series, what: str, first_row: int) -> tuple[np.ndarray, np.ndarray]:
    """Times as numbers (as written) or ISO 8601 (in epoch seconds), and which were ISO; the first that is
    neither is a one-line UserError naming its row and value."""
    numeric = np.array(pd.to_numeric(col, errors="coerce"), dtype=float)  # a copy: written below
    text = np.flatnonzero(~np.isfinite(numeric))
    iso = np.zeros(len(col), bool)
    if text.size:
        parsed = pd.to_datetime(col.iloc[text], errors="coerce", utc=True, format="ISO8601")
        bad = np.flatnonzero(parsed.isna().to_numpy())
        if bad.size:
            j = int(text[bad[0]])
            raise UserError(
                f"{what}: {data_row(first_row, j)}: bad time {str(col.iloc[j])!r}; allowed: epoch seconds "
                "(or milliseconds, nanoseconds) or ISO 8601 with a time zone"
            )
        numeric[text] = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(float)
        iso[text] = True
    return numeric, iso


def checked_busy(col: pd.Series, what: str, first_row: int) -> np.ndarray:
    """The busy column as fractions; a value outside 0..1 is a one-line error (a percent column: the hint)."""
    busy = pd.to_numeric(col, errors="coerce").to_numpy(float)
    bad = np.flatnonzero(~((busy >= 0) & (busy <= 1)))
    if bad.size:
        j = int(bad[0])
        finite = busy[np.isfinite(busy)]
        percent = finite.size == busy.size and finite.min() >= 0 and 1 < finite.max() <= 100
        hint = " (it looks like percent: divide the column by 100)" if percent else ""
        raise UserError(
            f"{what}: {data_row(first_row, j)}: busy {str(col.iloc[j])!r} outside 0-1 (a fraction of a whole "
            f"GPU's time){hint}"
        )
    return busy


def checked_memory(col: pd.Series, what: str, first_row: int) -> np.ndarray:
    memory = pd.to_numeric(col, errors="coerce").to_numpy(float)
    bad = np.flatnonzero(~(np.isfinite(memory) & (memory >= 0)))
    if bad.size:
        j = int(bad[0])
        raise UserError(
            f"{what}: {data_row(first_row, j)}: memory_bytes {str(col.iloc[j])!r}; allowed: a number of bytes >= 0"
        )
    return memory


def text_columns(names: list[str]) -> dict[str, type]:
    return {c: str for c in names if c in (*USAGE_COLUMNS, MODEL_COLUMN)}


def read_usage_csv(path: Path | str, step_s: float | None = None, gpu_model_name: str | None = None) -> Usage:
    """The usage CSV as a :class:`Usage`, streamed; one-line UserError for what a site can fix in it."""
    p = Path(path)
    what = f"--usage {p}"
    names = read_header(p)
    body = Body(what)
    wanted = [c for c in (*USAGE_COLUMNS, MODEL_COLUMN) if c in names]
    try:
        chunks = pd.read_csv(
            p,
            usecols=wanted,
            dtype=text_columns(names),
            keep_default_na=False,
            chunksize=CHUNK_ROWS,
            encoding="utf-8-sig",
        )
        for chunk in chunks:
            body.feed(chunk)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{what}: not a readable CSV after {body.rows} data rows ({str(exc).splitlines()[0]})"
        ) from None
    return finish(body, step_s, gpu_model_name)


def usage_from_rows(
    df: pd.DataFrame, what: str, step_s: float | None = None, gpu_model_name: str | None = None
) -> Usage:
    """Rows of the usage CSV (a frame) as a :class:`Usage`; ``what`` names the source in errors."""
    check_columns([str(c) for c in df.columns], what)
    body = Body(what)
    if len(df):
        text = df.astype(dict.fromkeys(("gpu", "pod", "class"), str))
        if MODEL_COLUMN in text:
            text[MODEL_COLUMN] = text[MODEL_COLUMN].fillna("").astype(str)
        body.feed(text)
    return finish(body, step_s, gpu_model_name)


def finish(body: Body, step_s: float | None, gpu_model_name: str | None) -> Usage:
    """The rows read, on the step grid of their window, as a :class:`Usage`."""
    if not body.rows:
        raise UserError(f"{body.what} has no samples; the window is empty")
    warnings = list(body.warnings)
    times = to_seconds(np.concatenate(body.times), np.concatenate(body.iso), body.what, warnings)
    body.times, body.iso = [], []
    uniq = np.unique(times)
    grid = Grid.of(uniq, step_s, body.what)
    outside(times, uniq, grid, body.what)
    del uniq
    samples = Samples(np.concatenate(body.pods), times, np.concatenate(body.busy), np.concatenate(body.memory))
    body.pods, body.busy, body.memory = [], [], []
    frame = on_grid(samples, grid, len(body.class_of), (body.what, warnings))
    model, model_from = usage_model(sorted(body.models), body.what, gpu_model_name)
    usage = Usage(
        grid.start,
        grid.step_s,
        tuple(body.pod_codes.names),
        tuple(body.class_of),
        tuple(body.gpu_of),
        *frame,
    )
    return replace(usage, gpu_model=model, model_from=model_from, warnings=tuple(warnings))


def to_seconds(times: np.ndarray, iso: np.ndarray, what: str, warnings: list[str]) -> np.ndarray:
    """Numeric times in their unit (:data:`UNITS`, told by the median) as epoch seconds; refused if none fits."""
    numeric = times[~iso]
    if not numeric.size:
        return times
    median = float(np.median(numeric))
    unit = next((u for u in reversed(UNITS) if u[0] <= median < TOP_TIME), None)
    if unit is None:
        raise UserError(
            f"{what}: times like {median:.6g} are neither epoch seconds (from 1973), milliseconds, microseconds "
            "nor nanoseconds; give epoch times or ISO 8601 with a time zone"
        )
    low, divisor, name = unit
    if divisor != 1.0:
        warnings.append(f"{what}: times read as epoch {name} (median {median:.4g}) and converted to seconds")
    out = times.copy()
    out[~iso] = numeric / divisor
    return out


@dataclass(frozen=True)
class Grid:
    """The step grid of a window: its first time and step."""

    start: float
    step_s: float

    @classmethod
    def of(cls, uniq: np.ndarray, step_s: float | None, what: str) -> Grid:
        """The grid of the distinct times ``uniq`` (sorted): ``step_s``, or their median spacing."""
        if step_s is None:
            step_s = float(np.median(np.diff(uniq))) if len(uniq) > 1 else 60.0
        if not (math.isfinite(step_s) and step_s > 0):
            raise UserError(f"{what}: no step between the samples' times ({step_s!r} s); allowed: a step > 0")
        return cls(float(uniq[0]), float(step_s))

    def cols(self, times: np.ndarray) -> np.ndarray:
        return np.rint((times - self.start) / self.step_s).astype(np.int64)


def stamp(t: float) -> str:
    try:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{t:.6g} s"


def outside(times: np.ndarray, uniq: np.ndarray, grid: Grid, what: str) -> None:
    """A sample far outside the window the others span (beyond twice the interquartile range of the distinct
    times ``uniq`` from their quartiles, and at least a day) is refused with its row; so is a window of more
    than :data:`MAX_STEPS` steps."""
    q1, q3 = np.percentile(uniq, [25, 75])
    pad = max(2 * (q3 - q1), DAY_S, 10 * grid.step_s)
    lo, hi = q1 - pad, q3 + pad
    far = np.flatnonzero((times < lo) | (times > hi))
    if far.size:
        j = int(far[0])
        inside = uniq[(uniq >= lo) & (uniq <= hi)]
        raise UserError(
            f"{what}: data row {j + 1}: time {times[j]:.6g} ({stamp(float(times[j]))}) lies far outside the window "
            f"the other samples span ({stamp(float(inside[0]))} to {stamp(float(inside[-1]))}); fix or drop the row"
        )
    steps = int(round((float(uniq[-1]) - grid.start) / grid.step_s)) + 1
    if steps > MAX_STEPS:
        raise UserError(
            f"{what}: the window is {steps:,} steps of {grid.step_s:g} s, more than {MAX_STEPS:,}; give a coarser "
            "sample (a year at 10-s steps is 3.2 million)"
        )


@dataclass(frozen=True, eq=False)
class Samples:
    """The rows as arrays: pod code, time (s), busy, memory."""

    pods: np.ndarray
    times: np.ndarray
    busy: np.ndarray
    memory: np.ndarray


def on_grid(
    s: Samples, grid: Grid, n_pods: int, report: tuple[str, list[str]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(busy frame, peak memory, first step, one past the last step) per pod, duplicates merged by the
    module's rules (each merge warned about in ``report``'s list)."""
    what, warnings = report
    col = grid.cols(s.times)
    steps = int(col.max()) + 1
    if n_pods * steps > MAX_CELLS:
        raise UserError(
            f"{what}: {n_pods:,} pods over {steps:,} steps is {n_pods * steps:,} pod-steps, more than "
            f"{MAX_CELLS:,}; advise a shorter window or a coarser step"
        )
    key = s.pods.astype(np.int64) * steps + col
    ordered = np.sort(key)
    busy = np.zeros((n_pods, steps), np.float32)
    if not np.any(ordered[1:] == ordered[:-1]):  # one sample a pod and step: the common case, no merging
        del ordered
        busy[s.pods, col] = s.busy
    else:
        del ordered
        s = merge_same_time(s, what, warnings)
        col = grid.cols(s.times)
        key = s.pods.astype(np.int64) * steps + col
        cells, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        if np.any(counts > 1):
            warnings.append(
                f"{what}: {int(np.sum(counts[counts > 1] - 1)):,} sample(s) fell into a step already holding one "
                "of their pod (irregular sampling): busy averaged over the step, memory the larger kept"
            )
        busy[cells // steps, cells % steps] = np.bincount(inverse, weights=s.busy, minlength=cells.size) / counts
    del key
    peak = np.zeros(n_pods)
    first = np.full(n_pods, steps, np.int64)
    last = np.zeros(n_pods, np.int64)
    np.maximum.at(peak, s.pods, s.memory)
    np.minimum.at(first, s.pods, col)
    np.maximum.at(last, s.pods, col + 1)
    return busy, peak, first, last


def merge_same_time(s: Samples, what: str, warnings: list[str]) -> Samples:
    """Rows of one pod at one time merged: the larger busy and memory (warned about, naming the first)."""
    order = np.lexsort((s.times, s.pods))
    pods, times = s.pods[order], s.times[order]
    same = (pods[1:] == pods[:-1]) & (times[1:] == times[:-1])
    if not same.any():
        return s
    start = np.concatenate([[True], ~same])
    group = np.cumsum(start) - 1
    busy = np.zeros(int(group[-1]) + 1)
    memory = np.zeros(int(group[-1]) + 1)
    np.maximum.at(busy, group, s.busy[order])
    np.maximum.at(memory, group, s.memory[order])
    j = int(order[int(np.flatnonzero(same)[0]) + 1])
    warnings.append(
        f"{what}: {int(same.sum()):,} duplicate (time, pod) row(s) (first: data row {j + 1}, at "
        f"{stamp(float(s.times[j]))}): merged by the larger busy and memory_bytes"
    )
    return Samples(pods[start], times[start], busy.astype(np.float32), memory)
