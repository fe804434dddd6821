"""The Answer: one verdict row per mode measured with batch replicas, and per workload pattern the mode
to choose, each from that pattern's own measurements.

Everything here is derived from the study's tables (``sharebench.analysis.tables``) and the latency
table (``sharebench.analysis.latency``) by the rules below, which the README states in words
(docs/readme/sweep.md, "How the Answer is derived"):

* **Work**: each mode is judged at the largest particle count it was measured at (the work closest
  to production); the row names it. Only the modes whose replicas ran the ``batch`` pattern get a
  verdict row: a mode whose measured replica followed another pattern (a row of the latency table)
  is that pattern's evidence, not batch evidence.
* **throughput gain**: the ``throughput`` table's gain against exclusive, with its 95% interval.
* **worst-job slowdown** (:func:`worst_job_slowdown`, the one figure the whole report prints): the
  slowest replica's tracking time against T_1 (one replica alone), the mean over the cell's repeats
  against the mean T_1, with the ratio's 95% interval: how much longer the last job of the mode waits
  than it would alone. Exclusive is 1 by definition.
* **isolation**: fixed by the mode's kind: none (time-slicing), MPS limits (MPS), hardware (MIG:
  memory, faults, per-instance telemetry), core sets (partition on the CPU).
* **interval** (time-slicing only): where the folder split the loss (``analysis.timeslice_split``), the
  slice length that would halve it, predicted from the switch and refill and labelled so (never measured);
  empty otherwise.
* **trust**: ``ok`` or the reasons not to: fewer than :data:`MIN_CI_REPEATS` repeats (no interval; a
  mode of patterned cells excepted, whose verdict's intervals come from one run's samples), a CV above
  :data:`CV_WARN_PCT`, a disturbed cell (a ``disturbed`` flag), excluded cells, a cell whose every user
  was faster shared than alone (``below-one``); the kinds of those reasons in ``flag_kinds``.

Per pattern kind (``sharebench.patterns.PATTERNS``, in its order: the saturated kind's line, then each
other kind's, named by ``PatternSpec.answer``), then the noisy neighbour and isolation lines, one or more
choice rows (:data:`CHOICE_COLUMNS`; ``basis`` says what
a row rests on: ``measured``, ``predicted``, ``not measured`` or ``untrusted``):

* **batch throughput**: the mode whose gain interval lies wholly above 1 and whose gain is at least
  :data:`MIN_GAIN` (a gain under 2% is no gain in practice), the highest such; when none, exclusive,
  naming the modes whose gain is real but under 2% and those that cost nothing within noise.
* **interactive** and **serving** (every kind not saturated): per mode family, the users (services: the
  kind's ``noun``) per GPU at the p95 slowdown target (``--slo``, default 2) against the same pattern
  alone, as the cells' verdicts decide them (``latency.users_at_target``; one rule, ``analysis.tail``):
  **every user counted** (a cell is within when every user's p95 slowdown is within beyond doubt, above
  when some user's is above beyond doubt, else undecided; distribution-free intervals), the largest N
  within with every smaller N within and the smallest N above ("4 users", "between 4 and 8", "≥ 8",
  "< 4", "no sharing", "undecided"), each end with the worst user's and all users' p95 slowdowns and
  their intervals; never a point estimate alone, never extrapolated. A kind with a ``capacity_unit`` also
  gives the total at the proven N (users x rate: requests/s). The mode chosen is the family with the most
  users proven within (emulations left out), a tie broken by the lower upper bound of the worst user, and
  said; :data:`UNDECIDED` where no family has an N within and one is undecided. A cell with a user
  faster shared than alone beyond doubt (``below_one``: the baseline alone was measured in a slower state)
  is no figure: left out of the bracket and named, with its numbers and why.
* **noisy neighbour**: per mode, the verdict of the users of the pattern beside replicas of another pattern
  (the aggressor, never counted as a user) and the aggressor's throughput cost; the mode chosen is the one
  with the lowest upper bound of the worst user's p95 slowdown (a cell flagged below 1 is never chosen).
  Shown whenever such a cell was measured, with its trust, even when no answer is trusted.
* **isolation required**: the measured MIG mode with the highest gain; on the CPU the partition mode;
  else MIG's cost measured on an emulated layout (``mig-emulated``, labelled "emulated with MPS shares":
  batch rows by gain, else the users' verdict, the most instances within the target);
  only where none was measured MIG as predicted (``predict_cell``, labelled so) or, without MIG, none.
* A pattern that was not measured says so and gives the command that measures it: nothing is inferred
  from another pattern's cells.
* When every sharing mode is flagged (none trusted as measured), no mode is chosen from the
  measurements: one row says there is no trustworthy answer, the kinds of the flags behind it and
  what to do (:data:`REMEDIES`); the noisy-neighbour rows stay, marked untrusted. A choice resting on a
  mode not trusted otherwise says so ("caution: …"). Every mode's trust is one table (:func:`trust_table`,
  ``tables/trust.csv``): the Answer and the end screen's count read it.
* A sweep on the CPU is a smoke test of the harness, not evidence about GPU sharing (:data:`CPU_NOTE`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from sharebench.analysis.format import fmt_gain_pct, fmt_interval, fmt_times
from sharebench.analysis.kinds import baseline_mask, emulation_mask, is_emulation, isolating_kinds
from sharebench.analysis.latency import (
    DEFAULT_SLO,
    LATENCY_COLUMNS,
    UsersAtTarget,
    below_one,
    has_verdict,
    mode_family,
    ratio_text,
    users_at_target,
    verdict_at,
    verdict_text,
)
from sharebench.analysis.prediction import predict_cell
from sharebench.analysis.reproduce import Reproduce
from sharebench.analysis.statistics import MIN_CI_REPEATS, ratio_ci
from sharebench.analysis.suggest import Ask, sized_command
from sharebench.analysis.tables import CV_WARN_PCT, WORK_KEYS, Tables
from sharebench.analysis.timeslice_split import helpful_interval
from sharebench.modes import BASELINE, is_baseline, kind_of, mode_sort_key, time_sliced
from sharebench.patterns import PatternSpec, kinds_where, parse_pattern, saturated

# the isolation each kind gives its replicas, keyed by KindSpec.name (tests/vocabulary/test_kinds.py
# checks every kind has one)
ISOLATION = {
    "exclusive": "whole device (one job)",
    "timeslice": "none: memory, faults and telemetry shared",
    "mps": "MPS limits (thread % and memory limits); a fault stops every client",
    "mig": "hardware: memory, faults, per-instance telemetry",
    "partition": "core sets (cpusets); memory shared",
    "mig-emulated": "none beyond MPS: an emulation of MIG (its SM shares and memory limits; L2, memory bandwidth "
    "and faults shared)",
}
# the modes the command that measures a missing pattern suggests when a folder measured no sharing mode
SUGGESTED_GPU = (BASELINE, "timeslice:2", "mps:2")
SUGGESTED_CPU = (BASELINE, "timeslice:2", "partition:2")
# the isolation the Answer predicts where no instance or partition was measured: MIG's smallest instances
PREDICTED_ISOLATION = "mig:all-1g"
ANSWER_COLUMNS = [
    *WORK_KEYS,
    "mode",
    "kind",
    "replicas",
    "repeats",
    "gain",
    "gain_ci_low",
    "gain_ci_high",
    "slowdown",
    "slowdown_ci_low",
    "slowdown_ci_high",
    "fairness",
    "isolation",
    "trust",
    "flag_kinds",
    "interval",
]
CHOICE_COLUMNS = ["pattern", "mode", "basis", "reason"]
TRUST_COLUMNS = ["mode", "trust", "flag_kinds", "sharing"]  # sharing: counts towards an answer
NEIGHBOUR_LINE = "noisy neighbour"  # the Answer's lines after one per pattern kind (PatternSpec.answer)
ISOLATION_LINE = "isolation required"
BASES = ("measured", "predicted", "not measured", "untrusted")
MIN_GAIN = 0.02  # a throughput gain under 2% is no gain in practice
NO_ANSWER = "no trustworthy answer"
UNDECIDED = "undecided"  # the choice of a pattern whose every family is undecided (more samples would tell)
CPU_NOTE = "a sweep on the CPU: a smoke test of the harness, not evidence about GPU sharing"
# what to do about the reasons a mode is not trusted (the kinds in ``flag_kinds``)
REMEDIES = {
    "disturbed": "measure on a quiet host (`--strict` refuses a busy one and stops at a disturbed cell)",
    "spread": "more repeats (`--repeats 10`) and longer cells (more particles or turns) to narrow the spread",
    "repeats": f"at least {MIN_CI_REPEATS} repeats (`--repeats {MIN_CI_REPEATS}`) for an interval",
    "excluded": "see Flags for why cells were left out (failed, incomplete, overlap, devices) and measure them again",
    "below-one": "measure the pattern alone again with more samples (the baseline alone was slower than a user "
    "shared: a slow state of the device or the host; `--awake-control` tests an idle GPU's wake-up)",
    "beyond": "measure again on a quiet host: a gain beyond what the replicas can give comes from a slow baseline",
}
EXCLUDING_KINDS = ("failed", "incomplete", "overlap", "devices")


# ------------------------------------------------------------------ verdict rows


def same_work(cells: pd.DataFrame, work: dict[str, Any]) -> pd.Series:
    """The rows of ``cells`` that measured ``work`` (NaN equals NaN, as a groupby with dropna=False has it)."""
    mask = pd.Series(True, index=cells.index)
    for k, v in work.items():
        mask &= (cells[k] == v) | (cells[k].isna() & pd.isna(v))
    return mask


def good_cells(cells: pd.DataFrame, mode: str, work: dict[str, Any]) -> pd.DataFrame:
    """The measured (not warm-up), not excluded cells of ``mode`` on ``work``."""
    keep = (cells["mode"] == mode) & ~cells["warmup"].astype(bool) & ~cells["excluded"].astype(bool)
    return cells[keep & same_work(cells, work)]


def worst_job_slowdown(cells: pd.DataFrame, mode: str, work: dict[str, Any]) -> tuple[float, float, float]:
    """The worst job's slowdown of ``mode`` on ``work`` and its 95% interval: the mean over the repeats of
    the slowest replica's ``track_s`` over the mean T_1 (``ratio_ci``; exclusive: 1, no interval).

    The one figure of the worst job: the Answer, the decision plot and the workloads table all print it."""
    if is_baseline(mode):
        return (1.0, math.nan, math.nan)
    mine, alone = good_cells(cells, mode, work), good_cells(cells, BASELINE, work)
    return ratio_ci(mine["max_track_s"].to_numpy(float), alone["mean_track_s"].to_numpy(float))


def trust_of(
    mode: str, work: dict[str, Any], repeats: int, flags: pd.DataFrame, patterned: bool = False
) -> tuple[str, list[str]]:
    """``ok`` or the reasons not to trust ``mode`` as measured, and the kinds of those reasons. A ``patterned``
    mode (its users' latencies decided by ``analysis.tail``) needs no number of repeats: its intervals come
    from the samples of one run, and too few samples make its verdict undecided, not untrusted."""
    reasons, kinds = [], []
    if repeats < MIN_CI_REPEATS and not patterned:
        reasons.append(f"{repeats} repeat(s) < {MIN_CI_REPEATS}: no interval")
        kinds.append("repeats")
    f = flags[(flags["mode"].isin([mode, BASELINE])) & (flags["particles"] == work["particles"])]
    disturbed = f[f["kind"] == "disturbed"]
    if len(disturbed):
        what = sorted(disturbed["detail"].astype(str))[0]
        reasons.append(f"{len(disturbed)} cell(s) of it or its baseline disturbed ({what})")
        kinds.append("disturbed")
    if (f["kind"] == "spread").any():
        reasons.append(f"spread: CV > {CV_WARN_PCT:.0f}%")
        kinds.append("spread")
    beyond = f[(f["mode"] == mode) & (f["kind"] == "beyond")]
    if len(beyond):
        reasons.append(f"beyond what its replicas can give: {beyond['detail'].iloc[0]}")
        kinds.append("beyond")
    excluded = f[(f["mode"] == mode) & f["excluded"].astype(bool)]
    if excluded["cell_id"].nunique():
        why = ", ".join(k for k in EXCLUDING_KINDS if k in set(excluded["kind"]))
        reasons.append(f"{excluded['cell_id'].nunique()} cell(s) excluded" + (f" ({why})" if why else ""))
        kinds.append("excluded")
    if ((f["mode"] == mode) & (f["kind"] == "below-one")).any():
        reasons.append("a user faster shared than alone (below 1): the baseline alone is off")
        kinds.append("below-one")
    return ("ok" if not reasons else "; ".join(reasons)), kinds


def pattern_kind(label: str) -> str:
    """``interactive:burst=10,think=0.5`` -> ``interactive``."""
    return parse_pattern(str(label)).kind


def saturated_kind() -> PatternSpec:
    """The saturated pattern kind (batch): its cells are the throughput tables' and its line the first."""
    return kinds_where(saturated=True)[0]


def non_batch_modes(latency: pd.DataFrame) -> set[str]:
    """The modes whose measured replica followed a pattern other than batch: not batch evidence."""
    victims = latency[latency["role"] == "victim"]
    return {str(m) for m, p in zip(victims["mode"], victims["pattern"]) if not saturated(str(p))}


def answer_rows(tables: Tables) -> pd.DataFrame:
    """One verdict row per mode measured with batch replicas (columns :data:`ANSWER_COLUMNS`), in mode order."""
    thr, cells = tables.throughput, tables.cells
    if thr.empty or cells.empty:
        return pd.DataFrame(columns=ANSWER_COLUMNS)
    other = non_batch_modes(tables.latency)
    if any(
        is_baseline(m) for m in other
    ):  # the baseline ran another pattern: a gain against it would compare two patterns
        return pd.DataFrame(columns=ANSWER_COLUMNS)
    rows = []
    for mode, g in thr.groupby("mode", sort=False):
        if str(mode) in other:
            continue
        r = g.sort_values("particles").iloc[-1]
        work = {k: r[k] for k in WORK_KEYS}
        kind = kind_of(str(mode))
        slow = worst_job_slowdown(cells, str(mode), work)
        trust, kinds = trust_of(str(mode), work, int(r["repeats"]), tables.flags)
        rows.append(
            dict(
                **work,
                mode=mode,
                kind=kind,
                replicas=int(r["replicas"]),
                repeats=int(r["repeats"]),
                gain=r["gain"],
                gain_ci_low=r["gain_ci_low"],
                gain_ci_high=r["gain_ci_high"],
                slowdown=slow[0],
                slowdown_ci_low=slow[1],
                slowdown_ci_high=slow[2],
                fairness=r["fairness"],
                isolation=ISOLATION.get(kind, "?"),
                trust=trust,
                flag_kinds=",".join(kinds),
                interval=interval_text(tables.timeslice_split, str(mode), work) if time_sliced(kind) else "",
            )
        )
    out = pd.DataFrame(rows, columns=ANSWER_COLUMNS)
    return out.iloc[sorted(range(len(out)), key=lambda i: mode_sort_key(out["mode"].iloc[i]))].reset_index(drop=True)


def interval_text(split: pd.DataFrame, mode: str, work: dict[str, Any]) -> str:
    """A time-slicing mode's predicted help from a longer slice (``timeslice_split.helpful_interval``), or ''."""
    rows = split[(split["mode"] == mode) & same_work(split, work)] if len(split) else split
    h = helpful_interval(rows.iloc[0]) if len(rows) else None
    if h is None:
        return ""
    return (
        f"a {h['slice_ms']:g} ms time slice would cut its loss to {h['predicted_loss_pct']:.1f}% (predicted, not "
        f"measured; {h['measured_slice_ms']:.2f} ms slices now)"
    )


# ------------------------------------------------------------------ what was measured


@dataclass(frozen=True)
class Evidence:
    """What a folder measured beyond the verdict rows: the latency table and its target, the modes
    measured (for the commands that measure what is missing) and whether the device was the CPU."""

    latency: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LATENCY_COLUMNS))
    slo: float = DEFAULT_SLO
    modes: tuple[str, ...] = ()
    cpu: bool = False
    gpu: str | None = None  # the GPU model, for the MIG prediction
    trust: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)  # mode -> (trust, flag kinds)
    reproduce: Reproduce = field(default_factory=Reproduce)  # the folder's workload, device, size and pace
    excluded: tuple[str, ...] = ()  # the excluded cells, ``mode cell (why)``: what "what to do" names

    def command(self, pattern: str, neighbours: str = "") -> str:
        """The command that measures ``pattern`` (beside ``neighbours``) with this folder's sharing modes and
        its own workload (engine, program, lattice, size, device: :class:`Reproduce`), and its predicted time."""
        modes = [m for m in self.modes if not is_emulation(m)]
        if all(is_baseline(m) for m in modes):
            modes = list(SUGGESTED_CPU if self.cpu else SUGGESTED_GPU)
        if not any(is_baseline(m) for m in modes):
            modes = [BASELINE, *modes]
        device = [] if "--device" in self.reproduce.options else (["--device cpu"] if self.cpu else [])
        # sized to finish within the time asked, at the workload's own burst size (analysis.suggest)
        prefix = ["sharebench run", *device]
        ask = Ask(tuple(modes), MIN_CI_REPEATS, pattern, neighbours, self.slo)
        return sized_command(self.reproduce, prefix, ask, self.reproduce.suggest_s)


