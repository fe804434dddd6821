"""``sharebench compare``: the work, imported when it runs (its options: ``sharebench.cli.compare``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from sharebench.analysis import analyse
from sharebench.analysis.compare import (
    PER_UNIT_NOTE,
    UNIT_KEYS,
    compare_tables,
    differing_settings,
    display_compare,
)
from sharebench.analysis.tables import Tables
from sharebench.cli.compare import check_compare
from sharebench.errors import UserError
from sharebench.parse import check_ignore
from sharebench.report import markdown_table
from sharebench.results import sweeps_warning


def cmd_compare(args: argparse.Namespace) -> int:
    check_compare(args)  # as cli.lazy ran it before this module loaded; again for a direct call
    dirs = [Path(d) for d in args.dirs]
    out = Path(args.out) if args.out else None
    ignore = check_ignore(args.ignore)
    base = analyse(dirs[0])
    parts, frames = [], []
    for other in dirs[1:]:
        labels = (dirs[0].name or str(dirs[0]), other.name or str(other))
        if labels[0] == labels[1]:
            labels = (str(dirs[0]), str(other))
        t, text = compare_two(base, analyse(other), ignore, labels)
        parts.append(f"## {labels[1]} against {labels[0]}\n\n{text}\n")
        frames.append(t.assign(a=str(dirs[0]), b=str(other)))
    text = "\n".join(parts)
    print(text)
    say_torn(dirs)  # said once the rows proved readable
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / "compare.md").write_text(f"# sharebench compare\n\n{text}")
            pd.concat(frames).to_csv(out / "compare.csv", index=False)
        except OSError as exc:  # a path under a file, a read-only or full disk: one line naming it
            raise UserError(f"cannot write {exc.filename or out}: {exc.strerror or exc}; give another --out") from None
        print(f"written: {out}/compare.md  ({out}/compare.csv)")
    return 0


def say_torn(dirs: list[Path]) -> None:
    """One stderr line per folder whose sweep.json is torn (its results.csv rows were used alone)."""
    for warning in filter(None, map(sweeps_warning, dirs)):
        print(f"sharebench: {warning}", file=sys.stderr)


def compare_two(a: Tables, b: Tables, ignore: tuple[str, ...], labels: tuple[str, str]) -> tuple[pd.DataFrame, str]:
    """B against A: per cell of the same work; where none is, the settings that differ, and per particle-turn
    when only the particle count or the turns do."""
    t = compare_tables(a, b, ignore)
    if not t.empty:
        return t, markdown_table(display_compare(t, labels))
    differ = differing_settings(a, b, ignore)
    named = f" ({'; '.join(differ).replace(' A,', f' {labels[0]},').replace(' B', f' {labels[1]}')})" if differ else ""
    if differ and all(d.split(":")[0] in UNIT_KEYS for d in differ):
        t = compare_tables(a, b, ignore, per_unit=True)
        if not t.empty:
            return t, (
                f"No cell measured in both at the same work{named}: compared per particle-turn instead ({PER_UNIT_NOTE})."
                f"\n\n{markdown_table(display_compare(t, labels))}"
            )
    return t, (
        f"No cell measured in both (same work: engine, backend, device class, lattice, particles, turns; see "
        f"--ignore){named}."
    )
