"""The committed pipeline YAML is what ``sharebench compile`` writes now (the quick loop's check).

    python -m tools.pipelines_sync          # exit 1 naming each stale, missing or extra pipelines/*.yaml

Runs ``sharebench compile`` into a temporary folder and compares each file with the committed one under
``pipelines/`` of the tree this tool sits in; writes nothing there (``sharebench compile`` rewrites them). A few seconds: ``make check`` runs it
as the ``pipelines-sync`` hook, and ``tests/kfp/test_pipeline.py`` checks the same in the full suite.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "sharebench compile"
DIFF_LINES = 12  # of each stale file's diff, shown under its line
COMPILE_TIMEOUT_S = 300


def compiled(out: Path) -> dict[str, str]:
    """File name -> text of every pipeline ``sharebench compile`` writes into ``out``, with the default image
    as the committed files name it (SHAREBENCH_IMAGE, read when the components are imported, left out)."""
    env = {k: v for k, v in os.environ.items() if k != "SHAREBENCH_IMAGE"}
    argv = [sys.executable, "-m", "sharebench", "compile", "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=COMPILE_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{COMMAND} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
    return {Path(p).name: Path(p).read_text() for p in proc.stdout.split()}


def check(committed_dir: Path) -> list[str]:
    """Every problem with the committed YAML under ``committed_dir``, one line each (a stale file's first
    lines of diff indented under it); [] when they are current."""
    with tempfile.TemporaryDirectory(prefix="pipelines-sync-") as tmp:
        fresh = compiled(Path(tmp))
    problems = []
    for name, text in fresh.items():
        path = committed_dir / name
        if not path.is_file():
            problems.append(f"pipelines/{name} is missing: run {COMMAND}")
            continue
        old = path.read_text()
        if old != text:
            diff = difflib.unified_diff(old.splitlines(), text.splitlines(), "committed", "compiled", lineterm="", n=0)
            shown = [f"    {line}" for line in list(diff)[2 : 2 + DIFF_LINES]]
            problems += [f"pipelines/{name} is stale: run {COMMAND}", *shown]
    extra = sorted(p.name for p in committed_dir.glob("*.yaml") if p.name not in fresh)
    problems += [f"pipelines/{name} is no pipeline's: remove it (or run {COMMAND})" for name in extra]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.pipelines_sync", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", type=Path, default=ROOT / "pipelines", help="the committed YAML's folder (default: pipelines/)"
    )
    args = parser.parse_args(argv)
    problems = check(args.dir)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
