"""A committed results folder's per-cell scratch files, packed as one archive (``cells.tar.xz``).

A sweep leaves, beside ``results.csv``, what each cell and replica wrote while it ran: ``cells/<cell>/``
(replica configs, records, logs, the raw telemetry samples ``telemetry.csv``), the warm replicas' priming
folder ``warm/``, the private MPS daemon's logs ``mps/``, ``workers/`` and the folder's lock. A campaign
kept in the repository (``results/<campaign>/``) holds them as one compressed archive instead of
thousands of files: :func:`pack_scratch` packs them (``python -m tools.pack_results DIR``), and
:func:`scratch_root` gives the folder where they can be read, unpacked once per process into a
temporary folder, so that ``sharebench report DIR`` still finds each cell's raw telemetry samples.
"""

from __future__ import annotations

import atexit
import shutil
import tarfile
import tempfile
from pathlib import Path

CELLS_ARCHIVE = "cells.tar.xz"
# what a sweep writes beside the documents while it runs (sweep/runner.py, sharing/, the warm replicas)
SCRATCH_NAMES = ("cells", "workers", "warm", "mps", ".sharebench.lock")
UNPACKED: dict[Path, Path] = {}  # an archive -> the temporary folder it was unpacked into (this process)


def scratch_paths(results_dir: Path | str) -> list[Path]:
    """The scratch files and folders present in a results folder, in archive order."""
    rdir = Path(results_dir)
    return [rdir / n for n in SCRATCH_NAMES if (rdir / n).exists()]


def pack_scratch(results_dir: Path | str, remove: bool = True) -> Path | None:
    """Pack the folder's scratch into ``cells.tar.xz`` (members relative to the folder, sorted, so the same
    files give the same member list); remove them when ``remove``. None when there is nothing to pack.
    A folder that already has an archive and new scratch (a resumed campaign) gets both in one archive."""
    rdir = Path(results_dir)
    paths = scratch_paths(rdir)
    if not paths:
        return None
    archive = rdir / CELLS_ARCHIVE
    files: list[Path] = []
    for p in paths:
        files += [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file() or f.is_symlink())
    with tempfile.TemporaryDirectory(dir=rdir) as tmp:
        staged = Path(tmp) / CELLS_ARCHIVE
        with tarfile.open(staged, "w:xz", preset=9) as tar:
            if archive.exists():
                with tarfile.open(archive) as old:
                    for member in old.getmembers():
                        if not (rdir / member.name).exists():
                            tar.addfile(member, old.extractfile(member) if member.isfile() else None)
            for f in files:
                tar.add(f, arcname=f.relative_to(rdir).as_posix(), recursive=False)
        staged.replace(archive)
    if remove:
        for p in paths:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    return archive


def scratch_root(results_dir: Path | str) -> Path | None:
    """Where the folder's scratch can be read: a temporary folder holding the unpacked ``cells.tar.xz``
    (unpacked on the first call of this process, removed at its exit); None without an archive."""
    archive = (Path(results_dir) / CELLS_ARCHIVE).resolve()
    if not archive.is_file():
        return None
    if archive not in UNPACKED:
        tmp = Path(tempfile.mkdtemp(prefix="sharebench-cells-"))
        atexit.register(shutil.rmtree, tmp, True)
        with tarfile.open(archive) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.12, 3.11.4, 3.10.12: no path outside tmp
                tar.extractall(tmp, filter="data")
            else:
                tar.extractall(tmp)  # older Pythons: the members are the folder's own (pack_scratch)
        UNPACKED[archive] = tmp
    return UNPACKED[archive]
