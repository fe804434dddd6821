"""``sharebench probe timeslice|split``: the work, imported when one of them runs (their options:
``sharebench.cli.probe``)."""

from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from sharebench.analysis.statistics import ratio_loss_ci
from sharebench.analysis.timeslice_split import Split, SwitchOut, loss_at, split, summarize
from sharebench.devices import resolve_device
from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.parse import counts, seconds, whole_number
from sharebench.sharing import cell_run, run_cell
from sharebench.sweep.beside import run_beside_probe
from sharebench.telemetry.timeslice_probe import BesideRun, ProbeUnavailable, TimesliceProbe, check_args, run_probe
from sharebench.workloads import ReplicaJob, Workload


def probe_or_fail(n: int, secs: float, args: argparse.Namespace) -> TimesliceProbe:
    bad = check_args(n, secs, args.grid, args.threshold_us)
    if bad:
        raise UserError(bad)
    r = run_probe(n, secs, device=args.device, grid=args.grid, threshold_us=args.threshold_us)
    if isinstance(r, ProbeUnavailable):
        raise UserError(f"time-slice probe: {r.reason}")
    return r


def cmd_timeslice(args: argparse.Namespace) -> int:
    secs = seconds("--seconds", args.seconds, 0.05, 600)
    results = []
    for n in counts("process count", args.processes, "2,4"):
        r = probe_or_fail(n, secs, args)
        print(r.summary(), flush=True)
        results.append(r.to_dict(traces=True))
    if args.out:
        write_atomic(args.out, json.dumps({"timeslice_probe": results}, indent=1, default=str) + "\n")
    return 0


def workload_job(args: argparse.Namespace) -> ReplicaJob:
    """The job of the workload the split measures: a program (``--exec``) or Simpletrack."""
    if args.exec_command:
        program = Workload(engine="exec", device=args.device, command=args.exec_command, name=args.exec_name)
        return ReplicaJob.of(program, particles=whole_number("--work", args.work, 1), turns=1)
    particles = counts("particle count", args.particles, "1e7")
    if len(particles) != 1:
        raise UserError(f"bad --particles {args.particles!r}: one particle count is allowed")
    tracker = Workload(engine="simpletrack", device=args.device, lattice=args.lattice)
    return ReplicaJob.of(tracker, particles=particles[0], turns=whole_number("--turns", args.turns, 1))


def cell_times(mode: str, job: ReplicaJob, folder: Path) -> tuple[float, float]:
    """One cell: (mean track_s of its replicas, span from the first start to the last end)."""
    rows = run_cell(cell_run(mode, job, folder, device=resolve_device(job.run.device)))
    bad = [r for r in rows if r.get("status") != "ok"]
    if bad:
        raise UserError(f"the {mode} cell failed: {bad[0].get('error') or bad[0].get('cell_error')}")
    span = max(r["track_end"] for r in rows) - min(r["track_start"] for r in rows)
    return sum(r["track_s"] for r in rows) / len(rows), span


def beside(job: ReplicaJob, folder: Path, probe_s: float, args: argparse.Namespace) -> BesideRun:
    r = run_beside_probe(job, folder, probe_s, grid=args.grid, threshold_us=args.threshold_us)
    if isinstance(r, ProbeUnavailable):
        raise UserError(f"workload beside the probe: {r.reason}")
    if not r.covered():
        raise UserError(
            f"the probe ({probe_s:.1f} s) ended before the workload's window; the workload ran {r.record['track_s']:.1f} s"
        )
    return r


def cmd_split(args: argparse.Namespace) -> int:
    job = workload_job(args)
    n = whole_number("--replicas", args.replicas, 2, 64)
    repeats = whole_number("--repeats", args.repeats, 1, 100)
    probe_s = seconds("--probe-seconds", args.probe_seconds, 0.05, 600)
    lengths = [seconds("--lengths", x, 0.01, 1000) for x in str(args.lengths).split(",") if x.strip()]
    probes = probe_or_fail(2, probe_s, args)
    print(probes.summary(), flush=True)
    t1, tn, runs = [], [], []
    with tempfile.TemporaryDirectory(prefix="sb-split-") as tmp:
        for i in range(repeats):
            t1.append(cell_times("exclusive", job, Path(tmp) / f"alone{i}")[0])
            tn.append(cell_times(f"timeslice:{n}", job, Path(tmp) / f"ts{i}")[1])
            runs.append(beside(job, Path(tmp) / f"beside{i}", max(3 * t1[-1] + 10, 10.0), args))
            print(
                f"repeat {i}: alone {t1[-1]:.3f} s, timeslice:{n} {tn[-1]:.3f} s, beside the probe {runs[-1].record['track_s']:.3f} s",
                flush=True,
            )
    measured = ratio_loss_ci(tn, t1, factor=n)
    alone = sum(t1) / len(t1)
    splits: list[Split] = [
        split(alone, r.record["track_s"], SwitchOut.of(r), probes.switch_ms.p50, probes.slice_ms.p50, measured[0])
        for r in runs
    ]
    out: dict[str, Any] = dict(
        workload=split_name(job),
        uuid=probes.uuid,
        device_name=probes.device_name,
        replicas=n,
        alone_s=t1,
        timeslice_span_s=tn,
        probe=probes.to_dict(),
        splits=[s.to_dict() for s in splits],
        summary=summarize(splits, measured),
    )
    out["predicted_at"] = loss_at(splits_mean(splits), lengths)
    print_split(out)
    if args.out:
        write_atomic(args.out, json.dumps(out, indent=1, default=str) + "\n")
    return 0


def split_name(job: ReplicaJob) -> str:
    """The measured workload as the split names it: the program's name or command, or the tracker's size."""
    w = job.workload
    if w.is_program:
        return w.name or str(w.command)
    return f"{w.engine} {job.run.particles:g} x {job.run.turns}"


def splits_mean(splits: list[Split]) -> Split:
    """The split of the repeats' mean parts (for the prediction at other lengths)."""
    m = summarize(splits)
    s = splits[0]
    return Split(**{**s.to_dict(), **{k: m[k] for k in ("slice_ms", "switch_ms", "refill_ms", "in_slice_rate")}})


def print_split(out: dict[str, Any]) -> None:
    s = out["summary"]
    print(
        f"{out['workload']} on {out['device_name']} {out['uuid']}: measured timeslice:{out['replicas']} loss "
        f"{s['loss_pct']:.2f}% [{s['loss_ci_low']:.2f}, {s['loss_ci_high']:.2f}]; slice {s['slice_ms']:.3f} ms, "
        f"switch {s['switch_ms']:.3f} ms ({s['switch_idle_pct']:.2f}% idle), GPU share beside the probe "
        f"{s['gpu_share']:.3f}, in-slice rate {s['in_slice_rate']:.3f}, refill {s['refill_ms']:.3f} ms per switch-in; "
        f"predicted loss {s['predicted_loss_pct']:.2f}% ({s['error_pts']:+.2f} points)"
    )
    for r in out["predicted_at"]:
        loss = r["predicted_loss_pct"]
        print(
            f"  predicted at a {r['slice_ms']:g} ms slice: loss {loss:.2f}%"
            if math.isfinite(loss)
            else f"  predicted at a {r['slice_ms']:g} ms slice: no progress"
        )
