"""The documentation site: `mkdocs build --strict` passes, and a broken link fails it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("mkdocs", reason="the docs extra (pip install -e '.[docs]') builds the site")


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        timeout=300,
    )


def test_the_site_builds_strict(tmp_path):
    out = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert out.returncode == 0, out.stderr[-3000:]
    # the guides carry the sections of docs/readme (snippets), the reference its generated pages
    local = (tmp_path / "site" / "guides" / "local" / "index.html").read_text()
    assert "How the Answer is derived" in local
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    assert "--dry-run" in cli
    # a link to a repository file the site does not carry shows as its path and opens the site's copy of it
    # (docs/hooks.py): a script as it is, a results folder's README rendered beside its plots
    site = tmp_path / "site"
    workloads = (site / "guides" / "workloads" / "index.html").read_text()
    assert '<a href="../../examples/workloads/sum_sqrt.sh"><code>examples/workloads/sum_sqrt.sh</code></a>' in workloads
    assert (site / "examples" / "workloads" / "sum_sqrt.sh").read_bytes() == (
        ROOT / "examples" / "workloads" / "sum_sqrt.sh"
    ).read_bytes()
    linked = re.findall(
        r'href="([^"]+)"><code>results/[^<]*</code></a>', (site / "campaigns" / "index.html").read_text()
    )
    assert linked, "the Results page links no results folder"
    for href in linked:
        assert (site / "campaigns" / href).resolve().is_file(), href
    # the Results page carries the users-per-GPU headline, included from the generated file (not a copy)
    results = (site / "campaigns" / "index.html").read_text()
    header = next(
        ln
        for ln in (ROOT / "results" / "h200" / "headline_patterns.md").read_text().splitlines()
        if ln.startswith("| workload |")
    )
    assert all(f"<th>{cell.strip()}</th>" in results for cell in header.strip("|").split("|")), header
    readme = (site / "results" / "h200" / "README.html").read_text()
    assert "<table>" in readme and "a file of the repository" in readme


def mini_site(tmp_path: Path, page: str) -> Path:
    """A one-page site with the project's mkdocs.yml settings (hooks, validation, snippets)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(page)
    text = (ROOT / "mkdocs.yml").read_text().split("\nnav:")[0]
    text = text.replace("docs_dir: docs", f"docs_dir: {docs}").replace("- docs/hooks.py", f"- {ROOT}/docs/hooks.py")
    config = tmp_path / "mkdocs.yml"
    config.write_text(text + "\nnav:\n  - Home: index.md\n")
    return config


def test_a_broken_link_fails_the_build(tmp_path):
    config = mini_site(tmp_path, "# Home\n\nSee [the plan](no-such-page.md).\n")
    out = build(config, tmp_path / "site")
    assert out.returncode != 0
    assert "no-such-page.md" in out.stderr


def test_a_link_to_a_missing_repository_file_fails_the_build(tmp_path):
    config = mini_site(tmp_path, "# Home\n\nSee [it](../examples/workloads/no_such_program.sh).\n")
    out = build(config, tmp_path / "site")
    assert out.returncode != 0
    assert "no_such_program.sh" in out.stderr
