"""The README headline's users and requests per GPU at a p95 target: one answer per workload x pattern x mode
family, from any set of pattern folders.

    python -m tools.patterns_headline [FOLDER ...] [--slo 2] [--out results/h200/headline_patterns.md]

Without FOLDER: every folder under results/ in which git tracks a ``bursts.csv`` and a ``results.csv`` (a
patterned sweep; outside a git checkout every such folder found). Rows: Simpletrack and ResNet-18 inference
(and any other workload found) x time-slicing, MPS and emulated MIG (and any other family found); columns:
interactive users, and services (requests/s) of the serving pattern at load 0.3 (``serve:load=0.3``: each
machine's rate is 0.3 of what one replica serves alone there; a serving pattern at another load is not this
column). "not measured" where no folder has the cell.

One answer per cell, by the rule every layer uses (``sharebench.analysis.tail``, every user counted):

* **per folder**, the points (N, verdict, the worst user's p95 slowdown and its interval): a search's
  ``capacity.json`` where the folder has one of this round's shape (``answer``, ``lo``, ``hi``, ``why``,
  ``probes`` with ``worst``; its answers decided again from the folder's cells, as its report's are), else the
  folder's own verdicts (``tables/latency.csv`` when it carries them,
  else recomputed from its bursts; nothing is written into a folder). A cell flagged below 1 (every user
  faster shared than alone: the baseline is off), or a probe that failed (no verdict), is left out, and
  named with the reason.
* **per machine** (a GPU UUID, from the folder's results.csv), the points of all its folders together make
  one bracket (``analysis.latency.bracket``: the largest N within with every smaller N within, the
  smallest N above; N where the folders disagree is undecided); a search's answer and why (budget,
  interrupt, memory, ...) where its bracket is the machine's.
* **per cell**, the figure is *general* only where two or more machines decided something, their brackets
  overlap, and every machine proves it: N within on each (the smallest such N), N above on each (the
  largest): a figure promised on every machine, never one machine's lower bound joined to another's upper
  bound (that is "no common answer"); disjoint brackets: the machines differ; one machine: its figure.
  The per-machine figures follow. Each machine's line gives its bracket, the cells at its ends (✓
  within, ✗ above, ? undecided; the worst user's p95 slowdown and its interval) and its folders as links.

Links are relative and written for a page two levels below the repository root (``../../results/…``): they
resolve from results/h200/ (this file), docs/readme/ (README.md, through ``docs/readme/assemble.py``) and
docs/campaigns/ (the documentation site, which includes this file).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from sharebench import analysis
from sharebench.analysis.latency import (
    DEFAULT_SLO,
    Bracket,
    Point,
    bracket,
    check_slo,
    counted_verdicts,
    ratio_text,
    users_at_target,
)
from sharebench.errors import UserError
from sharebench.patterns import parse_pattern
from sharebench.results import read_sweeps
from sharebench.sweep.capacity_folder import capacity_answers, read_capacity

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("Simpletrack", "ResNet-18 inference")  # always rows: "not measured" where no folder has them
FAMILIES = ("timeslice", "mps", "mig-emulated")
FAMILY_NAMES = {"timeslice": "time-slicing", "mps": "MPS", "mig-emulated": "MIG emulated with MPS"}
EXEC_NAMES = {"resnet18-infer": "ResNet-18 inference"}  # --exec-name prefixes of the workloads named here
KINDS = ("interactive", "serve")
SERVE_LOAD = 0.3  # the serving column: this load of what one replica serves alone
NOUNS = {"interactive": "users", "serve": "services"}
NOT_MEASURED = "not measured"
UP = "../../"  # links from a page two levels below the root: results/h200/, docs/readme/, docs/campaigns/


@dataclass(frozen=True)
class Found:
    """One folder's evidence for one workload, pattern and mode family: its points and, from a capacity.json,
    the search's own answer (None: the folder's verdicts)."""

    workload: str
    kind: str  # interactive or serve
    pattern: str
    family: str
    machine: str  # GPU-xxxxxxxx
    source: str  # the folder, relative to the repository root
    points: tuple[Point, ...]
    search: Bracket | None = None

    @property
    def rate(self) -> float | None:
        return parse_pattern(self.pattern).rate_per_s


@dataclass(frozen=True)
class MachineAnswer:
    """A machine's bracket for one cell, from the points of all its folders."""

    machine: str
    bracket: Bracket
    points: tuple[Point, ...]
    sources: tuple[str, ...]
    rate: float | None

    @property
    def decided(self) -> bool:
        return self.bracket.lo is not None or self.bracket.hi is not None


