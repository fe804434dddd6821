"""report.md and report.html from a results folder, optionally beside a second one.

``build_report(results_dir, compare=None)`` reads ``results.csv`` (and
``machine.json``), writes ``tables/``, ``plots/``, ``report.md`` and a
self-contained ``report.html`` (plots embedded), and appends the optional
sections of sharebench.prediction, sharebench.telemetry and
sharebench.provenance where those modules provide ``report_section``.
"""

from __future__ import annotations

import base64
import html
import importlib
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from sharebench import analysis
from sharebench.errors import UserError
from sharebench.plots import make_plots
from sharebench.results import load_results, read_machine

SECTION_MODULES = ("sharebench.prediction", "sharebench.telemetry", "sharebench.provenance")
TABLE_ORDER = ("timeslice", "mps", "mig", "partition", "throughput")

DEFINITIONS = """\
- **T_1**: tracking time of one replica alone on the device (`exclusive`).
- **T_N**: span of the N concurrent tracking windows, max(end) − min(start).
- **time-slicing / MPS loss** = (T_N − N·T_1) / (N·T_1): 0% means sharing cost nothing beyond
  doing the N runs one after the other; negative means the device did more work when shared.
- **MIG loss** = (T_mig − T_full) / T_full for the same work on one MIG instance.
- **partition scaling**: T_slice against the ideal T_full × full units / slice units
  (SMs of the MIG profile on a GPU, cores on the CPU); efficiency = ideal / T_slice.
- **throughput**: particle-turns of all replicas / T_N, per physical device; **gain** = against exclusive.
- **fairness**: slowest / fastest replica tracking time in a cell (1.00 = fair).
- Every figure is a median over the measured repeats (warm-up left out) with a 95% bootstrap
  confidence interval; CV = coefficient of variation of the repeats; **≠ 0?** says whether the
  loss's CI excludes 0 (yes: a real loss or gain at that level; no: not distinguishable from 0).
"""

FLAGS_HELP = """\
How to read the flags: *excluded = yes* means the cell is left out of every statistic
(a replica failed, the replicas ran on different devices, or their tracking windows overlapped
less than 95% so they did not really share the device). *excluded = no* is a warning: few repeats
(wide or missing CI), a large spread (CV > 10%: trust the median less), an unfair share between
replicas, or no exclusive baseline for that work (no loss computed).
"""


def _label(results_dir: Path, machine: dict[str, Any]) -> str:
    dev = machine.get("device") or {}
    name = dev.get("name") if isinstance(dev, dict) else None
    return f"{results_dir.name} ({name})" if name else results_dir.name


def _machine_lines(machine: dict[str, Any]) -> list[tuple[str, str]]:
    if not machine:
        return [("machine", "no machine.json in this folder")]
    dev = machine.get("device") or {}
    nv = machine.get("nvidia") or {}
    cpu = machine.get("cpu") or {}
    libs = machine.get("libraries") or {}
    gpus = ", ".join(f"{g.get('name')} ({g.get('uuid')}, MIG {g.get('mig_mode')})" for g in nv.get("gpus", []))
    return [
        ("device", ", ".join(f"{k}={v}" for k, v in dev.items() if v not in (None, "")) if dev else "-"),
        ("GPUs (NVML)", gpus or str(nv.get("nvml", "-"))),
        ("driver / CUDA", f"{nv.get('driver', '-')} / {nv.get('cuda_driver', '-')}"
                          + (f" ({machine['cuda_runtime']})" if machine.get("cuda_runtime") else "")),
        ("CPU", f"{cpu.get('model', '-')}, {cpu.get('usable_cores', cpu.get('logical_cores', '-'))} usable cores, "
                f"{(cpu.get('memory_bytes') or 0) / 2**30:.1f} GiB"),
        ("load average at start", " / ".join(f"{v:.2f}" for v in machine["load_avg_1m_5m_15m"])
         + f" (1, 5, 15 min; {cpu.get('logical_cores', '?')} logical cores)"
         if machine.get("load_avg_1m_5m_15m") else "-"),
        ("host / OS", f"{machine.get('host', '-')} / {machine.get('os', '-')}, Python {machine.get('python', '-')}"),
        ("libraries", ", ".join(f"{k} {v}" for k, v in libs.items())),
        ("command", " ".join(machine.get("command", [])) or "-"),
        ("written", str(machine.get("written_utc", "-"))),
    ]


def _sections(results_dir: Path, tables: dict[str, pd.DataFrame]) -> tuple[list[dict], list[str]]:
    """Optional sections from the other areas; absent modules are noted, not fatal."""
    sections, notes = [], []
    for name in SECTION_MODULES:
        try:
            fn = getattr(importlib.import_module(name), "report_section")
        except (ImportError, AttributeError) as exc:
            notes.append(f"{name}: no report section ({type(exc).__name__}: {exc})")
            continue
        try:
            sec = fn(Path(results_dir), tables)
        except Exception as exc:  # an optional section must not cost the user the report
            msg = f"{name}.report_section failed: {type(exc).__name__}: {exc}"
            print(f"sharebench: warning: {msg}", file=sys.stderr)
            notes.append(msg)
            continue
        if sec:
            sections.append(sec)
    return sections, notes