def evidence(
    tables: Tables, slo: float = DEFAULT_SLO, gpu: str | None = None, reproduce: Reproduce | None = None
) -> Evidence:
    """The :class:`Evidence` of ``tables``: every mode's trust, whatever pattern its replicas followed;
    ``reproduce``: what the suggested commands carry (``analysis.reproduce.reproduce_of`` of the folder)."""
    cells = tables.cells
    modes = sorted({str(m) for m in cells["mode"]}, key=mode_sort_key) if len(cells) else []
    classes = set(cells["device_class"].astype(str)) if len(cells) else set()
    return Evidence(
        tables.latency,
        slo,
        tuple(modes),
        classes == {"cpu"},
        gpu,
        mode_trust(tables),
        reproduce or Reproduce(),
        excluded_cells(tables.flags),
    )


def excluded_cells(flags: pd.DataFrame) -> tuple[str, ...]:
    """``mode cell (why)`` for every cell left out of the tables, in the order the flags list them."""
    if flags.empty:
        return ()
    ex = flags[flags["excluded"].astype(bool) & (flags["scope"] == "cell")] if "scope" in flags else flags.iloc[0:0]
    out: dict[str, list[str]] = {}
    for m, c, k in zip(ex["mode"], ex["cell_id"], ex["kind"]):
        out.setdefault(f"{m} {c}", []).append(str(k))
    return tuple(f"{key} ({', '.join(dict.fromkeys(kinds))})" for key, kinds in out.items())


