"""latency.csv and users per GPU at a target, on synthetic per-burst rows: percentiles against numpy,
intervals against scipy and the distribution-free order-statistic interval, busy fractions and
throughput costs against hand-computed values, every user counted in a cell's verdict, and the users per GPU
the verdicts decide (brackets, flagged cells left out)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sharebench.analysis.latency import (
    BURST_COLUMNS,
    LATENCY_COLUMNS,
    USERS_COLUMNS,
    below_one_flags,
    busy_union_s,
    check_slo,
    hierarchical_percentiles,
    latency_table,
    mode_family,
    users_at_target,
    users_table,
)
from sharebench.analysis.tail import Bounds, TailRule, look_of, verdict_of
from sharebench.errors import UserError

INTERACTIVE = "interactive:burst=10,think=0.5"


def cell_rows(mode, repeat, replicas, latencies, *, think=0.05, t0=1000.0, patterns=None, units=10):
    """Rows of one cell run: replica r's bursts back to back with ``think`` s between them, latencies given."""
    rows = []
    for r in range(replicas):
        t = t0
        pattern = (patterns or [INTERACTIVE] * replicas)[r]
        for i, lat in enumerate(latencies[r]):
            rows.append(
                dict(
                    cell_id=f"{mode}_r{repeat}",
                    mode=mode,
                    replica=r,
                    role="victim" if r == 0 else "neighbour",
                    pattern=pattern,
                    repeat=repeat,
                    i=i,
                    arrival=t,
                    start=t,
                    end=t + lat,
                    units=units,
                )
            )
            t += lat + think
    return rows


def synthetic(n=500, repeats=3, scale=None, seed=0):
    """exclusive, timeslice:2, timeslice:4 and mps:2 cells of interactive users; each mode's latencies
    are the alone distribution (lognormal, median 20 ms) times ``scale[mode]``."""
    scale = scale or {"exclusive": 1.0, "timeslice:2": 1.8, "timeslice:4": 3.0, "mps:2": 1.4}
    rng = np.random.default_rng(seed)
    rows, lat = [], {}
    for mode, factor in scale.items():
        replicas = 1 if mode == "exclusive" else int(mode.split(":")[1])
        for rep in range(1, repeats + 1):
            draws = [0.02 * factor * rng.lognormal(0, 0.3, n) for _ in range(replicas)]
            lat[(mode, rep)] = draws[0]
            rows += cell_rows(mode, rep, replicas, draws)
    return rows, lat


def test_columns_and_percentiles_match_numpy():
    rows, lat = synthetic(n=300)
    table = latency_table(rows, method="bursts", n_resamples=400)
    assert list(table.columns) == LATENCY_COLUMNS
    assert list(table["mode"].drop_duplicates()) == ["exclusive", "timeslice:2", "timeslice:4", "mps:2"]
    for mode in ("exclusive", "timeslice:2", "mps:2"):
        row = table[(table["mode"] == mode) & (table["role"] == "victim")].iloc[0]
        pooled = np.concatenate([lat[(mode, r)] for r in (1, 2, 3)])
        alone = np.concatenate([lat[("exclusive", r)] for r in (1, 2, 3)])
        for p in (50, 95, 99):
            assert row[f"latency_p{p}_s"] == pytest.approx(np.percentile(pooled, p), rel=1e-12)
            assert row[f"slowdown_p{p}"] == pytest.approx(np.percentile(pooled, p) / np.percentile(alone, p))
            assert row[f"latency_p{p}_lo_s"] < row[f"latency_p{p}_s"] < row[f"latency_p{p}_hi_s"]
        assert row["bursts"] == 900 and row["repeats"] == 3 and row["ci_method"] == "bursts"
    excl = table[table["mode"] == "exclusive"].iloc[0]
    assert excl["slowdown_p95"] == 1.0 and excl["replicas"] == 1 and excl["beside"] == ""
    ts4 = table[(table["mode"] == "timeslice:4") & (table["role"] == "victim")].iloc[0]
    assert ts4["replicas"] == 4 and ts4["beside"] == INTERACTIVE


