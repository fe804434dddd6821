"""A sweep on one machine loads no Kubernetes client (issue 41, item 3): an image whose ``kubernetes``
release could not import (kubernetes 37 without pydantic) stopped ``sharebench run`` before it touched
the GPU. The import-linter contract in pyproject.toml forbids the import statically; this test reads the
interpreter's own import log of a real ``sharebench run --dry-run`` on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


def imported_modules(importtime_log: str) -> list[str]:
    """The modules of a ``python -X importtime`` log (``import time: self | cumulative | name``)."""
    return [
        line.rsplit("|", 1)[1].strip()
        for line in importtime_log.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    ]


@pytest.mark.slow  # a real run --dry-run in a fresh interpreter (about 3 s; make check runs the contract instead)
def test_a_local_dry_run_imports_no_kubernetes_and_nothing_of_the_node_layer(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBERNETES_", "SHAREBENCH_KUBECONFIG"))}
    argv = ["run", "--dry-run", "--device", "cpu", "--modes", "exclusive,partition:2", "--particles", "100"]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "sharebench", *argv, "--turns", "1", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "partition:2 replica 1: cores" in done.stdout  # the dry run planned the sweep
    modules = imported_modules(done.stderr)
    assert {"sharebench.cli", "sharebench.sweep.plan", "sharebench.sharing"} <= set(modules)
    found = [m for m in modules if m.split(".")[0] == "kubernetes" or m.startswith("sharebench.node")]
    assert found == [], f"a local sweep imported {found[:10]}"
