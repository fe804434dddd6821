"""report.md and report.html of a results folder, optionally beside a second one.

``build_report(results_dir, compare=None)`` reads ``results.csv`` and ``provenance.json``, writes
``tables/``, ``plots/``, ``report.md`` and a self-contained ``report.html`` (plots embedded), with
the machine, summary, definitions, every loss table, the plots, the flags and the cells, then the
prediction, telemetry and provenance sections. A section that fails becomes a note in the report,
never a lost report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sharebench.analysis import Tables, analyse, display_table, summary_table
from sharebench.errors import UserError
from sharebench.report.answer import Answer
from sharebench.report.plots import make_plots
from sharebench.report.render import (
    Bullets,
    Compare,
    Heading,
    Image,
    Section,
    Table,
    Text,
    html_page,
    markdown,
    markdown_table,
)
from sharebench.report.sections import (
    latency_section,
    machine_table,
    prediction_section,
    provenance_section,
    telemetry_section,
)
from sharebench.report.timeslice import timeslice_split_section
from sharebench.report.workloads import workloads_section
from sharebench.results import read_notes, read_provenance

TABLE_TITLES = {
    "timeslice": "Time-slicing: N replicas on one device at once",
    "mps": "MPS: N replicas as clients of one MPS server",
    "mig": "MIG: one replica per MIG instance against the full GPU",
    "partition": "Partition scaling against the ideal",
    "mig_emulated": "MIG emulated with MPS (an emulation, not MIG): each profile against the full GPU and the ideal",
    "throughput": "Aggregate throughput per physical device and sharing gain",
    "flags": "Flags",
}
TABLE_ORDER = ("timeslice", "mps", "mig", "partition", "mig_emulated", "throughput")

DEFINITIONS = [
    "**T_1**: tracking time of one replica alone on the device (`exclusive`).",
    "**T_N**: span of the N concurrent tracking windows, max(end) − min(start).",
    "**time-slicing / MPS loss** = (T_N − N·T_1) / (N·T_1): 0% means sharing cost nothing beyond doing the N runs "
    "one after the other; negative means the device did more work when shared.",
    "**MIG loss** = (T_mig − T_full) / T_full for the same work on one MIG instance.",
    "**partition scaling**: T_slice against the ideal T_full × full units / slice units (SMs of the MIG profile on "
    "a GPU, cores on the CPU); efficiency = ideal / T_slice. An MPS thread share (`mps:N@PCT`) is such a slice: "
    "PCT% of the SMs, floored to whole TPCs (2 SMs), at least 8.",
    "**mig-emulated**: one MPS client per instance of a MIG layout, limited to its profile's SMs and memory; an "
    "emulation (no MIG memory, L2 or fault isolation). The real MIG loss predicted beside it comes from the 7g "
    "profile's SM deficit (A100: 98 of 108 SMs, 10.20%; H100/H200: 132 of 132, 0%).",
    "**throughput**: particle-turns of all replicas / T_N, per physical device; **gain** = against exclusive.",
    "**fairness**: slowest / fastest replica tracking time in a cell (1.00 = fair).",
    "Every figure is a mean over the measured repeats (warm-up left out) with a 95% Student-t confidence "
    "interval (none below 3 repeats; ratios: delta method on the log, Welch degrees of freedom); "
    "CV = coefficient of variation of the repeats; **≠ 0?** says whether the loss's CI excludes 0 (yes: a real "
    "loss or gain at that level; no: not distinguishable from 0; empty: no interval).",
]

FLAGS_HELP = (
    "How to read the flags: *excluded = yes* means the cell is left out of every statistic (a replica failed, the "
    "replicas ran on different devices, or their tracking windows overlapped less than 95% so they did not really "
    "share the device). *excluded = no* is a warning: few repeats (wide or missing CI), a large spread (CV > 10%: "
    "trust the median less), an unfair share between replicas, or no exclusive baseline for that work (no loss "
    "computed)."
)


def write_tables(tables: Tables, results_dir: Path | str) -> Path:
    """tables/<name>.csv (numbers) and tables/<name>.md (as printed, for the titled tables)."""
    d = Path(results_dir) / "tables"
    d.mkdir(parents=True, exist_ok=True)
    for name, t in tables.to_dict().items():
        t.to_csv(d / f"{name}.csv", index=False)
        if name in TABLE_TITLES:
            (d / f"{name}.md").write_text(f"## {TABLE_TITLES[name]}\n\n{markdown_table(display_table(name, t))}\n")
    return d


def tables_markdown(tables: Tables) -> str:
    """Every titled, non-empty table as Markdown, one after the other."""
    named = tables.to_dict()
    return "\n".join(
        f"## {title}\n\n{markdown_table(display_table(name, named[name]))}\n"
        for name, title in TABLE_TITLES.items()
        if not named[name].empty
    )


def folder_label(results_dir: Path, prov: dict[str, Any] | None) -> str:
    """How the report names a results folder: its name and its device."""
    name = ((prov or {}).get("device") or {}).get("name")
    return f"{results_dir.name} ({name})" if name else results_dir.name


def device_label(prov: dict[str, Any] | None) -> str:
    dev = (prov or {}).get("device") or {}
    return f"{dev['name']} ({dev.get('backend')})" if dev.get("name") else ""


class Folder:
    """One results folder as the report sees it: its tables, provenance and label."""

    def __init__(self, path: Path | str, what: str = "results folder"):
        self.path = Path(path)
        if not self.path.is_dir():
            raise UserError(f"{what} {self.path} does not exist")
        self.tables = analyse(self.path)
        self.provenance = read_provenance(self.path)
        self.label = folder_label(self.path, self.provenance)


def _sections(folder: Folder) -> tuple[list[Section], list[str]]:
    """The sections of the other areas; a failing one becomes a note, never a lost report."""
    makers: list[tuple[str, Callable[[], Section]]] = [
        ("prediction", lambda: prediction_section(folder.path, folder.tables, device_label(folder.provenance))),
        ("telemetry", lambda: telemetry_section(folder.path, folder.tables)),
        ("workloads", lambda: workloads_section(folder.path, folder.tables)),
        ("provenance", lambda: provenance_section(folder.provenance)),
    ]
    if not folder.tables.latency.empty:  # a folder of batch replicas only has no latency section
        makers.insert(0, ("latency", lambda: latency_section(folder.path, folder.tables)))
    if not folder.tables.timeslice.empty:  # why time-slicing costs what it costs (report.timeslice)
        split = ("timeslice split", lambda: timeslice_split_section(folder.path, folder.tables, folder.provenance))
        makers.insert(0, split)
    sections, notes = [], []
    for name, make in makers:
        try:
            sections.append(make())
        except Exception as exc:  # noqa: BLE001 - an optional section must not cost the user the report
            msg = f"{name} section failed: {type(exc).__name__}: {exc}"
            print(f"sharebench: warning: {msg}", file=sys.stderr)
            notes.append(msg)
    return sections, notes


def shown_table(name: str) -> Callable[[Folder], list]:
    """The blocks of one titled table of a folder, as printed."""

    def blocks(folder: Folder) -> list:
        return [Table(display_table(name, folder.tables.to_dict()[name]))]

    return blocks


def report_blocks(
    this: Folder, other: Folder | None, plots: list[Path], sections: list[Section], notes: list[str]
) -> list:
    """The report as blocks, in reading order (see ``sharebench.report.render``)."""
    labels = (this.label, other.label if other else "")

    def both(make: Callable[[Folder], list]) -> Compare:
        return Compare(make(this), make(other) if other else None, labels)

    blocks: list = []
    if other:
        blocks.append(Text(f"Compared with **{other.label}**."))
    blocks += [
        Heading("Machine"),
        both(lambda f: [machine_table(f.provenance)]),
        Heading("Summary: loss % (95% CI) per mode"),
        both(lambda f: [Table(summary_table(f.tables))]),
        Heading("Definitions"),
        Bullets(DEFINITIONS),
    ]
    for name in TABLE_ORDER:
        if this.tables.to_dict()[name].empty and (other is None or other.tables.to_dict()[name].empty):
            continue
        blocks += [Heading(TABLE_TITLES[name]), both(shown_table(name))]
    blocks += [
        Heading("Plots"),
        *(Image(p) for p in plots if p.suffix == ".png"),
        Heading(TABLE_TITLES["flags"]),
        Text(FLAGS_HELP),
        both(lambda f: [Table(display_table("flags", f.tables.flags))]),
        Heading("Cells"),
        Table(display_table("cells", this.tables.cells)),
        *sections,
    ]
    if notes:
        blocks += [Heading("Notes"), Bullets(notes)]
    return blocks


def report_page(results_dir: Path | str, compare: Path | str | None = None) -> tuple[str, list]:
    """The report's title and blocks (tables/ and plots/ written into the results folder on the way)."""
    this = Folder(results_dir)
    write_tables(this.tables, this.path)
    other = None
    if compare is not None:
        other = Folder(compare, "comparison folder")
        if other.path.resolve() == this.path.resolve():
            raise UserError(f"--compare {other.path} is the results folder itself; give a second results folder")
        if other.label == this.label:
            other.label += " (compare)"
    plots = make_plots(
        this.tables, this.path / "plots", other.tables if other else None, (this.label, other.label if other else "")
    )
    sections, section_notes = _sections(this)
    answer = Answer(this.path, this.tables, device_label(this.provenance))
    # what the sweep noted (added modes, resumed cells, absent telemetry ...), then the report's own
    blocks = answer.blocks(answer.write()) + report_blocks(
        this, other, plots, sections, read_notes(this.path) + section_notes
    )
    return f"sharebench report: {this.label}", blocks


def build_report(results_dir: Path | str, compare: Path | str | None = None) -> dict[str, Path]:
    """Rebuild tables, plots, report.md and report.html; returns their paths."""
    title, blocks = report_page(results_dir, compare)
    path = Path(results_dir)
    (path / "report.md").write_text(f"# {title}\n\n" + markdown(blocks, path))
    (path / "report.html").write_text(html_page(title, blocks))
    return {
        "markdown": path / "report.md",
        "html": path / "report.html",
        "tables": path / "tables",
        "plots": path / "plots",
    }
