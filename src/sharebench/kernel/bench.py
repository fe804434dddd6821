"""Speed benchmark: engines x devices x particle counts, each a few full runs.

:func:`run_bench` takes a :class:`BenchConfig` and writes ``bench.json`` (the document of kind
``"bench"``, ``sharebench.results.store``: the command, every raw record, and a summary per cell:
median and best tracking time and element passes per second) and ``bench.md`` (the summary as a
table) into the output folder. A cell that cannot run (an engine that does not build on a device)
is kept in the summary with its one-line reason instead of figures.
"""

from __future__ import annotations

import contextlib
import platform
import socket
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sharebench.devices import check_spec
from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.kernel.config import RunConfig
from sharebench.kernel.engines import ENGINES, check_engine
from sharebench.kernel.run import run_replica
from sharebench.parse import counts, cpu_set, whole_number
from sharebench.results.store import write_json


def names(values: str | list[str] | tuple[str, ...]) -> list[str]:
    """``"a, b"`` or a list -> ["a", "b"] (blanks dropped)."""
    items = values.split(",") if isinstance(values, str) else list(values)
    return [str(v).strip() for v in items if str(v).strip()]


@dataclass
class BenchConfig:
    """One benchmark: every engine on every device at every particle count, ``repeats`` runs each.

    ``engines``, ``devices`` and ``particles`` take a list or a comma-separated string (particles
    also ``5e6``-style numbers); ``cpus`` a list or ``"0-3,6"``. The other run options are those of
    :class:`RunConfig`. ``command``: the command line that asked for the benchmark, recorded in
    bench.json. Validated on construction (one-line UserErrors)."""

    engines: list[str] = field(default_factory=lambda: ["simpletrack"])
    devices: list[str] = field(default_factory=lambda: ["auto"])
    particles: list[int] = field(default_factory=lambda: [100_000])
    turns: int = 10
    repeats: int = 3
    out_dir: Path = Path("sharebench-results/bench")
    lattice: str | None = None  # None: the generated LHC-like ring
    seed: int = 1
    nemitt_x: float = 2.5e-6  # normalised emittance [m]
    nemitt_y: float = 2.5e-6
    sigma_z: float = 0.05  # [m]
    sigma_delta: float = 1e-4
    warmup_turns: int = 1
    mem_limit_bytes: int | None = None
    cpus: list[int] | None = None
    block_size: int = 128
    optimize: bool = True
    command: str = ""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Normalise the lists and numbers; UserError naming the first bad value and what is allowed."""
        self.engines = [check_engine(e) for e in names(self.engines)]
        if not self.engines:
            raise UserError(f"no engines given; allowed: a comma-separated list of {', '.join(ENGINES)}")
        self.devices = [check_spec(d) for d in names(self.devices)]
        if not self.devices:
            raise UserError("no devices given; allowed: a comma-separated list such as cpu,cuda:0")
        self.particles = counts("particle counts", self.particles, "100000,1000000")
        self.turns = whole_number("turns", self.turns, 1)
        self.repeats = whole_number("repeats", self.repeats, 1)
        if isinstance(self.cpus, str):
            self.cpus = cpu_set(self.cpus)
        self.out_dir = Path(self.out_dir)
        self.command = str(self.command)
        self.run_config(self.engines[0], self.devices[0], self.particles[0])  # the run options, as a run checks them

    def run_config(self, engine: str, device: str, particles: int, replica: int = 0) -> RunConfig:
        """The RunConfig of one run of the benchmark."""
        return RunConfig(
            engine=engine,
            device=device,
            lattice=self.lattice,
            particles=particles,
            turns=self.turns,
            seed=self.seed,
            nemitt_x=self.nemitt_x,
            nemitt_y=self.nemitt_y,
            sigma_z=self.sigma_z,
            sigma_delta=self.sigma_delta,
            warmup_turns=self.warmup_turns,
            mem_limit_bytes=self.mem_limit_bytes,
            cpus=self.cpus,
            replica=replica,
            optimize=self.optimize,
            block_size=self.block_size,
        )


def summarize(records: list[dict]) -> dict:
    """One cell's figures from its records: median and best tracking time and throughput."""
    track = [r["track_s"] for r in records]
    eps = [r["element_passes_per_s"] for r in records]
    ptps = [r["particle_turns_per_s"] for r in records]
    r0 = records[0]
    return {
        "engine": r0["engine"],
        "device": r0["device"],
        "device_name": r0["device_name"],
        "context": r0["context"],
        "particles": r0["particles"],
        "turns": r0["turns"],
        "elements": r0["elements"],
        "repeats": len(records),
        "track_s_median": statistics.median(track),
        "track_s_min": min(track),
        "element_passes_per_s_median": statistics.median(eps),
        "element_passes_per_s_best": max(eps),
        "particle_turns_per_s_median": statistics.median(ptps),
        "survived_min": min(r["survived"] for r in records),
        "compile_s_first": r0["compile_s"],
        "setup_s_median": statistics.median(r["setup_s"] for r in records),
    }