# ------------------------------------------------------------------ reading a folder


def committed_pattern_folders(root: Path = ROOT) -> list[Path]:
    """The folders under results/ whose bursts.csv and results.csv git tracks (a partial folder without its
    results.csv is no sweep); every such folder without git."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "--", "results"], capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [p.relative_to(root).as_posix() for p in (root / "results").rglob("*.csv")]
    files = {Path(f) for f in out}
    return sorted(root / f.parent for f in files if f.name == "bursts.csv" and f.parent / "results.csv" in files)


def workload_of(folder: Path) -> str:
    """The workload a folder's last sweep ran: "Simpletrack", "ResNet-18 inference", or its engine/name."""
    sweeps = read_sweeps(folder)
    w = (sweeps[-1].get("config") or {}).get("workload") or {} if sweeps else {}
    if w.get("engine") == "exec":
        name = str(w.get("name") or "exec")
        return next((label for prefix, label in EXEC_NAMES.items() if name.startswith(prefix)), name)
    return "Simpletrack" if w.get("engine") in ("simpletrack", "xsuite") else str(w.get("engine") or "unknown")


def short_uuid(uuid: str) -> str:
    """``GPU-1c569f0f-9ad7-…`` -> ``GPU-1c569f0f`` (the folders' and the campaigns' name for a machine)."""
    head, _, rest = uuid.partition("-")
    return f"{head}-{rest.split('-')[0]}" if rest else uuid


def machine_of(folder: Path) -> str:
    """The GPU a folder's cells ran on (the most common parent GPU UUID of its rows, shortened), else the
    folder's parent's name when it is a ``GPU-…`` one, else ``unknown machine``."""
    try:
        rows = pd.read_csv(folder / "results.csv", usecols=["device_uuid", "parent_uuid"], dtype=str)
        uuids = rows["parent_uuid"].where(rows["parent_uuid"].notna(), rows["device_uuid"]).dropna()
        uuids = uuids[uuids.str.startswith("GPU-")]
        if len(uuids):
            return short_uuid(str(uuids.mode().iloc[0]))
    except (OSError, ValueError, KeyError):
        pass
    return folder.parent.name if folder.parent.name.startswith("GPU-") else "unknown machine"


def latency_of(folder: Path) -> pd.DataFrame:
    """The folder's latency table with its verdicts: tables/latency.csv when it carries them, else computed
    from its bursts (a folder written before every user was counted; nothing written)."""
    table = folder / "tables" / "latency.csv"
    if table.is_file():
        lat = pd.read_csv(table)
        if "verdict" in lat.columns:
            lat["beside"] = lat["beside"].fillna("")
            return lat
    return analysis.analyse(folder).latency


def search_entries(folder: Path, slo: float) -> dict[tuple[str, str], dict[str, Any]]:
    """(pattern, family) -> the capacity.json entries of this round's shape searched at ``slo`` (an older
    search, decided by replica 0, is left for the folder's verdicts to answer)."""
    written = read_capacity(folder)
    if not all(isinstance(e, dict) and "why" in e for e in written):
        return {}
    entries = capacity_answers(folder)  # decided again from the folder's cells, as its report is
    out = {}
    for e in entries:
        if not (isinstance(e, dict) and {"answer", "lo", "hi", "why", "probes"} <= set(e)):
            continue
        if all(isinstance(p, dict) and "worst" in p for p in e["probes"]) and float(e.get("slo", slo)) == slo:
            out[(str(e["pattern"]), str(e["family"]))] = e
    return out


def number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def probe_point(p: dict[str, Any], source: str) -> Point:
    """A search's probe as a :class:`Point` (a probe with a user faster than alone beyond doubt is flagged)."""
    hi = number(p.get("hi"))
    fast = p.get("below_one") is True or hi < 1
    below = "below 1: a user faster shared than alone, so the baseline is off" if fast else ""
    if p.get("verdict") == "failed":  # no verdict: left out as not measured, its error said
        below = f"the cell failed: {str(p.get('error') or 'no error recorded').split('; ')[0]}"
    return Point(
        int(p["n"]),
        str(p.get("mode", "")),
        str(p.get("verdict", "undecided")),
        worst=number(p.get("worst")),
        worst_lo=number(p.get("lo")),
        worst_hi=hi,
        flag=below,
        source=source,
        reason=str(p.get("reason") or ""),
    )


