"""``sharebench probe timeslice|split``: the work, imported when one of them runs (their options:
``sharebench.cli.probe``)."""

from __future__ import annotations

import argparse
import csv
import json
import math
import tempfile
from pathlib import Path
from typing import Any

from sharebench.analysis.statistics import ratio_loss_ci
from sharebench.analysis.timeslice_split import (
    SPLIT_COLUMNS,
    Split,
    SwitchOut,
    loss_at,
    model_row,
    split,
    summarize,
)
from sharebench.cli.probe import SplitOptions, checked, split_options, timeslice_options
from sharebench.devices import resolve_device
from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.probe_settings import Neighbour
from sharebench.sharing import cell_run, run_cell
from sharebench.sweep.beside import run_beside_probe
from sharebench.telemetry.timeslice_probe import BesideRun, ProbeUnavailable, TimesliceProbe, run_probe
from sharebench.workloads import ReplicaJob, Workload

BESIDE_FACTOR = 3.0  # a workload beside one neighbour runs ~2.6 x T_1: the neighbour spins 3 x T_1 + margin
BESIDE_MARGIN_S = 2.0


def probe_or_fail(n: int, secs: float, args: argparse.Namespace, neighbour: str = "light") -> TimesliceProbe:
    checked(n, secs, args)
    r = run_probe(n, secs, device=args.device, grid=args.grid, threshold_us=args.threshold_us, neighbour=neighbour)
    if isinstance(r, ProbeUnavailable):
        raise UserError(f"time-slice probe ({neighbour}): {r.reason}")
    return r


def cmd_timeslice(args: argparse.Namespace) -> int:
    opts = timeslice_options(args)  # as cli.lazy checked them before this module loaded
    results = []
    for neighbour in opts.neighbours:
        for n in opts.processes:
            r = probe_or_fail(n, opts.seconds, args, neighbour.label)
            print(r.summary(), flush=True)
            results.append(r.to_dict(traces=True))
    if args.out:
        write_atomic(args.out, json.dumps({"timeslice_probe": results}, indent=1, default=str) + "\n")
    return 0


def workload_job(args: argparse.Namespace, opts: SplitOptions) -> ReplicaJob:
    """The job of the workload the split measures: a program (``--exec``) or Simpletrack."""
    if args.exec_command:
        program = Workload(engine="exec", device=args.device, command=args.exec_command, name=args.exec_name)
        return ReplicaJob.of(program, particles=opts.work, turns=1)
    tracker = Workload(engine="simpletrack", device=args.device, lattice=args.lattice)
    return ReplicaJob.of(tracker, particles=opts.particles, turns=opts.turns)


def cell_times(mode: str, job: ReplicaJob, folder: Path) -> tuple[float, float]:
    """One cell: (mean track_s of its replicas, span from the first start to the last end)."""
    rows = run_cell(cell_run(mode, job, folder, device=resolve_device(job.run.device)))
    bad = [r for r in rows if r.get("status") != "ok"]
    if bad:
        raise UserError(f"the {mode} cell failed: {bad[0].get('error') or bad[0].get('cell_error')}")
    span = max(r["track_end"] for r in rows) - min(r["track_start"] for r in rows)
    return sum(r["track_s"] for r in rows) / len(rows), span


def beside(job: ReplicaJob, folder: Path, t1: float, args: argparse.Namespace, neighbour: str) -> BesideRun:
    """One replica beside one ``neighbour``; once more with a neighbour spinning twice as long when the
    first ended before the workload's window."""
    probe_s, ran = min(BESIDE_FACTOR * t1 + BESIDE_MARGIN_S, 600.0), math.nan
    for attempt in (1, 2):
        r = run_beside_probe(
            job, folder / f"try{attempt}", probe_s, grid=args.grid, threshold_us=args.threshold_us, neighbour=neighbour
        )
        if isinstance(r, ProbeUnavailable):
            raise UserError(f"workload beside the {neighbour} probe: {r.reason}")
        if r.covered():
            return r
        ran = float(r.record["track_s"])
        probe_s = min(2 * probe_s, 600.0)
    raise UserError(f"the {neighbour} probe ended before the workload's window twice; the workload ran {ran:.1f} s")


def split_plan(args: argparse.Namespace) -> tuple[ReplicaJob, int, int, float, list[float], list[Neighbour]]:
    """The split's arguments (checked by ``cli.probe.split_options``): job, replicas, repeats, probe seconds,
    lengths, neighbours."""
    opts = split_options(args)
    return (
        workload_job(args, opts),
        opts.replicas,
        opts.repeats,
        opts.probe_s,
        list(opts.lengths),
        list(opts.neighbours),
    )


def measure(
    job: ReplicaJob, n: int, repeats: int, labels: list[str], args: argparse.Namespace
) -> tuple[list[float], list[float], dict[str, list[BesideRun]]]:
    """Per repeat: the workload alone, N time-sliced, and beside each neighbour."""
    t1: list[float] = []
    tn: list[float] = []
    runs: dict[str, list[BesideRun]] = {k: [] for k in labels}
    with tempfile.TemporaryDirectory(prefix="sb-split-") as tmp:
        for i in range(repeats):
            t1.append(cell_times("exclusive", job, Path(tmp) / f"alone{i}")[0])
            tn.append(cell_times(f"timeslice:{n}", job, Path(tmp) / f"ts{i}")[1])
            line = f"repeat {i}: alone {t1[-1]:.3f} s, timeslice:{n} {tn[-1]:.3f} s"
            for k in labels:
                runs[k].append(beside(job, Path(tmp) / f"beside{i}-{k.replace(':', '_')}", t1[-1], args, k))
                line += f", beside {k} {runs[k][-1].record['track_s']:.3f} s"
            print(line, flush=True)
    return t1, tn, runs


