"""Write the test tiers (``tests/slow_tests.txt``, ``tests/long_tests.txt``) from full runs' JUnit XML.

    python -m tools.slow_tests JUNIT.xml [JUNIT.xml ...] [--threshold 0.5] [--long-threshold 5]

``make test`` writes its JUnit XML to ``.pytest-junit.xml`` and ``make test-long`` to
``.pytest-junit-long.xml``; ``make slow-tests`` runs this on both. A test whose recorded time (set-up, call
and tear-down, on CI's 2 cores) is over ``--threshold`` is listed slow, over ``--long-threshold`` long too;
``tests/conftest.py`` marks the listed tests ``slow`` (``make check``, the quick loop, leaves them out) and
``long`` (``make test``, the README's test command, leaves them out; ``make test-long``, CI's second step,
runs them). A test none of the runs timed (not run: another tier, a skip) keeps the tier it was listed in,
while its file exists. Tests marked in their own file keep their marks whatever the lists say.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "tests" / "slow_tests.txt"
DEFAULT_LONG_OUT = ROOT / "tests" / "long_tests.txt"
DEFAULT_THRESHOLD_S = 0.5
DEFAULT_LONG_THRESHOLD_S = 5.0
HEADER = """\
# Tests over {threshold:g} s in a full run (make test and make test-long, 2 workers on 2 cores); {what}.
# Made by `python -m tools.slow_tests .pytest-junit.xml .pytest-junit-long.xml` (make slow-tests) on {machine};
# {count} tests, {seconds:.0f} s of the runs' {total:.0f} s. One pytest node id per line.
"""
LEAVES_OUT = {
    "slow": "make check leaves them out",
    "long": "make test leaves them out, make test-long (CI's second step) runs them",
}


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


def listed(path: Path) -> list[str]:
    """The node ids a tier file lists (none: no file)."""
    if not path.is_file():
        return []
    return [s for line in path.read_text().splitlines() if (s := line.strip()) and not s.startswith("#")]


def tier(times: dict[str, float], threshold: float, before: list[str], root: Path) -> list[str]:
    """The tests over ``threshold``, and those ``before`` listed that no run timed (their files still there)."""
    kept = [n for n in before if n not in times and (root / n.split("::")[0]).is_file()]
    return sorted({*(n for n, t in times.items() if t > threshold), *kept})


def write_tier(out: Path, names: list[str], kind: str, threshold: float, times: dict[str, float], machine: str) -> None:
    header = HEADER.format(
        threshold=threshold,
        what=LEAVES_OUT[kind],
        machine=machine,
        count=len(names),
        seconds=sum(times.get(n, 0.0) for n in names),
        total=sum(times.values()),
    )
    out.write_text(header + "".join(f"{n}\n" for n in names))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("junit", type=Path, nargs="+", help="JUnit XML of full runs (make test: .pytest-junit.xml)")
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_S, help="slow: seconds (default %(default)s)")
    ap.add_argument(
        "--long-threshold", type=float, default=DEFAULT_LONG_THRESHOLD_S, help="long: seconds (default %(default)s)"
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the slow list (default tests/slow_tests.txt)")
    ap.add_argument("--long-out", type=Path, default=None, help="the long list (default tests/long_tests.txt)")
    ap.add_argument("--machine", default="a 2-core machine", help="where the run was made (in the header)")
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout the run was made in (default: this one)")
    args = ap.parse_args(argv)
    missing = [j for j in args.junit if not j.is_file()]
    if missing:
        print(
            f"slow_tests: no JUnit XML at {missing[0]}; run `make test` first (it writes .pytest-junit.xml)",
            file=sys.stderr,
        )
        return 2
    for name, value in (("--threshold", args.threshold), ("--long-threshold", args.long_threshold)):
        if not value > 0:
            print(f"slow_tests: bad {name} {value}; allowed: seconds > 0", file=sys.stderr)
            return 2
    times: dict[str, float] = {}
    for junit in args.junit:
        times.update(timings(junit, args.root))
    long_out = args.long_out or args.out.with_name(DEFAULT_LONG_OUT.name)
    slow = tier(times, args.threshold, listed(args.out), args.root)
    long = tier(times, max(args.long_threshold, args.threshold), listed(long_out), args.root)
    write_tier(args.out, slow, "slow", args.threshold, times, args.machine)
    write_tier(long_out, long, "long", args.long_threshold, times, args.machine)
    print(
        f"{args.out}: {len(slow)} of {len(times)} timed tests over {args.threshold:g} s; "
        f"{long_out}: {len(long)} over {args.long_threshold:g} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