def mode_trust(tables: Tables) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Per measured mode, whatever pattern its replicas followed: its trust and the kinds of the reasons, at
    the largest particle count of its good cells (the work its verdict row is about; all cells when none
    is good), from the cells and flags tables (a patterned sweep has no throughput table)."""
    cells = tables.cells
    measured = cells[~cells["warmup"].astype(bool)] if len(cells) else cells
    patterned = non_batch_modes(tables.latency)
    out = {}
    for mode, g in measured.groupby("mode", sort=False):
        good = g[~g["excluded"].astype(bool)]
        pick = (good if len(good) else g).sort_values("particles").iloc[-1]
        work = {k: pick[k] for k in WORK_KEYS}
        repeats = int(same_work(good, work).sum())
        text, kinds = trust_of(str(mode), work, repeats, tables.flags, str(mode) in patterned)
        out[str(mode)] = (text, tuple(kinds))
    return out


def trust_table(ev: Evidence) -> pd.DataFrame:
    """Every measured mode's trust (:data:`TRUST_COLUMNS`, ``tables/trust.csv``), in mode order; ``sharing``:
    a sharing mode that counts towards an answer (not the baseline, not an emulation)."""
    rows = [
        dict(mode=m, trust=t, flag_kinds=",".join(ks), sharing=not (is_baseline(m) or is_emulation(m)))
        for m, (t, ks) in sorted(ev.trust.items(), key=lambda kv: mode_sort_key(kv[0]))
    ]
    return pd.DataFrame(rows, columns=TRUST_COLUMNS)


def not_measured(pattern: str, what: str, command: str) -> dict[str, str]:
    return dict(
        pattern=pattern,
        mode="not measured",
        basis="not measured",
        reason=f"{what}; nothing is inferred from the other patterns' cells. Measure it: {command}",
    )


# ------------------------------------------------------------------ batch


def batch_choice(rows: pd.DataFrame, ev: Evidence) -> dict[str, str]:
    """The batch throughput choice: a real gain of at least :data:`MIN_GAIN`, or exclusive."""
    spec = saturated_kind()
    if rows.empty:
        return not_measured(spec.answer, f"no cell with {spec.name} replicas was measured here", ev.command(spec.name))
    mode, reason = gain_verdict(rows[~baseline_mask(rows["kind"])])
    return dict(pattern=spec.answer, mode=mode, basis="measured", reason=reason)


def gain_verdict(sharing: pd.DataFrame) -> tuple[str, str]:
    """The Answer's throughput rule over sharing modes' rows (``mode``, ``gain``, ``gain_ci_low``,
    ``gain_ci_high``): the highest gain whose interval lies above 1 and that is at least :data:`MIN_GAIN`,
    or :data:`BASELINE` with the reason in numbers. Every table that names a mode for throughput (the
    Answer, the workloads table) decides by it, so they cannot tell two stories."""
    above = sharing[sharing["gain_ci_low"] > 1]
    better = above[above["gain"] >= 1 + MIN_GAIN].sort_values("gain", ascending=False)
    if len(better):
        b = better.iloc[0]
        return str(b["mode"]), (
            f"throughput {fmt_times(b['gain'])} exclusive{fmt_interval(b['gain_ci_low'], b['gain_ci_high'])}, "
            f"the highest gain whose interval is above 1 and that is at least {MIN_GAIN:.0%}"
        )
    small = above[above["gain"] < 1 + MIN_GAIN]
    free = sharing[(sharing["gain_ci_low"] <= 1) & (sharing["gain_ci_high"] >= 1)]
    worse = sharing[sharing["gain_ci_high"] < 1]
    unknown = sharing[~(sharing["gain_ci_low"].notna() & sharing["gain_ci_high"].notna())]
    parts = [f"no mode raises throughput by {MIN_GAIN:.0%} or more beyond noise"]
    if len(small):
        parts.append(
            f"a real gain under {MIN_GAIN:.0%}, no gain in practice: "
            + ", ".join(
                f"{m} {fmt_gain_pct(g)} [{fmt_gain_pct(lo)}, {fmt_gain_pct(hi)}]"
                for m, g, lo, hi in zip(small["mode"], small["gain"], small["gain_ci_low"], small["gain_ci_high"])
            )
        )
    if len(free):
        parts.append(
            "same as exclusive within noise: "
            + ", ".join(f"{m} {fmt_times(g)}" for m, g in zip(free["mode"], free["gain"]))
        )
    if len(worse):
        w = worse.sort_values("gain").iloc[0]
        parts.append(f"worst: {w['mode']} {fmt_times(w['gain'])}{fmt_interval(w['gain_ci_low'], w['gain_ci_high'])}")
    if len(unknown):
        parts.append(
            f"no interval (fewer than {MIN_CI_REPEATS} repeats): "
            + ", ".join(f"{m} {fmt_times(g)}" for m, g in zip(unknown["mode"], unknown["gain"]))
        )
    return BASELINE, "; ".join(parts)


# ------------------------------------------------------------------ interactive, serving, noisy neighbour


def mode_of(latency: pd.DataFrame, pattern: str, family: str, users: int) -> str:
    """The measured mode of ``family`` with ``users`` replicas of ``pattern`` (``timeslice`` 4 -> ``timeslice:4``)."""
    for m, p, n in zip(latency["mode"], latency["pattern"], latency["replicas"]):
        if p == pattern and int(n) == users and mode_family(str(m)) == family:
            return str(m)
    return f"{family} x{users}"


def answer_words(u: UsersAtTarget, noun: str) -> str:
    """A family's answer with the pattern kind's noun: ``4 users``, ``between 4 and 8 services``, ``≥ 8 users``,
    ``< 4 users``, ``no sharing``, ``undecided``."""
    if u.lo is not None and u.hi is not None:
        return f"{u.lo} {noun}" if u.hi == u.lo + 1 else f"between {u.lo} and {u.hi} {noun}"
    if u.lo is not None:
        return f"≥ {u.lo} {noun}"
    if u.hi is not None and u.answer.startswith("<"):
        return f"< {u.hi} {noun}"
    return u.answer


def users_text(u: UsersAtTarget, spec: PatternSpec, rate: float | None) -> str:
    """One family's users of a kind per GPU at the target, as the verdicts decide it (``spec.noun``; with a
    rate, their total in ``spec.capacity_unit`` at the proven N): the cells at the bracket's ends with the
    worst user's and all users' p95 slowdowns and their intervals, why it is no narrower, and the cells left
    out (flagged below 1) with theirs."""
    total = f" (≥ {u.lo * rate:g} {spec.capacity_unit})" if rate and spec.capacity_unit and u.lo else ""
    ends = [
        f"{p.mode} {side}: worst user {ratio_text(p.worst, p.worst_lo, p.worst_hi)}, all users "
        f"{ratio_text(p.pooled, p.pooled_lo, p.pooled_hi)}"
        for side, p in (("within", u.at(u.lo)), ("above", u.at(u.hi)))
        if p is not None
    ]
    left = [
        f"{p.mode} left out ({p.flag}; worst user {ratio_text(p.worst, p.worst_lo, p.worst_hi)})" for p in u.flagged
    ]
    return f"{u.family}: {answer_words(u, spec.noun)}{total} ({'; '.join([*ends, u.reason, *left])})"


def best_family(per_family: list[UsersAtTarget], unit: str) -> tuple[UsersAtTarget | None, str]:
    """The family with the most users proven within the target (``lo``; emulations are measurements, never
    chosen); a tie broken by the lower upper bound of the worst user's p95 at that N, and the sentence that
    says so ("" without a tie); None when no family has an N within."""
    pool = [u for u in per_family if u.lo is not None and not is_emulation(u.family)]
    if not pool:
        return None, ""
    top = max(u.lo or 0 for u in pool)
    tied = [u for u in pool if u.lo == top]

    def bound(u: UsersAtTarget) -> float:
        p = u.at(u.lo)
        return p.worst_hi if p is not None and math.isfinite(p.worst_hi) else math.inf

    best = min(tied, key=bound)
    if len(tied) < 2:
        return best, ""

    def named(u: UsersAtTarget) -> str:
        p = u.at(u.lo)
        return f"{p.mode if p else u.family} {fmt_times(bound(u))}"

    others = ", ".join(named(u) for u in tied if u is not best)
    return (
        best,
        f"ties at {top} {unit} broken by the lower upper bound of the worst user's p95 ({named(best)} against {others})",
    )


DECISION_RULE = (
    "every user counted: within when every user's p95 slowdown is within the target beyond doubt (the worst "
    "user's upper bound), above when some user's is above it beyond doubt (a lower bound), else undecided; "
    "distribution-free 95% intervals"
)


def users_choice(spec: PatternSpec, ev: Evidence) -> list[dict[str, str]]:
    """The line of a pattern kind not saturated (interactive, serving: ``spec.answer``): users
    (``spec.noun``) per GPU at the target per mode family, as the verdicts decide them; the mode of the family
    with the most users proven within, ``undecided`` where no family has one and some N is undecided."""
    name, unit = spec.answer, spec.noun
    lat = ev.latency
    victims = lat[lat["role"] == "victim"]
    labels = sorted({str(p) for p in victims["pattern"] if pattern_kind(p) == spec.name})
    if not labels:
        return [not_measured(name, f"no cell of {name} replicas was measured here", ev.command(spec.name))]
    found = users_at_target(lat, ev.slo)
    out = []
    for label in labels:
        per_family = [u for u in found if u.pattern == label and u.family]
        if not per_family:
            what = f"users per GPU: no sharing cell of {label} replicas alone was measured"
            out.append(not_measured(f"{name} ({label})", what, ev.command(label)))
            continue
        rate = parse_pattern(label).rate_per_s
        lines = "; ".join(users_text(u, spec, rate) for u in per_family)
        best, tie = best_family(per_family, unit)
        reason = f"{unit} per GPU at a p95 slowdown target of {ev.slo:g}× against alone ({DECISION_RULE}): {lines}"
        if best is not None:
            mode = mode_of(lat, label, best.family, best.lo or 0)
            reason += f"; {tie}" if tie else ""
        elif any(u.why in ("undecided", "flagged") for u in per_family):
            mode, reason = UNDECIDED, f"no family has an N decided within the target; {reason}"
        else:
            mode, reason = BASELINE, f"no sharing mode is within the target at any N measured; {reason}"
        out.append(dict(pattern=f"{name} ({label})", mode=mode, basis="measured", reason=reason))
    return out


def slowdown_text(r: Any) -> str:
    """A victim row's p95 slowdown as the Answer prints it: its verdict, every user counted; a cell flagged
    below 1 is no figure."""
    if below_one(r):
        return (
            f"{r['mode']} flagged below 1, no figure (faster shared than alone: the baseline is off; {verdict_text(r)})"
        )
    if has_verdict(r):
        return f"{r['mode']} {verdict_text(r)}"
    return f"{r['mode']} no verdict (replica 0 alone {fmt_times(r['slowdown_p95'])})"


def upper_bound(r: Any) -> float:
    """The worst user's upper bound of a victim row (inf when none: too few samples, or a flagged cell)."""
    hi = float(r.get("worst_p95_slowdown_hi", math.nan)) if has_verdict(r) and not below_one(r) else math.nan
    return hi if math.isfinite(hi) else math.inf


