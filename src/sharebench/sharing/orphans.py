"""MPS daemons a killed sweep left behind, found and stopped.

Every private MPS daemon lives in a folder ``$TMPDIR/sbmps-*`` that names its sweep's pid in
``owner.pid`` (:data:`OWNER_FILE`). SIGKILL of a sweep leaves the daemon running (it is a daemon:
not a child that dies with the sweep) and its folder behind. :func:`stop_orphans` finds each folder
whose owner is gone, asks its daemon to quit (``nvidia-cuda-mps-control`` with that pipe folder),
stops what still runs with that pipe folder in its environment, and removes the folder. The next
MPS cell on the machine calls it, and so does ``sharebench cleanup``. A symbolic link named like such
a folder is never sharebench's (a sweep makes real folders): it is left in place, nothing it points
at is stopped, and the report says so; a folder is reported removed only once it is gone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import psutil

from sharebench import processes

OWNER_FILE = "owner.pid"
PREFIX = "sbmps-"


def write_owner(root: Path) -> None:
    """Name this process as the owner of the daemon folder ``root``."""
    (root / OWNER_FILE).write_text(f"{os.getpid()}\n")


def _owner_alive(root: Path) -> bool:
    try:
        pid = int((root / OWNER_FILE).read_text().strip())
    except (OSError, ValueError):
        return True  # not ours to judge: a folder without a readable owner is left alone
    return psutil.pid_exists(pid) and pid != 0


def find_orphans(tmp: Path | None = None) -> list[Path]:
    """The daemon folders under ``tmp`` (default: the temporary folder) whose sweep is gone."""
    base = Path(tmp or tempfile.gettempdir())
    try:
        folders = sorted(p for p in base.glob(f"{PREFIX}*") if p.is_dir())
    except OSError:
        return []
    return [p for p in folders if (p / OWNER_FILE).exists() and not _owner_alive(p)]


def _daemon_processes(pipe: Path) -> list[psutil.Process]:
    procs = []
    for p in psutil.process_iter(["name"]):
        try:
            if (p.info["name"] or "").startswith("nvidia-cuda-mps") and p.environ().get(
                "CUDA_MPS_PIPE_DIRECTORY"
            ) == str(pipe):
                procs.append(p)
        except (psutil.Error, OSError):
            continue
    return procs


def stop_orphans(tmp: Path | None = None, control: str = "nvidia-cuda-mps-control") -> list[str]:
    """Stop every orphaned daemon and remove its folder; one line per folder saying what was done."""
    done = []
    for root in find_orphans(tmp):
        if root.is_symlink():
            done.append(f"left {root} in place: a symbolic link, not a daemon folder a sweep made")
            continue
        pipe = root / "pipe"
        path = shutil.which(control)
        if path:
            try:
                subprocess.run(
                    [path],
                    input="quit\n",
                    text=True,
                    capture_output=True,
                    timeout=10,
                    env={
                        **os.environ,
                        "CUDA_MPS_PIPE_DIRECTORY": str(pipe),
                        "CUDA_MPS_LOG_DIRECTORY": str(root / "log"),
                    },
                )
            except (OSError, subprocess.SubprocessError):
                pass  # stopped below by its pid
        procs = _daemon_processes(pipe)
        processes.end_processes(procs, grace_s=10.0)
        shutil.rmtree(root, ignore_errors=True)
        pids = ", ".join(str(p.pid) for p in procs) or "none running"
        outcome = f"could not remove {root}" if os.path.lexists(root) else f"removed {root}"
        done.append(f"stopped an orphaned MPS daemon (pid {pids}) and {outcome}")
    return done
