"""A sweep's time-slice probe: its first step and its last (issue 29).

* :func:`sweep_probe` (before the cells): with a ``timeslice:N`` mode, 2 and 4 probe processes run a few
  seconds on the GPU (``telemetry.provenance.timeslice_probe_entry``); provenance keeps what they saw, or
  one line saying why they did not run (``--no-probe``, CPU, PoCL, non-NVIDIA, MPS active, no CuPy).
* :func:`split_cells` (after the cells): per particle count, ``repeats`` runs of one replica beside one
  probe process (``sweep.beside.run_beside_probe``), in ``timeslice_split/<run>/``; their raw
  records go to ``timeslice_split.json`` (``analysis.timeslice_split``), from which the report splits each
  time-slicing loss into switch idle and refill. Only where the probe ran; a failed run is recorded with
  its reason and never fails the sweep. A resumed sweep runs only the sizes that lack their repeats.

The probe spins ``BESIDE_FACTOR`` x T_1 + ``BESIDE_MARGIN_S`` (T_1 from the sweep's exclusive cells): a
workload beside it holds about half the GPU, so its window lasts a little over 2 x T_1.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sharebench.analysis.timeslice_split import SPLIT_DIR, append_runs, beside_record, read_runs, work_of
from sharebench.errors import one_line
from sharebench.modes import BASELINE
from sharebench.results import load_results
from sharebench.sweep.beside import run_beside_probe
from sharebench.sweep.plan import SweepPlan
from sharebench.telemetry.provenance import probe_line, timeslice_probe_entry
from sharebench.telemetry.timeslice_probe import ProbeUnavailable

BESIDE_FACTOR = 4.0
BESIDE_MARGIN_S = 3.0
MAX_PROBE_S = 600.0  # the probe's own limit (timeslice_probe.check_args)


PATTERNED_SKIP = (
    "skipped (replica patterns: the probe's slices explain a batch loss, which this sweep does not measure)"
)


def sweep_probe(plan: SweepPlan) -> tuple[dict[str, Any] | None, list[str]]:
    """The provenance entry of the sweep's time-slice probe (None without a timeslice mode) and its note.
    A sweep of replica patterns skips it: its slices feed the batch loss's split and prediction only, and
    its seconds would come before every cell (issue 35)."""
    patterned, wanted = plan.config.workload.patterned, plan.config.timeslice_probe
    entry = timeslice_probe_entry(plan.device, plan.modes, enabled=wanted and not patterned)
    if entry is not None and wanted and patterned:
        entry = {**entry, "reason": PATTERNED_SKIP}
    line = probe_line(entry)
    return entry, [line] if line else []


def lattice_label(plan: SweepPlan) -> str:
    """The lattice as the results rows name it."""
    lattice = plan.config.workload.lattice
    return Path(lattice).name if lattice else "generated"


def work_of_size(plan: SweepPlan, particles: int) -> dict[str, Any]:
    """The results' work keys of one size of this sweep."""
    d = plan.device
    return dict(
        engine=plan.workload,
        backend=d.backend,
        device_class=d.kind,
        lattice=lattice_label(plan),
        particles=particles,
        turns=plan.turns,
    )


def alone_seconds(out: Path, work: dict[str, Any]) -> float:
    """T_1 of ``work`` in the folder: the mean ``track_s`` of its ok, measured exclusive replicas."""
    df = load_results(out)
    if df.empty:
        return math.nan
    ok = df[(df["mode"] == BASELINE) & (df["status"] == "ok") & ~df["warmup"].astype(bool)]
    rows = [r for r in ok.to_dict("records") if work_of(r) == work_of(work)]
    return float(sum(r["track_s"] for r in rows) / len(rows)) if rows else math.nan


def split_skipped(plan: SweepPlan, entry: dict[str, Any] | None) -> str | None:
    """Why the runs beside the probe are not run (None: they are)."""
    if entry is None:
        return ""  # no timeslice mode: nothing to split, nothing to say
    if plan.config.workload.patterned:
        return "timeslice split: not measured (replica patterns: the split is of the batch loss)"
    if entry.get("status") != "ok":
        return f"timeslice split: not measured ({probe_line(entry)})"
    return None


def split_cells(plan: SweepPlan, out: Path, sweep_id: str, entry: dict[str, Any] | None) -> list[str]:
    """The sweep's last step: the runs beside the probe (see the module's docstring); the notes it adds."""
    why = split_skipped(plan, entry)
    if why is not None or entry is None:
        return [why] if why else []
    have = [r for r in read_runs(out) if r.get("status") == "ok"]
    notes, repeats = [], plan.config.repeats
    for particles in plan.particles:
        work = work_of_size(plan, particles)
        done = sum(1 for r in have if work_of(r) == work_of(work))
        if done >= repeats:
            continue
        t1 = alone_seconds(out, work)
        if not math.isfinite(t1):
            notes.append(f"timeslice split: {particles:,} particles not measured (no exclusive cell: no T_1)")
            continue
        probe_s = min(BESIDE_FACTOR * t1 + BESIDE_MARGIN_S, MAX_PROBE_S)
        runs = [beside_run(plan, out, sweep_id, entry, work, r, probe_s) for r in range(done + 1, repeats + 1)]
        append_runs(out, runs)
        bad = [r for r in runs if r["status"] != "ok"]
        notes.append(
            f"timeslice split: {particles:,} particles, {len(runs) - len(bad)} of {len(runs)} run(s) beside the "
            f"probe ({probe_s:.1f} s each)" + (f"; {bad[0]['status']}: {bad[0]['reason']}" if bad else "")
        )
    return notes


def beside_run(
    plan: SweepPlan,
    out: Path,
    sweep_id: str,
    entry: dict[str, Any],
    work: dict[str, Any],
    repeat: int,
    probe_s: float,
) -> dict[str, Any]:
    """One replica of ``work`` beside one probe process; its raw record (a failure as a record too)."""
    name = f"beside_p{work['particles']}_r{repeat}"
    head = {**work, "sweep_id": sweep_id, "run": name, "repeat": repeat, "probe_seconds": probe_s}
    try:
        res = run_beside_probe(plan.replica_job(int(work["particles"])), out / SPLIT_DIR / name, probe_s)
    except Exception as exc:  # noqa: BLE001 - the split never costs the sweep what it measured
        res = ProbeUnavailable(f"{type(exc).__name__}: {one_line(exc)[:300]}")
    if isinstance(res, ProbeUnavailable):
        return {**head, "status": "failed", "reason": res.reason}
    pair = (entry.get("runs") or [None])[0]  # the 2-process probe: its percentiles give the medians' intervals
    return {**head, **beside_record(res, work, float(entry["switch_ms"]), float(entry["slice_ms"]), pair)}
