"""A synthetic replica for capacity tests (issue 33): an exec program whose bursts serialise on a shared
file lock, a one-slot device, so a burst's latency grows with the replicas beside it and a capacity
search finds a knee on the CPU.

Each unit of a burst holds the lock (``filelock``, the file ``SHAREBENCH_CONTENDED_LOCK``, default
``$TMPDIR/sharebench-contended.lock``) for ``SHAREBENCH_CONTENDED_UNIT_S`` seconds (default 0.01) of
sleep: alone a unit takes that long; beside N - 1 users whose bursts overlap it queues behind theirs.
It follows the replica protocol and the pattern the harness gives (``sharebench.workloads.bursts``)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from filelock import FileLock

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
    lock = FileLock(
        os.environ.get("SHAREBENCH_CONTENDED_LOCK") or str(Path(tempfile.gettempdir()) / "sharebench-contended.lock")
    )
    unit_s = float(os.environ.get("SHAREBENCH_CONTENDED_UNIT_S") or 0.01)

    def do_work(units: int) -> None:
        for _ in range(units):
            with lock.acquire(poll_interval=0.0005):  # filelock polls: 50 ms by default, a burst's own scale
                time.sleep(unit_s)

    pattern = pattern_from_env()
    limit, stop = limit_from_env({"count": 20})
    seed = [seed_from_env(0), int(os.environ.get("SHAREBENCH_REPLICA") or 0)]
    ready()
    start = wait_for_start()
    bursts = run_pattern(pattern, do_work, seed=seed, stop=stop, progress=progress_from_env(), **limit)
    end = time.time()
    record_bursts(bursts, pattern, seed, unit="locked sleeps")
    write_result(start=start, end=max(end, start + 1e-9), work=max(1, sum(b.units for b in bursts)), unit="units")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
