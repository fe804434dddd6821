"""A sweep within a node-time budget: what fits, planned before anything runs, and the plan that then runs.

``--budget DURATION`` (:func:`sharebench.parse.parse_duration`) is the node time an answer may cost, from the command's
start to its report. The plan (:func:`plan_within`) comes from

* a calibration (:class:`Calibration`): the exclusive rate per particle count, from one short
  exclusive run per size on this machine (:func:`calibrate_particles`, what the CPU default's
  ``sweep.calibrate`` does for one size), or from the committed results of a GPU model
  (:func:`recorded_calibration`: element-passes/s of its exclusive cells, and the span of each mode's
  cells against N·T_1), "planned from recorded rates of <model>";
* the measured overheads (:class:`Overheads`): the gap between cells, the set-up before the first
  cell, the report after the last (``tools/cell_overhead.py`` defines them; :func:`measured_overheads`
  reads them from results folders).

A cell of mode m (N replicas) at P particles is predicted to cost N·T_1(P)·f_m + the per-cell gap,
f_m the mode's recorded span / (N·T_1) (1 where none is recorded). The plan takes, in priority order,
every mode at the largest size at which all of them fit ``min_repeats`` times (with the warm-ups),
then further sizes, largest first, mode by mode (headline modes first: exclusive, timeslice:2,
mps:2, then the rest as given), keeping :data:`ADAPTIVE_RESERVE` of the budget for adaptive repeats
when ``max_repeats`` allows them. With no sizes given it picks the one largest size (two significant
digits) at which every mode fits. A budget that cannot hold one cell of every mode is a UserError
saying what does fit. The plan is a frozen :class:`BudgetPlan`: ``describe()`` is what ``--dry-run``
prints, ``cells()`` what then runs, in ``sweep.plan``'s order (repeat -> particle count -> mode);
after each cell ``sweep.adaptive.next_cells`` says what runs next.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sharebench.analysis.cost import DEFAULT_OVERHEADS as DEFAULT_OVERHEADS
from sharebench.analysis.cost import Overheads as Overheads
from sharebench.analysis.cost import patterned_cell, report_seconds
from sharebench.analysis.samples import cell_samples
from sharebench.analysis.sequential import DEFAULT_MAX_REPEATS, DEFAULT_PRECISION, GAIN_THRESHOLD_LOSS_PCT, MIN_REPEATS
from sharebench.errors import UserError
from sharebench.gpus import emulated_layout, layout_profiles
from sharebench.gpus import gpu_model as find_gpu_model
from sharebench.kernel import RunConfig, run_replica
from sharebench.modes import BASELINE, Mode, is_baseline, parse_mode
from sharebench.parse import fmt_duration, parse_duration, whole_number
from sharebench.patterns import BATCH, parse_pattern
from sharebench.results import load_results, read_sweeps
from sharebench.sharing import cell_run, run_cell
from sharebench.sweep.calibrate import MAX_PARTICLES, PROBE_PARTICLES, auto_sized
from sharebench.sweep.grid import CellGrid
from sharebench.sweep.plan import MAX_REPEATS, Cell, SweepConfig, SweepPlan, alone_cells, is_awake, validate
from sharebench.workloads import Workload
from sharebench.workloads.job import ReplicaJob

HEADLINE_MODES = (BASELINE, "timeslice:2", "mps:2")
# the smallest size a budget picks by itself (the CPU default without a budget stops at the probe's 1,000): a
# slow CPU (the generated LHC-like ring, 1,000 particles x 10 turns in 3.5-7.5 s on the 2-core dev machine)
# fits every default mode into 90 s only below it
MIN_AUTO_PARTICLES = 100
# where ``--dry-run --gpu-model`` and a pipeline's budget on a node find recorded results: the checkout's
# committed campaigns, or the folder SHAREBENCH_RECORDED names (the project image sets it: its copy of them)
RECORDED_ENV = "SHAREBENCH_RECORDED"
RECORDED_ROOT = Path(os.environ.get(RECORDED_ENV) or Path(__file__).resolve().parents[3] / "results")
ADAPTIVE_RESERVE = 0.25  # of the time left after the set-up: kept for repeats beyond the minimum


@dataclass(frozen=True)
class BudgetOptions:
    """What ``--budget/--precision/--max-repeats`` ask for; ``budget_s`` None: no budget (adaptive
    repeats alone). Thresholds: the values a cell's interval must lie clear of (loss points; slowdown)."""

    budget_s: float | None = None
    precision: float = DEFAULT_PRECISION  # half-width of a loss interval, points (of T_1: % of it)
    max_repeats: int = DEFAULT_MAX_REPEATS
    min_repeats: int = MIN_REPEATS
    loss_thresholds: tuple[float, ...] = (GAIN_THRESHOLD_LOSS_PCT,)
    slowdown_thresholds: tuple[float, ...] = ()


def budget_options(
    budget: str | float | None,
    precision: str | float = DEFAULT_PRECISION,
    max_repeats: str | int = DEFAULT_MAX_REPEATS,
    *,
    target_slowdown: float | None = None,
) -> BudgetOptions:
    """The options as typed, checked: a one-line UserError for a bad duration, a precision <= 0, or
    max-repeats below the minimum (3)."""
    budget_s = None if budget is None else parse_duration(budget)
    try:
        p = float(precision)
    except (TypeError, ValueError):
        p = math.nan
    if not math.isfinite(p) or p <= 0:
        raise UserError(f"bad --precision {precision!r}; allowed: points of loss > 0, such as 1 or 0.5")
    reps = whole_number("--max-repeats", max_repeats, MIN_REPEATS, MAX_REPEATS)
    slow = () if target_slowdown is None else (float(target_slowdown),)
    return BudgetOptions(budget_s, p, reps, MIN_REPEATS, (GAIN_THRESHOLD_LOSS_PCT,), slow)


