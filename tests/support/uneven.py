"""A synthetic replica for the cells' tests (issue 42): an exec program whose bursts sleep, so a cell's users
keep their latency beside each other (far within any target) unless one of them is told to be slow.

Each unit of a burst sleeps ``SHAREBENCH_UNEVEN_UNIT_S`` seconds (default 0.01). ``SHAREBENCH_UNEVEN_SLOW``
``R:F`` makes replica R of a cell of more than one replica sleep F times as long (a user the sharing hurts
while replica 0 does not). ``SHAREBENCH_UNEVEN_LIVE=0`` writes no live record (a program of the protocol
before issue 42: its cell runs to its limit). It follows the replica protocol and the pattern the harness
gives (``sharebench.workloads.bursts``)."""

from __future__ import annotations

import os
import time

from sharebench.workloads.bursts import (
    limit_from_env,
    pattern_from_env,
    progress_from_env,
    record_bursts,
    run_pattern,
    seed_from_env,
)
from sharebench.workloads.protocol import ready, wait_for_start, write_result


def main() -> int:
    unit_s = float(os.environ.get("SHAREBENCH_UNEVEN_UNIT_S") or 0.01)
    replica = int(os.environ.get("SHAREBENCH_REPLICA") or 0)
    shared = int(os.environ.get("SHAREBENCH_REPLICAS") or 1) > 1
    slow, _, factor = (os.environ.get("SHAREBENCH_UNEVEN_SLOW") or "").partition(":")
    if shared and slow and int(slow) == replica:
        unit_s *= float(factor)

    def do_work(units: int) -> None:
        time.sleep(unit_s * units)

    pattern = pattern_from_env()
    limit, stop = limit_from_env({"count": 20})
    seed = [seed_from_env(0), replica]
    live = progress_from_env() if os.environ.get("SHAREBENCH_UNEVEN_LIVE", "1") != "0" else None
    ready()
    start = wait_for_start()
    bursts = run_pattern(pattern, do_work, seed=seed, stop=stop, progress=live, **limit)
    end = time.time()
    record_bursts(bursts, pattern, seed, unit="sleeps")
    write_result(start=start, end=max(end, start + 1e-9), work=max(1, sum(b.units for b in bursts)), unit="units")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
