"""The Answer: per pattern, from that pattern's own measurements (the committed H200 folder, the crafted
sweep, and crafted bursts read back through a real results folder)."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import numpy as np
import pandas as pd
import pytest

from sharebench import analysis
from sharebench.analysis.answer import (
    ANSWER_COLUMNS,
    BASES,
    MIN_GAIN,
    NO_ANSWER,
    Evidence,
    answer_rows,
    choices,
    evidence,
    trust_table,
    worst_job_slowdown,
)
from sharebench.analysis.workloads import workload_table
from sharebench.modes import mode_sort_key
from sharebench.report import end_screen
from sharebench.results import ResultsWriter, load_results
from sharebench.results.bursts import append_bursts
from support.crafted import crafted_rows
from support.paths import ROOT

H200 = ROOT / "tests" / "data" / "results" / "h200" / "cuda"
CPU_DEFAULT = ROOT / "tests" / "data" / "results" / "cpu-default"
INTERACTIVE = "interactive:burst=10,think=0.5"


@pytest.fixture(scope="module")
def h200():
    tables = analysis.analyse(H200)
    rows = answer_rows(tables)
    return tables, rows, choices(rows, evidence(tables, gpu="H200"))


def test_verdicts_per_mode(h200):
    _, rows, _ = h200
    rows = rows.set_index("mode")
    assert list(rows.index) == ["exclusive", "timeslice:2", "timeslice:4", "timeslice:8", "mps:2", "mps:4", "mps:8"]
    # time-slicing: T_N about 35% longer than N·T_1, so about a quarter less throughput, fair
    for n in (2, 4, 8):
        r = rows.loc[f"timeslice:{n}"]
        assert 0.70 < r.gain < 0.78 and r.gain_ci_high < 1 and r.fairness < 1.05
        assert r.slowdown == pytest.approx(n * 1.355, rel=0.02)
    # MPS: no throughput cost, but the clients run one after another: the last waits N times as long
    for n in (2, 4, 8):
        r = rows.loc[f"mps:{n}"]
        assert abs(r.gain - 1) < 0.005 and r.fairness == pytest.approx(n, rel=0.01)
        assert r.slowdown == pytest.approx(n, rel=0.01)
    assert rows.loc["exclusive"].slowdown == 1 and math.isnan(rows.loc["exclusive"].slowdown_ci_low)
    assert set(rows["trust"]) == {"ok"} and set(rows["flag_kinds"]) == {""}


def test_choices_per_pattern_of_a_batch_sweep(h200):
    _, _, picks = h200
    assert set(picks["basis"]) <= set(BASES)
    picks = picks.set_index("pattern")
    assert list(picks.index) == ["batch throughput", "interactive", "serving", "noisy neighbour", "isolation required"]
    assert picks.loc["batch throughput", "mode"] == "exclusive"
    assert "same as exclusive within noise: mps:2" in picks.loc["batch throughput", "reason"]
    assert picks.loc["isolation required", "mode"] == "mig:all-1g (predicted, not measured)"
    assert picks.loc["isolation required", "basis"] == "predicted"


def test_an_unmeasured_pattern_is_never_inferred(h200):
    """The batch sweep measured no interactive user, no service and no neighbour: each says so and gives the
    command that measures it; no mode of the folder is named for them, no number of it is quoted."""
    tables, rows, picks = h200
    modes = ",".join(["exclusive", "timeslice:2", "timeslice:4", "timeslice:8", "mps:2", "mps:4", "mps:8"])
    bounded = " (at most 10 min: its --budget; no unit of work alone here to predict its path by)"
    commands = {  # users and services: a search of the folder's families; a user beside batch: each mode once
        "interactive": f"`sharebench run --pattern interactive --capacity --modes timeslice,mps --budget 10m`{bounded}",
        "serving": f"`sharebench run --pattern serve --capacity --modes timeslice,mps --budget 10m`{bounded}",
        "noisy neighbour": f"`sharebench run --pattern interactive --neighbours batch --modes {modes} --repeats 1`",
    }
    for pattern, command in commands.items():
        c = picks.set_index("pattern").loc[pattern]
        assert (c["mode"], c["basis"]) == ("not measured", "not measured")
        assert c["reason"].endswith(f"nothing is inferred from the other patterns' cells. Measure it: {command}")
        assert "×" not in c["reason"] and "fair" not in c["reason"]  # no number, no fairness borrowed from batch
    # the same whatever the batch cells say: made unfair and slow, the unmeasured rows do not move
    worse = rows.assign(fairness=9.0, slowdown=rows["slowdown"] * 3)
    again = choices(worse, evidence(tables, gpu="H200")).set_index("pattern")
    for pattern in commands:
        assert again.loc[pattern, "reason"] == picks.set_index("pattern").loc[pattern, "reason"]


def test_a_gain_under_two_percent_is_no_gain():
    """At 5M particles the H200's MPS cells gain 0.1-0.3% with intervals above 1: the old rule recommended
    MPS for that; a gain under MIN_GAIN is named as real but no gain in practice, and exclusive stays."""
    df = load_results(H200)
    rows = answer_rows(analysis.build_tables(df[df["particles"] == 5_000_000]))
    mps = rows[rows["kind"] == "mps"]
    assert (mps["gain_ci_low"] > 1).all() and (mps["gain"] < 1 + MIN_GAIN).all()  # what misled the old rule
    batch = choices(rows).set_index("pattern").loc["batch throughput"]
    assert batch["mode"] == "exclusive"
    assert f"no mode raises throughput by {MIN_GAIN:.0%} or more beyond noise" in batch["reason"]
    assert "a real gain under 2%, no gain in practice: mps:2 +0.1% [+0.1%, +0.2%]" in batch["reason"]
    # a gain of 2% or more whose interval is above 1 is chosen
    bigger = rows.copy()
    at = bigger.index[bigger["mode"] == "mps:4"][0]
    bigger.loc[at, ["gain", "gain_ci_low", "gain_ci_high"]] = [1.05, 1.03, 1.07]
    batch = choices(bigger).set_index("pattern").loc["batch throughput"]
    assert batch["mode"] == "mps:4"
    assert batch["reason"].startswith("throughput 1.05× exclusive [1.03, 1.07], the highest gain")


def test_one_worst_job_figure_for_the_answer_and_the_workloads_table(h200, tmp_path):
    """The Answer, the decision plot and tables/workloads.csv print one figure per mode (issue 23: they gave
    2.24× and 2.16× for one cell): the mean slowest replica over the mean T_1, for every kind of mode."""
    tables, rows, _ = h200
    wl = workload_table(tables)
    for _, r in rows.iterrows():
        same = wl[(wl["mode"] == r["mode"]) & (wl["particles"] == r["particles"])]
        assert same["worst_slowdown"].iloc[0] == pytest.approx(r["slowdown"], rel=1e-12)
    # the crafted sweep: MIG's worst job is its slowest instance (12.2, 12.4, 12.4 s) against T_full 5.2 s
    ResultsWriter(tmp_path).append(crafted_rows())
    crafted = analysis.analyse(tmp_path)
    mig = crafted.throughput[crafted.throughput["mode"] == "mig:3g"].iloc[0]
    slow = worst_job_slowdown(crafted.cells, "mig:3g", {k: mig[k] for k in analysis.WORK_KEYS})
    assert slow[0] == pytest.approx(np.mean([12.2, 12.4, 12.4]) / 5.2)
    assert workload_table(crafted).set_index("mode").loc["mig:3g", "worst_slowdown"] == pytest.approx(slow[0])
    assert answer_rows(crafted).set_index("mode").loc["mig:3g", "slowdown"] == pytest.approx(slow[0])


# ------------------------------------------------------------------ patterns other than batch


def burst_rows(
    mode: str, repeat: int, patterns: list[str], scale: float, rng: np.random.Generator, n: int = 30
) -> list[dict]:
    """``n`` bursts per replica of one crafted CPU cell (ids as support.crafted names them); replica 0 the victim;
    ``scale`` one factor for every replica, or one per replica."""
    rows = []
    scales = scale if isinstance(scale, list) else [scale] * len(patterns)
    for r, pattern in enumerate(patterns):
        t = 1000.0 * repeat
        scale = scales[r]
        for i in range(n):
            lat = 0.02 * scale * float(rng.lognormal(0, 0.2))
            rows.append(
                dict(
                    sweep_id="crafted",
                    cell_id=f"{mode}_p1000_r{repeat}",
                    mode=mode,
                    repeat=repeat,
                    warmup=False,
                    replica=r,
                    role="victim" if r == 0 else "neighbour",
                    pattern=pattern,
                    i=i,
                    arrival=t,
                    start=t,
                    end=t + lat,
                    units=10,
                )
            )
            t += lat + 0.1
    return rows


def folder_with_bursts(path, cells: dict[str, tuple[list[str], Any]], alone: str = INTERACTIVE, n: int = 100):
    """The crafted sweep with bursts: the exclusive cells' one user alone, and per mode its replicas'
    patterns and how much longer their bursts take than alone; the mode's good repeats only, ``n`` bursts a
    replica and repeat (mps:2 keeps 2 repeats: 200 a user, above the 113 two users need for a verdict)."""
    ResultsWriter(path).append(crafted_rows())
    rng = np.random.default_rng(7)
    good = {"exclusive": (1, 2, 3), "timeslice:2": (1, 2, 3), "mps:2": (2, 3)}
    for rep in good["exclusive"]:
        append_bursts(path, burst_rows("exclusive", rep, [alone], 1.0, rng, n))
    for mode, (patterns, scale) in cells.items():
        for rep in good[mode]:
            append_bursts(path, burst_rows(mode, rep, patterns, scale, rng, n))
    tables = analysis.analyse(path)
    return tables, choices(answer_rows(tables), evidence(tables)).set_index("pattern")


def test_interactive_users_per_gpu_come_from_the_interactive_cells(tmp_path):
    """Two interactive users per GPU: 1.5× slower bursts under time-slicing (within the 2× target for every
    user), 3× under MPS (above it). The batch verdict is not measured here (the baseline ran interactive users)."""
    tables, picks = folder_with_bursts(
        tmp_path, {"timeslice:2": ([INTERACTIVE] * 2, 1.5), "mps:2": ([INTERACTIVE] * 2, 3.0)}
    )
    assert answer_rows(tables).empty  # no batch evidence: no verdict per mode
    users = picks.loc[f"interactive ({INTERACTIVE})"]
    assert (users["mode"], users["basis"]) == ("timeslice:2", "measured")
    assert users["reason"].startswith(
        "users per GPU at a p95 slowdown target of 2× against alone (every user counted: within when every "
    )
    assert re.search(
        r": timeslice: ≥ 2 users \(timeslice:2 within: worst user 1\.\d\d× \[1\.\d\d, 1\.\d\d\], all users 1\.\d\d× "
        r"\[\d\.\d\d, 1\.\d\d\]; within at every N measured up to 2; more users not measured\)",
        users["reason"],
    ), users["reason"]
    assert "mps: no sharing (mps:2 above: worst user 3." in users["reason"]
    batch = picks.loc["batch throughput"]
    assert (batch["mode"], batch["basis"]) == ("not measured", "not measured")
    assert (
        "`sharebench run --pattern batch --modes exclusive,timeslice:2,mps:2,mig:3g,partition:2 --repeats 3`"
        in batch["reason"]
    )
    for pattern in ("serving", "noisy neighbour"):
        assert picks.loc[pattern, "basis"] == "not measured"


def test_one_user_above_the_target_makes_the_cell_above_and_too_few_samples_undecided(tmp_path):
    """Replica 0 within (1.2×), replica 1 at 3×: the cell is above and the answer "no sharing", though replica
    0's own p95 slowdown is within; with 30 bursts a user the same cells are undecided and named so."""
    cells = {"timeslice:2": ([INTERACTIVE] * 2, [1.2, 3.0])}
    tables, picks = folder_with_bursts(tmp_path / "long", cells)
    v = tables.latency[(tables.latency["mode"] == "timeslice:2") & (tables.latency["role"] == "victim")].iloc[0]
    assert v["slowdown_p95_hi"] < 2 and (v["verdict"], v["worst_replica"]) == ("above", "1")
    users = picks.loc[f"interactive ({INTERACTIVE})"]
    assert users["mode"] == "exclusive" and "timeslice: no sharing (timeslice:2 above: worst user 3." in users["reason"]
    _, picks = folder_with_bursts(tmp_path / "short", cells, n=30)
    users = picks.loc[f"interactive ({INTERACTIVE})"]
    assert users["mode"] == "undecided" and users["reason"].startswith("no family has an N decided within the target")
    assert (
        "timeslice: undecided (undecided at 2 (the alone p95 has no interval (90 samples; 99 needed)))"
        in users["reason"]
    )