@dataclass(frozen=True)
class Calibration:
    """Exclusive rates per particle count (element-passes/s; ``elements`` 1: particle-turns/s), each
    mode's span against N·T_1 (``factors``), where they come from, and the time the calibration took."""

    turns: int
    elements: int
    rates: Mapping[int, float]
    source: str
    factors: Mapping[str, float] = field(default_factory=dict)
    spent_s: float = 0.0
    workload: Workload | None = None  # a patterned one: cells cost their bursts (analysis.cost)
    setup_s: float = 0.0  # a program's set-up, start to ready (calibrate_exec): once when primed, else per cell

    def exclusive_s(self, particles: int) -> float:
        """T_1 at ``particles``: the rate of the nearest calibrated size (in log size), work / rate."""
        if not self.rates:
            raise ValueError("a Calibration needs at least one rate")
        near = min(self.rates, key=lambda p: abs(math.log(p / particles)))
        return particles * self.turns * max(1, self.elements) / self.rates[near]

    def work(self, replicas: int) -> str:
        """What a cell runs, for the plan's lines: ``N x`` T_1, or under a pattern the victim's bursts."""
        w = self.workload
        if w is None or not w.patterned:
            return f"{replicas} x"
        return f"{cell_samples(w, replicas).expected} bursts beside {replicas - 1} neighbour(s),"

    def cell_s(self, mode: Mode, replicas: int, particles: int, *, warmup: bool = False) -> float:
        """The predicted span of a cell: N·T_1·f_mode; under a pattern its users' expected bursts (the
        look the cost model decides it at, ``analysis.cost``; a warm-up's few), think times, neighbours and
        queueing (:func:`sharebench.analysis.cost.patterned_cell`, a unit = T_1 / turns)."""
        factor = self.factors.get(mode.label, 1.0)
        w = self.workload
        if w is None or not w.patterned:
            return replicas * self.exclusive_s(particles) * factor
        unit_s = self.exclusive_s(particles) / max(1, self.turns)
        return patterned_cell(w, replicas, unit_s, factor, warmup=warmup).cell_s


MIN_PROBE_S = 0.3  # a calibration run shorter than this is run again with more turns
MAX_PROBE_TURNS = 50  # a patterned tracker's calibration tracks at most this many turns (its unit: one turn)
CALIBRATION_BURSTS = 5  # a patterned program's calibration: this many bursts of the victim's pattern, alone


def calibrate_sweep(sweep: SweepPlan, sizes: Sequence[int], *, probe_turns: int | None = None) -> Calibration:
    """The calibration of ``sweep`` at ``sizes``: the kernel's short run in this process
    (:func:`calibrate_particles`), or an exec program's exclusive cell (:func:`calibrate_exec`)."""
    if sweep.config.workload.is_program:
        calibration = calibrate_exec(sweep, sizes)
    else:
        # a patterned tracker's unit is one turn: its probe may track more turns than the sweep's (rate per turn)
        most = MAX_PROBE_TURNS if sweep.config.workload.patterned else None
        calibration = calibrate_particles(sweep.run_config, sizes, probe_turns=probe_turns, most_turns=most)
    return dataclasses.replace(calibration, workload=sweep.config.workload)


def calibrate_exec(sweep: SweepPlan, sizes: Sequence[int]) -> Calibration:
    """An exec program's calibration: per size, one exclusive cell of fresh replicas in a temporary
    folder: :data:`CALIBRATION_BURSTS` bursts of its pattern (a unit's seconds: the median burst over its
    units) or, unpatterned, one whole run (T_1); the program's set-up is the cell's wall time beyond its
    timed window. A one-line UserError when the program fails."""
    t0 = time.monotonic()
    rates: dict[int, float] = {}
    setups: list[float] = []
    turns = sweep.turns
    with tempfile.TemporaryDirectory(prefix="sharebench-calibrate-") as tmp:
        for p in sizes:
            job = calibration_job(sweep.replica_job(int(p)))
            t = time.monotonic()
            rows = run_cell(cell_run(BASELINE, job, Path(tmp) / f"p{p}", plan=sweep.plans[BASELINE], start_delay_s=0.0))
            row = rows[0] if rows else {"status": "failed", "error": "no record"}
            if row.get("status") != "ok":
                raise UserError(f"the calibration cell of {sweep.workload} at {int(p):,} failed: {row.get('error')}")
            unit_s = burst_unit_s(row) if job.patterned else float(row["track_s"]) / max(1, turns)
            setups.append(max(0.0, time.monotonic() - t - float(row["track_s"])))
            rates[int(p)] = p / unit_s if unit_s > 0 else math.inf
    shown = ", ".join(f"{p:,}: {p / r:.3g} s a unit" for p, r in rates.items())
    setup_s = float(np.median(setups)) if setups else 0.0
    return Calibration(
        turns,
        1,
        rates,
        f"calibrated on this machine (one exclusive cell per size: {shown}; set-up {setup_s:.1f} s)",
        spent_s=time.monotonic() - t0,
        setup_s=setup_s,
    )


