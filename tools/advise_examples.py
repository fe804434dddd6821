"""The worked examples of ``sharebench advise``, regenerated: docs/advise-example/ and the blocks of docs/readme/advise.md.

    python -m tools.advise_examples          # rewrite them
    python -m tools.advise_examples --check  # exit 1 naming what differs (tests/advise/test_pattern_costs.py runs it)

Each example makes its synthetic usage (``sharebench.advise.synthetic``, seeded; no third-party trace),
runs ``sharebench advise`` on the committed H200 results as a site would, and puts what the command printed
between the example's markers in docs/readme/advise.md (``<!-- example NAME -->`` … ``<!-- /example NAME -->``);
the 16-GPU example also keeps its files in docs/advise-example/ (advice.md/json/html/png, assignment.csv,
check.json). The synthetic month's paragraph is rendered from the benchmark's record,
docs/advise-example/month.json (``python -m tools.advise_replay`` measures it). Run from anywhere: paths are
the repository's, and the temporary folders are written as /tmp in what is kept, so a rerun is byte-identical.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from sharebench.advise.synthetic import pool16, synthetic_usage
from sharebench.cli import main as sharebench

ROOT = Path(__file__).resolve().parents[1]
FILES = Path("docs") / "advise-example"
DOC = Path("docs") / "readme" / "advise.md"
RECORD = FILES / "month.json"
BLOCK = re.compile(r"(<!-- example (\S+) -->\n)(.*?)(<!-- /example \2 -->)", flags=re.S)


def pool16_usage(path: Path) -> None:
    synthetic_usage(pool16(), 1, seed=3).to_csv(path, index=False)


def pool16_large_usage(path: Path) -> None:
    """The 16-GPU pool with notebooks that hold 50 GB each: two fit an H200 (141 GB), not an 80-GB A100."""
    spec = pool16()
    spec["notebooks"] = replace(spec["notebooks"], memory_gb=50.0)
    synthetic_usage(spec, 1, seed=3).to_csv(path, index=False)


def day_and_night_usage(path: Path) -> None:
    """Six training jobs by day (08-18 UTC) and five by night (20-06), each on a GPU of its own today, 40 GB
    and about 95 % busy each (seeded)."""
    rng = np.random.default_rng(7)
    start = 1_800_000_000.0 - 8 * 3600  # 2027-01-15T00:00:00Z
    frames = []
    for name, pods, (a, b) in (("day", 6, (8, 18)), ("night", 5, (20, 30))):
        steps = np.arange(a * 60, b * 60)
        for i in range(pods):
            frames.append(
                pd.DataFrame(
                    {
                        "time": start + 60.0 * steps,
                        "gpu": f"{name}-gpu-{i}",
                        "pod": f"{name}-{i}",
                        "class": name,
                        "busy": np.round(rng.beta(19, 1, steps.size), 4),
                        "memory_bytes": 40e9,
                        "gpu_model": "NVIDIA H200",
                    }
                )
            )
    pd.concat(frames).to_csv(path, index=False)


@dataclass(frozen=True)
class Example:
    """One example: its name, how its usage is made, the options after ``--usage FILE``, and whether its
    files are kept in docs/advise-example/."""

    name: str
    usage: Callable[[Path], None]
    options: list[str] = field(default_factory=list)
    files: bool = False


EXAMPLES = [
    Example("pool16", pool16_usage, ["--results", "results/h200", "--check"], files=True),
    Example(
        "a100", pool16_large_usage, ["--results", "results/h200", "--gpu-model", "A100-80GB", "--allow-other-model"]
    ),
    Example("day-and-night", day_and_night_usage, ["--results", "results/h200"]),
]


@contextlib.contextmanager
def at_root() -> Iterator[None]:
    here = Path.cwd()
    os.chdir(ROOT)
    try:
        yield
    finally:
        os.chdir(here)


def run(example: Example, tmp: Path) -> tuple[str, Path]:
    """The example run in ``tmp``: what it printed (its command first; the temporary paths as they are
    written in the docs), and its advice folder."""
    usage, out = tmp / "usage" / f"{example.name}.csv", tmp / "out" / example.name
    usage.parent.mkdir(parents=True, exist_ok=True)
    example.usage(usage)
    argv = ["advise", "--usage", str(usage), *example.options, "--out", str(out)]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = sharebench(argv)
    if rc not in (0, 1):
        raise SystemExit(f"example {example.name}: sharebench {' '.join(argv)} exited {rc}")
    text = f"$ sharebench {' '.join(argv)}\n{buf.getvalue()}"
    return portable(text, tmp, example), out


def portable(text: str, tmp: Path, example: Example) -> str:
    """``text`` with the temporary folders written as the docs write them: the advice where it is kept (or
    /tmp/NAME), the usage as /tmp/NAME.csv."""
    text = text.replace(str(tmp / "out" / example.name), str(FILES) if example.files else f"/tmp/{example.name}")
    return text.replace(str(tmp / "usage"), "/tmp").replace(str(tmp), "/tmp")


def month_block(record: dict) -> str:
    """The synthetic month's paragraph, from the benchmark's record."""
    lines = [line for line in record["printed"] if not line.startswith(("read:", "costs:"))]
    return (
        f"Benchmark (`{record['command']}`, {record['date']}): `advise --check` on a synthetic month of 100 GPUs "
        f"(`month100()`: {record['pods']:,} churned pods, {record['rows']:,} samples at 1-minute steps) with the "
        f"committed H200 results took {record['cpu_s']:g} s of CPU and {record['wall_s']:g} s of wall time on "
        f"{record['cores']} cores (load {record['load_before']:g} when it started: the cores were shared), "
        f"and at most {record['peak_rss_bytes'] / 1e9:.2f} GB of memory (the usage CSV streamed, "
        f"{record['rows'] // 10**6}+ million rows); the target is under 60 s and 1.5 GB on 2 idle cores. "
        "It printed:\n\n```\n" + "\n".join(lines) + "\n```\n"
    )


def generate(tmp: Path) -> dict[Path, bytes]:
    """Every generated file (repository path -> bytes): the kept example files and the updated doc."""
    out: dict[Path, bytes] = {}
    blocks: dict[str, str] = {}
    for example in EXAMPLES:
        text, folder = run(example, tmp)
        blocks[example.name] = "```\n" + text + "```\n"
        if example.files:
            for f in sorted(folder.iterdir()):
                data = f.read_bytes()
                if f.suffix in (".md", ".json", ".html", ".csv"):
                    data = portable(data.decode(), tmp, example).encode()
                out[FILES / f.name] = data
    blocks["month"] = month_block(json.loads((ROOT / RECORD).read_text()))
    doc = (ROOT / DOC).read_text()
    missing = sorted(set(blocks) - {m.group(2) for m in BLOCK.finditer(doc)})
    if missing:
        raise SystemExit(f"{DOC}: no <!-- example NAME --> markers for {', '.join(missing)}")
    out[DOC] = BLOCK.sub(lambda m: m.group(1) + blocks[m.group(2)] + m.group(4), doc).encode()
    return out


def differences(got: dict[Path, bytes]) -> list[str]:
    kept = {FILES / f.name for f in (ROOT / FILES).iterdir() if f.name != RECORD.name}
    stale = sorted(str(p) for p in kept - set(got))
    changed = [str(p) for p, data in got.items() if not (ROOT / p).exists() or (ROOT / p).read_bytes() != data]
    return changed + [f"{p} (not generated any more)" for p in stale]


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed examples differ from a rerun")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, at_root():
        got = generate(Path(tmp))
        diff = differences(got)
        if args.check:
            for d in diff:
                print(f"stale: {d}; rebuild with python -m tools.advise_examples", file=sys.stderr)
            return 1 if diff else 0
        for f in (ROOT / FILES).iterdir():
            if f.name != RECORD.name and FILES / f.name not in got:
                f.unlink() if f.is_file() else shutil.rmtree(f)
        for path, data in got.items():
            (ROOT / path).write_bytes(data)
        print(f"wrote {len(got)} file(s); changed: {', '.join(diff) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
