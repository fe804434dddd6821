"""``python -m sharebench.telemetry``: sample this machine for a few seconds and print the summary.

A quick check of the telemetry path on a new machine (e.g. that NVML answers on a GPU node)::

    python -m sharebench.telemetry --device cuda --seconds 3 --out /tmp/telemetry.csv
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from sharebench.errors import UserError
from sharebench.telemetry.sampler import make_sampler


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sharebench.telemetry", description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu, cuda[:N] or a GPU UUID (GPU-…/MIG-…)")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--interval", type=float, default=0.1, help="sampling interval (s)")
    p.add_argument("--out", help="raw samples CSV")
    a = p.parse_args(argv)
    dev = a.device.strip()
    if dev == "cpu":
        info = {"kind": "cpu", "backend": "cpu", "spec": "cpu"}
    elif dev.startswith("cuda"):
        info = {"kind": "gpu", "backend": "cuda", "spec": dev}
    elif dev.upper().startswith(("GPU-", "MIG-")):
        info = {"kind": "gpu", "backend": "cuda", "uuid": dev}
    else:
        print(f"sharebench: error: unknown device {dev!r}; allowed: cpu, cuda[:N], GPU-…/MIG-… UUID",
              file=sys.stderr)
        return 2
    try:
        sampler = make_sampler(info, interval_s=a.interval, out_path=a.out).start()
    except UserError as exc:
        print(f"sharebench: error: {exc}", file=sys.stderr)
        return 2
    time.sleep(max(0.0, a.seconds))
    print(json.dumps(sampler.stop(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