def calibration_job(job: ReplicaJob) -> ReplicaJob:
    """The job of an exec program's calibration cell: :data:`CALIBRATION_BURSTS` of its victim's bursts;
    a service of a load (``serve:load=F``, no rate before its capacity is measured) as requests back to
    back (``batch``, a unit a call), what its capacity alone is measured from."""
    if not job.patterned:
        return job
    if parse_pattern(job.workload.pattern).needs_capacity:
        workload = dataclasses.replace(job.workload, pattern=BATCH.label, neighbours=job.workload.neighbour_pattern)
        job = dataclasses.replace(job, workload=workload)
    return dataclasses.replace(job, count=CALIBRATION_BURSTS)


def burst_unit_s(row: Mapping[str, Any]) -> float:
    """The median seconds of one unit of work in a record's bursts (``extra.bursts``: i, arrival, start,
    end, units); its track_s per unit when it has none."""
    bursts = (row.get("extra") or {}).get("bursts") or []
    per = [(b[3] - b[2]) / b[4] for b in bursts if len(b) >= 5 and b[4]]
    if per:
        return float(np.median(per))
    return float(row["track_s"]) / max(1, CALIBRATION_BURSTS)


def calibrate_particles(
    run_config: Callable[[int], RunConfig],
    sizes: Sequence[int],
    *,
    probe_turns: int | None = None,
    most_turns: int | None = None,
) -> Calibration:
    """One exclusive run per size in this process (which also builds the kernel into the cache the
    replicas reuse): their rates. ``run_config`` is ``SweepPlan.run_config``; ``probe_turns``: track at
    most that many turns (a short run; the rate per element-pass carries over to the sweep's turns). A
    probe shorter than :data:`MIN_PROBE_S` is run again with more turns (up to the sweep's, or up to
    ``most_turns`` when given: a patterned sweep's unit is one turn, and a probe of one turn of a few hundred
    particles is mostly fixed costs, the CPU's thread start-up, that would predict far too slow a unit)."""
    t0 = time.monotonic()
    rates: dict[int, float] = {}
    turns, elements = 1, 1
    for p in sizes:
        cfg = run_config(int(p))
        turns = cfg.turns
        if probe_turns is not None and cfg.turns > probe_turns:
            cfg = dataclasses.replace(cfg, turns=probe_turns)
        with contextlib.redirect_stdout(sys.stderr):
            rec = run_replica(cfg)
            limit = max(turns, most_turns or 0)
            if rec.track_s < MIN_PROBE_S and cfg.turns < limit:
                more = math.ceil(cfg.turns * MIN_PROBE_S / max(rec.track_s, 1e-6))
                cfg = dataclasses.replace(cfg, turns=min(limit, more))
                rec = run_replica(cfg)
        elements = max(1, int(rec.elements or 1))
        rates[int(p)] = p * cfg.turns * elements / rec.track_s if rec.track_s > 0 else math.inf
    shown = ", ".join(f"{p:,} particles {p * turns * elements / r:.3g} s" for p, r in rates.items())
    return Calibration(
        turns,
        elements,
        rates,
        f"calibrated on this machine (one exclusive run per size: {shown})",
        spent_s=time.monotonic() - t0,
    )


# The report's time kept aside at the end of a budget whose cells are not planned (a capacity search) and a
# campaign's least report time: build_report of results/cpu-default took 4.9 s after 4.7 s of imports on the
# 2-core dev machine (2026-12-03). A plan's own report is predicted from its cells (analysis.cost.report_seconds).
REPORT_S = 10.0


# A KFP pipeline's own time around the cells: each task is a pod (kfp.local: a new Python process that
# imports kfp and sharebench). Measured in kfp.local on the 2-core dev machine, shared (2026-12-03, the budget
# run of tests/kfp/test_pipeline_local.py: 2 modes x 4 cells at 2,000 particles): 21 tasks of 4.4-7.7 s, about
# 6 s each (a cell's three 16-22 s with its 2 s start delay; a mode's three 17 s; results and report 13 s); it
# used 120.8 s from the plan step to the results. A cluster's pods start slower: the report shows what a run used.
PIPELINE_TASK_S = 6.0
CELL_TASKS = 3  # schedule_start, the replica task(s) (started together), check_cell
MODE_TASKS = 3  # reconfigure_node, pick_cells, merge_records
END_TASKS = 2  # collect_results, write_report


def pipeline_overheads(start_delay_s: float, modes: int, task_s: float = PIPELINE_TASK_S) -> Overheads:
    """A pipeline's overheads (:func:`plan_budget_grid`): a cell costs its tasks and the
    start delay (its fresh replicas set up within it); before the first cell, every mode's own tasks (its
    node reconfigured: a no-op without a node, minutes with one, not modelled); after the last, the results
    and report tasks."""
    return Overheads(
        CELL_TASKS * task_s + float(start_delay_s),
        MODE_TASKS * task_s * max(1, modes),
        END_TASKS * task_s,
        f"a KFP pipeline: {task_s:g} s a task, {start_delay_s:g} s start delay a cell",
    )


