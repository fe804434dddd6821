"""Speed benchmark: engines x devices x particle counts, each a few full runs.

Writes ``bench.json`` (schema_version 1: the command, every raw record, and a
summary per cell: median and best tracking time and element passes per
second) and ``bench.md`` (the summary as a table) into the output folder.
A cell that cannot run (an engine that does not build on a device) is kept in
the summary with its one-line reason instead of figures.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shlex
import socket
import statistics
import sys
import time
from pathlib import Path

from sharebench.errors import UserError

SCHEMA_VERSION = 1


def _ints(text: str) -> list[int]:
    try:
        out = [int(float(v)) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise UserError(f"bad particle counts {text!r}: allowed is a comma list of integers like 100000,1000000") from None
    if not out or min(out) < 1:
        raise UserError(f"bad particle counts {text!r}: allowed is a comma list of positive integers")
    return out


def summarize(records: list[dict]) -> dict:
    track = [r["track_s"] for r in records]
    eps = [r["element_passes_per_s"] for r in records]
    ptps = [r["particle_turns_per_s"] for r in records]
    r0 = records[0]
    return {
        "engine": r0["engine"], "device": r0["device"], "device_name": r0["device_name"], "context": r0["context"],
        "particles": r0["particles"], "turns": r0["turns"], "elements": r0["elements"], "repeats": len(records),
        "track_s_median": statistics.median(track), "track_s_min": min(track),
        "element_passes_per_s_median": statistics.median(eps), "element_passes_per_s_best": max(eps),
        "particle_turns_per_s_median": statistics.median(ptps), "survived_min": min(r["survived"] for r in records),
        "compile_s_first": r0["compile_s"], "setup_s_median": statistics.median(r["setup_s"] for r in records),
    }


def to_markdown(doc: dict) -> str:
    lines = [
        f"Command: `{doc['command']}`  ",
        f"Host: {doc['host']}, {doc['date_utc']}; lattice: {doc['lattice']}",
        "",
        "| engine | device | name | particles | turns | elements | track s (median) | element passes/s (median) | particle-turns/s | survived | repeats |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in doc["summary"]:
        if "error" in s:
            lines.append(f"| {s['engine']} | {s['device']} | | {s['particles']:,} | | | not run: {s['error']} | | | | |")
            continue
        lines.append(
            f"| {s['engine']} | {s['device']} | {s['device_name']} | {s['particles']:,} | {s['turns']} | {s['elements']:,} "
            f"| {s['track_s_median']:.3f} | {s['element_passes_per_s_median']:.3e} | {s['particle_turns_per_s_median']:.3e} "
            f"| {s['survived_min']:,} | {s['repeats']} |"
        )
    return "\n".join(lines) + "\n"


def run_bench(args) -> dict:
    from sharebench.kernel.cli import _config
    from sharebench.kernel.run import run_replica

    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    devices = [d.strip() for d in (args.devices or args.device).split(",") if d.strip()]
    counts = _ints(args.particles)
    if args.repeats < 1:
        raise UserError(f"bad repeats {args.repeats}: an integer >= 1 is allowed")
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    doc = {
        "schema_version": SCHEMA_VERSION,
        "command": "sharebench " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv and "sharebench" in sys.argv[0] else " ".join(shlex.quote(a) for a in sys.argv),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "lattice": args.lattice or "generated LHC-like ring",
        "records": [],
        "summary": [],
    }
    for engine in engines:
        for device in devices:
            for n in counts:
                recs = []
                try:
                    for rep in range(args.repeats):
                        cfg = _config(args, n, args.turns, engine=engine, device=device)
                        cfg.replica = rep
                        with contextlib.redirect_stdout(sys.stderr):  # xtrack's chatter
                            rec = run_replica(cfg).to_dict()
                        recs.append(rec)
                        print(f"bench: {engine} {rec['device']} n={n:,} rep {rep}: track {rec['track_s']:.3f} s, "
                              f"{rec['element_passes_per_s']:.3e} element-passes/s", file=sys.stderr, flush=True)
                except UserError as exc:
                    doc["summary"].append({"engine": engine, "device": device, "particles": n, "error": str(exc)})
                    print(f"bench: {engine} {device} n={n:,}: not run: {exc}", file=sys.stderr, flush=True)
                    continue
                doc["records"] += recs
                doc["summary"].append(summarize(recs))
                _write(out_dir, doc)
    _write(out_dir, doc)
    print(to_markdown(doc))
    return doc


def _write(out_dir: Path, doc: dict) -> None:
    tmp = out_dir / f"bench.json.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(doc, indent=1))
    os.replace(tmp, out_dir / "bench.json")
    (out_dir / "bench.md").write_text(to_markdown(doc))