def neighbour_choice(ev: Evidence) -> list[dict[str, str]]:
    """The users' p95 slowdown beside another pattern per mode (every user of the pattern counted; the
    aggressor stays out), and the aggressor's cost; the mode with the lowest upper bound is named."""
    lat = ev.latency
    v = lat[(lat["role"] == "victim") & ~baseline_mask(lat["mode"])]
    mixed = v[(v["beside"].fillna("") != "") & (v["beside"] != v["pattern"])]
    if mixed.empty:
        return [
            not_measured(
                NEIGHBOUR_LINE,
                "no cell measured a replica beside replicas of another pattern",
                ev.command(kinds_where(saturated=False)[0].name, saturated_kind().name),
            )
        ]
    out = []
    for (pattern, beside), g in mixed.groupby(["pattern", "beside"], sort=True):
        g = g.iloc[sorted(range(len(g)), key=lambda i: mode_sort_key(str(g["mode"].iloc[i])))]
        nb = lat[(lat["role"] == "neighbour") & (lat["pattern"] == beside) & (lat["beside"] == pattern)]
        cost = {str(m): float(c) for m, c in zip(nb["mode"], nb["throughput_cost"]) if math.isfinite(float(c))}
        per_mode = "; ".join(
            slowdown_text(r) + (f" (the {beside} neighbour loses {cost[r['mode']]:.1%})" if r["mode"] in cost else "")
            for _, r in g.iterrows()
        )
        bounds = [upper_bound(r) for _, r in g.iterrows()]
        best = str(g["mode"].iloc[bounds.index(min(bounds))]) if math.isfinite(min(bounds)) else UNDECIDED
        out.append(
            dict(
                pattern=f"{NEIGHBOUR_LINE} ({pattern} beside {beside})",
                mode=best,
                basis="measured",
                reason=f"p95 slowdown of the {pattern} users against alone per mode ({DECISION_RULE}; the lowest "
                f"upper bound chosen): {per_mode}",
            )
        )
    return out