def test_the_bootstrap_interval_of_a_percentile_agrees_with_the_order_statistic_interval():
    rows, lat = synthetic(n=600, scale={"exclusive": 1.0})
    row = latency_table(rows, method="bursts").iloc[0]
    x = np.sort(np.concatenate([lat[("exclusive", r)] for r in (1, 2, 3)]))
    n = x.size
    for p, tol in ((50, 6), (95, 6)):
        q = p / 100
        lo_rank, hi_rank = int(stats.binom.ppf(0.025, n, q)), int(stats.binom.ppf(0.975, n, q))
        # the distribution-free 95% interval lies between these order statistics; the bootstrap's within a few
        assert x[lo_rank - tol] <= row[f"latency_p{p}_lo_s"] <= x[lo_rank + tol]
        assert x[hi_rank - tol] <= row[f"latency_p{p}_hi_s"] <= x[hi_rank + tol]


def test_slowdown_intervals_cover_the_true_factor():
    rows, _ = synthetic(n=400, seed=3, scale={"exclusive": 1.0, "timeslice:2": 1.8, "mps:2": 1.4})
    table = latency_table(rows, seed=5, method="bursts")
    for mode, factor in (("timeslice:2", 1.8), ("mps:2", 1.4)):
        row = table[(table["mode"] == mode) & (table["role"] == "victim")].iloc[0]
        for p in (50, 95):
            assert row[f"slowdown_p{p}_lo"] < factor < row[f"slowdown_p{p}_hi"], (mode, p)
            assert row[f"slowdown_p{p}_hi"] - row[f"slowdown_p{p}_lo"] < 0.3 * factor


def test_between_repeats_method_is_a_log_scale_t_interval_over_each_repeats_percentile():
    rows, lat = synthetic(n=200, repeats=4)
    table = latency_table(rows, method="repeats")
    row = table[(table["mode"] == "timeslice:2") & (table["role"] == "victim")].iloc[0]
    per_repeat = np.array([np.percentile(lat[("timeslice:2", r)], 95) for r in (1, 2, 3, 4)])
    # a latency is positive: its interval on the log scale, mean · exp(±t(3) · sem / mean)
    h = stats.t.ppf(0.975, 3) * stats.sem(per_repeat) / per_repeat.mean()
    lo, hi = per_repeat.mean() * np.exp(-h), per_repeat.mean() * np.exp(h)
    assert row["latency_p95_s"] == pytest.approx(per_repeat.mean())
    assert (row["latency_p95_lo_s"], row["latency_p95_hi_s"]) == pytest.approx((lo, hi))
    alone = np.array([np.percentile(lat[("exclusive", r)], 95) for r in (1, 2, 3, 4)])
    assert row["slowdown_p95"] == pytest.approx(per_repeat.mean() / alone.mean())
    assert row["slowdown_p95_lo"] < row["slowdown_p95"] < row["slowdown_p95_hi"] and row["ci_method"] == "repeats"
    two = latency_table(synthetic(n=50, repeats=2)[0], method="repeats")
    assert two["latency_p95_lo_s"].isna().all()  # no interval from two repeats


def test_hierarchical_resamples_are_percentiles_of_draws_from_the_drawn_repeats():
    """Each hierarchical resample is numpy's percentile of a pool made of whole repeats drawn with replacement,
    bursts drawn within each: with repeats of distinct values every resample's percentiles lie within the
    drawn values, and with one burst value per repeat the resample is a percentile of repeat values."""
    runs = [np.full(7, 1.0), np.full(11, 2.0), np.full(5, 3.0)]
    got = hierarchical_percentiles(runs, np.random.default_rng(0), 600)
    assert got.shape == (600, 3) and np.isin(got[:, 0], [1.0, 2.0, 3.0, 1.5, 2.5]).mean() > 0.5
    assert ((got >= 1.0) & (got <= 3.0)).all()
    # a resample that drew the first repeat three times: every percentile is 1
    assert (got == 1.0).all(axis=1).any() and (got == 3.0).all(axis=1).any()
    one = [np.random.default_rng(1).lognormal(0, 0.3, 400)]
    by_hand = np.random.default_rng(2)
    pick = [np.percentile(one[0][by_hand.integers(0, 400, 400)], 95) for _ in range(600)]
    mine = hierarchical_percentiles(one, np.random.default_rng(3), 600)[:, 1]
    # one repeat: the bursts bootstrap; the spread of the percentile agrees with a resampling loop's
    assert np.std(mine) == pytest.approx(np.std(pick), rel=0.2)