def _img_data_uri(path: Path) -> str:
    mime = {"png": "image/png", "svg": "image/svg+xml", "jpg": "image/jpeg"}.get(path.suffix[1:].lower(), "")
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()


def _html_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "<p><em>none</em></p>"
    return df.to_html(index=False, escape=True, border=0, classes="t")


def build_report(results_dir: Path | str, compare: Path | str | None = None) -> dict[str, Path]:
    """Rebuild tables, plots, report.md and report.html; returns their paths."""
    rdir = Path(results_dir)
    if not rdir.is_dir():
        raise UserError(f"results folder {rdir} does not exist")
    tables = analysis.build_tables(load_results(rdir))
    analysis.write_tables(tables, rdir)
    machine = read_machine(rdir)
    label = _label(rdir, machine)
    ctables = cmachine = None
    clabel = ""
    if compare is not None:
        cdir = Path(compare)
        if not cdir.is_dir():
            raise UserError(f"comparison folder {cdir} does not exist")
        if cdir.resolve() == rdir.resolve():
            raise UserError(f"--compare {cdir} is the results folder itself; give a second results folder")
        ctables = analysis.build_tables(load_results(cdir))
        cmachine = read_machine(cdir)
        clabel = _label(cdir, cmachine)
        if clabel == label:
            clabel += " (compare)"
    plots = make_plots(tables, rdir / "plots", ctables, (label, clabel))
    pngs = [p for p in plots if p.suffix == ".png"]
    sections, notes = _sections(rdir, tables)
    notes_file = rdir / "notes.txt"
    if notes_file.exists():  # what the sweep noted (added modes, resumed cells, absent telemetry ...)
        notes = [ln for ln in notes_file.read_text().splitlines() if ln.strip()] + notes
    md = _markdown(rdir, tables, machine, label, ctables, cmachine, clabel, pngs, sections, notes)
    (rdir / "report.md").write_text(md)
    page = _html(tables, machine, label, ctables, cmachine, clabel, pngs, sections, notes)
    (rdir / "report.html").write_text(page)
    return {"markdown": rdir / "report.md", "html": rdir / "report.html", "tables": rdir / "tables",
            "plots": rdir / "plots"}


def _markdown(rdir, tables, machine, label, ctables, cmachine, clabel, pngs, sections, notes) -> str:
    out = [f"# sharebench report: {label}", ""]
    if ctables is not None:
        out += [f"Compared with **{clabel}**.", ""]
    out += ["## Machine", ""]
    for mach, lab in ((machine, label), (cmachine, clabel)):
        if mach is None:
            continue
        if ctables is not None:
            out += [f"**{lab}**", ""]
        out += ["| | |", "|---|---|"] + [f"| {k} | {str(v).replace('|', '/')} |" for k, v in _machine_lines(mach)]
        out.append("")
    out += ["## Summary: loss % (95% CI) per mode", "", analysis.to_markdown(analysis.summary_table(tables)), ""]
    if ctables is not None:
        out += [f"**{clabel}**", "", analysis.to_markdown(analysis.summary_table(ctables)), ""]
    out += ["## Definitions", "", DEFINITIONS]
    for name in TABLE_ORDER:
        t, ct = tables[name], (ctables[name] if ctables is not None else None)
        if t.empty and (ct is None or ct.empty):
            continue
        out += [f"## {analysis.TABLE_TITLES[name]}", ""]
        if ct is not None:
            out += [f"**{label}**", ""]
        out += [analysis.to_markdown(analysis.display_table(name, t)), ""]
        if ct is not None:
            out += [f"**{clabel}**", "", analysis.to_markdown(analysis.display_table(name, ct)), ""]
    out += ["## Plots", ""]
    for p in pngs:
        out += [f"![{p.stem}](plots/{p.name})", f"(also [SVG](plots/{p.stem}.svg))", ""]
    out += [f"## {analysis.TABLE_TITLES['flags']}", "", FLAGS_HELP,
            analysis.to_markdown(analysis.display_table("flags", tables["flags"])), ""]
    if ctables is not None:
        out += [f"**{clabel}**", "", analysis.to_markdown(analysis.display_table("flags", ctables["flags"])), ""]
    out += ["## Cells", "", _cells_md(tables["cells"]), ""]
    for sec in sections:
        out += [f"## {sec.get('title', 'Section')}", "", sec.get("markdown", ""), ""]
        for img in sec.get("images", []) or []:
            img = Path(img).resolve()
            # links in report.md are relative to the results folder, wherever the sweep ran from
            rel = img.relative_to(rdir.resolve()) if rdir.resolve() in img.parents else img
            out += [f"![{img.stem}]({rel.as_posix()})", ""]
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(out)


