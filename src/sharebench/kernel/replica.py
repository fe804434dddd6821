"""Replica process entry used by the sharing executors:

    python -m sharebench.kernel.replica --config CFG.json --out REC.json

Writes the RunRecord to REC.json as the document of kind ``"record"`` (``sharebench.results.store``;
read it back with ``read_json(path, "record")``); on failure writes ``{"error": "<one line>"}``
there, of the same kind, and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from sharebench.errors import UserError
from sharebench.kernel.config import RunConfig
from sharebench.kernel.protocol import run_exec
from sharebench.kernel.run import pin_cpus, run_replica
from sharebench.results.store import write_json

# failures a user can act on from the one-line message alone: no traceback on stderr
EXPECTED_ERRORS = (UserError, KeyboardInterrupt, SystemExit, OSError, ValueError)


def one_line_error(exc: BaseException) -> str:
    """The failure as the one line the record keeps."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, UserError):
        return str(exc)
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def main(argv: list[str] | None = None) -> int:
    """Run one replica from its config file and write its record (or its error); the exit status."""
    ap = argparse.ArgumentParser(prog="python -m sharebench.kernel.replica", description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="RunConfig as JSON")
    ap.add_argument("--out", required=True, help="where to write the RunRecord JSON")
    args = ap.parse_args(argv)
    try:
        cfg = RunConfig.from_json(args.config)
        pin_cpus(cfg.cpus)  # before anything creates an OpenCL or OpenMP runtime
        rec = run_exec(cfg) if cfg.engine == "exec" else run_replica(cfg)
    except BaseException as exc:  # noqa: BLE001 - any failure becomes the one-line error record
        msg = one_line_error(exc)
        write_json(args.out, "record", {"error": msg})
        print(f"replica: error: {msg}", file=sys.stderr)
        if not isinstance(exc, EXPECTED_ERRORS):
            traceback.print_exc()
        return 1
    write_json(args.out, "record", rec.to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
