"""Replica process entry used by the sharing executors:

    python -m sharebench.workloads.replica --config CFG.json --out REC.json
    python -m sharebench.workloads.replica --serve     # a warm replica: cell after cell

A warm replica (:class:`sharebench.kernel.run.WarmRunner`) reads one job per line on stdin, a JSON
object ``{"config": CFG.json, "out": REC.json, "log": LOG}``; for each it sends its output to LOG, runs
the cell and writes the record to REC.json (the parent waits for that file); it ends at end of input.
``{"prime": CFG.json, "out": F, "log": LOG}`` sets up without tracking and writes "ok" (or the error) to F.

Writes the RunRecord to REC.json as the document of kind ``"record"`` (``sharebench.results.store``;
read it back with ``read_json(path, "record")``); on failure writes ``{"error": "<one line>"}``
there, of the same kind, and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.kernel.config import RunConfig
from sharebench.kernel.run import WarmRunner, pin_cpus, run_replica
from sharebench.results.store import write_json
from sharebench.workloads.protocol import run_exec

# failures a user can act on from the one-line message alone: no traceback on stderr
EXPECTED_ERRORS = (UserError, KeyboardInterrupt, SystemExit, OSError, ValueError)


def one_line_error(exc: BaseException) -> str:
    """The failure as the one line the record keeps."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, UserError):
        return str(exc)
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def run_one(config: str, out: str, warm: WarmRunner | None = None) -> int:
    """Run one replica from its config file and write its record (or its error); the exit status."""
    try:
        cfg = RunConfig.from_json(config)
        pin_cpus(cfg.cpus)  # before anything creates an OpenCL or OpenMP runtime
        run = run_exec if cfg.engine == "exec" else warm.run if warm is not None else run_replica
        rec = run(cfg)
    except BaseException as exc:  # noqa: BLE001 - any failure becomes the one-line error record
        msg = one_line_error(exc)
        write_json(out, "record", {"error": msg})
        print(f"replica: error: {msg}", file=sys.stderr)
        if not isinstance(exc, EXPECTED_ERRORS):
            traceback.print_exc()
        return 1
    write_json(out, "record", rec.to_dict())
    return 0


def prime_one(config: str, out: str, warm: WarmRunner) -> None:
    """Set up as for the run ``config`` (device, engine, particles, warm-up), track nothing; write "ok"
    or the one-line error to ``out``."""
    try:
        cfg = RunConfig.from_json(config)
        pin_cpus(cfg.cpus)
        warm.prime(cfg)
        msg = "ok"
    except BaseException as exc:  # noqa: BLE001 - the pool ends a replica that could not set up
        msg = one_line_error(exc)
        print(f"replica: error: {msg}", file=sys.stderr)
    write_atomic(out, msg + "\n")


def redirect_output(log: str) -> None:
    """Send this process's stdout and stderr (Python's and the libraries') to the file log."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)


def serve(jobs=None) -> int:
    """A warm replica: the jobs on stdin (a JSON object a line), one after the other, in this process."""
    warm = WarmRunner()
    for line in jobs if jobs is not None else sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        if job.get("log"):
            redirect_output(job["log"])
        if job.get("prime"):
            prime_one(job["prime"], job["out"], warm)
        else:
            run_one(job["config"], job["out"], warm)
        sys.stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one replica (or serve cell after cell with --serve); the exit status."""
    ap = argparse.ArgumentParser(prog="python -m sharebench.workloads.replica", description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="RunConfig as JSON")
    ap.add_argument("--out", help="where to write the RunRecord JSON")
    ap.add_argument("--serve", action="store_true", help="a warm replica: jobs on stdin, one JSON object a line")
    args = ap.parse_args(argv)
    if args.serve:
        return serve()
    if not args.config or not args.out:
        ap.error("--config and --out are needed (or --serve)")
    return run_one(args.config, args.out)


if __name__ == "__main__":
    sys.exit(main())