def test_the_hierarchical_interval_carries_the_spread_between_repeats():
    """Three alone repeats, one of them in a slow state (p95 1.5x): the bursts-only interval of the slowdown
    of a mode that changes nothing excludes 1 or nearly; the hierarchical one is wider and holds 1."""
    rng = np.random.default_rng(4)
    rows = []
    for rep, factor in ((1, 1.5), (2, 1.0), (3, 1.0)):
        rows += cell_rows("exclusive", rep, 1, [0.02 * factor * rng.lognormal(0, 0.3, 60)])
        rows += cell_rows("timeslice:2", rep, 2, [0.02 * rng.lognormal(0, 0.3, 60) for _ in range(2)])
    hier = latency_table(rows, seed=1, method="hierarchical")
    flat = latency_table(rows, seed=1, method="bursts")
    pick = (hier["mode"] == "timeslice:2") & (hier["role"] == "victim")
    h, f = hier[pick].iloc[0], flat[pick].iloc[0]
    assert h["ci_method"] == "hierarchical" and h["slowdown_p95"] == pytest.approx(f["slowdown_p95"])
    assert h["slowdown_p95_hi"] - h["slowdown_p95_lo"] > 1.3 * (f["slowdown_p95_hi"] - f["slowdown_p95_lo"])
    assert h["slowdown_p95_lo"] < 1 < h["slowdown_p95_hi"]


def test_a_cell_whose_every_user_is_faster_than_alone_is_flagged_with_the_alone_repeats():
    """Shared bursts twice as fast as alone (a baseline measured in a slow state): a below-one flag naming the
    mode, every user's verdict and the alone p95 of each repeat; a slowdown above 1 is not flagged."""
    rng = np.random.default_rng(5)
    rows = []
    for rep in (1, 2, 3):
        rows += cell_rows("exclusive", rep, 1, [0.04 * rng.lognormal(0, 0.1, 60)])
        rows += cell_rows("timeslice:2", rep, 2, [0.02 * rng.lognormal(0, 0.1, 60) for _ in range(2)])
        rows += cell_rows("mps:2", rep, 2, [0.08 * rng.lognormal(0, 0.1, 60) for _ in range(2)])
    table = latency_table(rows)
    flags = below_one_flags(table, rows, {"timeslice:2": 8})
    assert [(f.mode, f.kind, f.particles, f.excluded) for f in flags] == [("timeslice:2", "below-one", 8, False)]
    alone = [
        np.percentile([r["end"] - r["arrival"] for r in rows if r["cell_id"] == f"exclusive_r{k}"], 95)
        for k in (1, 2, 3)
    ]
    assert re.match(
        rf"timeslice:2 {INTERACTIVE}: a user's p95 slowdown below 1 \(within: worst user 0\.[45]\d× "
        r"\[0\.\d\d, 0\.\d\d\], all users 0\.\d\d× \[0\.\d\d, 0\.\d\d\] \(2 users\)\);",
        flags[0].detail,
    )
    assert flags[0].detail.endswith("alone p95 per repeat " + ", ".join(f"{v * 1e3:.1f}" for v in alone) + " ms")
    assert "never a figure" in flags[0].flag
    assert below_one_flags(table.iloc[0:0], rows) == []


def test_too_few_bursts_give_no_interval():
    rows, _ = synthetic(n=5, repeats=3, scale={"exclusive": 1.0, "timeslice:2": 2.0})
    table = latency_table(rows, method="bursts")
    assert table["latency_p95_s"].notna().all() and table["latency_p95_lo_s"].isna().all()
    assert table["slowdown_p95_lo"].isna().all()
    # order statistics: 15 bursts reach a lower bound of the p95 (rank 11) but no upper one
    order = latency_table(rows)
    assert order["latency_p95_lo_s"].notna().all() and order["latency_p95_hi_s"].isna().all()
    assert order["slowdown_p95_hi"].isna().all()
    victim = order[(order["mode"] == "timeslice:2") & (order["role"] == "victim")].iloc[0]
    assert (
        victim["verdict"] == "undecided" and victim["reason"] == "the alone p95 has no interval (15 samples; 99 needed)"
    )