def sweep_gaps(folder: Path) -> tuple[list[float], list[float]]:
    """The warm-replica sweeps of a results folder: gaps between consecutive cells, and the time from each
    sweep's start to its first tracking (``tools/cell_overhead.py``'s definitions)."""
    sweeps = {str(s["sweep_id"]): s for s in read_sweeps(folder)}
    df = load_results(folder)
    ok = df[(df["status"] == "ok") & df["track_start"].notna() & df["track_end"].notna()]
    gaps: list[float] = []
    starts: list[float] = []
    for sweep_id, g in ok.groupby("sweep_id"):
        sweep = sweeps.get(str(sweep_id), {})
        if (sweep.get("config") or {}).get("fresh_replicas", True):
            continue  # fresh replicas (or a sweep from before warm ones): not what runs now
        cells = g.groupby("cell_id").agg(start=("track_start", "min"), end=("track_end", "max")).sort_values("start")
        gaps += [float(x) for x in (cells["start"] - cells["end"].shift(1)).dropna()]
        if sweep.get("started_unix"):
            starts.append(float(cells["start"].iloc[0]) - float(sweep["started_unix"]))
    return gaps, starts


def measured_overheads(folders: Sequence[Path | str], end_s: float = DEFAULT_OVERHEADS["gpu"].end_s) -> Overheads:
    """The medians of the warm-replica sweeps of ``folders``; a UserError when none has one."""
    gaps: list[float] = []
    starts: list[float] = []
    for f in folders:
        g, s = sweep_gaps(Path(f))
        gaps += g
        starts += s
    if not gaps:
        raise UserError(f"no warm-replica sweep with two cells or more in {', '.join(map(str, folders))}")
    start = float(np.median(starts)) if starts else DEFAULT_OVERHEADS["gpu"].start_s
    names = str(folders[0]) if len(folders) == 1 else f"{len(folders)} results folders"
    return Overheads(float(np.median(gaps)), start, end_s, f"recorded: {names}, median of {len(gaps)} gaps")


def model_key(name: object) -> str:
    """The GPU model a device name is (``"NVIDIA H200"`` -> ``"H200"``); "" for anything else."""
    try:
        return find_gpu_model(str(name)).key
    except UserError:
        return ""


def recorded_results(
    root: Path | str, model: str, backend: str = "cuda", engine: str = "simpletrack"
) -> list[tuple[Path, pd.DataFrame]]:
    """The results folders under ``root`` with exclusive cells measured on a GPU of ``model`` (with that
    backend and engine), and those rows (every ok, measured one)."""
    key = find_gpu_model(model).key
    found = []
    for csv in sorted(Path(root).rglob("results.csv")):
        df = load_results(csv.parent)
        keys = df["device_name"].map(model_key)
        rows = df[
            (keys == key)
            & (df["status"] == "ok")
            & ~df["warmup"].astype(bool)
            & (df["backend"] == backend)
            & (df["engine"] == engine)
        ]
        if (rows["mode_kind"] == BASELINE).any():
            found.append((csv.parent, rows))
    if not found:
        raise UserError(
            f"no recorded {engine} results on the {backend} backend of GPU model {model!r} under {root}; "
            "record a sweep on one first"
        )
    return found


def mode_factors(rows: pd.DataFrame) -> dict[str, list[float]]:
    """Each cell's span / (N · mean T_1 of its work), by mode, from one folder's rows."""
    t1 = rows[rows["mode_kind"] == BASELINE].groupby(["particles", "turns"])["track_s"].mean()
    out: dict[str, list[float]] = {}
    for (_, _, mode), g in rows.groupby(["sweep_id", "cell_id", "mode"]):
        work = (g["particles"].iloc[0], g["turns"].iloc[0])
        if is_baseline(str(mode)) or work not in t1.index:
            continue
        span = float(g["track_end"].max() - g["track_start"].min())
        out.setdefault(str(mode), []).append(span / (len(g) * float(t1[work])))
    return out


def recorded_calibration(
    model: str, root: Path | str, turns: int, elements: int | None = None, backend: str = "cuda"
) -> tuple[Calibration, Overheads]:
    """A GPU campaign planned on a machine without that GPU: the median element-passes/s of the recorded
    exclusive cells per size, the modes' median span / (N·T_1), the warm sweeps' overheads. ``elements``:
    the campaign lattice's (None: the recorded one's)."""
    found = recorded_results(root, model, backend)
    rows = pd.concat([r for _, r in found])
    exclusive = rows[rows["mode_kind"] == BASELINE]
    rates = {int(p): float(g.median()) for p, g in exclusive.groupby("particles")["element_passes_per_s"]}
    factors: dict[str, list[float]] = {}
    for _, r in found:
        for mode, values in mode_factors(r).items():
            factors.setdefault(mode, []).extend(values)
    n_elements = elements if elements is not None else int(exclusive["elements"].mode().iloc[0])
    folders = [f for f, _ in found]
    try:
        overheads = measured_overheads(folders)
    except UserError:
        overheads = DEFAULT_OVERHEADS["gpu"]
    key = find_gpu_model(model).key
    source = f"planned from recorded rates of {key} ({len(folders)} results folder(s) under {root})"
    cal = Calibration(turns, n_elements, rates, source, {m: float(np.median(v)) for m, v in factors.items()})
    return cal, overheads


@dataclass(frozen=True)
class Block:
    """One mode at one particle count, planned for the plan's repeats: its replicas and predicted span."""

    mode: Mode
    particles: int
    replicas: int
    cell_s: float


