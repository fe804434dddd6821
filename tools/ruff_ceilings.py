"""Ceilings that ratchet: ruff's complexity and argument-count rules, and the functions over 60 lines.

    python -m tools.ruff_ceilings            # exit 1 when a count is over its ceiling, naming the new offenders
    python -m tools.ruff_ceilings --update   # lower the ceilings to today's counts (never raises one)

Ruff has no per-rule count ceiling, so this tool keeps one. It runs the project's ruff (``python -m ruff``,
the one installed beside this interpreter) with only these rules selected, over src/, components/ and
pipelines/; the rules' thresholds are pyproject.toml's ``[tool.ruff.lint.mccabe]`` and
``[tool.ruff.lint.pylint]``, and the rules are left out of its main ``select`` (a ``noqa`` for them is
then refused by RUF100: the ceiling is the only allowance). Ruff counts no lines, so the functions over
:data:`MAX_FUNCTION_LINES` lines are counted here, from the syntax tree.

Each count is compared with its ceiling in ``tools/ruff_ceilings.toml``: over it fails, one line per rule
naming the functions that are not among the file's known offenders; under it passes with a hint to lower
the ceiling. ``--update`` writes the lower counts (and today's offenders) back, and never raises a ceiling:
raising one is a hand edit that a reviewer sees. ``make check`` (the pre-commit hook) and
``tests/test_architecture.py`` run the check.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
CEILINGS_FILE = Path("tools") / "ruff_ceilings.toml"
PATHS = ("src", "components", "pipelines")
MAX_FUNCTION_LINES = 60
FUNCTION_LINES = "function-lines"  # the ceiling of the functions over MAX_FUNCTION_LINES lines
RUFF_RULES = {
    "C901": "cyclomatic complexity over [tool.ruff.lint.mccabe] max-complexity",
    "PLR0912": "too many branches (over [tool.ruff.lint.pylint] max-branches)",
    "PLR0913": "too many arguments (over [tool.ruff.lint.pylint] max-args)",
    "PLR0915": "too many statements (over [tool.ruff.lint.pylint] max-statements)",
}
RULES = {**RUFF_RULES, FUNCTION_LINES: f"functions over {MAX_FUNCTION_LINES} lines (no ruff rule counts lines)"}
HEADER = """\
# The ceilings of tools/ruff_ceilings.py (python -m tools.ruff_ceilings): how many functions of src/,
# components/ and pipelines/ each rule finds. A count over its ceiling fails `make check` and CI; once code
# is cleaned, `python -m tools.ruff_ceilings --update` lowers the ceilings to the counts (it never raises
# one). The ruff rules' thresholds are pyproject.toml's [tool.ruff.lint.mccabe] and [tool.ruff.lint.pylint].
# [offenders]: the functions each rule found at the last update, so that a failure names the new ones.
"""
_DETAIL = re.compile(r"\((\d+ > \d+)\)")


@dataclass(frozen=True)
class Offender:
    rule: str
    path: str  # relative to the root, with /
    line: int
    name: str  # the function's qualified name in its module (Class.method, outer.<locals>.inner)
    detail: str = ""  # "12 > 10", "73 lines"

    @property
    def key(self) -> str:
        """What the ceilings file knows it by: path and name (no line, which any edit above moves)."""
        return f"{self.path}:{self.name}"

    def __str__(self) -> str:
        return f"{self.path}:{self.line} {self.name}" + (f" ({self.detail})" if self.detail else "")


@dataclass
class Report:
    counts: dict[str, int]
    failures: list[str] = field(default_factory=list)  # one line per rule over its ceiling
    hints: list[str] = field(default_factory=list)  # one line per rule under its ceiling


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function of a module with its qualified name, nested ones included."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield prefix + child.name, child
                yield from walk(child, f"{prefix}{child.name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def _sources(root: Path) -> list[Path]:
    return sorted(p for name in PATHS if (root / name).is_dir() for p in (root / name).rglob("*.py"))


def _relative(path: Path, root: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix()


def scan_functions(root: Path) -> tuple[dict[tuple[str, int], str], list[Offender]]:
    """One pass over the sources' syntax trees: each function's qualified name by (path, line of its ``def``),
    and the functions over :data:`MAX_FUNCTION_LINES` lines (``def`` to last line, decorators left out)."""
    names: dict[tuple[str, int], str] = {}
    long: list[Offender] = []
    for path in _sources(root):
        rel = _relative(path, root)
        for qualname, fn in _functions(ast.parse(path.read_text(), str(path))):
            names[(rel, fn.lineno)] = qualname
            lines = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                long.append(Offender(FUNCTION_LINES, rel, fn.lineno, qualname, f"{lines} lines"))
    return names, long


def ruff_offenders(root: Path, names: dict[tuple[str, int], str]) -> list[Offender]:
    """The functions ruff reports for :data:`RUFF_RULES`, with the thresholds of ``root``'s pyproject.toml."""
    paths = [name for name in PATHS if (root / name).is_dir()]
    if not paths:
        return []
    cmd = [sys.executable, "-m", "ruff", "check", "--no-cache", "--exit-zero", "--force-exclude"]
    cmd += ["--select", ",".join(RUFF_RULES), "--output-format", "json", *paths]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ruff failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    found = []
    for v in json.loads(done.stdout):
        rel = _relative(Path(v["filename"]), root)
        row = v["location"]["row"]
        detail = _DETAIL.search(v["message"])
        name = names.get((rel, row), f"<line {row}>")
        found.append(Offender(v["code"], rel, row, name, detail[1] if detail else ""))
    return found


