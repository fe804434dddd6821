"""Where the kernel keeps what it builds once per machine and user: compiled CPU kernels, kernel
build markers, packed lattices, the generated ring as a line file, linear optics.

``$SHAREBENCH_CACHE`` when set, else ``$XDG_CACHE_HOME/sharebench``, else ``~/.cache/sharebench``.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """The kernel cache folder (or the sub-folder ``parts`` of it), created if missing."""
    base = os.environ.get("SHAREBENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "sharebench"
    )
    path = Path(base, *parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