@dataclass(frozen=True)
class BudgetPlan:
    """What a budgeted sweep runs: the blocks (mode x size) in priority order, the measured repeats of
    each (and warm-ups) that surely run, and the prediction. ``cells()`` is the run order."""

    budget_s: float
    calibration: Calibration
    overheads: Overheads
    modes: tuple[Mode, ...]  # run order (the sweep's)
    particles: tuple[int, ...]  # the particle counts (per replica), in run order
    blocks: tuple[Block, ...]  # priority order
    repeats: int
    warmup_repeats: int
    min_repeats: int
    max_repeats: int
    left_out: tuple[str, ...] = ()  # "mode at P particles" not planned for want of time
    # a patterned sweep's alone cells (``sweep.plan.alone_cells``): its baseline once per size, never repeated
    alone: tuple[Cell, ...] = ()

    def block(self, label: str, particles: int) -> Block | None:
        return next((b for b in self.blocks if b.mode.label == label and b.particles == particles), None)

    def cost_s(self, block: Block) -> float:
        """One cell of ``block`` with the gap before it."""
        return block.cell_s + self.overheads.per_cell_s

    def once(self, block: Block) -> bool:
        """Whether ``block`` is a patterned sweep's baseline, measured once (its alone cells), never repeated."""
        return bool(self.alone) and block.mode.is_baseline

    def rounds(self, block: Block) -> int:
        """The planned cells of ``block``: its alone cells, else the repeats and warm-ups."""
        if self.once(block):
            return sum(1 for c in self.alone if c.particles == block.particles)
        return self.repeats + self.warmup_repeats

    @property
    def cells_s(self) -> float:
        return sum(self.cost_s(b) * self.rounds(b) for b in self.blocks)

    @property
    def predicted_s(self) -> float:
        """Calibration, set-up, the planned cells and the report."""
        o = self.overheads
        return self.calibration.spent_s + o.start_s + self.cells_s + o.end_s

    @property
    def adaptive_s(self) -> float:
        """The time left in the budget for repeats beyond the planned ones."""
        return max(0.0, self.budget_s - self.predicted_s)

    def cells(self) -> list[Cell]:
        """The planned cells in run order: a patterned sweep's alone cells first (once per size), then repeat ->
        particle count -> mode; repeats <= 0 are warm-ups."""
        have = {(b.mode.label, b.particles) for b in self.blocks}
        first = 1 - self.warmup_repeats
        once = {(b.mode.label, b.particles) for b in self.blocks if self.once(b)}
        return [c for c in self.alone if (c.mode.label, c.particles) in have] + [
            Cell(m, p, r)
            for r in range(first, self.repeats + 1)
            for p in self.particles
            for m in self.modes
            if (m.label, p) in have and (m.label, p) not in once
        ]

    def describe(self) -> str:
        """The plan as ``--dry-run`` prints it."""
        o, c = self.overheads, self.calibration
        lines = [
            f"budget:    {fmt_duration(self.budget_s)} ({self.budget_s:g} s); {c.source}",
            f"overheads: {o.per_cell_s:.2f} s between cells, {o.start_s:.1f} s before the first, {o.end_s:.0f} s "
            f"for the report ({o.source})",
            f"plan:      {len(self.blocks)} mode x size block(s), {self.repeats} measured repeat(s) + "
            f"{self.warmup_repeats} warm-up each: {len(self.cells())} cells, in priority order:",
        ]
        lines += [
            f"  {b.mode.label:<14} at {b.particles:>12,} particles: {c.work(b.replicas)} T_1 {c.exclusive_s(b.particles):.3g} s"
            f" -> {b.cell_s:.3g} s a cell (+{o.per_cell_s:.2f} s) x {self.rounds(b)} = {self.cost_s(b) * self.rounds(b):.1f} s"
            + (" (the alone cell, once)" if self.once(b) else "")
            for b in self.blocks
        ]
        lines.append(
            f"predicted: {self.predicted_s:.0f} s of {self.budget_s:g} s (calibration {c.spent_s:.1f} s, set-up "
            f"{o.start_s:.1f} s, cells {self.cells_s:.1f} s, report {o.end_s:.0f} s)"
        )
        if self.max_repeats > self.repeats:  # else a fixed plan (the pipelines'): no repeat beyond it
            lines.append(
                f"adaptive:  beyond {self.repeats} repeat(s), up to {self.max_repeats}, a cell repeats while its "
                f"interval is wider than the precision or straddles a threshold, within the {self.adaptive_s:.0f} s left"
            )
        if self.left_out:
            lines.append(f"left out:  {', '.join(self.left_out)} (no time left in the budget)")
        return "\n".join(lines)


def priority(modes: Sequence[Mode]) -> list[Mode]:
    """Headline modes first (exclusive, timeslice:2, mps:2), then the rest in the order given."""
    head = [m for h in HEADLINE_MODES for m in modes if m.label == h]
    return head + [m for m in modes if m not in head]


def floor2(x: float) -> int:
    """Down to two significant digits: 12,345 -> 12,000."""
    if x < 1 or not math.isfinite(x):
        return 0
    k = 10 ** max(0, int(math.floor(math.log10(x))) - 1)
    return int(math.floor(x / k) * k)


@dataclass(frozen=True)
class Costing:
    """The planner's arithmetic: each mode's replicas, what one cell costs, the time left for cells."""

    calibration: Calibration
    overheads: Overheads
    modes: tuple[Mode, ...]  # priority order
    replicas: Mapping[str, int]
    available_s: float  # budget - calibration - set-up - report

    def block(self, mode: Mode, particles: int) -> Block:
        n = self.replicas[mode.label]
        return Block(mode, particles, n, self.calibration.cell_s(mode, n, particles))

    def cost(self, mode: Mode, particles: int) -> float:
        return self.block(mode, particles).cell_s + self.overheads.per_cell_s

    def one_each(self, particles: int) -> float:
        """One cell of every mode at ``particles``, gaps included."""
        return sum(self.cost(m, particles) for m in self.modes)

    def auto_size(self, rounds: int, room_s: float) -> int:
        """The largest size (two significant digits) at which every mode fits ``rounds`` times in ``room_s``."""
        per_particle = self.one_each(PROBE_PARTICLES) - len(self.modes) * self.overheads.per_cell_s
        per_particle /= PROBE_PARTICLES
        fixed = len(self.modes) * self.overheads.per_cell_s
        size = floor2((room_s / max(1, rounds) - fixed) / per_particle) if per_particle > 0 else MAX_PARTICLES
        return min(MAX_PARTICLES, max(MIN_AUTO_PARTICLES, size))