def offenders(root: Path = ROOT) -> dict[str, list[Offender]]:
    """Today's offenders of each rule of :data:`RULES`, in path and line order."""
    names, long = scan_functions(root)
    by_rule: dict[str, list[Offender]] = {rule: [] for rule in RULES}
    for o in [*ruff_offenders(root, names), *long]:
        by_rule[o.rule].append(o)
    return {rule: sorted(found, key=lambda o: (o.path, o.line)) for rule, found in by_rule.items()}


def _label(path: Path, root: Path) -> str:
    return _relative(path, root) if path.resolve().is_relative_to(root.resolve()) else str(path)


def read_ceilings(path: Path) -> tuple[dict[str, int], dict[str, list[str]]]:
    """The ceilings file's [ceilings] (rule -> count) and [offenders] (rule -> keys); empty when absent."""
    if not path.exists():
        return {}, {}
    data = tomllib.loads(path.read_text())
    return dict(data.get("ceilings", {})), {k: list(v) for k, v in data.get("offenders", {}).items()}


def write_ceilings(path: Path, ceilings: dict[str, int], known: dict[str, list[str]]) -> None:
    out = [HEADER, "[ceilings]"]
    out += [f"{rule} = {ceilings[rule]}  # {RULES[rule]}" for rule in ceilings]
    out += ["", "[offenders]"]
    for rule, keys in known.items():
        out += [f"{rule} = ["] + [f"    {json.dumps(k)}," for k in keys] + ["]"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n")


def unknown(current: list[Offender], known: list[str]) -> list[Offender]:
    """The offenders the known keys do not account for (a key known twice accounts for two)."""
    extra = Counter(o.key for o in current) - Counter(known)
    new = []
    for o in current:
        if extra[o.key] > 0:
            extra[o.key] -= 1
            new.append(o)
    return new


def compare(
    found: dict[str, list[Offender]], ceilings: dict[str, int], known: dict[str, list[str]], *, label: str
) -> Report:
    """Each rule's count against its ceiling: a failure line (naming the offenders the known list lacks)
    when over, a hint when under."""
    report = Report({rule: len(found[rule]) for rule in found})
    for rule, current in found.items():
        count = len(current)
        ceiling = ceilings.get(rule)
        if ceiling is None:
            report.failures.append(f"{rule}: no ceiling in {label} (today {count}); --update sets it")
        elif count > ceiling:
            names = "; ".join(map(str, unknown(current, known.get(rule, [])))) or "none told apart from the known"
            report.failures.append(f"{rule}: {count} over its ceiling {ceiling} ({RULES[rule]}); new: {names}")
        elif count < ceiling:
            report.hints.append(
                f"{rule}: {count} under its ceiling {ceiling}: lower it with `python -m tools.ruff_ceilings --update`"
            )
    return report


def check(root: Path = ROOT, ceilings_file: Path | None = None) -> Report:
    """Today's counts against the ceilings file (``tools/ruff_ceilings.toml`` under ``root`` by default)."""
    path = ceilings_file or root / CEILINGS_FILE
    ceilings, known = read_ceilings(path)
    return compare(offenders(root), ceilings, known, label=_label(path, root))


def update(root: Path = ROOT, ceilings_file: Path | None = None) -> Report:
    """Lower each ceiling to today's count (set a missing one at it); a count over its ceiling keeps the
    ceiling and its known offenders, and stays a failure."""
    path = ceilings_file or root / CEILINGS_FILE
    ceilings, known = read_ceilings(path)
    found = offenders(root)
    for rule, current in found.items():
        if rule not in ceilings or len(current) <= ceilings[rule]:
            ceilings[rule] = len(current)
            known[rule] = [o.key for o in current]
    write_ceilings(path, {r: ceilings[r] for r in RULES}, {r: known.get(r, []) for r in RULES})
    return compare(found, ceilings, known, label=_label(path, root))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.ruff_ceilings", description=__doc__.split("\n\n")[0])
    p.add_argument("--update", action="store_true", help="lower the ceilings to today's counts (never raises one)")
    p.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    p.add_argument("--ceilings", type=Path, default=None, help=f"the ceilings file (default: ROOT/{CEILINGS_FILE})")
    args = p.parse_args(argv)
    report = (update if args.update else check)(args.root, args.ceilings)
    for line in report.failures + report.hints:
        print(line)
    if args.update and not report.failures:
        print("ceilings: " + ", ".join(f"{rule} {n}" for rule, n in report.counts.items()))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
