"""What a results folder holds of a capacity search, and what it says of it (issue 42, items 4-5; issue 46,
item 2): the probes re-read from the folder's rows and bursts after each cell and on ``--resume``, and
``capacity.json`` / ``tables/capacity.csv``, written only from probes with a verdict.

:func:`read_folder` reads the measured cells per mode: each mode's cells (warm-ups left out), the failed
ones with their error, its last repeat, the one rule's decision on every user of the pattern
(``analysis.tail.decisions`` on the bursts of its cells that ran, the alone baseline's interval carried)
and the victim's burst timing (what the next probe's length is predicted from). :func:`populate` turns it
into a search's probes. A folder written before this round (a ``capacity.json`` with no ``why``) is
answered again by the rule from its bursts (:func:`capacity_answers`), so its report says what it measured.

``capacity.json`` is rewritten after each cell: a family still searching reads ``interrupt`` until its
next cell (what it would say were the run to die there); the end of the run (or its interrupt) writes the
last word: what the run decided as it went. The report and ``tables/capacity.csv`` decide again from the
folder's cells (:func:`capacity_answers`), so a cell the run did not count is counted there. Its shape: ``{"capacity": [{family, pattern, slo, answer, lo, hi, why, detail, note, users, line,
probes: [{n, mode, verdict, worst, lo, hi, samples, cells, pooled, worst_replica, below_one, reason,
error}]}], "search": {families, users, min_cells, max_cells, slo, q, confidence}}``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sharebench.analysis.kinds import baseline_mask
from sharebench.analysis.latency import burst_frame
from sharebench.analysis.tail import DEFAULT_CONFIDENCE, DEFAULT_QUANTILE, Decision, TailRule, decisions
from sharebench.modes import DEFAULT_USERS
from sharebench.results import NOTES_TXT, RESULTS_CSV, load_results
from sharebench.results.bursts import load_bursts
from sharebench.sweep.capacity_answer import Capacity, CapacitySearch, Probe, answer, next_n

CAPACITY_JSON = "capacity.json"
CAPACITY_CSV = "capacity.csv"
ERROR_CHARS = 240  # of a failed probe's error, kept in its answer
CAPACITY_COLUMNS = ["family", "pattern", "slo", "answer", "users", "lo", "hi", "why", "detail", "measured", "note"]


@dataclass(frozen=True)
class Timing:
    """A mode's victim bursts: replicas in its cells, mean latency, seconds from one arrival to the next,
    and the longest cell span (first arrival to last end)."""

    replicas: int
    latency_s: float
    cycle_s: float
    span_s: float


@dataclass(frozen=True)
class ModeCells:
    """The measured (not warm-up) cells of one mode: how many, the first failed one's error ('' none),
    the last repeat of any (a new cell of the mode takes the next)."""

    cells: int = 0
    failed: str = ""
    last_repeat: int = 0


@dataclass
class FolderState:
    """A folder's capacity evidence per mode label: its cells, the rule's decisions (by victim pattern),
    the victim's burst timing."""

    cells: dict[str, ModeCells] = field(default_factory=dict)
    decided: dict[tuple[str, str], Decision] = field(default_factory=dict)  # (mode, pattern) -> decision
    timing: dict[str, Timing] = field(default_factory=dict)
    alone: dict[str, int] = field(default_factory=dict)  # pattern -> its samples alone

    def decision(self, label: str, pattern: str) -> Decision | None:
        """The decision of ``label``'s cells for ``pattern`` (any pattern when the mode has one only)."""
        if (label, pattern) in self.decided:
            return self.decided[(label, pattern)]
        mine = [d for (m, _), d in self.decided.items() if m == label]
        return mine[0] if len(mine) == 1 else None