def search_bracket(e: dict[str, Any]) -> Bracket:
    def bound(v: Any) -> int | None:
        return int(v) if v is not None and not (isinstance(v, float) and math.isnan(v)) else None

    return Bracket(str(e["answer"]), bound(e["lo"]), bound(e["hi"]), str(e["why"]), str(e.get("note", "")))


def wanted(pattern: str) -> bool:
    """An interactive pattern, or a serving one at :data:`SERVE_LOAD`."""
    p = parse_pattern(pattern)
    return p.kind == "interactive" or (p.kind == "serve" and p.load is not None and abs(p.load - SERVE_LOAD) < 1e-9)


def found_in(folder: Path, slo: float, root: Path = ROOT) -> list[Found]:
    """One folder's evidence per pattern and family (interactive, and serving at load 0.3)."""
    workload, machine, lat = workload_of(folder), machine_of(folder), latency_of(folder)
    try:
        source = folder.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        source = folder.as_posix()
    searches = search_entries(folder, slo)
    out = []
    for u in users_at_target(lat, slo) if len(lat) and "verdict" in lat.columns else []:
        if not (u.family and u.pattern and parse_pattern(u.pattern).kind in KINDS and wanted(u.pattern)):
            continue
        e = searches.pop((u.pattern, u.family), None)
        points = (
            tuple(probe_point(p, source) for p in e["probes"])
            if e
            else tuple(replace(p, source=source) for p in u.points)
        )
        kind = parse_pattern(u.pattern).kind
        out.append(
            Found(workload, kind, u.pattern, u.family, machine, source, points, search_bracket(e) if e else None)
        )
    for (pattern, family), e in searches.items():  # a search whose cells the latency table does not hold
        if wanted(pattern) and parse_pattern(pattern).kind in KINDS:
            points = tuple(probe_point(p, source) for p in e["probes"])
            kind = parse_pattern(pattern).kind
            out.append(Found(workload, kind, pattern, family, machine, source, points, search_bracket(e)))
    return out


# ------------------------------------------------------------------ machines, then the cell


def machine_answers(found: Sequence[Found]) -> list[MachineAnswer]:
    """One bracket per machine from the points of its folders; a search's answer and why where its bracket is
    the machine's."""
    out = []
    for machine in sorted({f.machine for f in found}):
        mine = [f for f in found if f.machine == machine]
        points = tuple(p for f in mine for p in f.points)
        b = bracket(points)
        for f in mine:
            if f.search is not None and (f.search.lo, f.search.hi) == (b.lo, b.hi):
                b = Bracket(f.search.answer, b.lo, b.hi, f.search.why, b.reason)
                break
        rate = next((f.rate for f in mine if f.rate), None)
        out.append(MachineAnswer(machine, b, points, tuple(dict.fromkeys(f.source for f in mine)), rate))
    return out


def overlap(answers: Sequence[MachineAnswer]) -> tuple[int | None, int | None] | None:
    """The brackets' overlap (lo, hi: capacity in [lo, hi - 1]), None when two of them are disjoint."""
    los = [a.bracket.lo for a in answers if a.bracket.lo is not None]
    his = [a.bracket.hi for a in answers if a.bracket.hi is not None]
    lo, hi = (max(los) if los else None), (min(his) if his else None)
    if lo is not None and hi is not None and lo >= hi:
        return None
    return lo, hi


def shared(answers: Sequence[MachineAnswer]) -> tuple[int | None, int | None]:
    """What every machine's bracket proves (lo: each has N within, the smallest such N; hi: each has an N
    above, the largest): the figure promised on every machine, never one machine's lower bound joined to
    another's upper bound. (None, None): they decided different sides."""
    los = [a.bracket.lo for a in answers]
    his = [a.bracket.hi for a in answers]
    lo = min(v for v in los if v is not None) if all(v is not None for v in los) else None
    hi = max(v for v in his if v is not None) if all(v is not None for v in his) else None
    return lo, hi


