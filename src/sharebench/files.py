"""Files written whole or not at all: a temporary file beside the target, flushed, then renamed.

Every file sharebench writes that another process may read while it is being written (a replica's
record, the start file of a barrier, a kernel or lattice cache entry, a results document) goes
through :func:`write_atomic`: a reader sees the old file or the new one, never half of one.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: str | bytes, *, fsync: bool = False) -> Path:
    """Write ``data`` to ``path`` through a private temporary file and ``os.replace``; returns the path.

    ``fsync``: also flush the data to the disk before the rename (results that must survive a crash).
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    mode = "wb" if isinstance(data, bytes) else "w"
    try:
        with open(tmp, mode) as fh:
            fh.write(data)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:  # a full or read-only disk: the message names the file meant, not the temporary one
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(target)) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target
