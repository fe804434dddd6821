"""Render a results folder's report.html to a PNG with headless Chromium (the getting-started page's picture).

    python -m tools.screenshot RESULTS_DIR [--out docs/img/getting-started-report.png] [--width 820 --height 1150]
                                           [--scale 2]

Opens ``RESULTS_DIR/report.html`` in headless Chromium (``chromium``, ``chromium-browser``,
``google-chrome`` or ``google-chrome-stable`` on PATH, or ``--chromium PATH``; Debian/Ubuntu:
``apt-get install chromium``; CI does not install it) with a window of ``--width`` x ``--height`` CSS
pixels: the top of the report, its title and Answer. The window is about as wide as the site's text column,
so that the page shows the report's text at the size a browser would (a 1280-pixel window scaled down into
the column left it too small to read), and rendered at ``--scale`` device pixels per CSS pixel (2: sharp on a
high-density screen, and when zoomed). The picture is cropped to exactly that size and reduced to a
``--colors`` palette (Pillow, which matplotlib brings), so that the committed PNG stays small. Prints the
PNG's path, size and bytes. Chromium runs with
``--no-sandbox`` (the page is a local file the sweep wrote; the sandbox cannot start as root in a container)
and a throw-away profile.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

from sharebench.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "img" / "getting-started-report.png"
WIDTH, HEIGHT, SCALE = 820, 1150, 2  # CSS pixels: about the site's text column; the report's title and Answer
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL_HINT = "install Chromium (Debian/Ubuntu: apt-get install chromium) or pass --chromium PATH"
RENDER_TIMEOUT_S = 120


def find_chromium(given: str | None = None) -> str:
    """The Chromium executable: ``given`` (a path or a name on PATH), else the first of CHROMIUM_NAMES on PATH."""
    if given is not None:
        found = shutil.which(given)
        if found is None:
            raise UserError(f"--chromium {given}: no such executable; {INSTALL_HINT}")
        return found
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found is not None:
            return found
    raise UserError(f"no Chromium on PATH (looked for {', '.join(CHROMIUM_NAMES)}); {INSTALL_HINT}")


def chromium_command(
    chromium: str, page: Path, png: Path, width: int, height: int, profile: Path, scale: int = 1
) -> list[str]:
    """The headless Chromium command line that writes a ``width`` x ``height`` (CSS pixels) screenshot of
    ``page`` to ``png``, ``scale`` device pixels per CSS pixel."""
    return [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--mute-audio",
        f"--force-device-scale-factor={scale}",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
        f"--screenshot={png}",
        page.resolve().as_uri(),
    ]


def render(chromium: str, page: Path, width: int, height: int, scale: int = 1) -> Image.Image:
    """The top ``width`` x ``height`` CSS pixels of ``page`` as Chromium renders it headless (``scale`` device
    pixels each)."""
    width, height = width * scale, height * scale
    with tempfile.TemporaryDirectory(prefix="sharebench-screenshot-") as tmp:
        raw = Path(tmp) / "raw.png"
        cmd = chromium_command(chromium, page, raw, width // scale, height // scale, Path(tmp) / "profile", scale)
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=RENDER_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise UserError(f"{chromium} did not render {page} within {RENDER_TIMEOUT_S} s") from None
        if out.returncode != 0 or not raw.is_file() or raw.stat().st_size == 0:
            last = (out.stderr.strip().splitlines() or ["no output"])[-1]
            raise UserError(f"{chromium} wrote no screenshot of {page} (exit {out.returncode}): {last}")
        with Image.open(raw) as shot:
            shot.load()
            if shot.width < width or shot.height < height:
                raise UserError(f"{chromium} rendered {shot.width}x{shot.height}, smaller than {width}x{height}")
            return shot.convert("RGB").crop((0, 0, width, height))


def screenshot(
    results: Path,
    out: Path,
    width: int = WIDTH,
    height: int = HEIGHT,
    colors: int = 64,
    chromium: str | None = None,
    scale: int = SCALE,
) -> Path:
    """Render ``results/report.html`` to ``out`` (a PNG of ``width`` x ``height`` CSS pixels at ``scale``, of
    ``colors`` colours)."""
    page = results / "report.html"
    if not page.is_file():
        raise UserError(
            f"{results}: no report.html (a results folder has one; sharebench report {results} rebuilds it)"
        )
    if width < 200 or height < 200:
        raise UserError(f"--width {width} --height {height}: each must be at least 200 pixels")
    if not 2 <= colors <= 256:
        raise UserError(f"--colors {colors}: must be from 2 to 256")
    if not 1 <= scale <= 4:
        raise UserError(f"--scale {scale}: must be from 1 to 4")
    exe = find_chromium(chromium)
    image = render(exe, page, width, height, scale)
    out.parent.mkdir(parents=True, exist_ok=True)
    image.quantize(colors=colors, dither=Image.Dither.NONE).save(out, optimize=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="a results folder holding report.html")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the PNG to write (default: %(default)s)")
    ap.add_argument("--width", type=int, default=WIDTH, help="window width in CSS pixels (default: %(default)s)")
    ap.add_argument(
        "--height", type=int, default=HEIGHT, help="window height in CSS pixels, the part kept (default: %(default)s)"
    )
    ap.add_argument("--scale", type=int, default=SCALE, help="device pixels per CSS pixel (default: %(default)s)")
    ap.add_argument("--colors", type=int, default=64, help="palette size of the PNG (default: %(default)s)")
    ap.add_argument("--chromium", default=None, help="the Chromium executable (default: the first found on PATH)")
    args = ap.parse_args(argv)
    try:
        png = screenshot(args.results, args.out, args.width, args.height, args.colors, args.chromium, args.scale)
    except UserError as exc:
        print(f"screenshot: {exc}", file=sys.stderr)
        return 2
    size = f"{args.width * args.scale}x{args.height * args.scale}"
    print(f"{png} ({size} pixels: {args.width}x{args.height} CSS at {args.scale}x, {png.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