def too_small(budget_s: float, costing: Costing, particles: int) -> UserError:
    """The one-line error of a budget that holds no cell of every mode, saying what does fit."""
    c = costing
    extra = c.calibration.spent_s + c.overheads.start_s + c.overheads.end_s
    need = extra + c.one_each(particles)
    fits, used = [], 0.0
    for m in c.modes:
        used += c.cost(m, particles)
        if used > c.available_s:
            break
        fits.append(m.label)
    each = ", ".join(f"{m.label} {c.cost(m, particles):.1f} s" for m in c.modes)
    return UserError(
        f"--budget {fmt_duration(budget_s)} is too small for one cell of each mode at {particles:,} particles: "
        f"about {need:.0f} s ({each}; {extra:.0f} s of calibration, set-up and report); it fits "
        f"{', '.join(fits) if fits else 'no cell'}; allowed: --budget {fmt_duration(math.ceil(need))} or more, "
        "or fewer --modes"
    )


def plan_within(
    budget: float,
    calibration: Calibration,
    overheads: Overheads,
    modes: Sequence[Mode | str],
    sizes: Sequence[int] | None,
    min_repeats: int = MIN_REPEATS,
    max_repeats: int = DEFAULT_MAX_REPEATS,
    *,
    replicas: Mapping[str, int] | None = None,
    warmup_repeats: int = 1,
    reserve: float = ADAPTIVE_RESERVE,
) -> BudgetPlan:
    """The modes x sizes x repeats that fit ``budget`` seconds, in priority order (module docstring).

    ``modes`` in run order (``SweepPlan.modes``); ``sizes`` in run order, None: the one largest size at
    which every mode fits; ``replicas``: each mode label's replica count (``SweepPlan.replicas``; default
    the mode's own, 1 for a MIG layout). Fewer than ``min_repeats`` are planned only when no more fit.
    """
    run_modes = tuple(parse_mode(m) if isinstance(m, str) else m for m in modes)
    counts = {m.label: int((replicas or {}).get(m.label) or m.replicas or 1) for m in run_modes}
    o = overheads
    costing = Costing(
        calibration, o, tuple(priority(run_modes)), counts, budget - calibration.spent_s - o.start_s - o.end_s
    )
    room = costing.available_s * (1 - reserve if max_repeats > min_repeats else 1.0)
    run_sizes = tuple(sizes) if sizes else (costing.auto_size(min_repeats + warmup_repeats, room),)
    smallest = min(run_sizes)
    if costing.available_s < costing.one_each(smallest):
        raise too_small(budget, costing, smallest)
    tries = [(min_repeats, warmup_repeats)] + [(r, 0) for r in range(min_repeats, 0, -1)]  # warm-ups go first
    reps, warm = next((r, w) for r, w in tries if costing.one_each(smallest) * (r + w) <= costing.available_s)
    room = costing.available_s * (1 - reserve if max_repeats > reps else 1.0)
    blocks = choose_blocks(costing, run_sizes, reps + warm, room)
    chosen = {(b.mode.label, b.particles) for b in blocks}
    left_out = tuple(
        f"{m.label} at {p:,}"
        for p in sorted(run_sizes, reverse=True)
        for m in costing.modes
        if (m.label, p) not in chosen
    )
    return BudgetPlan(
        budget, calibration, o, run_modes, run_sizes, tuple(blocks), reps, warm, min_repeats, max_repeats, left_out
    )


def choose_blocks(costing: Costing, sizes: Sequence[int], rounds: int, room_s: float) -> list[Block]:
    """Every mode at the largest size where all fit ``rounds`` times in ``room_s`` (the smallest size when
    none does), then more sizes, largest first, mode by mode in priority order while they fit; a
    shared mode's block brings its size's exclusive block (the loss needs T_1 of the same work), and an
    exclusive block comes only so (unless exclusive is the only mode)."""
    c = costing
    base = next((p for p in sorted(sizes, reverse=True) if c.one_each(p) * rounds <= room_s), min(sizes))
    blocks = [c.block(m, base) for m in c.modes]
    used = c.one_each(base) * rounds
    exclusive = next((m for m in c.modes if m.is_baseline), None)
    for p in sorted(sizes, reverse=True):
        if p == base:
            continue
        for m in c.modes:
            if m == exclusive and len(c.modes) > 1:
                continue  # it comes with the first shared mode that fits at this size
            need = dict.fromkeys([exclusive, m] if exclusive else [m])  # exclusive first, once
            add = [a for a in need if not any(b.mode == a and b.particles == p for b in blocks)]
            cost = sum(c.cost(a, p) for a in add) * rounds
            if add and used + cost <= room_s:
                blocks += [c.block(a, p) for a in add]
                used += cost
    return blocks


# the calibration tracks this many turns per size (a 15 M-particle turn takes ~0.2 s on an H200; the CPU default's
# 1,000 particles take 0.35-0.75 s a turn of the generated ring on the dev machine): the rate per element-pass
# carries over to the sweep's turns
PROBE_TURNS = 1


