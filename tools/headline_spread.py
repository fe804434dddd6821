"""The headline's between-machine spread, from committed results folders (README "Headline spread").

    python3 -m tools.headline_spread docs/results/h200/*/ [--markdown]

Every row names its GPU (``device_uuid``); the loss of time-slicing and MPS per machine, its
within-run interval, the spread between machines and how the loss moves with the run length
(turns) are printed (``sharebench.analysis.spread``); where the folders hold runs beside the time-slice
probe, each machine's slice, switch, in-slice rate and refill, and the part the spread is attributed to.
"""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from sharebench.analysis.spread import folder_spread
from sharebench.errors import UserError


def fmt(v: float, spec: str = ".2f") -> str:
    return "—" if pd.isna(v) else format(float(v), spec)


def within(v: float) -> str:
    return "— (< 3 repeats)" if pd.isna(v) else f"{float(v):.2f} pts"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="results folders (or results.csv files)")
    ap.add_argument("--out", default=None, help="also write the table (markdown) to this file")
    args = ap.parse_args(argv)
    try:
        t = folder_spread(args.results)
    except UserError as exc:
        print(f"headline_spread: {exc}", file=sys.stderr)
        return 2
    if t.empty:
        print(
            "headline_spread: no time-slicing or MPS loss with a GPU UUID in " + " ".join(args.results), file=sys.stderr
        )
        return 2
    lines = render(t)
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(f"<!-- generated: python3 -m tools.headline_spread {' '.join(args.results)} -->\n")
            fh.write("\n".join(lines) + "\n")
    return 0


def render(t: pd.DataFrame) -> list[str]:
    """The spread table as markdown lines, with the machines and the run lengths measured."""
    uuids = sorted(set(" ".join(t["uuids"]).split()))
    out = [f"{len(uuids)} machine(s): {', '.join(uuids)}", ""]
    add = out.append
    add("| backend | particles | turns | mode | machines | loss | within-run 95% ± | between-machine spread |")
    add("|---|---:|---:|---|---:|---:|---:|---:|")
    for _, r in t.iterrows():
        add(
            f"| {r['backend']} | {int(r['particles']):,} | {int(r['turns'])} | {r['mode']} | {r['machines']} | "
            f"{fmt(r['loss_pct'])}% | {within(r['within_ci_pts'])} | "
            f"{fmt(r['spread_pts']) + ' pts' if r['machines'] > 1 else 'one machine only'} |"
        )
    for _, r in t[t["attributed"].fillna("") != ""].iterrows():
        add(
            f"- {r['mode']}, {int(r['particles']):,} particles: spread attributed to the {r['attributed']}; {r['per_machine']}"
        )
    turns = sorted(t["turns"].unique())
    add("")
    add(
        f"run lengths measured: {', '.join(str(int(x)) for x in turns)} turn(s)"
        + ("" if len(turns) > 1 else " — how the loss depends on run length is not in this data")
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
