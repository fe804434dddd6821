"""Print the requirements pyproject.toml declares for a set of extras, one a line.

The image installs these before it copies the sources (a layer of its own, so a source change
does not download them again), then installs the project itself with --no-deps. The list comes
from pyproject.toml at build time: there is no second package list to drift.

    python3 docker/requirements.py pyproject.toml test,cuda13
"""

from __future__ import annotations

import re
import sys

import tomllib


def requirements(pyproject: dict, extras: list[str]) -> list[str]:
    """The project's dependencies plus those of the extras, following sharebench[...] self-references."""
    name = pyproject["project"]["name"]
    optional = pyproject["project"].get("optional-dependencies", {})
    out, todo, seen = list(pyproject["project"]["dependencies"]), list(extras), set()
    while todo:
        extra = todo.pop(0)
        if extra in seen:
            continue
        if extra not in optional:
            raise SystemExit(f"requirements.py: no extra {extra!r} in pyproject.toml (has: {', '.join(optional)})")
        seen.add(extra)
        for req in optional[extra]:
            m = re.fullmatch(rf"{re.escape(name)}\[([^\]]+)\]", req.strip())
            if m:
                todo += [x.strip() for x in m.group(1).split(",")]
            elif req not in out:
                out.append(req)
    return out


def main(argv: list[str]) -> None:
    path, extras = argv[1], argv[2]
    with open(path, "rb") as f:
        pyproject = tomllib.load(f)
    print("\n".join(requirements(pyproject, [e for e in extras.split(",") if e])))


if __name__ == "__main__":
    main(sys.argv)
