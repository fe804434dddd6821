"""Rebuild every committed results folder's report with the current code, or check that each is fresh.

    python -m tools.rebuild_reports                  # check: exit 1, one line per stale file
    python -m tools.rebuild_reports --write          # rebuild them in place (then review `git diff`, commit)
    python -m tools.rebuild_reports results/cpu-default ...   # only these folders

A committed folder is one under ``results/`` in which git tracks a ``report.md`` and a ``results.csv``
(outside a git checkout: every such folder found). A report is derived from its folder, never edited:
``sharebench report DIR`` writes it from ``results.csv``, ``sweep.json`` and ``provenance.json``. The check
rebuilds each folder in a temporary copy (under the folder's own name: the report's title is the name)
and compares every text file the rebuild writes (``report.md``, ``tables/*.csv`` and ``*.md``,
``prediction.csv``, ``telemetry_summary.csv``, …) with the committed one: a file that differs, or one the
rebuild writes that is not committed, makes the folder stale. The figures (PNG, SVG) are rewritten by
``--write`` but not compared: their bytes depend on the machine's fonts and on matplotlib's version.
``report.html`` is not committed (``.gitignore``). tests/tools/test_rebuild_reports.py runs the check.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sharebench.report import build_report

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
TEXT_SUFFIXES = {".md", ".csv", ".json", ".txt"}
NOT_COMPARED = {"report.html"}


def committed_folders(root: Path = ROOT) -> list[Path]:
    """The folders under results/ whose report.md and results.csv git tracks (all such folders without git)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "--", "results"], capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return sorted(p.parent for p in (root / "results").rglob("report.md") if (p.parent / "results.csv").is_file())
    tracked = set(out)
    folders = {str(Path(f).parent) for f in tracked if f.endswith("/report.md")}
    return sorted(root / f for f in folders if f"{f}/results.csv" in tracked)


def digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }


def rebuild(folder: Path) -> None:
    """``sharebench report FOLDER``, its chatter kept off this tool's output."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        build_report(folder)


def first_difference(old: str, new: str) -> str:
    """Where two texts first differ: ``line N: '…old…' -> '…new…'`` around the first changed character."""
    a, b = old.splitlines(), new.splitlines()
    for i in range(max(len(a), len(b))):
        was, now = (a[i] if i < len(a) else ""), (b[i] if i < len(b) else "")
        if was != now:
            k = next((j for j, (x, y) in enumerate(zip(was, now)) if x != y), min(len(was), len(now)))
            lo = max(0, k - 30)
            return f"line {i + 1}: {was[lo : k + 50]!r} -> {now[lo : k + 50]!r}"
    return "line ends differ"


def stale(folder: Path) -> list[str]:
    """What a rebuild of ``folder`` by the current code changes in its committed text files ([] when fresh)."""
    with tempfile.TemporaryDirectory(prefix="rebuild-") as tmp:
        copy = Path(tmp) / folder.name
        shutil.copytree(folder, copy)
        before = digests(copy)
        rebuild(copy)
        after = digests(copy)
        out = []
        for name, digest in sorted(after.items()):
            if before.get(name) == digest or Path(name).suffix not in TEXT_SUFFIXES or name in NOT_COMPARED:
                continue
            if name not in before:
                out.append(f"{name}: written by the rebuild, not committed")
            else:
                diff = first_difference((folder / name).read_text(), (copy / name).read_text())
                out.append(f"{name}: differs, {diff}")
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.rebuild_reports", description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, help="results folders (default: every committed one)")
    parser.add_argument("--write", action="store_true", help="rebuild the reports in place instead of checking")
    args = parser.parse_args(argv)
    folders = [f.resolve() for f in args.folders] or committed_folders()
    missing = [f for f in folders if not (f / "results.csv").is_file()]
    if missing:
        print(f"rebuild_reports: not a results folder (no results.csv): {missing[0]}", file=sys.stderr)
        return 2
    if args.write:
        for f in folders:
            rebuild(f)
            print(f"rebuilt: {f.relative_to(ROOT) if ROOT in f.parents else f}")
        return 0
    bad = 0
    for f in folders:
        changes = stale(f)
        name = f.relative_to(ROOT) if ROOT in f.parents else f
        bad += bool(changes)
        print(f"{'stale' if changes else 'fresh'}: {name}" + "".join(f"\n  {c}" for c in changes))
    if bad:
        print(f"{bad} of {len(folders)} report(s) stale: python -m tools.rebuild_reports --write, then review git diff")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
