"""``sharebench probe timeslice|split``: the work, imported when one of them runs (their options:
``sharebench.cli.probe``)."""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

from sharebench.analysis.statistics import ratio_loss_ci
from sharebench.analysis.timeslice_split import (
    SPLIT_COLUMNS,
    ProbePair,
    Split,
    beside_record,
    doc_rows,
    doc_splits,
    loss_at,
    run_splits,
    summarize,
)
from sharebench.cli.probe import SplitOptions, checked, split_options, timeslice_options
from sharebench.devices import resolve_device
from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.probe_settings import Neighbour
from sharebench.sharing import cell_run, run_cell
from sharebench.sweep.beside import run_beside_probe
from sharebench.telemetry.provenance import collect as collect_provenance
from sharebench.telemetry.timeslice_probe import (
    BesideRun,
    ProbeUnavailable,
    TimesliceProbe,
    run_probe,
)
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
    if args.from_file:
        return split_from(args)
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
    out = split_document(job, n, (t1, tn), probes, runs)
    out["provenance"] = collect_provenance(resolve_device(args.device), list(sys.argv), {"work": out["work"]})
    out["predicted_at"] = loss_at(splits_mean(doc_splits(out)[labels[-1]]), lengths)
    finish_split(out, args)
    return 0


def split_document(
    job: ReplicaJob,
    n: int,
    times: tuple[list[float], list[float]],
    probes: dict[str, TimesliceProbe],
    runs: dict[str, list[BesideRun]],
) -> dict[str, Any]:
    """Everything ``probe split --out`` keeps: the work, the measured times (``times``: alone, N
    time-sliced), the probe pairs alone, the raw record of every run beside each neighbour (its gaps: the
    table recomputes from them) and the splits."""
    t1, tn = times
    measured = ratio_loss_ci(tn, t1, factor=n)
    alone = sum(t1) / len(t1)
    work = work_keys(job)
    light = probes["light"]
    beside = {
        k: [beside_record(r, work, probes[k].switch_ms.p50, probes[k].slice_ms.p50, probes[k].to_dict()) for r in v]
        for k, v in runs.items()
    }
    splits = {k: [s.to_dict() for s in run_splits(v, alone)] for k, v in beside.items()}
    for v in splits.values():
        for s in v:
            s.update(measured_loss_pct=measured[0], error_pts=s["predicted_loss_pct"] - measured[0])
    return dict(
        workload=split_name(job),
        work=work,
        mode=f"timeslice:{n}",
        uuid=light.uuid,
        device_name=light.device_name,
        replicas=n,
        alone_s=t1,
        timeslice_span_s=tn,
        probe=light.to_dict(),
        probes={k: p.to_dict() for k, p in probes.items()},
        beside=beside,
        splits=splits,
        summary=summarize(run_splits(beside["light"], alone), measured, switch_bounds(light.to_dict())),
    )


def switch_bounds(probe: dict[str, Any]) -> tuple[float, float]:
    """The interval of a probe pair's median switch (NaN where not known)."""
    _, lo, hi = ProbePair.of(probe).switch_ms
    return (lo, hi)


def finish_split(out: dict[str, Any], args: argparse.Namespace) -> None:
    """The model rows of a split document printed, written (``--out``) and appended (``--table``)."""
    out["model"] = doc_rows(out)
    print_split(out)
    if args.out:
        write_atomic(args.out, json.dumps(out, indent=1, default=str) + "\n")
    if args.table:
        work = out.get("work") or {}
        extra = {"mode": out.get("mode") or f"timeslice:{out['replicas']}", "uuid": out["uuid"]}
        extra["device_name"] = out["device_name"]
        append_table(Path(args.table), [{**work, **extra, **r} for r in out["model"]])


def split_from(args: argparse.Namespace) -> int:
    """``--from FILE``: the split recomputed from a recorded ``--out`` document, no GPU. Its work keys are
    the document's, or (documents before they were kept) those of the options given, as the original
    command gave them."""
    try:
        doc = json.loads(Path(args.from_file).read_text())
    except (OSError, ValueError) as exc:
        raise UserError(f"--from {args.from_file}: cannot read a probe split document ({exc})") from None
    if not isinstance(doc, dict) or not {"alone_s", "timeslice_span_s", "splits"} <= set(doc):
        raise UserError(f"--from {args.from_file}: not a `sharebench probe split --out` document")
    if not doc.get("work"):
        doc["work"] = work_keys(workload_job(args, split_options(args)))
    finish_split(doc, args)
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
    for k, p in doc_probes_of(out).items():
        print(f"  {k} pair alone: slice {p['slice_ms']['p50']:.3f} ms, switch {p['switch_ms']['p50']:.3f} ms")
    for r in out["model"]:
        print(model_line(r))
    for r in out.get("predicted_at") or []:
        loss = r["predicted_loss_pct"]
        print(
            f"  predicted at a {r['slice_ms']:g} ms slice: loss {loss:.2f}%"
            if math.isfinite(loss)
            else f"  predicted at a {r['slice_ms']:g} ms slice: no progress"
        )


def doc_probes_of(out: dict[str, Any]) -> dict[str, Any]:
    return dict(out.get("probes") or {"light": out.get("probe") or {}})


def model_line(r: dict[str, Any]) -> str:
    """One model row: the independent part (the probe pair alone), the transfer from the run beside the
    neighbour, its terms (or what is not identified) and what stays unexplained."""
    text = (
        f"  beside {r['neighbour']}: probe pair alone (slice and switch, no workload) {r['independent_pct']:.2f}% "
        f"{ci_text(r, 'independent_ci')}; transfer from the time-sliced run beside it (in-slice rate "
        f"{r['in_slice_rate']:.3f}, slice {r['slice_ms']:.3f} ms, switch {r['switch_ms']:.3f} ms) "
        f"{r['predicted_loss_pct']:.2f}% {ci_text(r, 'predicted_ci')}, measured {r['loss_pct']:.2f}%: "
        f"unexplained {r['unexplained_pts']:+.2f} points [{r['unexplained_ci_low']:+.2f}, "
        f"{r['unexplained_ci_high']:+.2f}]"
    )
    terms = [
        f"{name} {r[col]:.3f} ms"
        for name, col in (("refill", "refill_ms"), ("evicted", "evict_ms"))
        if math.isfinite(float(r[col]))
    ]
    if terms:
        text += "; " + ", ".join(terms) + " per switch-in"
    if r.get("not_identified"):
        text += f"; not identified: {r['not_identified']}"
    return text


def ci_text(r: dict[str, Any], stem: str) -> str:
    lo, hi = float(r[f"{stem}_low"]), float(r[f"{stem}_high"])
    return f"[{lo:.2f}, {hi:.2f}]" if math.isfinite(lo) and math.isfinite(hi) else "(no interval)"


def s_mean(x: list[float]) -> float:
    return sum(x) / len(x) if x else math.nan