def test_busy_fractions_and_the_neighbours_throughput_cost():
    rows = []
    for rep in (1, 2, 3):
        # alone: an interactive user busy 0.1 s of every 0.4 s; a batch job alone at 100 units/s
        rows += cell_rows("exclusive", rep, 1, [[0.1] * 10], think=0.3, units=1)
        alone_speed = {1: 99.0, 2: 100.0, 3: 101.0}[rep]  # repeats that vary (identical ones count as one)
        batch_alone = cell_rows("exclusive", rep, 1, [[1 / alone_speed] * 100], think=0.0, units=1, patterns=["batch"])
        rows += [dict(r, cell_id=f"exclusive_batch_r{rep}") for r in batch_alone]
        # shared: the user's bursts take 0.2 s; the batch neighbour runs at 80, 78, 82 units/s
        speed = {1: 80.0, 2: 78.0, 3: 82.0}[rep]
        rows += cell_rows("timeslice:2", rep, 1, [[0.2] * 10], think=0.3, units=1)
        batch = cell_rows("timeslice:2", rep, 1, [[1 / speed] * 100], think=0.0, units=1, patterns=["batch"])
        rows += [dict(r, replica=1, role="neighbour") for r in batch]
    table = latency_table(rows)
    victim = table[(table["mode"] == "timeslice:2") & (table["role"] == "victim")].iloc[0]
    assert victim["beside"] == "batch" and victim["slowdown_p50"] == pytest.approx(2.0)
    # 10 bursts of 0.2 s with 9 thinks of 0.3 s between them: window 4.7 s, busy 2.0 s
    assert victim["busy_fraction"] == pytest.approx(2.0 / 4.7)
    alone = table[(table["mode"] == "exclusive") & (table["pattern"] == INTERACTIVE)].iloc[0]
    assert alone["busy_fraction"] == pytest.approx(1.0 / 3.7)
    neighbour = table[(table["mode"] == "timeslice:2") & (table["role"] == "neighbour")].iloc[0]
    assert neighbour["pattern"] == "batch" and neighbour["beside"] == INTERACTIVE
    speeds = np.array([80.0, 78.0, 82.0])
    assert neighbour["throughput_units_per_s"] == pytest.approx(speeds.mean())
    assert neighbour["throughput_cost"] == pytest.approx(1 - speeds.mean() / 100.0)
    assert neighbour["throughput_cost_lo"] < 0.2 < neighbour["throughput_cost_hi"]
    assert neighbour["busy_fraction"] == pytest.approx(1.0)
    # the cell: the batch neighbour keeps it busy from its start to its end; the user's bursts lie inside
    # bursts at 0, 0.5, 1.0, ...: those from 1.5 s on (7 of 0.2 s) lie outside the neighbour's [0, 100/speed]
    assert victim["cell_busy_fraction"] == pytest.approx(np.mean(100 / speeds + 1.4) / 4.7)


def test_busy_union():
    assert busy_union_s([]) == 0
    assert busy_union_s([(0, 1), (0.5, 2), (3, 4)]) == pytest.approx(3.0)
    assert busy_union_s([(3, 4), (0, 10)]) == pytest.approx(10.0)


def verdict_row(mode, worst, lo, hi, pattern=INTERACTIVE, beside=None, samples=500, slo=2.0):
    """A victim row with its verdict decided by the rule (tail.verdict_of) from the worst user's bounds."""
    n = int(mode.split(":")[1].split("@")[0].split("/")[0])
    rule = TailRule(slo)
    alone = Bounds(0.01, 0.009, 0.011, 500)
    verdict, reason = verdict_of(rule, n, samples, look_of(samples, rule.first_look(n)), alone, hi, lo)
    return dict(
        mode=mode,
        pattern=pattern,
        role="victim",
        beside=beside or pattern,
        replicas=n,
        slowdown_p95=worst,
        verdict=verdict,
        users=n,
        samples=samples,
        worst_replica="1",
        worst_p95_slowdown=worst,
        worst_p95_slowdown_lo=lo,
        worst_p95_slowdown_hi=hi,
        pooled_p95_slowdown=worst * 0.9,
        pooled_p95_slowdown_lo=lo * 0.9,
        pooled_p95_slowdown_hi=hi * 0.9,
        alone_p95_s=alone.point,
        alone_p95_lo_s=alone.lo,
        alone_p95_hi_s=alone.hi,
        below_one=hi < 1,
        reason=reason,
        slo=slo,
    )


def target_table(cells, pattern=INTERACTIVE, beside=None, slo=2.0):
    """The latency rows of the alone cell and of sharing cells ``{mode: (worst, lo, hi)}``."""
    rows = [dict(mode="exclusive", pattern=pattern, role="victim", beside="", replicas=1, slowdown_p95=1.0)]
    rows += [verdict_row(m, *b, pattern=pattern, beside=beside, slo=slo) for m, b in cells.items()]
    return pd.DataFrame(rows)


def answers(cells, slo=2.0, **kw):
    return {u.family: (u.answer, u.lo, u.hi, u.why) for u in users_at_target(target_table(cells, **kw), slo)}


