"""Pack the per-cell scratch of campaign results folders into one ``cells.tar.xz`` each, before committing.

    python -m tools.pack_results results/CAMPAIGN [...]

Every results folder (a folder holding ``results.csv``) under the given folders gets its ``cells/``,
``workers/``, ``warm/``, ``mps/`` and lock packed into ``cells.tar.xz`` and removed
(``sharebench.results.archive``); ``sharebench report DIR`` reads the raw telemetry samples from the
archive. ``report.html`` is not committed (``.gitignore``): ``sharebench report DIR`` rebuilds it.
Prints one line per folder packed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sharebench.results import RESULTS_CSV
from sharebench.results.archive import pack_scratch


def results_folders(roots: list[Path]) -> list[Path]:
    """The results folders under ``roots`` (a root may be one), outermost first."""
    found = {csv.parent for root in roots for csv in root.rglob(RESULTS_CSV)}
    return sorted(found, key=lambda p: (len(p.parts), str(p)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+", type=Path, help="campaign folders (or results folders)")
    args = ap.parse_args(argv)
    missing = [str(f) for f in args.folders if not f.is_dir()]
    if missing:
        print(f"pack_results: no folder {', '.join(missing)}", file=sys.stderr)
        return 2
    for folder in results_folders(args.folders):
        archive = pack_scratch(folder)
        if archive is not None:
            print(f"{archive} ({archive.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