def _cells_table(cells: pd.DataFrame) -> pd.DataFrame:
    if cells.empty:
        return pd.DataFrame()
    c = cells.copy()
    return pd.DataFrame({
        "cell": c["cell_id"], "mode": c["mode"], "particles": c["particles"].map(analysis._int),
        "repeat": c["repeat"].map(lambda r: f"{int(r)}" if pd.notna(r) else "") + c["warmup"].map(
            lambda w: " (warm-up)" if w else ""),
        "span [s]": c["span_s"].map(analysis._sec), "overlap %": c["overlap_pct"].map(analysis._pct),
        "fairness": c["fairness"].map(analysis._num), "device(s)": c["devices"],
        "excluded": c["excluded"].map(lambda e: "yes" if e else "no"), "flags": c["flags"],
    })


def _cells_md(cells: pd.DataFrame) -> str:
    return analysis.to_markdown(_cells_table(cells))


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1400px;padding:0 1em;
color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table.t{border-collapse:collapse;font-size:.85em;margin:.5em 0}
table.t th,table.t td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
table.t th{background:#f3f3f3}table.t td:last-child{text-align:left}
.side{display:flex;gap:2em;flex-wrap:wrap}.side>div{flex:1 1 500px;overflow-x:auto}
img{max-width:100%;height:auto;border:1px solid #eee}.note{color:#555;font-size:.9em}
"""


def _html(tables, machine, label, ctables, cmachine, clabel, pngs, sections, notes) -> str:
    e = html.escape
    h = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>sharebench report: {e(label)}</title>"
         f"<style>{_CSS}</style></head><body>", f"<h1>sharebench report: {e(label)}</h1>"]
    if ctables is not None:
        h.append(f"<p>Compared with <strong>{e(clabel)}</strong>.</p>")

    def side(a: str, b: str | None, la: str, lb: str) -> str:
        if b is None:
            return a
        return (f"<div class='side'><div><h3>{e(la)}</h3>{a}</div>"
                f"<div><h3>{e(lb)}</h3>{b}</div></div>")

    def mtable(m):
        return _html_table(pd.DataFrame(_machine_lines(m), columns=["", "value"]))

    h.append("<h2>Machine</h2>")
    h.append(side(mtable(machine), mtable(cmachine) if ctables is not None else None, label, clabel))
    h.append("<h2>Summary: loss % (95% CI) per mode</h2>")
    h.append(side(_html_table(analysis.summary_table(tables)),
                  _html_table(analysis.summary_table(ctables)) if ctables is not None else None, label, clabel))
    h.append("<h2>Definitions</h2><ul>" + "".join(
        f"<li>{e(line[2:]).replace('**', '')}</li>" for line in _join_bullets(DEFINITIONS)) + "</ul>")
    for name in TABLE_ORDER:
        t, ct = tables[name], (ctables[name] if ctables is not None else None)
        if t.empty and (ct is None or ct.empty):
            continue
        h.append(f"<h2>{e(analysis.TABLE_TITLES[name])}</h2>")
        h.append(side(_html_table(analysis.display_table(name, t)),
                      _html_table(analysis.display_table(name, ct)) if ct is not None else None, label, clabel))
    h.append("<h2>Plots</h2>")
    for p in pngs:
        h.append(f"<figure><img alt='{e(p.stem)}' src='{_img_data_uri(p)}'><figcaption class='note'>{e(p.stem)} "
                 f"(SVG beside it: plots/{e(p.stem)}.svg)</figcaption></figure>")
    h.append(f"<h2>{analysis.TABLE_TITLES['flags']}</h2><p class='note'>{e(' '.join(FLAGS_HELP.split()))}</p>")
    h.append(side(_html_table(analysis.display_table("flags", tables["flags"])),
                  _html_table(analysis.display_table("flags", ctables["flags"])) if ctables is not None else None,
                  label, clabel))
    h.append("<h2>Cells</h2>" + _html_table(_cells_table(tables["cells"])))
    for sec in sections:
        h.append(f"<h2>{e(str(sec.get('title', 'Section')))}</h2>")
        h.append(sec.get("html") or f"<pre>{e(sec.get('markdown', ''))}</pre>")
        for img in sec.get("images", []) or []:
            img = Path(img)
            if img.exists():
                h.append(f"<figure><img alt='{e(img.stem)}' src='{_img_data_uri(img)}'></figure>")
    if notes:
        h.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
    h.append("</body></html>")
    return "\n".join(h)


def _join_bullets(text: str) -> list[str]:
    items: list[str] = []
    for line in text.splitlines():
        if line.startswith("- "):
            items.append(line)
        elif items and line.strip():
            items[-1] += " " + line.strip()
    return items
