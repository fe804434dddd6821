"""The report's sections beyond the loss tables: the machine, the prediction, the telemetry, the latency
of replica patterns and the provenance of a results folder. Each returns a :class:`~sharebench.report.render.Section`
(and writes the CSV and plot it is made of into the folder)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sharebench.analysis import (
    Tables,
    cell_telemetry,
    energy_table,
    fmt_particles,
    fmt_pct,
    fmt_spec,
    predicted_vs_measured_of,
    price_per_hour,
)
from sharebench.analysis.latency import USERS_CSV, below_one, sweep_slo, users_table
from sharebench.analysis.prediction import DRAM_BOUND_PCT, SM_BOUND_PCT, SM_IDLE_PCT
from sharebench.analysis.tail import VERDICTS
from sharebench.analysis.telemetry import PRICE_ENV
from sharebench.parse import number_or_nan
from sharebench.report.latency import make_latency_plots
from sharebench.report.plots import plot_energy, plot_predicted_vs_measured
from sharebench.report.render import Bullets, Image, Section, Table, Text
from sharebench.results import PROVENANCE_JSON, read_sweeps
from sharebench.results.bursts import load_bursts
from sharebench.results.folder import PREDICTION_CSV, TELEMETRY_SUMMARY_CSV
from sharebench.telemetry.provenance import code_line, machine_state_text, probe_line


def _v(x: Any) -> str:
    return "—" if x is None or x == "" else str(x)


# ------------------------------------------------------------------ machine


def machine_rows(prov: dict[str, Any] | None) -> list[tuple[str, str]]:
    """(what, value) of the machine a results folder was measured on, from its provenance."""
    if not prov:
        return [("machine", f"no {PROVENANCE_JSON} in this folder")]
    dev = prov.get("device") or {}
    nv = prov.get("nvidia") or {}
    host = prov.get("host") or {}
    libs = prov.get("libraries") or {}
    gpus = ", ".join(f"{g.get('name')} ({g.get('uuid')}, MIG {g.get('mig_mode')})" for g in nv.get("gpus") or [])
    load = host.get("load_avg_1m_5m_15m")
    cmd = prov.get("command")
    return [
        ("device", ", ".join(f"{k}={v}" for k, v in dev.items() if v not in (None, "")) or "-"),
        ("GPUs (NVML)", gpus or str(nv.get("reason") or "-")),
        (
            "driver / CUDA",
            f"{nv.get('driver_version') or '-'} / {nv.get('cuda_driver_version') or '-'}"
            + (f" ({prov['cuda_runtime']})" if prov.get("cuda_runtime") else ""),
        ),
        (
            "CPU",
            f"{host.get('cpu_model') or '-'}, {host.get('usable_cores') or host.get('cpu_logical') or '-'} "
            f"usable cores, {(host.get('mem_bytes') or 0) / 2**30:.1f} GiB",
        ),
        (
            "load average at start",
            " / ".join(f"{v:.2f}" for v in load) + f" (1, 5, 15 min; {host.get('cpu_logical') or '?'} logical cores)"
            if load
            else "-",
        ),
        ("host / OS", f"{host.get('hostname') or '-'} / {host.get('os') or '-'}, Python {host.get('python') or '-'}"),
        ("libraries", ", ".join(f"{k} {v}" for k, v in libs.items() if v)),
        ("command", (" ".join(map(str, cmd)) if isinstance(cmd, (list, tuple)) else str(cmd or "")) or "-"),
        ("written", str(prov.get("created_utc") or "-")),
    ]


def machine_table(prov: dict[str, Any] | None) -> Table:
    return Table(pd.DataFrame(machine_rows(prov), columns=["what", "value"]))


# ------------------------------------------------------------------ provenance


def provenance_rows(prov: dict[str, Any]) -> list[tuple[str, str]]:
    """(what, value) rows of a provenance document, in reading order; unknowns say why."""
    rows: list[tuple[str, str]] = []
    dev = prov.get("device") or {}
    rows.append(("device", f"{_v(dev.get('name'))} ({_v(dev.get('kind'))}, {_v(dev.get('backend'))})"))
    gpu = prov.get("gpu")
    nv = prov.get("nvidia") or {}
    if gpu is not None:
        if not gpu.get("available"):
            rows.append(("GPU (NVML)", f"not available: {_v(gpu.get('reason'))}"))
        else:
            rows += [
                ("GPU model", f"{_v(gpu.get('name'))} [{_v(gpu.get('model_key'))}, {_v(gpu.get('sms'))} SMs]"),
                ("GPU UUID", _v(gpu.get("uuid"))),
                ("driver / CUDA (driver API)", f"{_v(nv.get('driver_version'))} / {_v(nv.get('cuda_driver_version'))}"),
            ]
            mig = gpu.get("mig_mode") or {}
            insts = gpu.get("mig_instances") or []
            layout = ", ".join(
                f"GI {i.get('gpu_instance_id')}: {_v(i.get('profile'))} ({_v(i.get('sms'))} SMs)" for i in insts
            )
            rows.append(("MIG", f"{_v(mig.get('current'))}" + (f"; {layout}" if layout else "")))
    if prov.get("cuda_runtime"):
        rows.append(("CUDA runtime", prov["cuda_runtime"]))
    probe = probe_line(prov.get("timeslice_probe"))  # a sweep with a timeslice mode: its time-slice probe
    if probe:
        rows.append(("time-slice probe", probe.removeprefix("probe: ")))
    if prov.get("opencl"):
        rows.append(
            ("OpenCL platform / device", f"{_v(prov['opencl'].get('platform'))} / {_v(prov['opencl'].get('device'))}")
        )
    libs = prov.get("libraries") or {}
    rows.append(
        (
            "xsuite / xtrack / xobjects / xpart",
            " / ".join(_v(libs.get(k)) for k in ("xsuite", "xtrack", "xobjects", "xpart")),
        )
    )
    sb = prov.get("sharebench") or {}
    rows.append(("sharebench", f"{_v(sb.get('version'))}, {code_line(prov)[1]}"))
    rows.append(("machine state", machine_state_text(prov)))
    host = prov.get("host") or {}
    rows.append(
        (
            "host",
            f"{_v(host.get('hostname'))}: {_v(host.get('cpu_model'))}, {_v(host.get('cpu_logical'))} "
            f"logical cores, {_v(host.get('os'))}",
        )
    )
    cl = prov.get("cluster") or {}
    if cl.get("in_cluster") or cl.get("node") or cl.get("api"):
        rows.append(("cluster node", _v(cl.get("node"))))
        rows.append(
            (
                "gpu-operator / device-plugin",
                f"{_v(cl.get('gpu_operator_version'))} / {_v(cl.get('device_plugin_version'))}",
            )
        )
        if (cl.get("api") or {}).get("error"):
            rows.append(("Kubernetes API", f"not read: {cl['api']['error']}"))
    cmd = prov.get("command")
    rows.append(("command", " ".join(map(str, cmd)) if isinstance(cmd, (list, tuple)) else _v(cmd)))
    rows.append(("config hash (SHA-256)", _v(prov.get("config_hash"))))
    rows.append(("recorded (UTC)", _v(prov.get("created_utc"))))
    return rows


def provenance_section(prov: dict[str, Any] | None) -> Section:
    """Where and with what this results folder was measured."""
    section = Section("Provenance")
    if prov is None:
        section.blocks.append(Text(f"No {PROVENANCE_JSON} in this results folder: the run's context was not recorded."))
        return section
    named, line = code_line(prov)
    section.blocks += [
        *([] if named else [Text(f"The code that ran {line}.")]),
        Table(pd.DataFrame(provenance_rows(prov), columns=["what", "value"])),
        Text(f"Full record: `{PROVENANCE_JSON}`."),
    ]
    return section


# ------------------------------------------------------------------ prediction


PREDICTION_INTRO = (
    "Prediction = the loss with no interference between replicas: 0% for time-slicing and MPS "
    "(the ideal span is N·T_1), the SM (or memory) share of the instance for MIG, 0% excess over "
    "the SM/core-fraction ideal for partitions. Excess = measured − predicted, in percentage points. "
    f"Bound from the exclusive cells' telemetry (thresholds: DRAM ≥ {DRAM_BOUND_PCT:.0f}% → memory-bound, "
    f"SM active ≥ {SM_BOUND_PCT:.0f}% → SM-bound, < {SM_IDLE_PCT:.0f}% → latency-bound)."
)


def prediction_display(df: pd.DataFrame) -> pd.DataFrame:
    """The prediction table as printed: percentages with two decimals, "—" where not measured."""
    rows = []
    for r in df.to_dict("records"):
        ci = (
            f"[{fmt_pct(r['measured_ci_low'], '—')}, {fmt_pct(r['measured_ci_high'], '—')}]"
            if math.isfinite(number_or_nan(r["measured_ci_low"]))
            else "—"
        )
        rows.append(
            {
                "table": r["table"],
                "mode": r["mode"],
                "particles": fmt_particles(r["particles"]),
                "compares": r["metric"],
                "measured %": fmt_pct(r["measured_pct"], "—"),
                "95% CI": ci,
                "predicted %": fmt_pct(r["predicted_pct"], "—"),
                "excess (pp)": fmt_pct(r["excess_pct"], "—"),
                "bound": r["bound"],
                "basis": r["basis"],
            }
        )
    return pd.DataFrame(rows)


def prediction_section(results_dir: Path, tables: Tables, device_label: str) -> Section:
    """Predicted vs measured loss per cell and the excess; writes prediction.csv and its plot."""
    section = Section("Predicted vs measured loss")
    df, gpu = predicted_vs_measured_of(results_dir, tables)
    if df.empty:
        section.blocks.append(
            Text("No loss table to compare with a prediction (no shared-mode cells with an exclusive baseline).")
        )
        return section
    images = plot_predicted_vs_measured(
        df, results_dir / "plots", title=f"{gpu or device_label or 'device'}: loss against a no-interference prediction"
    )[:1]
    evidence = sorted({f"{r['bound']}: {r['bound_evidence']}" for r in df.to_dict("records")})
    df.to_csv(results_dir / PREDICTION_CSV, index=False)
    section.blocks += [
        Text(PREDICTION_INTRO),
        Table(prediction_display(df)),
        Text("Telemetry behind the bound: " + "; ".join(evidence) + "."),
        *(Image(p) for p in images),
    ]
    return section


# ------------------------------------------------------------------ telemetry


# (energy_table column, header, format spec; None: as text)
TELEMETRY_COLUMNS = [
    ("mode", "mode", None),
    ("particles", "particles", ",.0f"),
    ("tel_source", "source", None),
    ("gpu_util_pct", "GPU util %", ".1f"),
    ("sm_clock_mhz", "SM clock MHz", ".0f"),
    ("sm_active_pct", "SM active %", ".1f"),
    ("dram_bw_util_pct", "DRAM BW %", ".1f"),
    ("power_w", "power W", ".1f"),
    ("mem_used_bytes_max", "GPU mem max GiB", None),
    ("cpu_busy_cores", "host busy cores", ".2f"),
    ("proc_busy_cores", "replica cores", ".2f"),
    ("energy_j_per_mpt", "J / 10⁶ pt", ".3g"),
    ("throughput_pt_per_s", "throughput pt/s per device", ".4g"),
    ("gain", "sharing gain", ".2f"),
]


def telemetry_display(table: pd.DataFrame, price: float | None) -> pd.DataFrame:
    """The energy table as printed; columns nothing was measured for (GPU columns on a CPU run, and
    the reverse) are left out."""
    show = list(TELEMETRY_COLUMNS)
    if np.isfinite(table["dcgm_sm_active_pct"].astype(float)).any():
        show[7:7] = [("dcgm_sm_active_pct", "DCGM SM active %", ".1f"), ("dcgm_fp64_active_pct", "DCGM FP64 %", ".1f")]
    if price:
        show.append(("cost_per_1e9_pt", "cost / 10⁹ pt", ".4g"))
    recs = []
    for r in table.to_dict("records"):
        rec = {}
        for k, _h, spec in show:
            if k == "mem_used_bytes_max":
                rec[k] = fmt_spec(number_or_nan(r[k]) / 2**30, ".2f")
            else:
                rec[k] = str(r[k]) if spec is None else fmt_spec(r[k], spec)
        recs.append(rec)
    keep = {"mode", "particles", "tel_source"}
    show = [c for c in show if c[0] in keep or any(rec[c[0]] != "—" for rec in recs)]
    return pd.DataFrame([{h: rec[k] for k, h, _s in show} for rec in recs], columns=[h for _k, h, _s in show])


def telemetry_section(results_dir: Path, tables: Tables) -> Section:
    """Telemetry per cell, energy and cost; writes telemetry_summary.csv and its plot."""
    section = Section("Telemetry, energy and cost")
    cells = cell_telemetry(results_dir)
    if cells.empty or not any(c.startswith(("tel_", "dcgm_")) for c in cells.columns):
        section.blocks.append(
            Text(
                "No telemetry in this results folder (the sweep ran without sharebench.telemetry, "
                "and no dcgm.csv from Prometheus)."
            )
        )
        return section
    price, price_src = price_per_hour(results_dir)
    table = energy_table(cells, tables.throughput, price)
    table.to_csv(results_dir / TELEMETRY_SUMMARY_CSV, index=False)
    esrc = sorted({str(s) for s in table["energy_source"] if s})
    section.blocks.append(
        Text(
            "Medians over the measured cells of each mode and size, of each cell's mean over its tracking "
            "window (from the raw samples; the whole sampled window where those are missing). Telemetry is per cell "
            "and per whole device: under time-slicing and MPS, NVML's values are the GPU's, shared by all replicas "
            "(not per replica). Host busy cores count everything on the machine; replica cores only the "
            "sweep's own processes. Energy is over the tracking window; source: "
            + (", ".join(esrc) if esrc else "none recorded (NVML gives GPU energy; none is read for a CPU)")
            + "."
        )
    )
    if price:
        section.blocks.append(
            Text(
                f"Price: {price:g} per GPU-hour ({price_src}); cost per 10⁹ particle-turns = "
                "price / 3600 / throughput × 10⁹."
            )
        )
    else:
        section.blocks.append(
            Text(f"No price given (sweep config `price_per_gpu_hour` or `{PRICE_ENV}`): no cost column.")
        )
    section.blocks.append(Table(telemetry_display(table, price)))
    notes = sorted(
        {str(n) for col in ("tel_note", "dcgm_note") for n in cells.get(col, []) if isinstance(n, str) and n}
    )
    if notes:
        section.blocks += [Text("Telemetry notes:"), Bullets(notes)]
    section.blocks += [Image(p) for p in plot_energy(table, results_dir / "plots")[:1]]
    return section


LATENCY_HELP = (
    "Replica 0 of each cell (the victim) follows the sweep's --pattern; the others (the neighbours) follow "
    "--neighbours. Latency = end - arrival of a burst or request (a request's includes its time queued). "
    "Slowdown = the percentile against the same percentile of the same pattern alone (exclusive); the p50/p95/p99 "
    "columns are the row's replicas (a victim row: replica 0). Intervals: 95%, {method}. **Every user counted**: a "
    "sharing cell's verdict against the target reads every replica that follows the victim's pattern (a neighbour "
    "of another pattern is the aggressor, not a user): *within* when every user's p95 slowdown is within it beyond "
    "doubt (the worst user's upper bound), *above* when some user's is above it beyond doubt (a lower bound), else "
    "*undecided* (too few samples for the percentile, or an interval across the target); *worst user* and *all "
    "users* (the p95 over every user's bursts) with their intervals; *below 1*: a user faster shared than "
    "alone beyond doubt, the baseline is off, no figure. The verdict's intervals are distribution-free (order "
    "statistics, the binomial's ranks), valid for one run, and assume that a user's bursts are independent draws "
    "(a queue near saturation makes them narrower than the truth). Busy = the share of the replica's window with "
    "work in flight; throughput cost = 1 - its units/s against the same pattern alone. Users per GPU: by the "
    "verdicts, the largest N within with every smaller N within and the smallest N above; never extrapolated past "
    "the measured N, never a point estimate alone."
)
METHOD_TEXT = {
    "order": "distribution-free, between order statistics (independent bursts assumed)",
    "hierarchical": "two-level bootstrap over repeats, then bursts (none from one repeat)",
    "bursts": "percentile bootstrap over bursts within each repeat",
    "repeats": "Student-t between repeats",
}


def fmt_ms(v: Any) -> str:
    x = number_or_nan(v)
    return f"{1e3 * x:.4g}" if math.isfinite(x) else ""


def fmt_x(v: Any, lo: Any = math.nan, hi: Any = math.nan) -> str:
    """A slowdown with its interval: ``1.57× [1.31, 1.89]``; a bound that does not exist (too few samples) is
    ``?``; "" when there is no value."""
    x, a, b = number_or_nan(v), number_or_nan(lo), number_or_nan(hi)
    if not math.isfinite(x):
        return ""
    if not (math.isfinite(a) or math.isfinite(b)):
        return f"{x:.2f}×"

    def bound(y: float) -> str:
        return f"{y:.2f}" if math.isfinite(y) else "?"

    return f"{x:.2f}× [{bound(a)}, {bound(b)}]"


def verdict_cell(r: Any) -> str:
    """A row's verdict as the latency table prints it: ``within (2 users)``, ``below 1`` for a flagged cell."""
    if str(r.get("verdict", "")) not in VERDICTS:
        return ""
    users = number_or_nan(r.get("users"))
    n = f" ({int(users)} users)" if math.isfinite(users) else ""
    return ("below 1" if below_one(r) else str(r["verdict"])) + n