def test_serving_gives_requests_per_second_per_gpu(tmp_path):
    serve = "serve:rate=10,size=1"
    _, picks = folder_with_bursts(tmp_path, {"timeslice:2": ([serve] * 2, 1.3), "mps:2": ([serve] * 2, 1.1)}, serve)
    served = picks.loc[f"serving ({serve})"]
    assert (served["mode"], served["basis"]) == ("mps:2", "measured")  # a tie at 2: the lower upper bound
    assert re.search(
        r"; ties at 2 services broken by the lower upper bound of the worst user's p95 \(mps:2 1\.\d\d× against "
        r"timeslice:2 1\.\d\d×\)",
        served["reason"],
    )
    assert "timeslice: ≥ 2 services (≥ 20 requests/s) (timeslice:2 within: worst user 1." in served["reason"]
    assert "mps: ≥ 2 services (≥ 20 requests/s)" in served["reason"]
    assert picks.loc["interactive", "basis"] == "not measured"


def test_a_noisy_neighbour_is_measured_per_mode_and_users_are_not_inferred_from_it(tmp_path):
    """An interactive user beside a batch job: its verdict per mode (the batch aggressor is no user); users
    per GPU were not measured (no cell of interactive users alone) and are not inferred from the mixed cells."""
    _, picks = folder_with_bursts(
        tmp_path, {"timeslice:2": ([INTERACTIVE, "batch"], 2.5), "mps:2": ([INTERACTIVE, "batch"], 1.2)}
    )
    noisy = picks.loc[f"noisy neighbour ({INTERACTIVE} beside batch)"]
    assert (noisy["mode"], noisy["basis"]) == ("mps:2", "measured")
    assert noisy["reason"].startswith(
        f"p95 slowdown of the {INTERACTIVE} users against alone per mode (every user counted"
    )
    assert "the lowest upper bound chosen): timeslice:2 above: worst user 2." in noisy["reason"]
    assert "mps:2 within: worst user 1." in noisy["reason"] and "(1 users)" in noisy["reason"]
    # two repeats of mps:2 are no reason against a patterned mode (its intervals come from one run's samples)
    assert noisy["reason"].endswith("caution, not trusted as measured: 1 cell(s) excluded (failed)")
    users = picks.loc[f"interactive ({INTERACTIVE})"]
    assert (users["mode"], users["basis"]) == ("not measured", "not measured")
    assert f"no sharing cell of {INTERACTIVE} replicas alone was measured" in users["reason"]
    assert f"`sharebench run --pattern {INTERACTIVE} --capacity --modes timeslice,mps --budget 10m`" in users["reason"]


