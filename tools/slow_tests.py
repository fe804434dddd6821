"""Write the list of slow tests (``tests/slow_tests.txt``) from a full run's JUnit XML.

    python -m tools.slow_tests JUNIT.xml [--threshold 1.0] [--out tests/slow_tests.txt]

``make test`` writes its JUnit XML to ``.pytest-junit.xml``; ``make slow-tests`` runs this on it. A test
whose recorded time (set-up, call and tear-down, on CI's 2 cores) is over the threshold is listed;
``tests/conftest.py`` marks the listed tests ``slow``, and ``make check`` (the quick loop) leaves them
out. Tests marked ``slow`` in their own file stay slow whatever the list says.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tests" / "slow_tests.txt"
DEFAULT_THRESHOLD_S = 0.5
HEADER = """\
# Tests over {threshold:g} s in a full run (make test, 2 workers on 2 cores); make check leaves them out.
# Made by `python -m tools.slow_tests .pytest-junit.xml` (make slow-tests) on {machine}; {count} tests,
# {seconds:.0f} s of the run's {total:.0f} s. One pytest node id per line.
"""


def node_id(classname: str, name: str, root: Path = ROOT) -> str:
    """A JUnit test case's pytest node id: ``tests.kfp.test_x`` + ``test_y[p]`` -> ``tests/kfp/test_x.py::test_y[p]``
    (a test class's name stays after the file: ``tests/a/test_b.py::TestC::test_d``)."""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = Path(*parts[:cut]).with_suffix(".py")
        if (root / path).is_file():
            return "::".join([path.as_posix(), *parts[cut:], name])
    raise ValueError(f"no test file for JUnit class {classname!r} under {root}")


def timings(junit: Path, root: Path = ROOT) -> dict[str, float]:
    """Node id -> seconds of every test case in ``junit`` that was not skipped."""
    out: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("skipped") is not None:
            continue
        out[node_id(case.get("classname", ""), case.get("name", ""), root)] = float(case.get("time", 0))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("junit", type=Path, help="the JUnit XML of a full run (make test writes .pytest-junit.xml)")
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_S, help="seconds (default %(default)s)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the list (default tests/slow_tests.txt)")
    ap.add_argument("--machine", default="a 2-core machine", help="where the run was made (in the header)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout the run was made in (default: this one)")
    args = ap.parse_args(argv)
    if not args.junit.is_file():
        print(
            f"slow_tests: no JUnit XML at {args.junit}; run `make test` first (it writes .pytest-junit.xml)",
            file=sys.stderr,
        )
        return 2
    if not args.threshold > 0:
        print(f"slow_tests: bad --threshold {args.threshold}; allowed: seconds > 0", file=sys.stderr)
        return 2
    times = timings(args.junit, args.root)
    slow = sorted(n for n, t in times.items() if t > args.threshold)
    header = HEADER.format(
        threshold=args.threshold,
        machine=args.machine,
        count=len(slow),
        seconds=sum(times[n] for n in slow),
        total=sum(times.values()),
    )
    args.out.write_text(header + "".join(f"{n}\n" for n in slow))
    print(f"{args.out}: {len(slow)} of {len(times)} tests over {args.threshold:g} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