def words(lo: int | None, hi: int | None, kind: str, rate: float | None, answer: str = "") -> str:
    """A bracket in words with the kind's noun, and requests/s at the proven N for a service."""
    noun = NOUNS.get(kind, "users")
    if lo is not None and hi is not None:
        text = f"{lo} {noun}" if hi == lo + 1 else f"between {lo} and {hi} {noun}"
    elif lo is not None:
        text = f"≥ {lo} {noun}"
    elif hi is not None:
        text = f"undecided (above at {hi})" if answer == "undecided" else "no sharing" if hi <= 2 else f"< {hi} {noun}"
    else:
        text = answer or "undecided"
    if kind == "serve" and rate and lo is not None:
        per_s = lo * rate
        text += f" ({'' if hi == lo + 1 else '≥ '}{per_s:.4g} requests/s)"
    return text


def point_brief(p: Point) -> str:
    """``4 ✓ 1.57× [1.31, 1.89]``; ``2 ? 2.53×`` where no bound exists."""
    bounded = math.isfinite(p.worst_lo) or math.isfinite(p.worst_hi)
    return f"{p.n} {p.mark} " + (ratio_text(p.worst, p.worst_lo, p.worst_hi) if bounded else f"{p.worst:.2f}×")


def cause(p: Point) -> str:
    """Why a point is undecided, in a few words."""
    if "samples a user" in p.reason:
        return "too few samples a user"
    if p.reason.startswith("the alone"):
        return "the alone baseline has no interval (too few samples)"
    if "disagree" in p.reason:
        return "the folders disagree"
    return "an interval across the target" if "across" in p.reason else p.reason


def link(source: str, root: Path = ROOT) -> str:
    """A folder as a relative link (its report.md where it has one) from two levels below the root."""
    target = f"{source}/report.md" if (root / source / "report.md").is_file() else f"{source}/"
    return f"[{source.rsplit('/', 1)[-1]}]({UP}{target})"


def machine_line(a: MachineAnswer, kind: str, root: Path = ROOT) -> str:
    """``GPU-1c569f0f: between 4 and 8 services (≥ 767.6 requests/s): 4 ✓ 1.57× [1.31, 1.89], 8 ✗ …; [rn-serve-0.3](…)``."""
    b = a.bracket
    verdict = dict(counted_verdicts(a.points))
    best: dict[int, Point] = {}
    for p in a.points:  # of one N, a point with the N's verdict (a decided folder over an undecided one)
        if not p.flag and (p.n not in best or p.verdict == verdict[p.n] != best[p.n].verdict):
            best[p.n] = p
    shown = [
        best[n] for n in sorted(best) if n in (b.lo, b.hi) or (verdict[n] == "undecided" and (b.hi is None or n < b.hi))
    ]
    why = f" ({b.why})" if b.why not in ("none", "unmeasured", "undecided", "maximum", "flagged") else ""
    causes = sorted({cause(p) for p in shown if p.verdict == "undecided" or verdict[p.n] == "undecided"})
    undecided = f" (? = {'; '.join(causes)})" if causes else ""
    ends = ", ".join(point_brief(p) for p in shown) + undecided
    text = f"{a.machine}: {words(b.lo, b.hi, kind, a.rate, b.answer)}{why}"
    return f"{text}: {ends or b.reason}; {', '.join(link(s, root) for s in a.sources)}"


def left_out(answers: Sequence[MachineAnswer], root: Path = ROOT) -> list[str]:
    """The flagged cells, each with the reason and its folder."""
    return [
        f"left out: {p.mode} on {a.machine} ({p.flag}"
        + (f"; worst user {ratio_text(p.worst, p.worst_lo, p.worst_hi)}" if math.isfinite(p.worst) else "")
        + f") in {link(p.source, root) if p.source else 'its folder'}"
        for a in answers
        for p in a.points
        if p.flag
    ]