def test_users_at_target_by_the_verdicts_largest_n_within_and_smallest_above():
    got = answers(
        {
            "timeslice:2": (1.5, 1.2, 1.8),  # within
            "timeslice:3": (2.6, 2.2, 3.0),  # above
            "mps:2": (1.2, 1.0, 1.4),
            "mps:4": (1.9, 1.6, 1.95),  # within: its upper bound 1.95 <= 2, though close
            "mps:8": (3.1, 2.5, 3.9),
        }
    )
    assert got["timeslice"] == ("2 users", 2, 3, "none")  # 2 within and 3 above, both measured
    assert got["mps"] == ("between 4 and 8", 4, 8, "unmeasured")  # 5..7 not measured: never extrapolated


def test_a_point_estimate_within_does_not_decide_an_interval_across_the_target():
    # replica 0's point 1.5x would have said 4 users; the worst user's interval reaches across 2x: undecided
    got = answers({"mps:2": (1.2, 1.0, 1.4), "mps:4": (1.5, 1.1, 2.6), "mps:8": (2.9, 2.2, 3.5)})
    assert got["mps"] == ("between 2 and 8", 2, 8, "undecided")
    u = users_at_target(target_table({"mps:2": (1.2, 1.0, 1.4), "mps:4": (1.5, 1.1, 2.6)}))[0]
    assert (u.answer, u.why) == (">= 2", "undecided")
    assert (
        u.reason == "within up to 2; undecided at 4 (the worst user's p95 slowdown interval reaches 2.60x, across 2x)"
    )
    assert u.at(2).worst_hi == 1.4 and u.at(4).verdict == "undecided" and u.at(3) is None


def test_the_brackets_below_the_smallest_n_and_without_one():
    assert answers({"mps:2": (1.2, 1.0, 1.4), "mps:4": (1.9, 1.6, 1.95)})["mps"] == (">= 4", 4, None, "maximum")
    assert answers({"timeslice:2": (2.5, 2.1, 3.0)})["timeslice"] == ("no sharing", None, 2, "none")
    assert answers({"timeslice:4": (2.5, 2.1, 3.0)})["timeslice"] == ("< 4", None, 4, "unmeasured")
    # something smaller measured but undecided: no "< N"
    assert answers({"timeslice:2": (1.8, 1.2, 2.5), "timeslice:4": (2.5, 2.1, 3.0)})["timeslice"] == (
        "undecided",
        None,
        4,
        "undecided",
    )
    # too few samples a user for the percentile: undecided whatever the point
    few = users_at_target(pd.DataFrame([verdict_row("mps:2", 1.1, 1.0, math.nan, samples=30)]))[0]
    assert (few.answer, few.points[0].verdict) == ("undecided", "undecided")


def test_a_cell_flagged_below_one_is_left_out_with_the_reason():
    u = users_at_target(target_table({"mps:2": (0.8, 0.7, 0.9), "mps:4": (1.4, 1.1, 1.8), "mps:8": (3, 2.4, 4)}))[0]
    assert (u.answer, u.lo, u.hi) == ("between 4 and 8", 4, 8)
    assert [p.mode for p in u.flagged] == ["mps:2"] and "below 1" in u.flagged[0].flag
    table = users_table(target_table({"mps:2": (0.8, 0.7, 0.9), "mps:4": (1.4, 1.1, 1.8), "mps:8": (3, 2.4, 4)}))
    row = table.iloc[0]
    assert list(table.columns) == USERS_COLUMNS
    assert row["measured"] == "2:flagged,4:within,8:above" and row["flagged"].startswith("mps:2: below 1")
    assert (row["lo_mode"], row["lo_worst_p95_slowdown_hi"], row["hi_mode"], row["hi_worst_p95_slowdown_lo"]) == (
        "mps:4",
        1.8,
        "mps:8",
        2.4,
    )
    only = users_at_target(target_table({"mps:2": (0.8, 0.7, 0.9)}))[0]
    assert (only.answer, only.why) == ("undecided", "flagged")


def test_users_at_target_none_when_nothing_was_measured():
    assert users_at_target(pd.DataFrame())[0].answer == "not measured"
    alone_only = users_at_target(target_table({}))
    assert alone_only[0].lo is None and "no sharing cell" in alone_only[0].reason
    # cells beside another pattern (noisy neighbours) are not users of one pattern: never counted
    mixed = users_at_target(target_table({"timeslice:2": (1.1, 1.0, 1.2)}, beside="batch"))
    assert mixed[0].answer == "not measured" and "no sharing cell" in mixed[0].reason