def cmd_split(args: argparse.Namespace) -> int:
    job, n, repeats, probe_s, lengths, neighbours = split_plan(args)
    labels = [k.label for k in neighbours]
    if args.dry_run:
        print(
            f"would measure {split_name(job)}: probes alone ({', '.join(labels)}; {probe_s:g} s each), then "
            f"{repeats} x (alone, timeslice:{n}, beside {', '.join(labels)})"
        )
        return 0
    probes = {k: probe_or_fail(2, probe_s, args, k) for k in labels}
    for p in probes.values():
        print(p.summary(), flush=True)
    t1, tn, runs = measure(job, n, repeats, labels, args)
    measured = ratio_loss_ci(tn, t1, factor=n)
    alone = sum(t1) / len(t1)
    splits = {
        k: [
            split(
                alone,
                r.record["track_s"],
                SwitchOut.of(r),
                probes[k].switch_ms.p50,
                probes[k].slice_ms.p50,
                measured[0],
            )
            for r in runs[k]
        ]
        for k in labels
    }
    light = splits["light"]
    rows = [{"neighbour": k, **model_row(splits[k], light, measured, k)} for k in labels[1:]]
    rows = rows or [model_row(light, [], measured, "light")]
    out: dict[str, Any] = dict(
        workload=split_name(job),
        uuid=probes["light"].uuid,
        device_name=probes["light"].device_name,
        replicas=n,
        alone_s=t1,
        timeslice_span_s=tn,
        probe=probes["light"].to_dict(),
        probes={k: p.to_dict() for k, p in probes.items()},
        splits={k: [s.to_dict() for s in v] for k, v in splits.items()},
        summary=summarize(light, measured),
        model=rows,
    )
    out["predicted_at"] = loss_at(splits_mean(splits[labels[-1]]), lengths)
    print_split(out)
    if args.out:
        write_atomic(args.out, json.dumps(out, indent=1, default=str) + "\n")
    if args.table:
        append_table(
            Path(args.table),
            [
                {
                    **work_keys(job),
                    "mode": f"timeslice:{n}",
                    "uuid": out["uuid"],
                    "device_name": out["device_name"],
                    **r,
                }
                for r in rows
            ],
        )
    return 0


def work_keys(job: ReplicaJob) -> dict[str, Any]:
    """The results' work keys of the measured workload (``analysis.timeslice_split.RECORD_WORK``)."""
    w = job.workload
    lattice = Path(w.lattice).name if w.lattice else ("" if w.is_program else "generated")
    return dict(
        engine=w.label,
        backend="cuda",
        device_class="gpu",
        lattice=lattice,
        particles=job.run.particles,
        turns=job.run.turns,
    )


def append_table(path: Path, rows: list[dict[str, Any]]) -> None:
    """Add rows to a split table (:data:`SPLIT_COLUMNS`), its header written when the file is new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=SPLIT_COLUMNS, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerows(rows)


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
        f"{s['loss_pct']:.2f}% [{s['loss_ci_low']:.2f}, {s['loss_ci_high']:.2f}]; T1 {s_mean(out['alone_s']):.3f} s, "
        f"T{out['replicas']} {s_mean(out['timeslice_span_s']):.3f} s ({len(out['alone_s'])} repeats)"
    )
    for k, p in out["probes"].items():
        print(f"  {k} pair alone: slice {p['slice_ms']['p50']:.3f} ms, switch {p['switch_ms']['p50']:.3f} ms")
    for r in out["model"]:
        print(
            f"  beside {r['neighbour']}: slice {r['slice_ms']:.3f} ms, switch {r['switch_ms']:.3f} ms "
            f"({r['switch_idle_pct']:.2f}% idle), in-slice rate {r['in_slice_rate']:.3f} "
            f"(light {r['in_slice_rate_light']:.3f}), refill {r['refill_light_ms']:.3f} ms + evicted "
            f"{r['evict_ms']:.3f} ms [{r['evict_ms_ci_low']:.3f}, {r['evict_ms_ci_high']:.3f}] per switch-in; "
            f"predicted {r['predicted_loss_pct']:.2f}% (light probe alone {r['predicted_light_pct']:.2f}%), "
            f"measured {r['loss_pct']:.2f}%: unexplained {r['unexplained_pts']:+.2f} points "
            f"[{r['unexplained_ci_low']:+.2f}, {r['unexplained_ci_high']:+.2f}], "
            f"{r['missing_ms']:+.3f} ms per switch-in"
        )
    for r in out["predicted_at"]:
        loss = r["predicted_loss_pct"]
        print(
            f"  predicted at a {r['slice_ms']:g} ms slice: loss {loss:.2f}%"
            if math.isfinite(loss)
            else f"  predicted at a {r['slice_ms']:g} ms slice: no progress"
        )


def s_mean(x: list[float]) -> float:
    return sum(x) / len(x) if x else math.nan