# ------------------------------------------------------------------ isolation


EMULATED_LABEL = "emulated with MPS shares"


def isolation_choice(rows: pd.DataFrame, ev: Evidence) -> dict[str, str]:
    """Isolation required: a measured instance or partition mode (``rows``: the verdict rows, emulations
    included), else MIG's cost measured on an emulated layout, else MIG predicted (only where nothing was
    measured), else none."""
    real = rows[~emulation_mask(rows["kind"])] if len(rows) else rows
    for kind in isolating_kinds():  # hardware instances first, then core sets
        m = real[real["kind"] == kind]
        if len(m):
            b = m.sort_values("gain", ascending=False).iloc[0]
            return dict(
                pattern=ISOLATION_LINE,
                mode=b["mode"],
                basis="measured",
                reason=f"{ISOLATION[kind]}; measured: throughput {fmt_times(b['gain'])} exclusive"
                f"{fmt_interval(b['gain_ci_low'], b['gain_ci_high'])}, the worst job {fmt_times(b['slowdown'])} its "
                "time alone",
            )
    emulated = emulated_isolation(rows, ev)
    return emulated if emulated is not None else predicted_isolation(ev.gpu)


def emulated_isolation(rows: pd.DataFrame, ev: Evidence) -> dict[str, str] | None:
    """MIG's cost as measured on an emulated layout (``mig-emulated``): batch verdict rows by gain, else the
    measured replica of a pattern alone, the layout with the most instances within the target (ties: the
    lower p95); None when no emulated layout was measured."""
    batch = rows[emulation_mask(rows["kind"])] if len(rows) else rows
    if len(batch):
        b = batch.sort_values("gain", ascending=False).iloc[0]
        mode = str(b["mode"])
        what = (
            f"throughput {fmt_times(b['gain'])} exclusive{fmt_interval(b['gain_ci_low'], b['gain_ci_high'])}, "
            f"the worst job {fmt_times(b['slowdown'])} its time alone"
        )
    else:
        r = emulated_latency_row(ev)
        if r is None:
            return None
        mode = str(r["mode"])
        other = r["beside"] if isinstance(r["beside"], str) and r["beside"] != r["pattern"] else ""
        beside = f" beside {other}" if other else ""
        what = f"p95 slowdown {slowdown_text(r)} of {r['pattern']}{beside}, {int(r['replicas'])} instances (target {ev.slo:g}×)"
    layout = mode.split(":", 1)[1] if ":" in mode else mode
    return dict(
        pattern=ISOLATION_LINE,
        mode=f"mig {layout} ({EMULATED_LABEL})",
        basis="measured",
        reason=f"{ISOLATION['mig']} on real MIG; its cost measured here as {mode} ({EMULATED_LABEL}: MIG's SM "
        f"shares and memory limits, not its isolation): {what}",
    )


