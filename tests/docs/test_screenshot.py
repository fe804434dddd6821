"""tools.screenshot renders a results folder's report.html to a PNG with headless Chromium (a one-line error
naming what to install where there is none), and the getting-started page's picture of a real report exists.

The rendering test runs where Chromium is installed (CI does not install it: it is skipped there, with the
reason); tests/data/report/report.html is the top of a real report (its title, Answer and Machine) of the
local CPU sweep the getting-started page shows.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from tools import screenshot

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "tests" / "data" / "report"
PAGE = ROOT / "docs" / "getting-started.md"
IMAGE = re.compile(r"!\[[^\]\n]*\]\(([^)\s]+)\)")  # ![alt](target)
CHROMIUM = next((found for name in screenshot.CHROMIUM_NAMES if (found := shutil.which(name))), None)


def run_tool(args: list[str], path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.screenshot", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
        timeout=180,
    )


def test_no_chromium_on_path_is_a_one_line_error(tmp_path: Path) -> None:
    png = tmp_path / "report.png"
    empty = tmp_path / "bin"
    empty.mkdir()
    out = run_tool([str(REPORT), "--out", str(png)], str(empty))
    assert out.returncode == 2
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert "no Chromium on PATH" in out.stderr
    assert "apt-get install chromium" in out.stderr
    assert not png.exists()


def test_a_folder_without_report_html_is_a_one_line_error(tmp_path: Path) -> None:
    out = run_tool([str(tmp_path), "--out", str(tmp_path / "report.png")], os.environ["PATH"])
    assert out.returncode == 2
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert f"{tmp_path}: no report.html" in out.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (CI does not install it): apt-get install chromium")
def test_renders_the_report_to_a_png_of_the_asked_size(tmp_path: Path) -> None:
    png = tmp_path / "report.png"
    args = ["--width", "900", "--height", "640", "--scale", "1"]
    out = run_tool([str(REPORT), "--out", str(png), *args], os.environ["PATH"])
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"{png} (900x640 pixels:" in out.stdout
    assert png.stat().st_size > 0
    with Image.open(png) as image:
        assert image.size == (900, 640)
        gray = image.convert("L")
    # the page was drawn, not a blank window: the title's and the Answer's dark text on the white page
    dark = sum(count for value, count in enumerate(gray.histogram()) if value < 100)
    assert 0.005 < dark / (900 * 640) < 0.5
    top = gray.crop((0, 0, 900, 120))  # the title: "sharebench report: ..."
    assert min(top.getdata()) < 100
    # at 2 device pixels per CSS pixel: twice the pixels of the same window
    out = run_tool([str(REPORT), "--out", str(png), "--width", "450", "--height", "320"], os.environ["PATH"])
    assert out.returncode == 0, out.stderr[-3000:]
    with Image.open(png) as image:
        assert image.size == (900, 640)


def test_the_getting_started_picture_exists_and_is_small() -> None:
    targets = IMAGE.findall(PAGE.read_text())
    assert "img/getting-started-report.png" in targets
    for target in targets:
        picture = (PAGE.parent / target).resolve()
        assert picture.is_file(), f"{PAGE.name} shows {target}, which does not exist"
    picture = PAGE.parent / "img" / "getting-started-report.png"
    assert picture.stat().st_size < 300_000
    assert picture.resolve() == screenshot.DEFAULT_OUT
    with Image.open(picture) as image:
        assert image.format == "PNG"
        # readable in the site's text column: a window about as wide as the column (the report's text at a
        # browser's size), drawn at twice the pixels (sharp when zoomed); a 1280-pixel window was too small
        assert image.size == (screenshot.WIDTH * screenshot.SCALE, screenshot.HEIGHT * screenshot.SCALE)
        assert screenshot.WIDTH <= 900 and screenshot.SCALE >= 2
    # the caption names the command that made the picture
    assert "python -m tools.screenshot" in PAGE.read_text()
