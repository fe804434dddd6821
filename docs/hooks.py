"""mkdocs hooks (``hooks:`` in mkdocs.yml): links to files of the repository that are not part of the site,
and the plots of the committed campaigns (``results/``, beside ``docs/``) that the pages show.

The guides include docs/readme's sections, written for README.md on a code host, whose links may name
files the site does not carry: examples, manifests, plans, the results folders' pages. A link whose target
exists in the repository but not in the site is pointed at a copy the site carries at the same path
(:func:`repository_file`): the file itself (a script, a plan, a CSV: the browser shows it), a Markdown file
rendered as a plain HTML page beside it (``results/h200/README.md`` -> ``results/h200/README.html``, its
plots the site's copies), a folder its README's page or a list of what it holds; its text keeps the path in
code. A link whose target exists nowhere is left as it is, so that ``mkdocs build --strict`` fails on it (a
broken link).

The campaigns live in ``results/<campaign>/`` at the repository root, outside ``docs/``: their PNG plots are
added to the site under ``results/`` (:func:`on_files`), and an image whose target is one of them is pointed
at that copy, so the same Markdown shows the plot in README.md on a code host and on the site.

The links are rewritten by a Markdown preprocessor that runs after pymdownx.snippets has included the
sections (a page hook would see only the ``--8<--`` lines); the page being rendered is the hook's.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

import markdown as python_markdown  # type: ignore[import-untyped]  # Python-Markdown ships no types
from markdown import Extension, Markdown  # type: ignore[import-untyped]
from markdown.preprocessors import Preprocessor  # type: ignore[import-untyped]
from mkdocs.structure.files import File

LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\(([^)\s]+)\)")  # [text](target), not an image
IMAGE = re.compile(r"(!\[[^\]\n]*\])\(([^)\s]+)\)")  # ![alt](target)
RESULTS = "results"  # the campaigns' home at the repository root; their plots join the site under this name
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|#|/)")  # a URL, an anchor on the page, or a site-absolute path
SNIPPETS_PRIORITY = 32  # pymdownx.snippets' preprocessor; a lower priority runs after it
CURRENT: dict[str, Any] = {}  # the page mkdocs renders now, its config and the site's files


def repository_path(target: str, page_dir: Path, docs: Path, root: Path, site_files: set[str]) -> str | None:
    """The target's path in the repository when it exists there but is not a file of the site, else None."""
    path = target.split("#", 1)[0]
    if not path or EXTERNAL.match(target):
        return None
    resolved = (page_dir / path).resolve()
    if resolved.is_relative_to(docs) and resolved.relative_to(docs).as_posix() in site_files:
        return None
    if not resolved.exists() or not resolved.is_relative_to(root):
        return None
    return resolved.relative_to(root).as_posix() + ("/" if resolved.is_dir() else "")


def relink(markdown: str, page: Any, config: Any, files: Any) -> str:
    """The page's Markdown with its links to repository files outside the site pointed at the site's copies
    (:func:`repository_file` adds them to ``files``), their text the path in code."""
    docs = Path(config["docs_dir"]).resolve()
    root = Path(config["config_file_path"]).resolve().parent
    page_dir = (docs / page.file.src_path).parent
    site_files = {f.src_uri for f in files if not f.inclusion.is_excluded()}

    def one(m: re.Match[str]) -> str:
        text, target = m.groups()
        path = repository_path(target, page_dir, docs, root, site_files)
        if path is None:
            return m.group(0)
        copy = repository_file(path, root, config, files)
        href = Path(os.path.relpath(docs / copy, page_dir)).as_posix()
        if text.strip("`").rstrip("/") == path.rstrip("/"):
            return f"[`{path}`]({href})"
        return f"{text} ([`{path}`]({href}) in the repository)"

    def image(m: re.Match[str]) -> str:
        return f"{m.group(1)}({site_image(m.group(2), page_dir, docs, root)})"

    return LINK.sub(one, IMAGE.sub(image, markdown))


PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.2em .5em}}pre{{background:#f6f6f6;padding:.5em;overflow:auto}}</style>
</head><body><p><small>{title}: a file of the repository, shown as it is there</small></p>
{body}</body></html>
"""


def repository_file(path: str, root: Path, config: Any, files: Any) -> str:
    """The site's copy of the repository file (or folder) ``path``, added to ``files`` once: a Markdown file
    rendered to ``NAME.html`` beside it, a folder its README's page or an ``index.html`` listing it, any
    other file as it is. Its path in the site (the repository's, but for the rendered pages)."""
    source = root / path
    if source.is_dir():
        readme = source / "README.md"
        if readme.is_file():
            return repository_file(readme.relative_to(root).as_posix(), root, config, files)
        uri = path.rstrip("/") + "/index.html"
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in source.iterdir() if not p.name.startswith("."))
        body = "<ul>" + "".join(f"<li><code>{html.escape(n)}</code></li>" for n in names) + "</ul>"
        content: str | None = PAGE.format(title=html.escape(path), body=body)
    elif source.suffix == ".md":
        uri = source.with_suffix(".html").relative_to(root).as_posix()
        rendered = python_markdown.markdown(source.read_text(errors="replace"), extensions=["tables", "fenced_code"])
        content = PAGE.format(title=html.escape(path), body=rendered)
    else:
        uri, content = path, None
    if files.get_file_from_path(uri) is None:
        if content is None:
            files.append(File.generated(config, uri, abs_src_path=str(source)))
        else:
            files.append(File.generated(config, uri, content=content))
    return uri


def site_image(target: str, page_dir: Path, docs: Path, root: Path) -> str:
    """An image target in ``results/`` (outside docs/) as the path of its copy in the site; others as given."""
    if EXTERNAL.match(target):
        return target
    resolved = (page_dir / target).resolve()
    if not resolved.is_relative_to(root / RESULTS) or resolved.suffix != ".png":
        return target
    return Path(os.path.relpath(docs / resolved.relative_to(root), page_dir)).as_posix()


class RepositoryLinks(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        if "page" not in CURRENT:
            return lines
        return relink("\n".join(lines), CURRENT["page"], CURRENT["config"], CURRENT["files"]).split("\n")


class RepositoryLinksExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 - Python-Markdown's name
        md.preprocessors.register(RepositoryLinks(md), "repository_links", SNIPPETS_PRIORITY - 1)


def on_config(config: Any) -> Any:
    config["markdown_extensions"].append(RepositoryLinksExtension())
    return config


def on_files(files: Any, config: Any) -> Any:
    """The committed campaigns' PNG plots join the site as ``results/<campaign>/…/NAME.png``."""
    root = Path(config["config_file_path"]).resolve().parent
    for png in sorted((root / RESULTS).rglob("*.png")):
        files.append(File.generated(config, png.relative_to(root).as_posix(), abs_src_path=str(png)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    CURRENT.update(page=page, config=config, files=files)
    return markdown
