"""Assemble README.md from the sections in docs/readme/ (one file per area).

    python docs/readme/assemble.py          # rewrite README.md
    python docs/readme/assemble.py --check  # exit 1 if README.md is stale (a test runs this)

Links in the sections are written relative to docs/readme/; they are rewritten relative to the
repository root here.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
ORDER = [
    "_intro.md",
    "_results.md",
    "sweep.md",
    "kernel.md",
    "workloads.md",
    "node.md",
    "dra.md",
    "kfp.md",
    "telemetry.md",
    "history.md",
    "advise.md",
    "_develop.md",
]


def _relink(text: str) -> str:
    # ](../results/x) in docs/readme/ → ](docs/results/x) at the root; leave absolute and anchor links
    def fix(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"^(?:[a-z]+:|#|/)", target):
            return m.group(0)
        resolved = (HERE / target).resolve()
        try:
            return f"{m.group(1)}({resolved.relative_to(ROOT).as_posix()})"
        except ValueError:
            return m.group(0)

    return re.sub(r"(!?\[[^\]]*\])\(([^)\s]+)\)", fix, text)


def _toc(sections: list[str]) -> str:
    lines = ["## Contents", ""]
    for text in sections[1:]:
        for m in re.finditer(r"^## (.+)$", text, flags=re.M):
            title = m.group(1).strip()
            anchor = re.sub(r"[^\w\- ]", "", title.lower()).strip().replace(" ", "-")
            lines.append(f"- [{title}](#{anchor})")
    return "\n".join(lines) + "\n"


def assemble() -> str:
    parts = [_relink((HERE / name).read_text().rstrip() + "\n") for name in ORDER]
    head, rest = parts[0], parts[1:]
    return "\n".join([head, _toc(parts), *rest])


def main(argv: list[str]) -> int:
    text = assemble()
    readme = ROOT / "README.md"
    if "--check" in argv:
        if readme.read_text() != text:
            print("README.md is stale: run python docs/readme/assemble.py", file=sys.stderr)
            return 1
        return 0
    readme.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
