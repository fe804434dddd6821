"""The measured campaigns' home, results/<campaign>/: documents committed, per-cell scratch packed, no
report.html, and few files; the tests read their own trimmed copies under tests/data/, never results/."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from support.paths import ROOT

SCRATCH = re.compile(r"/(?:cells|workers|warm/prime|mps)/|/\.sharebench\.lock$|/report\.html$")


def committed(*paths: str) -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_campaigns_commit_documents_and_one_archive_per_results_folder():
    files = committed("results", "docs")
    # a results folder commits about 40 files (its tables, each plot as PNG and SVG, its report, one
    # archive); 1,700 leaves room for the campaigns committed so far (1,556 with the headline-capacity
    # folders of 2026-12-05) and stops scratch or copies creeping in
    assert len(files) <= 1700, len(files)
    assert not [f for f in files if SCRATCH.search(f)]
    folders = {f.rsplit("/", 1)[0] for f in files if f.startswith("results/") and f.endswith("/results.csv")}
    assert folders and all(f"{d}/cells.tar.xz" in files for d in folders)
    readmes = {f"results/{c}/README.md" for c in ("h200", "cpu-default", "cpu-example", "kernel", "timeslice")}
    assert readmes <= set(files)


COMMITTED_RESULTS_TESTS = (
    "test_results_home.py",
    "test_rebuild_reports.py",
    "test_readme.py",
    "test_pattern_costs.py",
    "test_answer.py",
    "test_companions.py",  # issue 45: the READMEs, index and trust tables against their committed folders
)


def test_no_test_reads_the_committed_campaigns():
    """Tidying a campaign must not break the suite: tests name tests/data/results, not results/. The
    exceptions are the tests whose purpose is the committed results themselves: the report-freshness
    test, the README headline's, the advice from the committed H200 pattern costs (issue 33's pool and
    churn cases) and the Answer on the placed H200 pattern folders (each skips where its folder is gone)."""
    pattern = re.compile(
        r'"docs" / "results"|docs/results/|benchmarks/results|ROOT / "results" / "(?!h200" / "headline)'
    )
    offenders = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "tests").rglob("*.py"))
        if p.name not in COMMITTED_RESULTS_TESTS and pattern.search(p.read_text())
    ]
    assert not offenders, offenders
