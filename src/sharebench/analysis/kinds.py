"""Mode kinds on frames: which rows are the baseline, which kinds share a device, which loss table a
mode goes to, each from the kind's :class:`~sharebench.modes.KindSpec` (never from its name).

A column of kinds (``mode_kind``) or of mode labels (``mode``) both work: a label's kind is the part
before ``:``. A kind no :data:`~sharebench.modes.KINDS` row declares (a results folder of another
sharebench) is neither the baseline nor shared, and :func:`table_of` says it has no table.
"""

from __future__ import annotations

import pandas as pd

from sharebench.errors import UserError
from sharebench.modes import KINDS, KindSpec, is_baseline, kind_of, parse_mode


def spec_or_none(mode: object) -> KindSpec | None:
    """The spec of a mode's (or label's, or kind's) kind; None for a kind no row declares."""
    return KINDS.get(kind_of(str(mode)))


def baseline_mask(column: pd.Series) -> pd.Series:
    """True where a kind or mode label is the baseline (one replica alone on the device)."""
    return column.map(is_baseline).astype(bool)


def shared_mask(column: pd.Series) -> pd.Series:
    """True where a kind or mode label puts N replicas on one whole device (T_N against N·T_1)."""
    return column.map(lambda m: (s := spec_or_none(m)) is not None and s.shared).astype(bool)


def table_mask(column: pd.Series, table: str) -> pd.Series:
    """True where a kind or mode label's kind declares loss table ``table`` (:attr:`KindSpec.table`)."""
    return column.map(lambda m: (s := spec_or_none(m)) is not None and s.table == table).astype(bool)


def table_of(label: str) -> str | None:
    """The loss table a mode label's cells go to (:attr:`Mode.table`: '' the baseline's none), or None
    for a label this sharebench cannot parse (a kind it does not know)."""
    try:
        return parse_mode(str(label)).table
    except UserError:
        return None


def is_emulation(mode: object) -> bool:
    """A kind that stands in for another (:attr:`KindSpec.emulates`): measured, never a mode to choose."""
    spec = spec_or_none(mode)
    return spec is not None and bool(spec.emulates)


def emulation_mask(column: pd.Series) -> pd.Series:
    """True where a kind or mode label is an emulation (:func:`is_emulation`)."""
    return column.map(is_emulation).astype(bool)


def isolating_kinds() -> tuple[str, ...]:
    """The kinds whose replicas run on disjoint slices of the device (instances, partitions), emulations
    left out, in KINDS order: hardware instances (MIG) first."""
    return tuple(s.name for s in KINDS.values() if s.family in {"instances", "partition"} and not s.emulates)
