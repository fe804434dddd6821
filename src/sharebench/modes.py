"""Sharing-mode strings, parsed in one place.

Grammar (lowercase)::

    exclusive             one replica alone on the device (T_1)
    timeslice:N[/INTERVAL] N concurrent processes sharing the device; INTERVAL (default, short,
                          medium, long) is the time-slice length the GPU is set to for the cell
    mps:N[@PCT]           N MPS clients, optional active-thread percentage each
    mig:LAYOUT            one replica per MIG instance (LAYOUT: 7g, 1g, 1g.18gb, all-1g.5gb)
    mig-emulated:LAYOUT   MIG emulated with MPS: one client per instance of the layout, each with
                          its profile's SM share and memory limit (LAYOUT: 1g.18gb, 7x1g.18gb,
                          4g.71gb+3g.71gb, all-1g.18gb, 7g); no MIG memory/L2/fault isolation
    partition:N           CPU only: N replicas on disjoint core sets
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sharebench.errors import UserError

KINDS = ("exclusive", "timeslice", "mps", "mig", "mig-emulated", "partition")
ALLOWED = "exclusive, timeslice:N[/INTERVAL], mps:N[@PCT], mig:LAYOUT, mig-emulated:LAYOUT, partition:N"
INTERVALS = ("default", "short", "medium", "long")  # nvidia-smi compute-policy --set-timeslice 0..3
# the time-slice probe (sharebench.telemetry.timeslice_probe) and the split of a time-slicing loss
# (sharebench.analysis.timeslice_split): here, light, for the help of `sharebench probe`
GRIDS = ("one", "full")  # the probe on one block, or one block per SM
DEFAULT_THRESHOLD_US = 20.0  # a read-to-read jump longer than this is a switch-out (switches take ~0.2 ms)
DEFAULT_LENGTHS_MS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # the slice lengths a split predicts the loss at


@dataclass(frozen=True)
class Mode:
    kind: str  # one of KINDS
    replicas: int | None = 1  # None for mig until the layout is resolved
    layout: str | None = None  # mig and mig-emulated only, as written by the user
    thread_pct: int | None = None  # mps only
    interval: str | None = None  # timeslice only: one of INTERVALS; None leaves the GPU's setting alone

    @property
    def label(self) -> str:
        if self.kind == "exclusive":
            return "exclusive"
        if self.kind in ("mig", "mig-emulated"):
            return f"{self.kind}:{self.layout}"
        if self.kind == "mps" and self.thread_pct is not None:
            return f"mps:{self.replicas}@{self.thread_pct}"
        if self.kind == "timeslice" and self.interval is not None:
            return f"timeslice:{self.replicas}/{self.interval}"
        return f"{self.kind}:{self.replicas}"

    def __str__(self) -> str:
        return self.label


# replicas one cell may run at once (what one device can hold; partition:N is bounded by the cores)
MAX_REPLICAS = 64


def parse_mode(text: str) -> Mode:
    s = text.strip().lower()
    if s == "exclusive":
        return Mode("exclusive", 1)
    kind, sep, arg = s.partition(":")
    if kind not in KINDS or not sep or not arg:
        raise UserError(f"unknown sharing mode {text!r}; allowed: {ALLOWED}")
    if kind == "mig":
        if not re.fullmatch(r"(all-)?(\d+g(\.\d+gb)?|disabled)", arg):
            raise UserError(f"bad MIG layout in {text!r}; allowed: mig:7g, mig:1g, mig:1g.18gb, mig:all-1g.5gb")
        return Mode("mig", None, layout=arg)
    if kind == "mig-emulated":
        if not re.fullmatch(r"[0-9a-z.+]+(-[0-9a-z.+]+)?", arg):
            raise UserError(
                f"bad emulated MIG layout in {text!r}; allowed: mig-emulated:1g.18gb, "
                "mig-emulated:7x1g.18gb, mig-emulated:4g.71gb+3g.71gb, mig-emulated:all-1g.18gb"
            )
        return Mode("mig-emulated", None, layout=arg)
    pct = interval = None
    if "/" in arg:
        if kind != "timeslice":
            raise UserError(f"only timeslice takes a /INTERVAL (got {text!r}); allowed: {ALLOWED}")
        arg, _, interval = arg.partition("/")
        if interval not in INTERVALS:
            raise UserError(
                f"bad time-slice interval in {text!r}; allowed: {', '.join(INTERVALS)} (e.g. timeslice:2/long)"
            )
    if kind == "mps" and "@" in arg:
        arg, _, pct_s = arg.partition("@")
        if not pct_s.isdigit() or not 1 <= int(pct_s) <= 100:
            raise UserError(f"bad MPS thread percentage in {text!r}; allowed: an integer 1..100")
        pct = int(pct_s)
    if not re.fullmatch(r"-?\d+", arg):
        raise UserError(f"bad replica count in {text!r}; allowed: an integer N >= 1")
    if len(arg) > 6 or (kind != "partition" and int(arg) > MAX_REPLICAS):
        raise UserError(f"replica count too large in {text!r}; allowed: 1..{MAX_REPLICAS} replicas per cell")
    n = int(arg)
    if n < 1:
        raise UserError(f"replica count must be >= 1 in {text!r}")
    if kind == "exclusive":
        raise UserError(f"'exclusive' takes no count (got {text!r}); allowed: {ALLOWED}")
    return Mode(kind, n, thread_pct=pct, interval=interval)


def parse_modes(text: str | list[str]) -> list[Mode]:
    items = text.split(",") if isinstance(text, str) else list(text)
    modes = [parse_mode(t) for t in items if t.strip()]
    if not modes:
        raise UserError("no sharing mode given; allowed: " + ALLOWED)
    return modes


def mode_sort_key(mode: str) -> tuple:
    """The order tables and plots list modes in: exclusive, time-slicing, MPS, MIG, partitions,
    each by replica count (``timeslice:2`` before ``timeslice:8``), then by time-slice interval
    (none given, then default, short, medium, long)."""
    kind, _, arg = str(mode).partition(":")
    order = {"exclusive": 0, "timeslice": 1, "mps": 2, "mig": 3, "mig-emulated": 3.5, "partition": 4}.get(kind, 9)
    num, _, interval = arg.split("@")[0].partition("/")
    rank = INTERVALS.index(interval) + 1 if interval in INTERVALS else 0
    return (order, int(num) if num.isdigit() else 0, rank, arg)
