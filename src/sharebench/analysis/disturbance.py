"""Flags of cells measured under disturbance (``tel_disturbed`` in results.csv, written by
``sharebench.telemetry.disturbance``): a warning, never an exclusion — the reader decides, the
Answer says the mode cannot be trusted as measured."""

from __future__ import annotations

import pandas as pd

from sharebench.analysis.flags import Flag

DISTURBED_COLUMN = "tel_disturbed"
BUSY_COLUMN = "tel_busy_processes"  # the busiest other processes, which the reason lists after ", busiest: "


def what_disturbed(reason: str, busy: object) -> str:
    """The reason without the list of the busiest processes (kept in its own column): what, not who."""
    return reason.replace(f", busiest: {busy}", "") if isinstance(busy, str) and busy else reason


def disturbed_flags(df: pd.DataFrame, measured: pd.DataFrame) -> list[Flag]:
    """One ``disturbed`` flag per measured (non-warm-up) cell whose rows carry a reason."""
    if DISTURBED_COLUMN not in df.columns or measured.empty:
        return []
    cols = ["sweep_id", "cell_id", DISTURBED_COLUMN] + ([BUSY_COLUMN] if BUSY_COLUMN in df.columns else [])
    reasons = df[cols].copy()
    reasons = reasons[reasons[DISTURBED_COLUMN].fillna("").astype(str).str.len() > 0]
    if reasons.empty:
        return []
    first = reasons.drop_duplicates(["sweep_id", "cell_id"]).set_index(["sweep_id", "cell_id"])
    out = []
    for _, c in measured.iterrows():
        key = (c["sweep_id"], c["cell_id"])
        reason = first[DISTURBED_COLUMN].get(key)
        if isinstance(reason, str) and reason:
            busy = first[BUSY_COLUMN].get(key) if BUSY_COLUMN in first.columns else None
            out.append(
                Flag(
                    scope="cell",
                    mode=c["mode"],
                    particles=c["particles"],
                    cell_id=c["cell_id"],
                    flag=f"disturbed: {reason}",
                    excluded=False,
                    kind="disturbed",
                    detail=what_disturbed(reason, busy),
                )
            )
    return out