def emulated_latency_row(ev: Evidence) -> Any:
    """The victim row of an emulated MIG layout: users of one pattern first, else beside another pattern; of
    those the cells within the target (by the verdict, every user counted) first, the most instances, ties by
    the lower upper bound; a cell flagged below 1 last (it is no figure); None when none."""
    lat = ev.latency
    v = lat[(lat["role"] == "victim") & emulation_mask(lat["mode"])] if len(lat) else lat
    if v.empty:
        return None
    records = list(v.iterrows())

    def key(item: tuple[Any, Any]) -> tuple[int, int, int, float, int]:
        r = item[1]
        one = int(not isinstance(r["beside"], str) or r["beside"] in ("", r["pattern"]))
        within = int(has_verdict(r) and verdict_at(r, ev.slo)[0] == "within" and not below_one(r))
        n = int(r["replicas"])
        return (-int(not below_one(r)), -one, -within * n, upper_bound(r), -n)

    return min(records, key=key)[1]


def predicted_isolation(gpu: str | None) -> dict[str, str]:
    """MIG's smallest instances as predicted for ``gpu`` (labelled predicted), or none without MIG."""
    if gpu:
        try:
            p = predict_cell(PREDICTED_ISOLATION, gpu=gpu)
        except Exception:  # noqa: BLE001 - a GPU without MIG: say so below
            p = None
        if p and math.isfinite(float(p.get("predicted_pct", math.nan))):
            return dict(
                pattern=ISOLATION_LINE,
                mode=f"{PREDICTED_ISOLATION} (predicted, not measured)",
                basis="predicted",
                reason=f"{ISOLATION[kind_of(PREDICTED_ISOLATION)]}; predicted for {gpu}, no MIG or emulated MIG "
                f"layout measured here: each job takes {fmt_times(1 + float(p['predicted_pct']) / 100)} its time "
                f"alone ({p.get('basis', '')})",
            )
    return dict(
        pattern=ISOLATION_LINE,
        mode="none measured",
        basis="not measured",
        reason="only MIG gives hardware isolation and no MIG cell of batch replicas was measured here",
    )


