"""The time-slice probe's settings: its grids, its switch-out threshold, the slice lengths a split predicts
the loss at.

The probe (``sharebench.telemetry.timeslice_probe``) and the split of a time-slicing loss
(``sharebench.analysis.timeslice_split``) read them, and so does ``sharebench probe --help``
(``sharebench.cli.probe``), which must not load the probe's stack (numpy, the kernel): so they are kept in
this module of the shared vocabulary, which imports nothing but ``errors``; and so are the checks of the
probe's arguments (:func:`check_args`, :func:`parse_neighbours`), which the command line runs before the
probe loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from sharebench.errors import UserError

GRIDS = ("one", "full")  # the probe on one block, or one block per SM
DEFAULT_THRESHOLD_US = 20.0  # a read-to-read jump longer than this is a switch-out (switches take ~0.2 ms)
DEFAULT_LENGTHS_MS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0)  # the slice lengths a split predicts the loss at
NEIGHBOURS = ("light", "stream", "heavy")  # the probe's kernels: clock reads only, or streaming over a buffer
DEFAULT_NEIGHBOUR_MB = 128  # stream/heavy footprint (MiB): over twice the H200's 60 MB L2
MAX_NEIGHBOUR_MB = 65536
DEFAULT_SPLIT_NEIGHBOURS = "light,heavy:128"  # what `probe split` measures the workload beside


@dataclass(frozen=True)
class Neighbour:
    """What the probe process runs: ``light`` (clock reads on one block or one per SM), ``stream`` (every
    SM streams over ``mb`` MiB) or ``heavy`` (the stream plus a full register file and shared memory)."""

    kind: str = "light"
    mb: int = 0

    @property
    def label(self) -> str:
        return self.kind if self.kind == "light" else f"{self.kind}:{self.mb}"


NEIGHBOUR_HELP = f"light, stream[:MB] or heavy[:MB] with MB 1..{MAX_NEIGHBOUR_MB} is allowed"


def parse_neighbour(text: str) -> Neighbour:
    """``light``, ``stream[:MB]`` or ``heavy[:MB]`` (MB default :data:`DEFAULT_NEIGHBOUR_MB`); a UserError
    naming the bad value otherwise."""
    kind, _, mb = str(text).strip().lower().partition(":")
    bad = UserError(f"bad --neighbour {text!r}: {NEIGHBOUR_HELP}")
    if kind not in NEIGHBOURS or (kind == "light" and mb):
        raise bad
    if kind == "light":
        return Neighbour()
    if not mb:
        return Neighbour(kind, DEFAULT_NEIGHBOUR_MB)
    if not mb.isdigit() or not 1 <= int(mb) <= MAX_NEIGHBOUR_MB:
        raise bad
    return Neighbour(kind, int(mb))


def parse_neighbours(text: str) -> list[Neighbour]:
    """A comma list of neighbours, without repeats, in the order given."""
    out: list[Neighbour] = []
    for part in str(text).split(","):
        n = parse_neighbour(part)
        if n not in out:
            out.append(n)
    return out


def check_args(processes: int, seconds: float, grid: str, threshold_us: float) -> str | None:
    """One line naming a bad argument and what is allowed, or None."""
    if not isinstance(processes, int) or isinstance(processes, bool) or not 1 <= processes <= 64:
        return f"bad probe process count {processes!r}: a whole number from 1 to 64 is allowed"
    if not (isinstance(seconds, (int, float)) and 0.05 <= seconds <= 600):
        return f"bad probe duration {seconds!r} s: a number of seconds from 0.05 to 600 is allowed"
    if grid not in GRIDS:
        return f"bad probe grid {grid!r}: one of {', '.join(GRIDS)} is allowed"
    if not (isinstance(threshold_us, (int, float)) and 0.1 <= threshold_us <= 10_000):
        return f"bad switch-out threshold {threshold_us!r} us: a number from 0.1 to 10000 is allowed"
    return None
