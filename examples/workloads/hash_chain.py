#!/usr/bin/env python3
"""A sharebench workload in plain Python (no sharebench import), following the replica protocol
(README, "Any workload"): set up, touch the ready file, wait for the start instant, do the timed
work, write the result JSON. Work: a SHA-256 chain of SHAREBENCH_WORK links."""

import hashlib
import json
import os
import sys
import time


def main() -> int:
    text = os.environ.get("SHAREBENCH_WORK", "100000")
    if not text.isdigit() or int(text) < 1:
        print(f"bad SHAREBENCH_WORK {text!r}; allowed: a whole number > 0", file=sys.stderr)
        return 2
    links = int(text)
    seed = f"replica-{os.environ.get('SHAREBENCH_REPLICA', '0')}".encode()

    ready = os.environ.get("SHAREBENCH_READY_FILE")
    if ready:
        with open(ready, "w") as fh:
            fh.write(str(os.getpid()))
    start_file = os.environ.get("SHAREBENCH_START_FILE")
    if start_file:
        while True:  # the file, then the epoch instant it holds
            try:
                with open(start_file) as fh:
                    instant = float(fh.read().split()[0])
                break
            except (OSError, IndexError, ValueError):
                time.sleep(0.001)
        while time.time() < instant:
            time.sleep(min(0.01, max(instant - time.time(), 0)))

    start = time.time()
    digest = seed
    for _ in range(links):
        digest = hashlib.sha256(digest).digest()
    end = time.time()

    result = {"start": start, "end": end, "work": links, "unit": "hash", "digest": digest.hex()}
    out = os.environ.get("SHAREBENCH_RESULT_FILE")
    if out:
        with open(out + ".tmp", "w") as fh:
            json.dump(result, fh)
        os.replace(out + ".tmp", out)
    else:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
