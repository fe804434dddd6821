"""A results folder as a small crash-safe store: one writer at a time, nothing of the user's
overwritten, a torn last row set aside instead of parsed.

* :func:`claim_folder` takes the folder's lock (``.sharebench.lock``, held with ``filelock`` for as
  long as the sweep runs; the kernel drops it when the process dies, even by SIGKILL) and names the
  holder in ``.sharebench.owner``. A second sweep on the same folder is refused with the holder's pid.
* :func:`check_new_folder` refuses a fresh sweep into a folder that already holds anything (the
  user's files, another sweep's outputs): sharebench writes only into folders it owns.
* :func:`complete_rows` splits results.csv into its whole rows and a torn tail (a last line with no
  newline, or with another number of fields than the header: a disk that filled mid-append, a
  truncation); :func:`set_aside_torn_tail` moves the tail to ``results-torn.txt`` so the next
  append starts on a clean line and the tail is never parsed into results.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.results.folder import RESULTS_CSV

LOCK_FILE = ".sharebench.lock"
OWNER_FILE = ".sharebench.owner"
TORN_TXT = "results-torn.txt"


def _owner(out: Path) -> str:
    try:
        return (out / OWNER_FILE).read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def check_out_path(out: Path) -> None:
    """``out`` can be a results folder: not a file, and creatable."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, not a folder; give a folder path (it is created if missing)")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create results folder {out}: {exc.strerror or exc}; give another --out") from None


def check_new_folder(out: Path) -> None:
    """A fresh (not resumed) sweep writes only into a missing or empty folder."""
    if not out.is_dir():
        return
    held = sorted(p.name for p in out.iterdir() if p.name not in (LOCK_FILE, OWNER_FILE))
    if held:
        shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        raise UserError(
            f"{out} is not empty (it holds {shown}); sharebench writes only into a new or empty "
            "folder: give another --out, or --resume to continue a sharebench results folder"
        )


@contextmanager
def claim_folder(out: Path) -> Iterator[None]:
    """Hold ``out`` for one sweep; a second sweep on it is refused naming the holder's pid."""
    lock = FileLock(str(out / LOCK_FILE), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise UserError(
            f"{out} is in use by another sweep ({_owner(out)}); wait for it to end, or give another --out"
        ) from None
    except OSError as exc:
        raise UserError(f"cannot lock results folder {out}: {exc.strerror or exc}") from None
    try:
        try:
            write_atomic(out / OWNER_FILE, f"pid {os.getpid()}\n")
        except OSError:
            pass  # the lock itself is what counts; the name is a courtesy
        yield
    finally:
        (out / OWNER_FILE).unlink(missing_ok=True)
        lock.release()


def complete_rows(data: bytes) -> tuple[bytes, bytes]:
    """(the whole rows, the torn tail) of a results CSV's bytes. A row is whole when it ends in a
    newline and has as many fields as the header."""
    if not data:
        return b"", b""
    cut = data.rfind(b"\n") + 1
    whole, tail = data[:cut], data[cut:]
    lines = whole.splitlines(keepends=True)
    if len(lines) >= 2:
        try:
            header = next(csv.reader(io.StringIO(lines[0].decode())))
            last = next(csv.reader(io.StringIO(lines[-1].decode())), [])
        except (UnicodeDecodeError, csv.Error, StopIteration):
            return whole, tail
        if len(last) != len(header):
            whole, tail = b"".join(lines[:-1]), lines[-1] + tail
    return whole, tail


def set_aside_torn_tail(out: Path) -> str | None:
    """Move a torn last row of ``out/results.csv`` to ``results-torn.txt``; returns a note, or None."""
    path = out / RESULTS_CSV
    if not path.exists():
        return None
    try:
        data = path.read_bytes()
        whole, tail = complete_rows(data)
        if not tail:
            return None
        with (out / TORN_TXT).open("ab") as f:
            f.write(tail + (b"" if tail.endswith(b"\n") else b"\n"))
            f.flush()
            os.fsync(f.fileno())
        write_atomic(path, whole, fsync=True)
    except OSError as exc:
        raise UserError(f"cannot repair {path}: {exc.strerror or exc}") from None
    return f"{RESULTS_CSV} ended in a torn row ({len(tail)} bytes, moved to {TORN_TXT}); its cell runs again"