def cell_text(found: Sequence[Found], root: Path = ROOT) -> str:
    """One cell of the table: the answer (general where two machines agree), each machine's line, the cells
    left out; :data:`NOT_MEASURED` without a folder."""
    if not found:
        return NOT_MEASURED
    kind = found[0].kind
    answers = machine_answers(found)
    decided = [a for a in answers if a.decided]
    if len(decided) >= 2:
        common = shared(decided)
        names = ", ".join(a.machine for a in decided)
        if overlap(decided) is None:
            head = f"**machines differ** ({names}): per machine below"
        elif common == (None, None):
            head = f"**no common answer** ({names}): each decided another side; per machine below"
        else:
            head = f"**{words(*common, kind, None)}**: general, {len(decided)} machines agree ({names})"
    elif decided:
        a = decided[0]
        head = f"**{words(a.bracket.lo, a.bracket.hi, kind, None, a.bracket.answer)}** on one machine ({a.machine})"
    else:
        head = "**undecided**"
    return "<br>".join([head, *(machine_line(a, kind, root) for a in answers), *left_out(answers, root)])


# ------------------------------------------------------------------ the table


def render(found: Iterable[Found], slo: float, root: Path = ROOT) -> list[str]:
    """The Markdown table: a row per workload and mode family, the interactive and serving columns."""
    found = list(found)
    workloads = list(WORKLOADS) + sorted({f.workload for f in found} - set(WORKLOADS))
    families = list(FAMILIES) + sorted({f.family for f in found} - set(FAMILIES))
    lines = [
        f"| workload | mode | users per GPU at {slo:g}× p95 (interactive) | services per GPU at {slo:g}× p95 "
        f"(serving at load {SERVE_LOAD:g}) |",
        "|---|---|---|---|",
    ]
    for w in workloads:
        for fam in families:
            cells = [
                cell_text([f for f in found if f.workload == w and f.family == fam and f.kind == kind], root)
                for kind in KINDS
            ]
            lines.append(f"| {w} | {FAMILY_NAMES.get(fam, fam)} | {cells[0]} | {cells[1]} |")
    return lines


def header(folders: list[str], slo: float, out: str, given: bool = False) -> str:
    """The table file's first line: what it is made from and the command that rebuilds it (``given``: the
    folders were named on the command line, not the committed ones)."""
    what = " ".join(folders) if folders else "(none committed yet)"
    named = f"{' '.join(folders)} " if given else ""
    command = f"python -m tools.patterns_headline {named}--slo {slo:g} --out {out}"
    return f"<!-- Generated by `{command}` from the pattern folders {what}; re-run it instead of editing. -->\n"


LEGEND = (
    "Each cell: the users (services) per GPU at the p95 target, **every user counted** (a cell of N users is "
    "within when every user's p95 slowdown against alone is within the target beyond doubt, above when one "
    "user's is above it beyond doubt, else undecided; distribution-free 95% intervals, which assume a user's "
    "bursts are independent draws): *N* when N is within and N+1 above, *between A and B* (A within, B above, "
    "the N between not decided), *≥ N* (nothing above measured), *< N* (above at N, nothing smaller measured), "
    "*no sharing* (2 already above), *undecided*. *General* only where two or more machines decided and their "
    "brackets overlap; else each machine's bracket, with the cells at its ends (✓ within, ✗ above, ? undecided: "
    "the worst user's p95 slowdown and its interval) and its folders. A cell flagged below 1 (a user faster "
    "shared than alone: the baseline, not the sharing, is off) is left out and named."
)


def table(folders: list[Path], slo: float = DEFAULT_SLO, root: Path = ROOT) -> list[str]:
    """The table's lines for ``folders``."""
    return render([f for folder in folders for f in found_in(folder, slo, root)], slo, root)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="*", help="pattern results folders (default: the committed ones under results/)")
    ap.add_argument("--slo", default=str(DEFAULT_SLO), help=f"p95 slowdown target (default {DEFAULT_SLO:g})")
    ap.add_argument("--out", default=None, help="also write the table (markdown) to this file")
    args = ap.parse_args(argv)
    try:
        slo = check_slo(args.slo)
        folders = [Path(f) for f in args.folders] if args.folders else committed_pattern_folders()
        lines = table(folders, slo)
    except UserError as exc:
        print(f"patterns_headline: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    if args.out:
        names = [
            f.resolve().relative_to(ROOT).as_posix() if f.resolve().is_relative_to(ROOT) else str(f) for f in folders
        ]
        text = header(names, slo, args.out, bool(args.folders)) + "\n".join(lines) + "\n\n" + LEGEND + "\n"
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