def test_a_cell_faster_than_alone_is_flagged_and_never_a_figure(tmp_path):
    """timeslice:2 at half the alone latency for every user (the baseline measured in a slow state): left out
    of the users per GPU with its numbers and why; mps:2 within gives the answer."""
    tables, picks = folder_with_bursts(
        tmp_path, {"timeslice:2": ([INTERACTIVE] * 2, 0.5), "mps:2": ([INTERACTIVE] * 2, 1.2)}
    )
    assert set(tables.flags.loc[tables.flags["kind"] == "below-one", "mode"]) == {"timeslice:2"}
    trust = trust_table(evidence(tables)).set_index("mode")
    assert trust.loc["timeslice:2", "flag_kinds"] == "excluded,below-one"
    assert "a user faster shared than alone (below 1)" in trust.loc["timeslice:2", "trust"]
    assert trust.loc["mps:2", "flag_kinds"] == "excluded"  # 2 repeats: no "repeats" kind for a patterned mode
    users = picks.loc[f"interactive ({INTERACTIVE})"]
    assert users["mode"] == "mps:2"
    assert (
        "timeslice: undecided (every cell measured is flagged; timeslice:2 left out (below 1: a user faster"
        in (users["reason"])
    )
    assert "timeslice: ≥ 2" not in users["reason"]


