"""One renderer for every part of the report, in Markdown and in HTML.

A report is a list of blocks (:class:`Heading`, :class:`Text`, :class:`Table`, :class:`Image`,
:class:`Bullets`, :class:`Compare`); :func:`markdown` and :func:`html_page` turn the same blocks into
``report.md`` and a self-contained ``report.html`` (images embedded). Every table of the report,
the sections' included, goes through :func:`markdown_table` and :func:`html_table`.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Text:
    """A paragraph; inline ``**strong**``, ``*emphasis*`` and ```code``` are kept in Markdown and
    rendered in HTML."""

    text: str


@dataclass(frozen=True)
class Table:
    frame: pd.DataFrame


@dataclass(frozen=True)
class Image:
    """A figure (PNG); an SVG of the same name beside it is linked in Markdown."""

    path: Path


@dataclass(frozen=True)
class Bullets:
    items: list[str]


@dataclass(frozen=True)
class Compare:
    """The same part for two results folders: one after the other in Markdown (each under its
    label), side by side in HTML. Without a second folder, the first part alone, unlabelled."""

    left: list
    right: list | None = None
    labels: tuple[str, str] = ("", "")


@dataclass(frozen=True)
class Snippet:
    """Blocks that documentation quotes: in Markdown between the section markers of pymdownx.snippets
    (``<!-- --8<-- [start:NAME] -->`` … ``[end:NAME]``, HTML comments a Markdown viewer hides), so that a
    page includes the generated lines (``--8<-- "results/…/report.md:NAME"``) instead of a copy that goes
    stale; in HTML the blocks alone."""

    name: str
    blocks: list


@dataclass
class Section:
    """A titled part of the report (the prediction, the telemetry, the provenance)."""

    title: str
    blocks: list = field(default_factory=list)


# ------------------------------------------------------------------ tables


def markdown_table(df: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table (``_none_`` when empty); ``|`` in a cell is escaped."""
    if df.empty:
        return "_none_"
    cols = [str(c) for c in df.columns]
    out = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for values in df.itertuples(index=False):
        out.append("| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |")
    return "\n".join(out)


def html_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "<p><em>none</em></p>"
    return df.to_html(index=False, escape=True, border=0, classes="t")


# ------------------------------------------------------------------ Markdown


def markdown(blocks: list, base: Path) -> str:
    """The blocks as Markdown; image links relative to ``base`` (the results folder)."""
    out: list[str] = []
    for block in blocks:
        out += _markdown_block(block, base)
    return "\n".join(out)


def _markdown_block(block: object, base: Path) -> list[str]:
    if isinstance(block, Heading):
        return ["#" * block.level + " " + block.text, ""]
    if isinstance(block, Text):
        return [block.text, ""]
    if isinstance(block, Table):
        return [markdown_table(block.frame), ""]
    if isinstance(block, Bullets):
        return [f"- {item}" for item in block.items] + [""]
    if isinstance(block, Image):
        rel = _relative(block.path, base)
        lines = [f"![{block.path.stem}]({rel})"]
        if block.path.with_suffix(".svg").exists():
            lines.append(f"(also [SVG]({Path(rel).with_suffix('.svg').as_posix()}))")
        return [*lines, ""]
    if isinstance(block, Snippet):
        inner = [ln for b in block.blocks for ln in _markdown_block(b, base)]
        return [f"<!-- --8<-- [start:{block.name}] -->", *inner, f"<!-- --8<-- [end:{block.name}] -->", ""]
    if isinstance(block, Section):
        return _markdown_block(Heading(block.title), base) + [
            ln for b in block.blocks for ln in _markdown_block(b, base)
        ]
    if isinstance(block, Compare):
        if block.right is None:
            return [ln for b in block.left for ln in _markdown_block(b, base)]
        out: list[str] = []
        for label, part in zip(block.labels, (block.left, block.right)):
            out += [f"**{label}**", ""] + [ln for b in part for ln in _markdown_block(b, base)]
        return out
    raise TypeError(f"not a report block: {block!r}")


def _relative(path: Path, base: Path) -> str:
    """A path relative to the results folder when it lies in it (report.md can move with it)."""
    resolved, root = path.resolve(), base.resolve()
    return (resolved.relative_to(root) if root in resolved.parents else resolved).as_posix()


# ------------------------------------------------------------------ HTML


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1400px;padding:0 1em;
color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table.t{border-collapse:collapse;font-size:.85em;margin:.5em 0}
table.t th,table.t td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
table.t th{background:#f3f3f3}table.t td:last-child{text-align:left}
.side{display:flex;gap:2em;flex-wrap:wrap}.side>div{flex:1 1 500px;overflow-x:auto}
img{max-width:100%;height:auto;border:1px solid #eee}.note{color:#555;font-size:.9em}
"""


def inline_html(text: str) -> str:
    """Escaped text with the Markdown inline marks the report uses turned into HTML."""
    s = html.escape(" ".join(text.split()))
    s = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", s)
    s = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", s)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", s)


def html_page(title: str, blocks: list) -> str:
    """A self-contained HTML page of the blocks (styles inline, images as data URIs)."""
    e = html.escape
    head = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(title)}</title>"
        f"<style>{CSS}</style></head><body>"
    )
    return "\n".join([head, f"<h1>{e(title)}</h1>", *(_html_block(b) for b in blocks), "</body></html>"])


def _html_block(block: object) -> str:
    e = html.escape
    if isinstance(block, Heading):
        return f"<h{block.level}>{e(block.text)}</h{block.level}>"
    if isinstance(block, Text):
        return f"<p>{inline_html(block.text)}</p>"
    if isinstance(block, Table):
        return html_table(block.frame)
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{inline_html(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Image):
        if not block.path.exists():
            return ""
        return (
            f"<figure><img alt='{e(block.path.stem)}' src='{_data_uri(block.path)}'>"
            f"<figcaption class='note'>{e(block.path.stem)}</figcaption></figure>"
        )
    if isinstance(block, Snippet):
        return "\n".join(_html_block(b) for b in block.blocks)
    if isinstance(block, Section):
        return "\n".join([_html_block(Heading(block.title)), *(_html_block(b) for b in block.blocks)])
    if isinstance(block, Compare):
        left = "\n".join(_html_block(b) for b in block.left)
        if block.right is None:
            return left
        right = "\n".join(_html_block(b) for b in block.right)
        return (
            f"<div class='side'><div><h3>{e(block.labels[0])}</h3>{left}</div>"
            f"<div><h3>{e(block.labels[1])}</h3>{right}</div></div>"
        )
    raise TypeError(f"not a report block: {block!r}")


def _data_uri(path: Path) -> str:
    mime = {"png": "image/png", "svg": "image/svg+xml", "jpg": "image/jpeg"}.get(path.suffix[1:].lower(), "")
    return f"data:{mime};base64," + base64.b64encode(path.read_bytes()).decode()
