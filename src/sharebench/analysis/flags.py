"""The flags table's rows: one typed :class:`Flag` per finding, its ``kind`` from a fixed vocabulary.

``kind`` says what was found, ``detail`` the numbers or reason behind it, and ``flag`` the sentence the
report prints. Readers filter on ``kind`` (the Answer: ``disturbed``, ``spread``), never on the sentence.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd

from sharebench.analysis.kinds import baseline_mask

# cell flags: failed, incomplete, overlap, devices, unlisted and rerun exclude the cell; disturbed warns
# group flags (one mode on one kind of work): warnings
FLAG_KINDS = (
    "failed",  # a replica or the cell failed; detail: the first error
    "incomplete",  # fewer replica rows than replicas; detail: "2 of 3 replica rows"
    "overlap",  # the replicas' tracking windows overlapped too little; detail: "90.00% < 95%"
    "devices",  # the replicas ran on different physical devices; detail: their UUIDs
    "disturbed",  # another job or the host disturbed the cell; detail: what (the busiest processes left out)
    "repeats",  # too few measured repeats for an interval; detail: "only 2 measured repeat(s) (< 3)"
    "baseline",  # no exclusive cell of the same work; detail: what is missing
    "spread",  # a coefficient of variation above the limit; detail: "CV of T_N 12.00% > 10%"
    "fairness",  # the slowest replica much slower than the fastest; detail: the ratio
    "scaling",  # the units (SMs, cores) of the device or the slice unknown; detail: which
    "unlisted",  # the row's sweep is not one sweep.json lists (a row from elsewhere); detail: the sweep id
    "kind",  # a mode of a kind this sharebench has no loss table for: cells and throughput only; detail: the kind
    "rerun",  # a failed cell that a later sweep of the folder measured again; detail: the first error
    # a p95 slowdown whose whole interval lies below 1 (shared faster than alone): the baseline alone was
    # measured in another state; detail: the slowdown, its interval and the alone p95 per repeat
    "below-one",
    # a throughput gain whose whole interval lies above what N replicas can give (N x exclusive; on the CPU at
    # most its cores, as one replica alone uses one core or more): the exclusive baseline ran slower than the
    # same work runs (another load, a replica alone using fewer cores than it was given); detail: the gain,
    # its interval and the bound
    "beyond",
)
FLAG_COLUMNS = ["scope", "mode", "particles", "cell_id", "flag", "excluded", "kind", "detail"]
# the flags that bear on a mode's trust (``analysis.answer.trust_of``, ``tables/trust.csv``): a disturbed cell
# of the mode or its baseline, a large spread, a p95 slowdown below 1, an excluded cell of the mode. A mode
# with any of them at the work its trust is judged at is never "ok" (tests/results/test_companions.py).
TRUST_KINDS = ("disturbed", "spread", "below-one")


@dataclass(frozen=True)
class Flag:
    """One row of the flags table (columns :data:`FLAG_COLUMNS`)."""

    scope: str  # "cell" or "group" (one mode on one kind of work)
    mode: str
    particles: Any
    cell_id: str  # "" for a group flag
    flag: str  # the sentence the report prints
    excluded: bool  # the cell is left out of every statistic
    kind: str  # one of FLAG_KINDS
    detail: str

    def __post_init__(self) -> None:
        if self.kind not in FLAG_KINDS:
            raise ValueError(f"flag kind {self.kind!r} is not one of {', '.join(FLAG_KINDS)}")


def flags_frame(flags: list[Flag]) -> pd.DataFrame:
    """The flags table, columns :data:`FLAG_COLUMNS` (empty when nothing was flagged)."""
    return pd.DataFrame([asdict(f) for f in flags], columns=FLAG_COLUMNS)


def trust_flags(flags: pd.DataFrame, mode: str, particles: Any, baseline: str = "exclusive") -> pd.DataFrame:
    """The flags that bear on ``mode``'s trust at ``particles`` (:data:`TRUST_KINDS` of the mode, a disturbed
    cell of its ``baseline`` too, and the mode's excluded cells)."""
    if flags.empty:
        return flags
    at = flags["particles"].astype(str) == str(particles)
    own = (flags["mode"] == mode) & (flags["kind"].isin(TRUST_KINDS) | flags["excluded"].astype(bool))
    base = (flags["mode"] == baseline) & (flags["kind"] == "disturbed")
    return flags[at & (own | base)]


def below_one_detail(flags: pd.DataFrame, mode: str, particles: Any) -> str:
    """The detail of ``mode``'s ``below-one`` flag at ``particles`` ('' when none): its p95 slowdown lies
    wholly below 1, so the baseline alone was measured in another state and the mode is not trusted as
    measured."""
    f = trust_flags(flags, mode, particles)
    below = f[(f["mode"] == mode) & (f["kind"] == "below-one")] if len(f) else f
    return str(below["detail"].iloc[0]) if len(below) else ""


def gain_bound(replicas: int, device_class: str, cores: float) -> tuple[float, str]:
    """The most throughput N replicas can give against one alone, and why: N (each does one replica's work in
    the same time at best); on the CPU also its cores (a replica alone uses at least one of them)."""
    if device_class == "cpu" and math.isfinite(cores) and 1 <= cores < replicas:
        return float(cores), f"{replicas} replicas on {cores:g} cores"
    return float(replicas), f"{replicas} replicas"


def beyond_flags(throughput: pd.DataFrame, cells: pd.DataFrame) -> list[Flag]:
    """A ``beyond`` group flag for each mode whose throughput gain interval lies wholly above the bound
    (:func:`gain_bound`; the cores: those the exclusive cells of that work could run on): shared replicas cannot
    do more than that, so the baseline alone was slower than the work is, and the gain is no gain."""
    out: list[Flag] = []
    for _, r in throughput.iterrows():
        low = float(r["gain_ci_low"]) if pd.notna(r["gain_ci_low"]) else math.nan
        if not math.isfinite(low) or int(r["replicas"]) <= 1:
            continue
        alone = cells[baseline_mask(cells["mode_kind"]) & (cells["particles"] == r["particles"])]
        cores = float(alone["cores"].astype(float).max()) if len(alone) and "cores" in alone else math.nan
        bound, why = gain_bound(int(r["replicas"]), str(r["device_class"]), cores)
        if low <= bound:
            continue
        detail = f"throughput {r['gain']:.2f}x [{low:.2f}, {float(r['gain_ci_high']):.2f}] > {bound:g}x ({why})"
        text = (
            f"{detail}: more than {why} can do; the exclusive baseline ran slower than this work runs (another "
            "load while it ran, or one replica alone using fewer cores than it had): not a gain"
        )
        out.append(Flag("group", str(r["mode"]), r["particles"], "", text, False, "beyond", detail))
    return out
