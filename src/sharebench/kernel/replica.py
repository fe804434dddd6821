"""Replica process entry used by the sharing executors:

    python -m sharebench.kernel.replica --config CFG.json --out REC.json

Writes the RunRecord as JSON to REC.json; on failure writes
``{"error": "<one line>"}`` there and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _write(path: str, obj: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as fh:
        json.dump(obj, fh, indent=1)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sharebench.kernel.replica", description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="RunConfig as JSON")
    ap.add_argument("--out", required=True, help="where to write the RunRecord JSON")
    args = ap.parse_args(argv)
    try:
        # pin before anything imports an OpenCL runtime
        with open(args.config) as fh:
            raw = json.load(fh)
        if isinstance(raw, dict) and raw.get("cpus"):
            from sharebench.kernel.run import pin_cpus

            pin_cpus(raw["cpus"])
        from sharebench.kernel.config import RunConfig
        from sharebench.kernel.run import run_replica

        rec = run_replica(RunConfig.from_dict(raw) if isinstance(raw, dict) else RunConfig.from_json(args.config))
    except BaseException as exc:  # noqa: BLE001 - any failure becomes the one-line error record
        from sharebench.errors import UserError

        if isinstance(exc, KeyboardInterrupt):
            msg = "interrupted"
        elif isinstance(exc, UserError):
            msg = str(exc)
        else:
            msg = " ".join(f"{type(exc).__name__}: {exc}".split())
        _write(args.out, {"error": msg})
        print(f"replica: error: {msg}", file=sys.stderr)
        if not isinstance(exc, (UserError, KeyboardInterrupt, SystemExit, OSError, ValueError)):
            import traceback

            traceback.print_exc()
        return 1
    _write(args.out, rec.to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
