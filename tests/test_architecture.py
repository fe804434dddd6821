"""The architecture, checked by kept tools and by the tree itself.

* import-linter (contracts in pyproject.toml): layers, the library never importing KFP, no cycles;
* ruff (rules in pyproject.toml), on the whole tree, tests included: among them no private name used
  outside its module (SLF001, PLC2701);
* ceilings that ratchet (tools/ruff_ceilings.py, tools/ruff_ceilings.toml): how many functions of the library
  and the KFP layer ruff finds too complex (C901), with too many branches, arguments or statements (PLR0912,
  PLR0913, PLR0915), and how many are over 60 lines: none more than today, lowered as code is cleaned;
* what no kept tool checks: the library imports its own modules at the top of a module (an import
  inside a function hides a dependency) and never imports the KFP layer (components/, pipelines/).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tools import ruff_ceilings

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "src" / "sharebench"
KFP_LAYER = [ROOT / "components", ROOT / "pipelines"]


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.skip(f"{name} not installed in this environment (pip install -e '.[test]')")
    return str(path)


def _functions(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _sources(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py"))


def test_import_contracts_are_kept():
    out = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_ruff_is_clean_on_the_tree():
    out = subprocess.run([_tool("ruff"), "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_library_imports_its_own_modules_at_the_top():
    inside = []
    for path in _sources(LIBRARY, *KFP_LAYER):
        if path.parent.name == "components" and path.name not in ("__init__.py", "steps.py", "image.py"):
            continue  # a KFP component's body must import what it uses (KFP runs the function alone)
        for fn in _functions(path):
            for node in ast.walk(fn):
                module = (
                    node.module
                    if isinstance(node, ast.ImportFrom)
                    else next((a.name for a in node.names), "")
                    if isinstance(node, ast.Import)
                    else None
                )
                if module and module.split(".")[0] == "sharebench":
                    inside.append(f"{path.relative_to(ROOT)}:{node.lineno} {fn.name}() imports {module}")
    assert not inside, "\n".join(inside)


def test_the_library_never_imports_the_kfp_layer():
    found = []
    for path in _sources(LIBRARY):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} {n}"
                for n in names
                if n.startswith(("sharebench.components", "sharebench.pipelines", "kfp"))
            ]
    assert not found, "\n".join(found)


def test_complexity_arguments_and_long_functions_stay_under_their_ceilings():
    _tool("ruff")
    report = ruff_ceilings.check(ROOT)
    assert not report.failures, "\n".join(report.failures)