def plan_budget(sweep: SweepPlan, options: BudgetOptions, sizes: Sequence[int] = ()) -> BudgetPlan:
    """The budget plan of a validated sweep on this machine: one short exclusive run per size (the CPU
    default: one run of :data:`PROBE_PARTICLES`, and the size chosen to fit), the recorded overheads of
    the device class, the sweep's modes, replicas, sizes and warm-ups. Each calibration run tracks
    :data:`PROBE_TURNS` turns; a size picked to fit is at least :data:`MIN_AUTO_PARTICLES`.
    ``options.budget_s`` must be set.
    ``sizes``: the sizes to plan instead of the sweep's (a resumed folder's, ``calibrate.folder_particles``)."""
    if options.budget_s is None:
        raise ValueError("plan_budget needs options.budget_s")
    auto = not sizes and auto_sized(sweep)
    run_sizes = list(sizes) or sweep.particles
    calibration = calibrate_sweep(sweep, [PROBE_PARTICLES] if auto else run_sizes, probe_turns=PROBE_TURNS)
    plan = plan_within(
        options.budget_s,
        calibration,
        sweep_overheads(sweep, calibration),
        sweep.modes,
        None if auto else run_sizes,
        options.min_repeats,
        options.max_repeats,
        replicas={m.label: sweep.replicas(m) for m in sweep.modes},
        warmup_repeats=sweep.config.warmup_repeats,
    )
    # a patterned sweep's baseline: the alone cells, once per size and pattern (issue 42), never a block's repeats;
    # a warm-up before them only when the plan keeps warm-ups
    config = dataclasses.replace(sweep.config, warmup_repeats=plan.warmup_repeats)
    planned = dataclasses.replace(sweep, config=config).with_particles(plan.particles)
    return dataclasses.replace(plan, alone=tuple(alone_cells(planned)))


def model_replicas(model: str, mode: Mode) -> int:
    """A mode's replicas on a GPU model: one per MIG instance (or emulated instance) of its layout."""
    if mode.spec.replicas_from == "layout":  # the device's own instances, or those MPS emulates
        instances = layout_profiles if mode.spec.device_instances else emulated_layout
        return len(instances(model, mode.layout or ""))
    return int(mode.replicas or 1)


def plan_recorded(
    options: BudgetOptions,
    model: str,
    root: Path | str,
    modes: Sequence[Mode],
    sizes: Sequence[int],
    turns: int,
    warmup_repeats: int = 1,
) -> BudgetPlan:
    """A GPU campaign planned where that GPU is not (``--dry-run --gpu-model H200``): the recorded rates and
    overheads of ``model`` under ``root`` (the committed results/), no device resolved."""
    if options.budget_s is None:
        raise ValueError("plan_recorded needs options.budget_s")
    calibration, overheads = recorded_calibration(model, root, turns)
    return plan_within(
        options.budget_s,
        calibration,
        overheads,
        modes,
        sizes,
        options.min_repeats,
        options.max_repeats,
        replicas={m.label: model_replicas(model, m) for m in modes},
        warmup_repeats=warmup_repeats,
    )


# ---------------------------------------------------------------- a pipeline's budget (sweep.grid.plan_grid)
def calibrate_here(grid: CellGrid, turns: int, workload: Workload) -> tuple[Calibration, dict[str, int]]:
    """The rates of one short exclusive run per size on this machine (the device of ``workload``), as
    ``sharebench run --budget`` calibrates, and each mode's replicas there."""
    config = SweepConfig(
        modes=grid.modes,
        particles=grid.particles,
        turns=turns,
        repeats=grid.repeats,
        warmup_repeats=grid.warmup_repeats,
        workload=workload,
        progress=False,
    )
    sweep = validate(config)
    calibration = calibrate_sweep(sweep, grid.particles, probe_turns=PROBE_TURNS)
    return calibration, {m.label: sweep.replicas(m) for m in sweep.modes}


def plan_budget_grid(
    grid: CellGrid,
    *,
    turns: Any,
    workload: Mapping[str, Any] | Workload,
    start_delay_s: float,
    root: Path | str = RECORDED_ROOT,
) -> tuple[CellGrid, BudgetPlan]:
    """The grid cut to what fits ``grid.budget_s`` (module docstring): the planned modes (a mode with no
    block left out), sizes, repeats and each mode's cells, and the budget plan behind them. No node: the
    rates are calibrated on this machine; a node: they are the recorded ones of its GPU model under
    ``root`` (a one-line UserError without a GPU model, or with none recorded)."""
    if grid.budget_s is None:
        raise ValueError("plan_budget_grid needs a grid with a budget")
    what = workload if isinstance(workload, Workload) else Workload.from_dict(dict(workload or {}))
    n_turns = whole_number("turns", turns, 1)
    modes = list(grid.modes)
    if grid.node_name:
        if not grid.gpu_model:
            raise UserError(
                f"budget {fmt_duration(grid.budget_s)} on node {grid.node_name!r} is planned from the recorded rates "
                "of its GPU model; allowed: gpu_model (e.g. H200) or node_name NAME=GPU_MODEL"
            )
        calibration, _ = recorded_calibration(grid.gpu_model, root, n_turns)
        replicas = {m.label: model_replicas(grid.gpu_model, m) for m in modes}
    else:
        calibration, replicas = calibrate_here(grid, n_turns, what)
    plan = plan_within(
        grid.budget_s,
        calibration,
        pipeline_overheads(float(start_delay_s), len(modes)),
        modes,
        grid.particles,
        grid.repeats,
        grid.repeats,  # no repeat beyond the planned ones: a static graph
        replicas=replicas,
        warmup_repeats=grid.warmup_repeats,
    )
    sizes = tuple(p for p in plan.particles if any(b.particles == p for b in plan.blocks))
    per = plan.repeats + plan.warmup_repeats
    by_mode = {
        label: tuple(i * per + k for i, p in enumerate(sizes) if plan.block(label, p) for k in range(per))
        for label in grid.labels
    }
    by_mode = {label: cells for label, cells in by_mode.items() if cells}
    planned = dataclasses.replace(
        grid,
        modes=tuple(m for m in grid.modes if m.label in by_mode),
        cells=tuple(range(len(sizes) * per)),
        particles=sizes,
        repeats=plan.repeats,
        warmup_repeats=plan.warmup_repeats,
        cells_by_mode=by_mode,
    )
    return planned, plan