# ------------------------------------------------------------------ trust


def test_no_trustworthy_answer_when_every_sharing_mode_is_flagged(tmp_path):
    """Every cell measured on a busy host: no mode is chosen from the numbers; the row says why (the flag
    kinds) and what to do, and the patterns not measured still give their command."""
    rows = crafted_rows()
    for r in rows:
        r["tel_disturbed"] = "other processes used 1.90 cores (> 0.5)"
    ResultsWriter(tmp_path).append(rows)
    tables = analysis.analyse(tmp_path)
    picks = choices(answer_rows(tables), evidence(tables))
    first = picks.iloc[0]
    assert (first["mode"], first["basis"]) == (NO_ANSWER, "untrusted")
    assert first["reason"].startswith("Every sharing mode measured is flagged (disturbed, excluded, repeats: ")
    assert "`--strict` refuses a busy one" in first["reason"]
    # mps:2 ran 3 repeats and lost one (failed): "--repeats 3" would change nothing; the excluded cells are named
    assert "`--repeats 4` so that 3 survive the same losses" in first["reason"]
    assert "excluded: timeslice:2 timeslice:2_p1000_r4 (overlap)" in first["reason"], first["reason"]
    assert "measured" not in set(picks["basis"]) and "predicted" not in set(picks["basis"])
    assert set(picks["basis"].iloc[1:]) == {"not measured"}