def to_markdown(doc: dict) -> str:
    """The summary of a bench document as a markdown table, under the command and the host."""
    lines = [
        f"Command: `{doc['command']}`  ",
        f"Host: {doc['host']}, {doc['date_utc']}; lattice: {doc['lattice']}",
        "",
        "| engine | device | name | particles | turns | elements | track s (median) | element passes/s (median) "
        "| particle-turns/s | survived | repeats |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in doc["summary"]:
        if "error" in s:
            lines.append(
                f"| {s['engine']} | {s['device']} | | {s['particles']:,} | | | not run: {s['error']} | | | | |"
            )
            continue
        lines.append(
            f"| {s['engine']} | {s['device']} | {s['device_name']} | {s['particles']:,} | {s['turns']} "
            f"| {s['elements']:,} | {s['track_s_median']:.3f} | {s['element_passes_per_s_median']:.3e} "
            f"| {s['particle_turns_per_s_median']:.3e} "
            f"| {s['survived_min']:,} | {s['repeats']} |"
        )
    return "\n".join(lines) + "\n"


def run_cell(config: BenchConfig, engine: str, device: str, particles: int) -> list[dict]:
    """The ``repeats`` records of one cell (UserError when it cannot run); progress on stderr."""
    recs = []
    for rep in range(config.repeats):
        cfg = config.run_config(engine, device, particles, rep)
        with contextlib.redirect_stdout(sys.stderr):  # xtrack's chatter
            rec = run_replica(cfg).to_dict()
        recs.append(rec)
        print(
            f"bench: {engine} {rec['device']} n={particles:,} rep {rep}: track {rec['track_s']:.3f} s, "
            f"{rec['element_passes_per_s']:.3e} element-passes/s",
            file=sys.stderr,
            flush=True,
        )
    return recs


def write_bench(out_dir: Path, doc: dict) -> None:
    """bench.json (kind "bench") and bench.md in ``out_dir``, each whole or not at all."""
    write_json(out_dir / "bench.json", "bench", doc)
    write_atomic(out_dir / "bench.md", to_markdown(doc))


def run_bench(config: BenchConfig) -> dict[str, Any]:
    """Run every cell of the benchmark, writing bench.json and bench.md after each; returns the
    document (as ``read_json(out_dir / "bench.json", "bench")`` reads it back)."""
    config.out_dir.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {
        "command": config.command,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "lattice": config.lattice or "generated LHC-like ring",
        "records": [],
        "summary": [],
    }
    for engine in config.engines:
        for device in config.devices:
            for n in config.particles:
                try:
                    recs = run_cell(config, engine, device, n)
                except UserError as exc:
                    doc["summary"].append({"engine": engine, "device": device, "particles": n, "error": str(exc)})
                    print(f"bench: {engine} {device} n={n:,}: not run: {exc}", file=sys.stderr, flush=True)
                    continue
                doc["records"] += recs
                doc["summary"].append(summarize(recs))
                write_bench(config.out_dir, doc)
    write_bench(config.out_dir, doc)
    return doc