def budget_summary(plan: BudgetPlan, started_unix: float) -> dict[str, Any]:
    """What the report needs of a pipeline's budget plan, as plain values: the budget, the clock's start
    (epoch s, the plan step's), the prediction and the plan as ``--dry-run`` prints it."""
    return {
        "budget_s": plan.budget_s,
        "started_unix": float(started_unix),
        "predicted_s": round(plan.predicted_s, 1),
        "cells": len(plan.cells()),
        "plan": plan.describe().splitlines(),
    }


def budget_notes(summary: Mapping[str, Any], measured_cells: int, now_unix: float | None = None) -> list[str]:
    """The report's budget lines (its notes) of a pipeline run from :func:`budget_summary`: budget, time
    used from the plan step to now (before the report), the plan and what ran of it; none without a budget."""
    if not summary or summary.get("budget_s") is None:
        return []
    budget_s = float(summary["budget_s"])
    used = (time.time() if now_unix is None else now_unix) - float(summary["started_unix"])
    return [
        f"budget: {fmt_duration(budget_s)} ({budget_s:g} s); used {used:.1f} s ({100 * used / budget_s:.0f}%) from "
        f"the plan step to the results, before the report; predicted {float(summary['predicted_s']):.0f} s",
        f"budget: ran {measured_cells} of {int(summary['cells'])} planned cell(s); the pipeline's repeats are fixed, "
        "chosen to fit (a static task graph cannot repeat an unsettled cell)",
        *(f"budget plan: {line.strip()}" for line in summary.get("plan") or []),
    ]


def predicted_line(sweep: SweepPlan, calibration: Calibration | None = None) -> str:
    """A dry run's ``predicted: N s`` of a sweep without a budget, and its basis: ``calibration`` (the CPU
    default's own: :func:`rate_calibration`) or one short exclusive run per size on this machine, then every
    cell's seconds (N x T_1; a patterned cell: its users' expected bursts, think times, neighbours and
    queueing, ``analysis.cost.patterned_cell``; a warm-up's few), the recorded gaps, set-up and report."""
    if calibration is None:
        calibration = calibrate_sweep(sweep, sweep.particles, probe_turns=PROBE_TURNS)
    o = sweep_overheads(sweep, calibration)
    cells = sum(
        calibration.cell_s(c.mode, sweep.replicas(c.mode), c.particles, warmup=c.warmup and not is_awake(c))
        + o.per_cell_s
        for c in sweep.cells()
    )
    total = calibration.spent_s + o.start_s + cells + o.end_s
    return (
        f"predicted: {total:.0f} s (cells {cells:.0f} s, set-up {o.start_s:.0f} s, report {o.end_s:.0f} s; "
        f"calibration {calibration.spent_s:.1f} s on this machine); basis: {calibration.source}; "
        f"{o.per_cell_s:.2f} s between cells ({o.source})"
    )


def rate_calibration(sweep: SweepPlan, rate_pt_per_s: float, spent_s: float) -> Calibration:
    """The CPU default's calibration (``sweep.calibrate``: one exclusive run of its probe size) as the dry
    run's basis: T_1 at the sweep's size from that rate."""
    shown = ", ".join(f"{p:,} particles {p * sweep.turns / rate_pt_per_s:.3g} s" for p in sweep.particles)
    return Calibration(
        sweep.turns,
        1,
        {PROBE_PARTICLES: rate_pt_per_s},
        f"the calibration's rate, {rate_pt_per_s:,.0f} particle-turns/s: T_1 {shown}; a cell of N replicas N x T_1",
        spent_s=spent_s,
        workload=sweep.config.workload,
    )


def sweep_overheads(sweep: SweepPlan, calibration: Calibration) -> Overheads:
    """The recorded overheads of the sweep's device class, with a program's own set-up
    (``calibration.setup_s``): once before the first cell when its warm replicas are primed (all at once),
    in every cell when they start fresh (``--fresh-replicas``, process timing); the report from the sweep's
    cells (``analysis.cost.report_seconds``)."""
    o = DEFAULT_OVERHEADS["gpu" if sweep.device.kind == "gpu" else "cpu"]
    o = dataclasses.replace(o, end_s=report_seconds(len(sweep.cells())))
    if not calibration.setup_s:
        return o
    if sweep.config.fresh_replicas or sweep.config.workload.starts_fresh:
        return dataclasses.replace(o, per_cell_s=o.per_cell_s + calibration.setup_s)
    return dataclasses.replace(o, start_s=o.start_s + calibration.setup_s)