def read_folder(out: Path, rule: TailRule) -> FolderState:
    """The capacity evidence ``out`` holds (module docstring); empty for a folder with no rows yet."""
    state = FolderState()
    if not (out / RESULTS_CSV).is_file():
        return state
    rows = load_results(out)
    if rows.empty:
        return state
    measured = rows[~rows["warmup"].astype(bool)]
    for label, g in measured.groupby("mode", sort=False):
        bad = g[g["cell_status"].astype(str) != "ok"]
        error = next((str(e) for e in (*bad["cell_error"], *bad["error"]) if isinstance(e, str) and e), "failed")
        repeat = int(pd.to_numeric(rows.loc[rows["mode"] == label, "repeat"], errors="coerce").max())
        state.cells[str(label)] = ModeCells(
            int(g["cell_id"].nunique()), error[:ERROR_CHARS] if len(bad) else "", repeat
        )
    ran = set(measured.loc[measured["cell_status"].astype(str) == "ok", "cell_id"])
    bursts = load_bursts(out)
    bursts = bursts[~bursts["warmup"].astype(bool) & bursts["cell_id"].isin(ran)]
    if bursts.empty:
        return state
    frame = burst_frame(bursts)
    state.decided = {(m, p): d for (m, p, _), d in decisions(frame, rule).items()}
    state.timing = timings(frame)
    alone = frame[baseline_mask(frame["mode"])]
    state.alone = {str(p): len(g) for p, g in alone.groupby("pattern", sort=False)}
    return state


def timings(frame: pd.DataFrame) -> dict[str, Timing]:
    """Each mode's victim :class:`Timing` from a burst frame."""
    out: dict[str, Timing] = {}
    victims = frame[frame["role"] == "victim"]
    for label, g in victims.groupby("mode", sort=False):
        cycles, spans = [], []
        for _, c in g.groupby("cell_id", sort=False):
            arrivals = np.sort(np.asarray(c["arrival"], float))
            if arrivals.size > 1:
                cycles.append((arrivals[-1] - arrivals[0]) / (arrivals.size - 1))
            spans.append(float(c["end"].max()) - float(arrivals[0]))
        if cycles:
            replicas = int(g["replicas"].max())
            out[str(label)] = Timing(replicas, float(g["latency_s"].mean()), float(np.median(cycles)), max(spans))
    return out


def populate(search: CapacitySearch, state: FolderState) -> None:
    """``search``'s probes from the folder: every mode of its family measured, decided or failed."""
    search.probes = {}
    for label, cells in state.cells.items():
        n = search.n_of(label)  # an emulated MIG layout's N is its instances (its mode has no replica count)
        if n is None:
            continue
        if cells.failed:
            search.probes[n] = Probe(n, label, "failed", cells.cells, error=cells.failed)
            continue
        d = state.decision(label, search.pattern)
        if d is not None:
            search.probes[n] = Probe.decided(n, label, d, cells.cells)


# ----------------------------------------------------------------- capacity.json and tables/capacity.csv


def write_capacity(out: Path, caps: Sequence[Capacity], search: Mapping[str, Any] | None = None) -> None:
    """``capacity.json`` (the answers and their probes), rewritten whole after each cell."""
    doc = {"capacity": [c.to_dict() for c in caps], "search": dict(search or {})}
    tmp = out / (CAPACITY_JSON + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False, default=str))
    tmp.replace(out / CAPACITY_JSON)


def read_capacity(out: Path) -> list[dict[str, Any]]:
    """The entries ``capacity.json`` holds as written (none when the folder ran no capacity search)."""
    path = Path(out) / CAPACITY_JSON
    if not path.is_file():
        return []
    try:
        return list(json.loads(path.read_text()).get("capacity") or [])
    except (OSError, ValueError, AttributeError):
        return []


def read_search(out: Path) -> dict[str, Any]:
    """``capacity.json``'s ``search`` record (users, min_cells, max_cells, slo, q, confidence); {} if none."""
    try:
        doc = json.loads((Path(out) / CAPACITY_JSON).read_text())
    except (OSError, ValueError):
        return {}
    found = doc.get("search") if isinstance(doc, dict) else None
    return found if isinstance(found, dict) else {}


def capacity_answers(out: Path) -> list[dict[str, Any]]:
    """The folder's answers, decided from its cells: a search of this round again from its rows and bursts
    (:func:`folder_answers`: ``capacity.json`` is what the run decided as it went, and a run's reading of its
    cells can miss one); a folder of before this round answered again by the rule (:func:`legacy_answers`)."""
    entries = read_capacity(out)
    if not entries:
        return entries
    if all("why" in e for e in entries):
        return [c.to_dict() for c in folder_answers(Path(out), entries, read_search(out))]
    return [c.to_dict() for c in legacy_answers(Path(out), entries)]