# ------------------------------------------------------------------ the choices


def untrusted(ev: Evidence) -> dict[str, str] | None:
    """The one row that replaces every measured choice when no sharing mode is trusted; None otherwise."""
    sharing = {m: t for m, t in ev.trust.items() if not (is_baseline(m) or is_emulation(m))}
    if not sharing or any(text == "ok" for text, _ in sharing.values()):
        return None
    kinds = sorted({k for _, ks in sharing.values() for k in ks})
    todo = what_to_do(kinds, ev)
    return dict(
        pattern="every pattern measured",
        mode=NO_ANSWER,
        basis="untrusted",
        reason=f"Every sharing mode measured is flagged ({', '.join(kinds) or 'not trusted'}: see each mode's "
        f"trust and the Flags), so none is chosen from these numbers. What to do: {todo or 'see the Flags'}",
    )


def what_to_do(kinds: list[str], ev: Evidence) -> str:
    """The remedies of the flag kinds behind an untrusted answer, from what happened: the excluded cells
    named, and too few repeats told apart from repeats lost to exclusions."""
    short = [m for m, (_, ks) in ev.trust.items() if "repeats" in ks]  # modes with too few repeats kept
    lost = max((sum(e.startswith(f"{m} ") for e in ev.excluded) for m in short), default=0)
    todo = []
    for k in kinds:
        if k not in REMEDIES:
            continue
        if k == "repeats" and lost:
            todo.append(
                f"fewer than {MIN_CI_REPEATS} repeats were kept because cells were excluded: measure "
                f"`--repeats {MIN_CI_REPEATS + lost}` so that {MIN_CI_REPEATS} survive the same losses"
            )
        elif k == "excluded" and ev.excluded:
            todo.append(f"excluded: {', '.join(ev.excluded)} (see Flags for why) and measure them again")
        else:
            todo.append(REMEDIES[k])
    return "; ".join(todo)


