"""The history's settings as its commands are given them, checked without the history's stack (pandas, scipy,
matplotlib), as ``probe_settings`` is for the probe:
``sharebench history``'s options module (``sharebench.cli.history``) checks every value with these before
the work loads, and the library checks them again with the same functions.

* :class:`CheckOptions`: ``--threshold``, ``--alpha``, ``--baseline`` of ``history check`` and ``add --check``;
* :func:`store_location`: a store as typed (a local folder or ``s3://bucket/prefix``), its form checked;
* :func:`parse_since`: ``--since`` as the store's time format;
* :func:`check_url`: a ``--pushgateway`` URL.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sharebench.errors import UserError
from sharebench.parse import DEFAULT_ALPHA, DEFAULT_BASELINE_RUNS, DEFAULT_THRESHOLD_PTS

ALLOWED_STORES = "a local folder or s3://bucket/prefix"


@dataclass(frozen=True)
class CheckOptions:
    threshold_pts: float = DEFAULT_THRESHOLD_PTS
    alpha: float = DEFAULT_ALPHA
    baseline_runs: int = DEFAULT_BASELINE_RUNS

    def validated(self) -> CheckOptions:
        if not (math.isfinite(self.threshold_pts) and self.threshold_pts > 0):
            raise UserError(f"bad --threshold {self.threshold_pts:g}; allowed: percentage points > 0, e.g. 2")
        if not (0 < self.alpha < 1):
            raise UserError(f"bad --alpha {self.alpha:g}; allowed: a probability in (0, 1), e.g. 0.01")
        if self.baseline_runs < 1:
            raise UserError(f"bad --baseline {self.baseline_runs}; allowed: a whole number of runs >= 1")
        return self


@dataclass(frozen=True)
class Location:
    """Where a store is: ``bucket`` and ``prefix`` of an s3:// store, else ``root`` (a local folder)."""

    text: str
    bucket: str = ""
    prefix: str = ""
    root: Path | None = None


def store_location(text: str, *, create: bool = False) -> Location:
    """A store as typed, its form checked: ``s3://bucket/prefix`` or a local folder (one that exists, unless
    ``create``: ``history add`` makes it). A one-line UserError for anything else."""
    text = str(text).strip()
    if text.startswith("s3://"):
        bucket, _, prefix = text[len("s3://") :].partition("/")
        if not bucket:
            raise UserError(f"history store {text!r} names no bucket; allowed: {ALLOWED_STORES}")
        return Location(text, bucket=bucket, prefix=prefix.strip("/"))
    if not text or "://" in text:
        raise UserError(f"history store {text!r} is not a folder or an s3 URL; allowed: {ALLOWED_STORES}")
    root = Path(text)
    if root.exists() and not root.is_dir():
        raise UserError(f"history store {text} is a file, not a folder; allowed: {ALLOWED_STORES}")
    if not create and not root.is_dir():
        raise UserError(f"no history store at {text}: add a run first (sharebench history add DIR --to {text})")
    return Location(text, root=root)


def parse_since(text: str | None) -> str | None:
    """--since as the store's time format (UserError if it is no ISO date/time)."""
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(
            f"bad --since {text!r}; allowed: an ISO date or time, e.g. 2026-12-01 or 2026-12-01T12:00"
        ) from None
    return t.strftime("%Y-%m-%dT%H:%M:%S+0000")


def check_url(url: str) -> str:
    """A ``--pushgateway`` URL: http(s) only."""
    if not url.startswith(("http://", "https://")):
        raise UserError(f"bad --pushgateway {url!r}; allowed: an http(s) URL, e.g. http://pushgateway:9091")
    return url