def test_one_trusted_mode_is_enough_for_an_answer(tmp_path):
    """The crafted sweep as measured: partition:2 is trusted, the others are flagged (an excluded cell, two
    repeats): the choices stand, and one resting on a flagged mode says so."""
    ResultsWriter(tmp_path).append(crafted_rows())
    tables = analysis.analyse(tmp_path)
    rows = answer_rows(tables).set_index("mode")
    assert rows.loc["partition:2", "trust"] == "ok"
    assert rows.loc["timeslice:2", "flag_kinds"] == "excluded" and "(overlap)" in rows.loc["timeslice:2", "trust"]
    assert rows.loc["mps:2", "flag_kinds"] == "repeats,excluded"
    picks = choices(rows.reset_index(), evidence(tables)).set_index("pattern")
    assert NO_ANSWER not in set(picks["mode"])
    iso = picks.loc["isolation required"]
    assert iso["mode"] == "mig:3g" and "caution, not trusted as measured: 1 cell(s) excluded (devices)" in iso["reason"]


def test_a_cpu_sweep_is_a_smoke_test():
    assert evidence(analysis.analyse(CPU_DEFAULT)).cpu
    assert not evidence(analysis.analyse(H200)).cpu


def test_a_patterned_sweep_with_every_sharing_cell_flagged_has_no_trustworthy_answer(tmp_path):
    """A patterned sweep has no throughput table (its cells are not batch evidence): the trust of its modes
    comes from the cells and flags, so a busy host still gives no trustworthy answer, not a user count."""
    rows = [r for r in crafted_rows() if r["device_class"] == "cpu"]
    for r in rows:
        r["tel_disturbed"] = "other processes used 1.90 cores (> 0.5)"
    ResultsWriter(tmp_path).append(rows)
    rng = np.random.default_rng(3)
    for rep in (1, 2, 3):
        append_bursts(tmp_path, burst_rows("exclusive", rep, [INTERACTIVE], 1.0, rng))
        append_bursts(tmp_path, burst_rows("timeslice:2", rep, [INTERACTIVE] * 2, 1.5, rng))
    tables = analysis.analyse(tmp_path)
    patterned = dataclasses.replace(tables, throughput=tables.throughput.iloc[0:0])
    picks = choices(answer_rows(patterned), evidence(patterned))
    assert list(picks["mode"])[:1] == [NO_ANSWER] and "measured" not in set(picks["basis"])
    assert "(disturbed, excluded, repeats: " in picks["reason"].iloc[0]