def folder_answers(out: Path, entries: Sequence[Mapping[str, Any]], search: Mapping[str, Any]) -> list[Capacity]:
    """This round's answers decided again from the folder: each family's probes from its measured cells
    (:func:`populate`), its range and cells per N from the ``search`` record, and what stopped it (``budget``,
    ``interrupt``) or the memory limit it found from its entry: what the run would have said had it read
    every cell it measured (an H200's emulated-MIG cells, missed by the run's reading before 2026-12-05)."""
    lo, hi = search.get("users") or DEFAULT_USERS
    states: dict[tuple[float, float, float], FolderState] = {}
    caps = []
    for e in entries:
        rule = TailRule(
            float(e.get("slo") or search.get("slo") or 2.0),
            float(search.get("q") or DEFAULT_QUANTILE),
            float(search.get("confidence") or DEFAULT_CONFIDENCE),
        )
        s = CapacitySearch(
            str(e["family"]),
            rule.slo,
            int(lo),
            int(hi),
            max_cells=int(search.get("max_cells") or 4),
            min_cells=int(search.get("min_cells") or 1),
            pattern=str(e["pattern"]),
        )
        if e.get("why") == "memory" and isinstance(e.get("lo"), int):
            s.mem_max = int(e["lo"])
        populate(s, states.setdefault((rule.slo, rule.q, rule.confidence), read_folder(out, rule)))
        if next_n(s) is not None:
            s.stopped = "budget" if e.get("why") == "budget" else "interrupt"
        caps.append(answer(s))
    return caps


def capacity_lines(out: Path) -> list[str]:
    """The Answer's capacity lines of a results folder (one per family searched), for the report."""
    return [str(c.get("line")) for c in capacity_answers(out) if c.get("line")]


def capacity_rows(caps: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """``tables/capacity.csv``: one row per family (:data:`CAPACITY_COLUMNS`), from answer entries."""
    rows = []
    for c in caps:
        row = {k: c.get(k) for k in CAPACITY_COLUMNS}
        row["measured"] = ", ".join(probe_text(p) for p in c.get("probes") or [])
        rows.append(row)
    return pd.DataFrame(rows, columns=CAPACITY_COLUMNS)


def probe_text(p: Mapping[str, Any]) -> str:
    """A probe entry as the line writes it: ``4 ✓ 1.52×``."""
    worst = p.get("worst")
    return Probe(
        int(p["n"]), str(p.get("mode") or ""), p["verdict"], worst=float(worst) if worst is not None else math.nan
    ).text


def write_capacity_table(out: Path) -> Path | None:
    """``tables/capacity.csv`` from the folder's answers; None when no search ran."""
    caps = capacity_answers(out)
    if not caps:
        return None
    path = Path(out) / "tables" / CAPACITY_CSV
    path.parent.mkdir(parents=True, exist_ok=True)
    capacity_rows(caps).to_csv(path, index=False)
    return path


def legacy_answers(out: Path, entries: Sequence[Mapping[str, Any]]) -> list[Capacity]:
    """The answers of a search written before this round, decided again by the rule from the folder's bursts:
    its families, pattern and target from its ``capacity.json``; the N it measured from its rows; a search
    that ended short of an answer said to be stopped by the budget when its notes say the budget was
    reached (else interrupted); an N the rule leaves undecided ends it there (no cell more is measured)."""
    notes = (out / NOTES_TXT).read_text(errors="replace") if (out / NOTES_TXT).is_file() else ""
    budget = "budget" in notes and "reached" in notes
    caps = []
    state: dict[float, FolderState] = {}
    for e in entries:
        slo = float(e.get("slo") or 2.0)
        given = e.get("limit")
        limit: dict[str, Any] = given if isinstance(given, dict) else {}
        hi = int(limit["n"]) if limit.get("why") in ("maximum", "kind", "memory") else DEFAULT_USERS[1]
        ns = [int(p["n"]) for p in e.get("probes") or []]
        search = CapacitySearch(str(e["family"]), slo, min(ns, default=DEFAULT_USERS[0]), hi, pattern=str(e["pattern"]))
        search.mem_max = hi if limit.get("why") == "memory" else None
        populate(search, state.setdefault(slo, read_folder(out, TailRule(slo))))
        search.max_cells = 0  # that search ended: no cell more, an N the rule leaves undecided is where it ended
        if next_n(search) is not None:
            search.stopped = "budget" if budget or e.get("bound") == "between" else "interrupt"
        caps.append(answer(search))
    return caps