def latency_display(table: pd.DataFrame) -> pd.DataFrame:
    """tables/latency.csv as the report prints it (ms, slowdowns with their intervals, the verdicts)."""
    rows = []
    for _, r in table.iterrows():
        cost = number_or_nan(r["throughput_cost"])
        rows.append(
            {
                "mode": r["mode"],
                "pattern": r["pattern"],
                "role": r["role"],
                "beside": r["beside"] or "alone",
                "bursts": int(r["bursts"]),
                "repeats": int(r["repeats"]),
                "p50 ms": fmt_ms(r["latency_p50_s"]),
                "p95 ms": fmt_ms(r["latency_p95_s"]),
                "p99 ms": fmt_ms(r["latency_p99_s"]),
                "p95 slowdown": fmt_x(r["slowdown_p95"], r["slowdown_p95_lo"], r["slowdown_p95_hi"]),
                "verdict": verdict_cell(r),
                "worst user p95 slowdown": fmt_x(
                    r.get("worst_p95_slowdown"), r.get("worst_p95_slowdown_lo"), r.get("worst_p95_slowdown_hi")
                ),
                "all users p95 slowdown": fmt_x(
                    r.get("pooled_p95_slowdown"), r.get("pooled_p95_slowdown_lo"), r.get("pooled_p95_slowdown_hi")
                ),
                "busy": fmt_pct(100 * number_or_nan(r["busy_fraction"])),
                "throughput cost": fmt_pct(100 * cost) if math.isfinite(cost) else "",
            }
        )
    return pd.DataFrame(rows)


