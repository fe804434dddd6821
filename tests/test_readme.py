"""README.md is assembled from docs/readme/*.md; it must be in sync, and its links must resolve."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_is_assembled_from_the_sections():
    out = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "readme" / "assemble.py"), "--check"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


def test_readme_gives_the_two_setup_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    assert "make run " in readme and "make test " in readme
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == "make test"


def test_readme_local_links_resolve():
    readme = (ROOT / "README.md").read_text()
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", readme) if not re.match(r"^(?:[a-z]+:|#)", t)]
    assert targets
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert not missing, missing
