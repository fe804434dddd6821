"""Flags of cells measured under disturbance (``tel_disturbed`` in results.csv, written by
``sharebench.telemetry.disturbance``): a warning, never an exclusion — the reader decides, the
Answer says the mode cannot be trusted as measured."""

from __future__ import annotations

import pandas as pd

DISTURBED_COLUMN = "tel_disturbed"


def disturbed_flags(df: pd.DataFrame, measured: pd.DataFrame) -> list[dict]:
    """One ``disturbed: REASON`` flag row per measured (non-warm-up) cell whose rows carry a reason."""
    if DISTURBED_COLUMN not in df.columns or measured.empty:
        return []
    reasons = df[["sweep_id", "cell_id", DISTURBED_COLUMN]].copy()
    reasons = reasons[reasons[DISTURBED_COLUMN].fillna("").astype(str).str.len() > 0]
    if reasons.empty:
        return []
    first = reasons.drop_duplicates(["sweep_id", "cell_id"]).set_index(["sweep_id", "cell_id"])[DISTURBED_COLUMN]
    out = []
    for _, c in measured.iterrows():
        reason = first.get((c["sweep_id"], c["cell_id"]))
        if isinstance(reason, str) and reason:
            out.append(
                dict(
                    scope="cell",
                    mode=c["mode"],
                    particles=c["particles"],
                    cell_id=c["cell_id"],
                    flag=f"disturbed: {reason}",
                    excluded=False,
                )
            )
    return out