# ------------------------------------------------------------------ the Answer reads its tables right (H200 patterns)

PATTERNS_DATA = ROOT / "tests" / "data" / "patterns"
RN_USERS = "interactive:burst=5,think=0.1"
PLACED = ROOT / "results" / "h200" / "patterns-2026-12-03"


def pattern_evidence(name: str, trust: str = "ok", **kw) -> Evidence:
    """The Evidence of an H200 pattern folder's latency table (tests/data/patterns), every mode ``trust``."""
    lat = pd.read_csv(PATTERNS_DATA / f"h200-{name}-latency.csv", keep_default_na=False, na_values=[""])
    lat["beside"] = lat["beside"].fillna("")
    modes = sorted(set(lat["mode"]), key=mode_sort_key)
    kinds = () if trust == "ok" else ("repeats",)
    return Evidence(
        latency=lat,
        modes=tuple(modes),
        gpu="H200",
        trust={m: ("ok" if m == "exclusive" else trust, () if m == "exclusive" else kinds) for m in modes},
        **kw,
    )


def picked(ev: Evidence):
    return choices(pd.DataFrame(columns=ANSWER_COLUMNS), ev).set_index("pattern")


def test_a_folder_of_short_cells_is_undecided_and_says_why():
    """rn-users: 30 bursts a user and repeat, 90 alone (the baseline's p95 needs 99 for an interval) and 90 a
    user (two users need 113): every family undecided, no mode chosen, each N with its reason; replica 0's
    point estimates (timeslice:8 1.27x, mps:8 0.98x: the old tie at 8 users) are no answer."""
    users = picked(pattern_evidence("rn-users")).loc[f"interactive ({RN_USERS})"]
    assert (users["mode"], users["basis"]) == ("undecided", "measured")
    alone = "the alone p95 has no interval (90 samples; 99 needed)"
    assert f"timeslice: undecided (undecided at 2 ({alone}), 4 ({alone}), 8 ({alone}))" in users["reason"]
    assert f"mig-emulated: undecided (undecided at 3 ({alone}), 7 ({alone}))" in users["reason"]
    assert "ties" not in users["reason"] and "8 users" not in users["reason"]