def side_text(r: Any, side: str) -> str:
    """The cell at one end of a users bracket (``lo``: within, ``hi``: above): ``mps:4 worst user 1.57× [1.31,
    1.89], all users 1.45× [1.30, 1.62]``; "" when that end was not measured."""
    mode = r.get(f"{side}_mode")
    if not isinstance(mode, str) or not mode:
        return ""
    worst = fmt_x(*(r.get(f"{side}_worst_p95_slowdown{k}") for k in ("", "_lo", "_hi")))
    pooled = fmt_x(*(r.get(f"{side}_pooled_p95_slowdown{k}") for k in ("", "_lo", "_hi")))
    return f"{mode}: worst user {worst}, all users {pooled}"


def users_display(users: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "pattern": r["pattern"],
                "modes": r["family"],
                f"users per GPU at {r['slo']:g}×": r["answer"],
                "within at": side_text(r, "lo"),
                "above at": side_text(r, "hi"),
                "measured N": str(r["measured"]).replace(",", ", "),
                "why": r["reason"]
                + (f"; left out: {r['flagged']}" if isinstance(r["flagged"], str) and r["flagged"] else ""),
            }
            for _, r in users.iterrows()
        ]
    )


def latency_section(results_dir: Path, tables: Tables) -> Section:
    """Latency of bursts and requests per mode and pattern, users per GPU at the sweep's target, and their
    plots; writes tables/users_per_gpu.csv and the plots (nothing without a pattern measured)."""
    section = Section("Latency of bursts and requests (replica patterns)")
    table = tables.latency
    if table.empty:
        section.blocks.append(Text("No replica pattern was measured here (every replica ran batch): no latency table."))
        return section
    slo = sweep_slo(read_sweeps(results_dir, torn_ok=True))
    users = users_table(table, slo)
    (results_dir / "tables").mkdir(parents=True, exist_ok=True)
    users.to_csv(results_dir / "tables" / USERS_CSV, index=False)
    methods = sorted({str(m) for m in table["ci_method"]})
    section.blocks += [
        Text(LATENCY_HELP.format(method=", ".join(METHOD_TEXT.get(m, m) for m in methods))),
        Table(latency_display(table)),
        Text(f"Users per GPU at a p95 slowdown target of {slo:g}× (tables/{USERS_CSV}):"),
        Table(users_display(users)),
    ]
    bursts = load_bursts(results_dir)
    bursts = bursts[~bursts["warmup"].astype(bool)]
    section.blocks += [
        Image(p) for p in make_latency_plots(bursts, table, results_dir / "plots", slo) if p.suffix == ".png"
    ]
    return section