def test_users_at_target_follows_the_target_by_the_same_rule():
    """A table decided against 2x answers for another target from its bounds (tail.verdict_of)."""
    table = target_table({"mps:2": (1.2, 1.1, 1.3), "mps:4": (1.9, 1.7, 2.1), "mps:8": (3.5, 3.0, 4.2)})
    got = [(u.answer) for s in (1.05, 1.5, 2, 2.5, 5) for u in users_at_target(table, slo=s)]
    assert got == ["no sharing", "between 2 and 4", "between 2 and 8", "between 4 and 8", ">= 8"]


def test_every_user_counted_replica_0_within_another_replica_above():
    """A synthetic cell where replica 0 meets the target and replica 1 does not: the cell is above, and
    replica 0's own row (its p95 slowdown) would have said within."""
    rng = np.random.default_rng(7)
    rows = cell_rows("exclusive", 1, 1, [0.02 * rng.lognormal(0, 0.2, 600)])
    rows += cell_rows("mps:2", 1, 2, [0.02 * rng.lognormal(0, 0.2, 600), 0.07 * rng.lognormal(0, 0.2, 600)])
    table = latency_table(rows)
    v = table[(table["mode"] == "mps:2") & (table["role"] == "victim")].iloc[0]
    assert v["slowdown_p95_hi"] < 2  # replica 0 alone: within
    assert (v["verdict"], v["users"], v["worst_replica"], bool(v["below_one"])) == ("above", 2, "1", False)
    assert v["worst_p95_slowdown_lo"] > 2 and v["pooled_p95_slowdown"] > v["slowdown_p95"]
    u = users_at_target(table)[0]
    assert (u.answer, u.hi) == ("no sharing", 2)
    neighbour = table[(table["mode"] == "mps:2") & (table["role"] == "neighbour")].iloc[0]
    assert pd.isna(neighbour["verdict"])  # the verdict is the cell's, on its victim row


def test_the_order_interval_is_between_the_binomial_ranks_and_needs_one_run_only():
    """The default interval: two order statistics of the pooled bursts whose ranks scipy's binomial gives,
    for one repeat as for several; the hierarchical bootstrap gives none from one repeat."""
    rows, lat = synthetic(n=400, repeats=1, scale={"exclusive": 1.0, "timeslice:2": 1.5})
    row = latency_table(rows).set_index(["mode", "role"]).loc[("timeslice:2", "victim")]
    x = np.sort(lat[("timeslice:2", 1)])
    b = stats.binom(x.size, 0.95)
    lo_rank = max(k for k in range(1, x.size + 1) if b.cdf(k - 1) <= 0.025)
    hi_rank = min(k for k in range(1, x.size + 1) if b.cdf(k - 1) >= 0.975)
    assert (row["latency_p95_lo_s"], row["latency_p95_hi_s"]) == pytest.approx((x[lo_rank - 1], x[hi_rank - 1]))
    assert row["ci_method"] == "order" and row["slowdown_p95_lo"] < 1.5 < row["slowdown_p95_hi"]
    hier = latency_table(rows, method="hierarchical").set_index(["mode", "role"]).loc[("timeslice:2", "victim")]
    assert math.isnan(hier["latency_p95_lo_s"]) and math.isnan(hier["slowdown_p95_hi"])


@pytest.mark.parametrize("bad", [0.5, 0, -2, math.nan, math.inf, "two"])
def test_a_target_below_one_is_one_line(bad):
    with pytest.raises(UserError, match=r"bad --slo .*allowed: a p95 slowdown target >= 1"):
        check_slo(bad)


def test_mode_family():
    assert [mode_family(m) for m in ("timeslice:4", "timeslice:2/long", "mps:4@25", "mig-emulated:7x1g.18gb")] == [
        "timeslice",
        "timeslice/long",
        "mps@25",
        "mig-emulated",
    ]


def test_bad_input():
    with pytest.raises(ValueError, match="burst rows lack"):
        latency_table([{"cell_id": "x"}])
    with pytest.raises(UserError, match="bad latency interval method 'jackknife'"):
        latency_table([], method="jackknife")
    assert list(latency_table(pd.DataFrame(columns=list(BURST_COLUMNS))).columns) == LATENCY_COLUMNS
    assert latency_table([]).empty