def test_the_isolation_line_uses_the_measured_emulated_layout_and_predicts_only_without_one():
    iso = picked(pattern_evidence("rn-users")).loc["isolation required"]
    assert (iso["mode"], iso["basis"]) == ("mig 7x1g.18gb (emulated with MPS shares)", "measured")
    assert "measured here as mig-emulated:7x1g.18gb (emulated with MPS shares" in iso["reason"]
    assert "p95 slowdown mig-emulated:7x1g.18gb undecided: worst user 1.15× [?, ?], all users 1.03× [" in iso["reason"]
    assert f"of {RN_USERS}, 7 instances (target 2×)" in iso["reason"]
    assert "8.25" not in iso["reason"] and "predicted" not in iso["reason"]
    ev = pattern_evidence("rn-users")
    no_mig = dataclasses.replace(ev, latency=ev.latency[~ev.latency["mode"].str.startswith("mig-emulated")])
    iso = picked(no_mig).loc["isolation required"]
    assert (iso["mode"], iso["basis"]) == ("mig:all-1g (predicted, not measured)", "predicted")
    assert "predicted for H200, no MIG or emulated MIG layout measured here: each job takes 8.25×" in iso["reason"]


def test_the_noisy_neighbour_line_stays_with_its_trust_when_every_mode_is_flagged():
    """rn-beside: every mode at 2 repeats (no answer trusted): the neighbour line is still there, untrusted;
    60 bursts a user: undecided everywhere, so no mode is named."""
    picks = picked(pattern_evidence("rn-beside", trust="2 repeat(s) < 3: no interval"))
    assert picks.iloc[0]["mode"] == NO_ANSWER
    noisy = picks.loc[f"noisy neighbour ({RN_USERS} beside batch)"]
    assert (noisy["mode"], noisy["basis"]) == ("undecided", "untrusted")
    assert "the lowest upper bound chosen): timeslice:2 undecided: worst user 1.09× [" in noisy["reason"]
    assert noisy["reason"].endswith("; not trusted as measured: 2 repeat(s) < 3: no interval")


def test_the_count_line_reads_the_same_trust_table_as_the_answer(tmp_path):
    """A patterned sweep has no verdict rows: the count comes from tables/trust.csv, so it cannot say "0 modes
    not to be trusted" under "every sharing mode measured is flagged"."""
    ev = pattern_evidence("rn-beside", trust="2 repeat(s) < 3: no interval")
    tables = tmp_path / "tables"
    tables.mkdir()
    picked(ev).reset_index().to_csv(tables / "choices.csv", index=False)
    trust = trust_table(ev)
    trust.to_csv(tables / "trust.csv", index=False)
    assert list(trust["mode"])[:2] == ["exclusive", "timeslice:2"] and list(trust["sharing"]) == [
        False,
        True,
        True,
        True,
        True,
        False,
    ]
    text, _ = end_screen(tmp_path)
    assert "NO TRUSTWORTHY ANSWER: Every sharing mode measured is flagged" in text
    assert text.splitlines()[-1].endswith(
        "5 mode(s) not to be trusted as measured, no trustworthy answer for every pattern measured"
    )


@pytest.mark.skipif(not (PLACED / "GPU-026cd61c" / "rn-users").is_dir(), reason="the H200 pattern folders are not here")
def test_the_placed_h200_folder_reads_its_tables_right():
    """The real rn-users folder (read, never written): replica 0's p95 slowdowns below 1 (timeslice:2 0.82x)
    flag nothing now that every user is counted (too few samples for an upper bound: no claim either way);
    the interactive line is undecided, the isolation line from mig-emulated:7x1g.18gb."""
    tables = analysis.analyse(PLACED / "GPU-026cd61c" / "rn-users")
    assert tables.flags[tables.flags["kind"] == "below-one"].empty
    assert set(tables.latency["ci_method"]) == {"order"}
    picks = choices(answer_rows(tables), evidence(tables, gpu="H200")).set_index("pattern")
    assert picks.loc[f"interactive ({RN_USERS})", "mode"] == "undecided"
    assert picks.loc["isolation required", "mode"] == "mig 7x1g.18gb (emulated with MPS shares)"
