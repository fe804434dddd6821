"""The README headline's users and requests per GPU at a p95 target, from committed pattern folders.

    python -m tools.patterns_headline [FOLDER ...] [--slo 2] [--out results/h200/headline_patterns.md]

Without FOLDER: every folder under results/ in which git tracks a ``bursts.csv`` (a patterned sweep;
outside a git checkout every such folder found). Per workload (Simpletrack, ResNet-18 inference) and mode
family (time-slicing, MPS, emulated MIG), the users per GPU of its interactive pattern and the requests/s
per GPU of its serving pattern whose p95 slowdown against the same pattern alone stays within the target
(``sharebench.analysis.latency.users_at_target``: the measured N only, never extrapolated), each with
its p95 slowdown and the folder (GPU) it comes from; of one machine's folders the one that measured the most
users. A row without data says "not measured". The latency
table is the folder's ``tables/latency.csv`` (as its report wrote it), else computed from its bursts
(read only: nothing is written into the folder). ``docs/readme/assemble.py`` puts the table into README.md.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sharebench import analysis
from sharebench.analysis.format import fmt_times
from sharebench.analysis.latency import DEFAULT_SLO, UsersAtTarget, check_slo, users_at_target
from sharebench.errors import UserError
from sharebench.patterns import parse_pattern
from sharebench.results import read_sweeps

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = ("Simpletrack", "ResNet-18 inference")  # always rows: "not measured" where no folder has them
FAMILIES = ("timeslice", "mps", "mig-emulated")
FAMILY_NAMES = {"timeslice": "time-slicing", "mps": "MPS", "mig-emulated": "MIG emulated with MPS"}
EXEC_NAMES = {"resnet18-infer": "ResNet-18 inference"}  # --exec-name prefixes of the workloads named here
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class Found:
    """One folder's answer for one pattern and mode family."""

    workload: str
    kind: str  # interactive or serve
    rate: float | None  # requests/s per service (serve)
    users: UsersAtTarget
    source: str  # the folder, relative to the repository root


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


def latency_of(folder: Path) -> pd.DataFrame:
    """The folder's latency table: tables/latency.csv, else computed from its bursts (nothing written)."""
    table = folder / "tables" / "latency.csv"
    if table.is_file():
        lat = pd.read_csv(table)
        lat["beside"] = lat["beside"].fillna("")
        return lat
    return analysis.analyse(folder).latency


def found_in(folder: Path, slo: float, root: Path = ROOT) -> list[Found]:
    """Users (services) per GPU at ``slo`` per pattern and family of one folder (interactive and serve)."""
    workload, lat = workload_of(folder), latency_of(folder)
    try:
        source = folder.resolve().relative_to(root).as_posix()
    except ValueError:
        source = folder.as_posix()
    out = []
    for u in users_at_target(lat, slo) if len(lat) else []:
        kind = parse_pattern(u.pattern).kind if u.pattern else ""
        if u.family and kind in ("interactive", "serve"):
            out.append(Found(workload, kind, parse_pattern(u.pattern).rate_per_s, u, source))
    return out


def cell_text(f: Found) -> str:
    """One folder's figure: "2 (p95 1.89×; N 2,4,8 measured; interactive:…, GPU-1ac098ee/st-users)"; 0 when
    N = 2 already exceeds the target, "< N" when the smallest N measured (above 2) does; requests/s =
    services x the pattern's rate."""
    u = f.users
    where = f"{u.pattern}, {'/'.join(f.source.split('/')[-2:])}"
    measured = ",".join(str(n) for n in u.measured)
    if not math.isfinite(u.slowdown_p95):
        return f"{NOT_MEASURED} (no alone baseline; {where})"
    if u.users is None:
        first = min(u.measured)
        none = "0" if first <= 2 else f"< {first}"
        return f"{none} (N {first}: p95 {fmt_times(u.slowdown_p95)}; {where})"
    count = u.users * f.rate if f.kind == "serve" and f.rate else u.users
    most = ", none beyond" if u.users == max(u.measured) else ""
    return f"{count:g} (p95 {fmt_times(u.slowdown_p95)}; N {measured} measured{most}; {where})"


def machine_of(f: Found) -> str:
    """The machine a finding comes from: the folder's parent (``GPU-…``) under its campaign."""
    parts = f.source.split("/")
    return parts[-2] if len(parts) >= 2 else f.source


def one_per_machine(found: list[Found]) -> list[Found]:
    """Per workload, family, pattern kind and machine, the folder that measured the most users (a short
    comparison step on a machine adds nothing beside a users step there); the order kept."""
    best: dict[tuple[str, str, str, str], Found] = {}
    for f in found:
        key = (f.workload, f.users.family, f.kind, machine_of(f))
        if key not in best or (max(f.users.measured), len(f.users.measured)) > (
            max(best[key].users.measured),
            len(best[key].users.measured),
        ):
            best[key] = f
    keep = set(map(id, best.values()))
    return [f for f in found if id(f) in keep]


def render(found: list[Found], slo: float) -> list[str]:
    """The Markdown table: a row per workload and mode family, the interactive and serving columns; one
    figure per machine (:func:`one_per_machine`)."""
    found = one_per_machine(found)
    workloads = list(WORKLOADS) + sorted({f.workload for f in found} - set(WORKLOADS))
    families = list(FAMILIES) + sorted({f.users.family for f in found} - set(FAMILIES))
    lines = [
        f"| workload | mode | users per GPU at {slo:g}× p95 (interactive) | requests/s per GPU at {slo:g}× p95 (serving) |",
        "|---|---|---|---|",
    ]
    for w in workloads:
        for fam in families:
            cells = []
            for kind in ("interactive", "serve"):
                mine = [f for f in found if f.workload == w and f.users.family == fam and f.kind == kind]
                cells.append("<br>".join(cell_text(f) for f in mine) or NOT_MEASURED)
            lines.append(f"| {w} | {FAMILY_NAMES.get(fam, fam)} | {cells[0]} | {cells[1]} |")
    return lines


def header(folders: list[str], slo: float, out: str, given: bool = False) -> str:
    """The table file's first line: what it is made from and the command that rebuilds it (``given``: the
    folders were named on the command line, not the committed ones)."""
    what = " ".join(folders) if folders else "(none committed yet)"
    named = f"{' '.join(folders)} " if given else ""
    command = f"python -m tools.patterns_headline {named}--slo {slo:g} --out {out}"
    return f"<!-- Generated by `{command}` from the pattern folders {what}; re-run it instead of editing. -->\n"


def table(folders: list[Path], slo: float = DEFAULT_SLO, root: Path = ROOT) -> list[str]:
    """The table's lines for ``folders``."""
    return render([f for folder in folders for f in found_in(folder, slo, root)], slo)


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
        Path(args.out).write_text(header(names, slo, args.out, bool(args.folders)) + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