def choices(rows: pd.DataFrame, ev: Evidence | None = None) -> pd.DataFrame:
    """Per workload pattern (a line per pattern kind, then the noisy neighbour and isolation lines) the mode
    to choose, what it rests on, and the reason in numbers."""
    ev = ev or Evidence()
    if rows.empty and ev.latency.empty:  # nothing measured (every cell failed): nothing to choose or to point at
        return pd.DataFrame(columns=CHOICE_COLUMNS)
    deployable = rows[~emulation_mask(rows["kind"])]  # an emulation measures MIG's compute share: not a mode
    neighbours = neighbour_choice(ev)
    latency = [*(c for spec in kinds_where(saturated=False) for c in users_choice(spec, ev)), *neighbours]
    none = untrusted(ev)
    if none is not None:  # the measured choices are withheld; what was not measured still says how to measure it
        made = [none, *[c for c in [batch_choice(deployable, ev), *latency] if c["basis"] == "not measured"]]
        for c in neighbours:  # a cell beside another pattern stays in view, with its trust
            if c["basis"] == "measured":
                made.append(
                    dict(c, basis="untrusted", reason=c["reason"] + f"; not trusted as measured: {trust_text(c, ev)}")
                )
        return pd.DataFrame(made, columns=CHOICE_COLUMNS)
    made = [batch_choice(deployable, ev), *latency, isolation_choice(rows, ev)]
    for c in made:  # a choice resting on numbers not to be trusted says so
        text = trust_text(c, ev)
        if text != "ok":
            c["reason"] += f"; caution, not trusted as measured: {text}"
    return pd.DataFrame(made, columns=CHOICE_COLUMNS)


def trust_text(choice: dict[str, str], ev: Evidence) -> str:
    """The trust of the mode a choice rests on ("ok" when none is recorded); an emulated MIG choice rests
    on its emulated mode, named in the reason."""
    mode = choice["mode"]
    if mode == UNDECIDED:  # no mode named: the trust of the sharing modes it was decided from
        texts = sorted({t for m, (t, _) in ev.trust.items() if t != "ok" and not (is_baseline(m) or is_emulation(m))})
        return "; ".join(texts) or "ok"
    if mode.endswith(f"({EMULATED_LABEL})"):
        mode = "mig-emulated:" + mode.split(" ")[1]
    return ev.trust.get(mode, ("ok", ()))[0]
