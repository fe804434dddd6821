"""One report over several results folders (the sweeps of several nodes), rendered once.

The first folder is the reference: its report, with the second folder beside it where there is one,
comes first; every further folder adds a page comparing it with the first. Each page is the blocks
:func:`sharebench.report.build.report_page` gives (the folders are copied, so the originals are
left as they were); the pages are joined as blocks and rendered once, to Markdown and HTML.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sharebench.errors import UserError
from sharebench.report.build import report_page
from sharebench.report.render import Heading, html_page, markdown
from sharebench.results import read_provenance


@dataclass(frozen=True)
class Combined:
    """The joined report: its title, its blocks, the folder its image links are relative to, and
    the plots of its first page."""

    title: str
    blocks: list
    base: Path
    plots: Path

    def markdown(self) -> str:
        return f"# {self.title}\n\n" + markdown(self.blocks, self.base)

    def html(self) -> str:
        return html_page(self.title, self.blocks)


def folder_names(results_dirs: list[Path]) -> list[str]:
    """A distinct, file-safe name per folder: the node it ran on where the provenance says, else
    the folder's own name (the report labels a folder by it)."""
    names: list[str] = []
    for i, d in enumerate(results_dirs):
        device = (read_provenance(d) or {}).get("device") or {}
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", str(device.get("node") or d.name or f"results-{i}"))
        names.append(f"{name}-{i}" if name in names else name)
    return names


def combine_reports(results_dirs: Sequence[Path | str], work: Path | str) -> Combined:
    """The report over ``results_dirs``, its pages built in copies under ``work`` (an empty folder)."""
    dirs = [Path(d) for d in results_dirs]
    if not dirs:
        raise UserError("no results folder to report on")
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        raise UserError(f"results folder {missing[0]} does not exist")
    names = folder_names(dirs)
    root = Path(work)
    blocks: list = []
    title, base = "", root
    for j, other in enumerate(dirs[1:] or [None]):
        page = root / f"page-{j}"
        this = shutil.copytree(dirs[0], page / names[0])
        compare = shutil.copytree(other, page / "compare" / names[j + 1]) if other is not None else None
        page_title, page_blocks = report_page(this, compare)
        if j == 0:
            title, base = page_title, Path(this)
        else:
            blocks.append(Heading(f"{page_title}, compared with {names[j + 1]}", level=1))
        blocks += page_blocks
    return Combined(title, blocks, base, base / "plots")


def write_combined(
    results_dirs: Sequence[Path | str], html_path: Path | str, md_path: Path | str, work: Path | str
) -> Combined:
    """:func:`combine_reports`, written to ``html_path`` and ``md_path``."""
    combined = combine_reports(results_dirs, work)
    Path(html_path).write_text(combined.html())
    Path(md_path).write_text(combined.markdown())
    return combined
