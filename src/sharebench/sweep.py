"""A sweep: sharing modes x particle counts x repeats, written as it goes.

``run_sweep(config, out_dir)`` validates everything first (one-line UserError
before any replica starts), then runs the cells in the order
repeat -> particle count -> mode (so slow drifts of the machine spread over
all modes), appending each cell's rows to ``results.csv`` as soon as the cell
ends. Repeat 0 is the discarded warm-up. Ctrl-C stops the running cell; what is
on disk stays, and ``--resume`` continues the folder later.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from sharebench.errors import UserError
from sharebench.modes import Mode, parse_modes
from sharebench.results import COLUMN_NAMES, EXTRA_PREFIX, RESULTS_CSV, ResultsWriter, load_results, write_machine
from sharebench.sharing import CellPlan, device_dict, plan_cell, run_cell

# `sharebench run` with no options: sizes per device class that finish in a few minutes
# (CPU: 5.5 min for the whole default sweep on 2 cores of an AMD EPYC, docs/results/cpu-example; GPU: the
# kernel's H200 figure, 1e6 particles x 10 turns in 1.45 s with CUDA (docs/results/kernel.md), makes the
# largest exclusive run here about 3 s)
DEFAULT_PARTICLES = {"cpu": [500, 1000], "gpu": [1_000_000, 2_000_000]}
DEFAULT_TURNS = {"cpu": 10, "gpu": 10}
DEFAULT_REPEATS = 3


@dataclass
class SweepConfig:
    modes: list[str] | None = None          # None: the default set for the device
    particles: list[int] | None = None      # None: the default sizes for the device class
    turns: int | None = None                # None: the default for the device class
    repeats: int = DEFAULT_REPEATS          # measured repeats per cell
    warmup_repeats: int = 1                 # discarded warm-up repeats before them
    device: str = "auto"
    engine: str = "simpletrack"
    lattice: str | None = None              # None: the generated LHC-like ring
    seed: int = 1
    ready_timeout_s: float = 900.0          # barrier: longest setup (build, compile) allowed
    run_timeout_s: float | None = None      # longest tracking allowed per cell (None: no limit)
    telemetry_interval_s: float | None = 0.1  # None: no telemetry sampler
    resume: bool = False                    # continue an existing results folder
    stop_after_s: float | None = None       # start no new cell after this many seconds (resume later)
    report: bool = True                     # build report.md/html at the end
    progress: bool = True
    command: list[str] | None = None        # recorded in machine.json (default: sys.argv)
    run_options: dict[str, Any] = field(default_factory=dict)  # extra RunConfig fields (nemitt_x, ...)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class SweepPlan:
    config: SweepConfig
    device: dict[str, Any]
    modes: list[Mode]
    plans: dict[str, CellPlan]
    particles: list[int]
    turns: int
    notes: list[str]

    def cells(self) -> list[tuple[int, int, Mode]]:
        """(repeat, particles, mode) in run order; repeat 0 is the warm-up."""
        first = 1 - self.config.warmup_repeats
        return [(r, p, m) for r in range(first, self.config.repeats + 1) for p in self.particles for m in self.modes]


def describe_plan(plan: SweepPlan) -> str:
    """What a sweep would run, and its cost in exclusive-run equivalents (a cell of N replicas lasts
    about N exclusive runs when sharing is fair and lossless)."""
    d, c = plan.device, plan.config
    per = sum(plan.plans[m.label].n for m in plan.modes)
    reps = c.repeats + c.warmup_repeats
    lines = [
        f"device:    {d.get('spec')} ({d.get('name')}; {d.get('kind')}, {d.get('backend')})",
        f"engine:    {c.engine}, lattice {c.lattice or 'generated LHC-like ring'}",
        "modes:     " + ", ".join(f"{m.label} ({plan.plans[m.label].n} replica{'s' if plan.plans[m.label].n > 1 else ''})"
                                  for m in plan.modes),
        f"particles: {', '.join(f'{p:,}' for p in plan.particles)} per replica, {plan.turns} turns",
        f"repeats:   {c.repeats} measured + {c.warmup_repeats} warm-up",
        f"cells:     {len(plan.cells())} ({sum(plan.plans[m.label].n for _, _, m in plan.cells())} replica runs)",
        f"cost:      about {per} exclusive runs per particle count and repeat; {per * reps} per particle count "
        f"in all ({', '.join(f'{per * reps} x {p:,}' for p in plan.particles)})",
    ]
    for m in plan.modes:
        for rp in plan.plans[m.label].replicas:
            if rp.mig_uuid:
                lines.append(f"  {m.label} replica {rp.replica}: {rp.mig_uuid} ({rp.mig_profile}, {rp.sms} SMs)")
            elif rp.cpus:
                lines.append(f"  {m.label} replica {rp.replica}: cores {rp.cpus}")
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)


def default_modes(device: dict[str, Any]) -> list[str]:
    modes = ["exclusive", "timeslice:2", "timeslice:4"]
    if device.get("kind") == "cpu":
        modes.append("partition:2")
    elif device.get("kind") == "gpu":
        from sharebench.sharing import check_mps_available
        try:
            check_mps_available(device, "mps:2")
            modes.append("mps:2")
        except UserError:
            pass
    return modes


def parse_particles(text: str | list) -> list[int]:
    """"5e6,1e7,1.5e7" -> [5000000, 10000000, 15000000]; each must be a whole number > 0."""
    items = text.split(",") if isinstance(text, str) else list(text)
    out = []
    for it in items:
        s = str(it).strip().replace("_", "")
        if not s:
            continue
        try:
            v = float(s)
        except ValueError:
            raise UserError(f"bad particle count {it!r}; allowed: whole numbers > 0 such as 10000 or 5e6") from None
        if not math.isfinite(v) or v <= 0 or v != int(v):
            raise UserError(f"bad particle count {it!r}; allowed: whole numbers > 0 such as 10000 or 5e6")
        out.append(int(v))
    if not out:
        raise UserError("no particle count given; allowed: a comma-separated list such as 5e6,1e7")
    return list(dict.fromkeys(out))


def _check_int(name: str, v: Any, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise UserError(f"bad {name} {v!r}; allowed: an integer >= {lo}")
    return v


def validate(config: SweepConfig) -> SweepPlan:
    """Everything checked before anything runs; a one-line UserError otherwise."""
    from sharebench.kernel import resolve_device
    from sharebench.kernel.memory import check_engine, check_fits

    notes: list[str] = []
    check_engine(config.engine)
    _check_int("repeats", config.repeats, 1)
    _check_int("warm-up repeats", config.warmup_repeats, 0)
    if config.lattice is not None and not Path(config.lattice).is_file():
        raise UserError(f"lattice file {config.lattice!r} not found; give an Xsuite line JSON or JSON.gz")
    device = device_dict(resolve_device(config.device))
    dclass = device.get("kind", "cpu")
    particles = parse_particles(config.particles) if config.particles is not None else DEFAULT_PARTICLES[dclass]
    turns = _check_int("turns", config.turns if config.turns is not None else DEFAULT_TURNS[dclass], 1)
    modes = parse_modes(config.modes if config.modes is not None else default_modes(device))
    modes = list({m.label: m for m in modes}.values())
    if any(m.kind != "exclusive" for m in modes) and not any(m.kind == "exclusive" for m in modes) \
            and not all(m.kind == "mig" for m in modes):
        modes.insert(0, Mode("exclusive", 1))
        notes.append("added 'exclusive': every loss needs the T_1 baseline")
    plans: dict[str, CellPlan] = {}
    for m in modes:
        plans[m.label] = plan_cell(m, device)
    mem = device.get("memory_bytes")
    for m in modes:
        plan = plans[m.label]
        for p in particles:
            try:
                if m.kind == "mig":
                    for rp in plan.replicas:
                        check_fits(p, rp.memory_bytes, config.engine, what=f"memory of MIG instance {rp.mig_uuid}")
                elif mem:
                    n = plan.n
                    check_fits(p, int(mem) // n, config.engine,
                               what="device memory" if n == 1 else f"1/{n} share of the device memory ({int(mem):,} bytes)")
            except UserError as exc:
                raise UserError(f"{m.label} at {p:,} particles: {exc}") from None
    # the run config itself (engine, device grammar, emittances ...) is validated by the kernel
    _run_config(config, device, particles[0], turns)
    _check_lattice(config)
    return SweepPlan(config, device, modes, plans, particles, turns, notes)


def _check_lattice(config: SweepConfig) -> None:
    """Load (and cache, once for all replicas) the lattice: a bad file or element fails here, not per cell."""
    import contextlib

    from sharebench.kernel import lattice as lat

    with contextlib.redirect_stdout(sys.stderr):  # xtrack's loader chatter stays off our stdout
        if config.engine == "simpletrack":
            lat.get_packed(config.lattice)
        else:
            lat.get_line_cached(config.lattice)


def _run_config(config: SweepConfig, device: dict[str, Any], particles: int, turns: int):
    from sharebench.kernel import RunConfig

    opts = dict(config.run_options)
    return RunConfig(engine=config.engine, device=device.get("spec", config.device), lattice=config.lattice,
                     particles=particles, turns=turns, seed=config.seed, **opts)


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", label.replace("@", "at"))


def cell_id(mode: Mode, particles: int, repeat: int) -> str:
    return f"{mode.label}_p{particles}_r{repeat}"


def _check_resume(out: Path, plan: SweepPlan, notes: list[str]) -> set[str]:
    """Cells already measured (ok) in out; refuses to mix another device model or class into the folder."""
    if not (out / RESULTS_CSV).exists():
        return set()
    df = load_results(out)
    dev = plan.device
    seen = df[["device_class", "backend", "device_name"]].drop_duplicates()
    def model(name) -> str:  # "NVIDIA H200 MIG 1g.18gb" is an H200
        return re.sub(r"\s+MIG\s.*$", "", str(name or "")).strip()

    for r in seen.itertuples():
        if (r.device_class, r.backend) != (dev.get("kind"), dev.get("backend")) or \
                (model(r.device_name) and model(dev.get("name")) and model(r.device_name) != model(dev.get("name"))):
            raise UserError(f"{out} holds results measured on {r.device_name or '?'} ({r.backend}, {r.device_class}); "
                            f"this run's device is {dev.get('name')} ({dev.get('backend')}, {dev.get('kind')}): "
                            "use another --out (and compare the two with sharebench report --compare)")
    uuids = sorted({u for u in df["parent_uuid"] if isinstance(u, str) and u})
    if dev.get("uuid") and uuids and dev["uuid"] not in uuids and dev.get("kind") == "gpu":
        notes.append(f"resumed on another physical device of the same model ({dev['uuid']}; before: "
                     f"{', '.join(uuids)})")
    return set(df.loc[df["cell_status"] == "ok", "cell_id"])


def _hook(module: str, attr: str) -> Callable | None:
    try:
        mod = __import__(module, fromlist=[attr])
        return getattr(mod, attr)
    except (ImportError, AttributeError):
        return None


def run_sweep(config: SweepConfig, out_dir: Path | str, *, on_cell: Callable[[list[dict]], None] | None = None) -> Path:
    """Run the sweep into out_dir (results.csv, machine.json, cells/, and the report); returns out_dir."""
    out = Path(out_dir)
    if (out / RESULTS_CSV).exists() and not config.resume:
        raise UserError(f"{out} already holds {RESULTS_CSV}; use --resume to continue it, or another --out")
    plan = validate(config)
    out.mkdir(parents=True, exist_ok=True)
    writer = ResultsWriter(out)
    sweep_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    notes = list(plan.notes)
    done = _check_resume(out, plan, notes) if config.resume else set()
    _record_sweep(out, sweep_id, config, plan)
    # a resumed folder keeps its first machine.json / provenance.json; later sessions add their own
    suffix = f"-{sweep_id}" if (out / "machine.json").exists() else ""
    write_machine(out, plan.device, config.command if config.command is not None else list(sys.argv),
                  name=f"machine{suffix}.json")
    notes += _provenance(out, plan, config, name=f"provenance{suffix}.json")

    cells = [c for c in plan.cells() if cell_id(c[2], c[1], c[0]) not in done]
    if done:
        notes.append(f"resumed: {len(done)} cell(s) already on disk were kept and not re-run")
    make_sampler = _hook("sharebench.telemetry", "make_sampler") if config.telemetry_interval_s else None
    if config.telemetry_interval_s and make_sampler is None:
        notes.append("telemetry: sharebench.telemetry.make_sampler not available; no tel_* columns")
    bar = _progress(cells, plan, config.progress)
    t0 = time.monotonic()
    try:
        for i, (repeat, particles, mode) in enumerate(cells):
            if config.stop_after_s is not None and time.monotonic() - t0 > config.stop_after_s:
                msg = (f"stopped after {config.stop_after_s:g} s (--stop-after): {len(cells) - i} of {len(cells)} "
                       f"cell(s) not run; continue with --resume --out {out}")
                notes.append(msg)
                print(f"sharebench: {msg}", file=sys.stderr)
                break
            cid = cell_id(mode, particles, repeat)
            if bar is not None:
                bar.set_postfix_str(f"{cid}", refresh=True)
            rows = _run_one(plan, config, out, sweep_id, cid, mode, particles, repeat, make_sampler, notes)
            writer.append(rows)
            if on_cell is not None:
                on_cell(rows)
            if bar is not None:
                bar.update(_weight(plan, mode, particles))
    finally:
        if bar is not None:
            bar.close()
        if hasattr(os, "getloadavg"):  # how busy the machine was: other jobs distort shared-mode timings
            notes.append("load average at the end: " + " / ".join(f"{v:.2f}" for v in os.getloadavg())
                         + " (1, 5, 15 min)")
        if notes:
            with (out / "notes.txt").open("a") as f:
                f.write("".join(f"{sweep_id}: {n}\n" for n in dict.fromkeys(notes)))
    if config.report and (out / RESULTS_CSV).exists():
        from sharebench.report import build_report
        build_report(out)
    return out


def _weight(plan: SweepPlan, mode: Mode, particles: int) -> float:
    return plan.plans[mode.label].n * particles * plan.turns / 1e6


def _progress(cells, plan: SweepPlan, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    total = sum(_weight(plan, m, p) for _, p, m in cells)
    return tqdm(total=total, unit="M particle-turns", unit_scale=False, dynamic_ncols=True, file=sys.stderr,
                bar_format="{l_bar}{bar}| {n:.3g}/{total:.3g} {unit} [{elapsed}<{remaining}{postfix}]")


def _run_one(plan: SweepPlan, config: SweepConfig, out: Path, sweep_id: str, cid: str, mode: Mode, particles: int,
             repeat: int, make_sampler, notes: list[str]) -> list[dict[str, Any]]:
    cell_plan = plan.plans[mode.label]
    cdir = out / "cells" / (_safe(cid) + ("" if repeat > 0 else "_warmup"))
    cfg = _run_config(config, plan.device, particles, plan.turns)
    sampler = None
    if make_sampler is not None:
        try:
            sampler = make_sampler(plan.device, interval_s=config.telemetry_interval_s,
                                   out_path=cdir / "telemetry.csv")
            cdir.mkdir(parents=True, exist_ok=True)
            sampler.start()
        except Exception as exc:  # telemetry is optional: the measurement goes on without it
            notes.append(f"telemetry: sampler failed to start ({type(exc).__name__}: {exc})")
            sampler = None
    summary: dict[str, Any] = {}
    try:
        recs = run_cell(mode, cfg, cdir, plan=cell_plan, ready_timeout_s=config.ready_timeout_s,
                        run_timeout_s=config.run_timeout_s)
    finally:
        if sampler is not None:
            try:
                summary = dict(sampler.stop() or {})
            except Exception as exc:
                notes.append(f"telemetry: sampler failed to stop ({type(exc).__name__}: {exc})")
    summary = {k: v for k, v in summary.items() if k.startswith(EXTRA_PREFIX)}
    lattice = Path(config.lattice).name if config.lattice else "generated"
    rows = []
    for rec in recs:
        row = {k: v for k, v in rec.items() if k in COLUMN_NAMES}
        row.setdefault("engine", config.engine)
        row.setdefault("particles", particles)
        row.setdefault("turns", plan.turns)
        row.update(sweep_id=sweep_id, cell_id=cid, mode=cell_plan.mode.label, mode_kind=mode.kind,
                   replicas=cell_plan.n, repeat=repeat, warmup=repeat <= 0,
                   device_class=plan.device.get("kind", ""), backend=plan.device.get("backend", ""),
                   lattice=lattice, **summary)
        rows.append(row)
    return rows


def _record_sweep(out: Path, sweep_id: str, config: SweepConfig, plan: SweepPlan) -> None:
    path = out / "sweep.json"
    data = {"sweeps": []}
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError:
            data = {"sweeps": []}
    data["sweeps"].append({"sweep_id": sweep_id, "config": config.to_dict(), "device": plan.device,
                           "modes": [m.label for m in plan.modes], "particles": plan.particles,
                           "turns": plan.turns, "started_unix": time.time()})
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")


def _provenance(out: Path, plan: SweepPlan, config: SweepConfig, name: str = "provenance.json") -> list[str]:
    collect = _hook("sharebench.provenance", "collect")
    if collect is None:
        return ["provenance: sharebench.provenance.collect not available; no provenance.json"]
    try:
        prov = collect(device_info=plan.device, command=config.command if config.command is not None else sys.argv,
                       config=config.to_dict())
    except Exception as exc:  # optional: never costs the measurement
        return [f"provenance: collect failed ({type(exc).__name__}: {exc})"]
    (out / name).write_text(json.dumps(prov, indent=2, default=str) + "\n")
    return []
