"""Presentation: report.md and report.html of a results folder (``build``), its figures
(``plots``), its sections (``sections``) and the one renderer for Markdown and HTML (``render``)."""

from sharebench.report.answer import end_screen
from sharebench.report.build import TABLE_TITLES, build_report, tables_markdown, write_tables
from sharebench.report.plots import make_plots, save_figure
from sharebench.report.render import html_table, markdown_table

__all__ = [
    "TABLE_TITLES",
    "build_report",
    "end_screen",
    "html_table",
    "make_plots",
    "markdown_table",
    "save_figure",
    "tables_markdown",
    "write_tables",
]
