"""A synthetic replica whose knee is known (issues 42, 46): an exec program whose bursts sleep for a time
that depends only on the replicas in its cell, so that a capacity search's answer does not depend on the
machine's timing, and which fails from a given N.

A unit sleeps ``SHAREBENCH_KNEE_UNIT_S`` seconds (default 0.02) in a cell of fewer than
``SHAREBENCH_KNEE_AT`` replicas (default 4; ``SHAREBENCH_REPLICAS``), ``SHAREBENCH_KNEE_FACTOR`` times that
(default 3) from there on: within a 2x target below the knee, above it from the knee. With
``SHAREBENCH_KNEE_FAIL_AT`` set the program exits 1 (before it is ready) in a cell of that many replicas
or more. It follows the replica protocol and the pattern the harness gives (``sharebench.workloads.bursts``)."""

from __future__ import annotations

import os
import sys
import time

from sharebench.workloads.bursts import (
    limit_from_env,
    pattern_from_env,
    progress_from_env,
    record_bursts,
    run_pattern,
    seed_from_env,
)
from sharebench.workloads.protocol import REPLICAS, ready, wait_for_start, write_result


def main() -> int:
    n = int(os.environ.get(REPLICAS) or 1)
    fail_at = os.environ.get("SHAREBENCH_KNEE_FAIL_AT")
    if fail_at and n >= int(fail_at):
        print(f"knee: failing on purpose with {n} replicas (SHAREBENCH_KNEE_FAIL_AT={fail_at})", file=sys.stderr)
        return 1
    unit_s = float(os.environ.get("SHAREBENCH_KNEE_UNIT_S") or 0.02)
    if n >= int(os.environ.get("SHAREBENCH_KNEE_AT") or 4):
        unit_s *= float(os.environ.get("SHAREBENCH_KNEE_FACTOR") or 3)

    def do_work(units: int) -> None:
        time.sleep(unit_s * units)

    pattern = pattern_from_env()
    limit, stop = limit_from_env({"count": 20})
    seed = [seed_from_env(0), int(os.environ.get("SHAREBENCH_REPLICA") or 0)]
    ready()
    start = wait_for_start()
    bursts = run_pattern(pattern, do_work, seed=seed, stop=stop, progress=progress_from_env(), **limit)
    end = time.time()
    record_bursts(bursts, pattern, seed, unit="sleeps")
    write_result(start=start, end=max(end, start + 1e-9), work=max(1, sum(b.units for b in bursts)), unit="units")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
