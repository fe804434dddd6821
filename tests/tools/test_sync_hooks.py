"""The quick loop checks what is generated: each sync hook of .pre-commit-config.yaml, run as configured in a
temporary copy of the files it reads with one generated file made stale, fails naming that file (and only
it); ``make check`` runs every hook, and a commit that touches a generated file or its source runs its hook."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from support.paths import ROOT

HOOKS = {h["id"]: h for repo in yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
         for h in repo["hooks"]}  # fmt: skip


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path}"
    path.write_text(text.replace(old, new, 1))


@dataclass(frozen=True)
class Case:
    copy: tuple[str, ...]  # what the hook reads (the library itself is the installed one)
    stale: Callable[[Path], None]  # makes one generated file stale in the copy
    errors: tuple[str, ...]  # the hook's error lines (stderr and stdout), all of them
    matched: tuple[str, ...]  # paths whose change must run the hook at a commit


CASES = {
    "readme-sync": Case(
        copy=("README.md", "docs/readme", "results/h200/headline_spread.md", "results/h200/headline_patterns.md"),
        # the source changes, README.md does not: stale
        stale=lambda root: edit(root / "docs/readme/_front.md", "\n## ", "\nA sentence added.\n\n## "),
        errors=("README.md is stale: run python docs/readme/assemble.py",),
        matched=("README.md", "docs/readme/_front.md", "results/h200/headline_patterns.md"),
    ),
    "manifests-sync": Case(
        copy=("manifests",),
        stale=lambda root: edit(
            root / "manifests/namespace/0100_namespace_gpu-operator.yaml", "gpu-operator", "gpu-op"
        ),
        errors=(
            "differs: namespace/0100_namespace_gpu-operator.yaml",
            "sharebench: manifests in manifests are out of sync; run 'sharebench manifests render --out manifests'",
        ),
        matched=("manifests/namespace/0100_namespace_gpu-operator.yaml", "src/sharebench/manifests/operator.py"),
    ),
    "pipelines-sync": Case(
        copy=("tools", "pipelines/sharebench_sweep.yaml", "pipelines/sharebench_multi_node.yaml"),
        stale=lambda root: edit(root / "pipelines/sharebench_sweep.yaml", "5000000.0", "5000001.0"),
        errors=("pipelines/sharebench_sweep.yaml is stale: run sharebench compile",),
        matched=("pipelines/sharebench_sweep.yaml", "pipelines/sweep_pipeline.py", "components/run_simpletrack.py"),
    ),
    "reference-sync": Case(
        copy=("tools", "docs/reference", "pipelines/sharebench_sweep.yaml", "pipelines/sharebench_multi_node.yaml"),
        # an option of sharebench run the page no longer lists (as when the option is new in the code)
        stale=lambda root: edit(root / "docs/reference/cli.md", "| `--dry-run` |", "| `--dry-run-old` |"),
        errors=("cli.md: missing `sharebench run`: `--dry-run`", "cli.md is stale: run python -m tools.reference"),
        matched=("docs/reference/cli.md", "src/sharebench/cli/sweep.py", "pipelines/sharebench_sweep.yaml"),
    ),
}


def copy_tree(paths: tuple[str, ...], to: Path) -> None:
    for rel in paths:
        src, dst = ROOT / rel, to / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)


def hook_command(hook: dict) -> list[str]:
    """The hook's entry as configured, its ``.venv/bin/`` tools taken from the venv running the tests."""
    bin_dir = Path(sys.executable).parent
    return [str(bin_dir / w.removeprefix(".venv/bin/")) if w.startswith(".venv/bin/") else w
            for w in shlex.split(hook["entry"])]  # fmt: skip


SLOW = pytest.mark.slow  # a compile of the pipelines, about 4 s: make check runs the hook itself


@pytest.mark.parametrize(
    "hook_id", [pytest.param(h, marks=SLOW) if h == "pipelines-sync" else h for h in sorted(CASES)]
)
def test_a_sync_hook_fails_on_a_stale_file_in_a_copy(tmp_path, hook_id):
    case, hook = CASES[hook_id], HOOKS[hook_id]
    assert hook["pass_filenames"] is False and hook["language"] == "system"
    copy_tree(case.copy, tmp_path)
    case.stale(tmp_path)
    out = subprocess.run(hook_command(hook), cwd=tmp_path, capture_output=True, text=True, timeout=300)
    said = [ln for ln in (out.stderr + out.stdout).splitlines() if ln.strip() and not ln.startswith("    ")]
    # the stale file named, and nothing else: the copy holds everything the hook reads
    assert out.returncode == 1 and said == list(case.errors), out.stderr + out.stdout


@SLOW
def test_the_pipelines_check_names_a_missing_and_an_extra_file(tmp_path):
    copy_tree(("tools", "pipelines/sharebench_sweep.yaml"), tmp_path)
    (tmp_path / "pipelines" / "old_pipeline.yaml").write_text("# a pipeline that is gone\n")
    out = subprocess.run(hook_command(HOOKS["pipelines-sync"]), cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1 and out.stderr.splitlines() == [
        "pipelines/sharebench_multi_node.yaml is missing: run sharebench compile",
        "pipelines/old_pipeline.yaml is no pipeline's: remove it (or run sharebench compile)",
    ]


@pytest.mark.parametrize("hook_id", sorted(CASES))
def test_a_commit_touching_a_generated_file_or_its_source_runs_its_hook(hook_id):
    pattern = re.compile(HOOKS[hook_id]["files"])
    assert all(pattern.search(p) for p in CASES[hook_id].matched)
    assert all((ROOT / p).is_file() for p in CASES[hook_id].matched)


def test_make_check_runs_every_hook():
    """No hook is skipped in the quick loop (SKIP=...): each sync check runs on every `make check`."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^check:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None
    lines = recipe[1].splitlines()
    assert any(ln.strip().endswith("pre-commit run --all-files") for ln in lines) and "SKIP" not in recipe[1]
    assert {"readme-sync", "manifests-sync", "pipelines-sync", "reference-sync"} <= set(HOOKS)
