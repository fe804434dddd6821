"""Rebuild a ``sharebench probe split`` folder's ``tables/timeslice_split.csv`` from what it recorded.

    python -m tools.split_tables results/h200/timeslice-split-2026-12-04/GPU-9479f04d           # check
    python -m tools.split_tables --write results/h200/timeslice-split-2026-12-04/GPU-9479f04d   # rebuild

A split folder holds, per workload, the ``--out`` document of ``sharebench probe split`` and the command that
wrote it (``commands.txt``, one line per step). The table is derived, never edited: each command is run
again as ``sharebench probe split --from DOCUMENT`` with the work options it was given (``--lattice``,
``--particles``, ``--turns``; a program's ``--exec-name`` and ``--work``), which name the work where the
document does not, and the rows are appended in the commands' order; then every other document of the
folder that records its work (written since issue 45), in name order. The check rebuilds into a temporary
file and compares it with the committed table; tests/results/test_companions.py runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import shlex
import sys
import tempfile
from pathlib import Path

from sharebench.analysis.spread import is_split_document
from sharebench.cli import main as sharebench_main

TABLE = Path("tables") / "timeslice_split.csv"
WORK_OPTIONS = ("--lattice", "--particles", "--turns", "--exec-name", "--work", "--replicas")


def split_commands(folder: Path) -> list[tuple[Path, list[str]]]:
    """Each recorded ``probe split`` command of ``folder`` whose ``--out`` document is there: the document
    and the work options it was given (a ``--exec`` program stands as ``--exec program``: only its name and
    size name the work)."""
    path = folder / "commands.txt"
    out = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        if "probe split" not in line:
            continue
        words = shlex.split(line.split("probe split", 1)[1])
        opts = dict(zip(words, words[1:]))
        doc = folder / Path(opts.get("--out", "")).name
        if not opts.get("--out") or not doc.is_file():
            continue
        argv = [w for k in WORK_OPTIONS if k in opts for w in (k, opts[k])]
        if "--exec" in opts:
            argv += ["--exec", "program"]
        out.append((doc, argv))
    named = {doc for doc, _ in out}
    for doc in sorted(folder.glob("*.json")):  # documents that record their work need no command (issue 45)
        if doc not in named and is_split_document(doc) and json.loads(doc.read_text()).get("work"):
            out.append((doc, []))
    return out


def build(folder: Path, table: Path) -> int:
    """Write ``folder``'s split table to ``table`` from its documents; the number of documents read."""
    table.unlink(missing_ok=True)
    commands = split_commands(folder)
    for doc, argv in commands:
        with contextlib.redirect_stdout(io.StringIO()):
            rc = sharebench_main(["probe", "split", "--from", str(doc), "--table", str(table), *argv])
        if rc:
            raise SystemExit(f"split_tables: {doc}: sharebench probe split --from failed ({rc})")
    return len(commands)


def stale(folder: Path) -> str:
    """'' when ``folder``'s committed table is what its documents give, else why not."""
    with tempfile.TemporaryDirectory(prefix="split-") as tmp:
        fresh = Path(tmp) / "timeslice_split.csv"
        if not build(folder, fresh):
            return f"{folder}: no probe split command with its --out document in commands.txt"
        committed = folder / TABLE
        if not committed.is_file():
            return f"{folder}: {TABLE} missing"
        if committed.read_text() != fresh.read_text():
            return f"{folder}: {TABLE} is stale: run python -m tools.split_tables --write {folder}"
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path)
    ap.add_argument("--write", action="store_true", help="rebuild the tables in place")
    args = ap.parse_args(argv)
    bad = []
    for folder in args.folders:
        if args.write:
            print(f"{folder}: {build(folder, folder / TABLE)} document(s)")
        elif why := stale(folder):
            bad.append(why)
    print("\n".join(bad), file=sys.stderr) if bad else None
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
