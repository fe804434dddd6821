"""`sharebench compare A B`: per cell, the change with its interval and a verdict; never writes into A or B."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from sharebench.cli import main
from sharebench.results import ResultsWriter
from support.crafted import crafted_rows
from support.paths import ROOT


def _slower(factor: float) -> list[dict]:
    rows = crafted_rows()
    for r in rows:
        if r.get("track_s") is not None:
            r["track_s"] *= factor
            r["track_end"] = r["track_start"] + r["track_s"]
    return rows


@pytest.fixture
def folders(tmp_path):
    a, b, same = tmp_path / "a", tmp_path / "b", tmp_path / "same"
    ResultsWriter(a).append(crafted_rows())
    ResultsWriter(b).append(_slower(1.5))  # every time 50% longer (like a slower GPU)
    ResultsWriter(same).append(crafted_rows())
    return a, b, same


def test_compare_verdicts_and_own_folder(folders, tmp_path, capsys):
    a, b, same = folders
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), str(same), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "## b against a" in text and "## same against a" in text
    t = pd.read_csv(out / "compare.csv")
    vs_b, vs_same = t[t["b"] == str(b)], t[t["b"] == str(same)]
    ts = vs_b[(vs_b["mode"] == "timeslice:2")].iloc[0]
    # times scaled by 1.5: +50% exactly, interval around it, excluding 0 -> slower
    assert ts["change_pct"] == pytest.approx(50.0) and ts["change_ci_low"] > 0 and ts["verdict"] == "slower"
    # the loss is unchanged by a common scale: no between-run spread
    assert ts["loss_spread_pts"] == pytest.approx(0.0, abs=1e-9)
    # mps:2 has 2 good repeats: no interval, no verdict beyond saying so
    assert vs_b[vs_b["mode"] == "mps:2"].iloc[0]["verdict"] == "no interval (< 3 repeats)"
    assert set(vs_same.loc[vs_same["repeats_a"] >= 3, "verdict"]) == {"same within noise"}
    assert (out / "compare.md").read_text().startswith("# sharebench compare")
    # nothing written into the compared folders
    for d in (a, b, same):
        assert sorted(p.name for p in d.iterdir()) == ["results.csv"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{a}"], "compare needs at least two results folders, got 1: {a}"),
        (
            ["{a}", "{tmp}/nope"],
            "results folder {tmp}/nope has no results.csv; give folders written by `sharebench run`",
        ),
        (["{a}", "{b}", "--out", "{a}"], "--out {a} is one of the compared folders; give a folder of its own"),
        (
            ["{a}", "{b}", "--ignore", "particles"],
            "bad --ignore 'particles'; allowed: engine, backend, lattice, device_class",
        ),
    ],
)
def test_compare_refusals(folders, tmp_path, capsys, argv, message):
    a, b, _ = folders
    fill = dict(a=a, b=b, tmp=tmp_path)
    assert main(["compare", *(x.format(**fill) for x in argv)]) == 2
    assert capsys.readouterr().err == f"sharebench: error: {message.format(**fill)}\n"


def test_compare_the_two_h200_folders(tmp_path, capsys):
    """CUDA against NVIDIA's OpenCL on the H200 (committed folders): OpenCL is slower at every size."""
    src = ROOT / "tests" / "data" / "results" / "h200"
    for name in ("cuda", "opencl"):
        (tmp_path / name).mkdir()
        shutil.copy(src / name / "results.csv", tmp_path / name / "results.csv")
    assert main(["compare", str(tmp_path / "cuda"), str(tmp_path / "opencl"), "--ignore", "backend"]) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if "| exclusive |" in line]
    assert len(rows) == 3 and all("| slower |" in line for line in rows)


def _resized(factor: float, turns: int | None = None) -> list[dict]:
    """The crafted rows as if calibrated to ``factor`` times the particles (and ``turns``), every time
    scaled with the work: the same speed per particle-turn."""
    rows = crafted_rows()
    for r in rows:
        work = factor * (turns / r["turns"] if turns else 1.0)
        r["particles"] = int(r["particles"] * factor)
        if turns:
            r["turns"] = turns
        if r.get("track_s") is not None:
            r["track_end"] = r["track_start"] + (r["track_end"] - r["track_start"]) * work
            r["track_s"] *= work
    return rows


def test_calibrated_runs_of_other_sizes_compare_per_particle_turn(tmp_path, capsys):
    """Two calibrated runs picked other particle counts: the setting is named and the cells compared per
    particle-turn (the same speed: same within noise), not 'No cell measured in both'."""
    a, b, slow = tmp_path / "a", tmp_path / "b", tmp_path / "slow"
    ResultsWriter(a).append(crafted_rows())
    ResultsWriter(b).append(_resized(2.0))
    rows = _resized(2.0)
    for r in rows:  # 1.5x slower per particle-turn as well
        if r.get("track_s") is not None:
            r["track_end"] = r["track_start"] + (r["track_end"] - r["track_start"]) * 1.5
            r["track_s"] *= 1.5
    ResultsWriter(slow).append(rows)
    particles = sorted({r["particles"] for r in crafted_rows()})
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), str(slow), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    shown = "/".join(f"{p:,}" for p in particles)
    doubled = "/".join(f"{2 * p:,}" for p in particles)
    assert (
        f"No cell measured in both at the same work (particles: {shown} in a, {doubled} in b): compared per "
        "particle-turn instead (time per particle-turn"
    ) in text
    assert "No cell measured in both (same work" not in text
    t = pd.read_csv(out / "compare.csv")
    assert set(t["per"]) == {"particle-turn"}
    vs_b, vs_slow = t[t["b"] == str(b)], t[t["b"] == str(slow)]
    ts = vs_b[vs_b["mode"] == "timeslice:2"].iloc[0]
    assert ts["change_pct"] == pytest.approx(0.0, abs=1e-9) and ts["verdict"] == "same within noise"
    assert ts["particles_b"] == 2 * ts["particles"]
    assert ts["loss_spread_pts"] == pytest.approx(0.0, abs=1e-9)  # the loss is per unit already
    ts = vs_slow[vs_slow["mode"] == "timeslice:2"].iloc[0]
    assert ts["change_pct"] == pytest.approx(50.0) and ts["verdict"] == "slower"


def test_other_settings_are_named_when_nothing_compares(tmp_path, capsys):
    """Another lattice: nothing compares, even per unit, and the message says which setting differs."""
    a, b = tmp_path / "a", tmp_path / "b"
    ResultsWriter(a).append(crafted_rows())
    rows = _resized(2.0)
    for r in rows:
        r["lattice"] = "other.json"
    ResultsWriter(b).append(rows)
    assert main(["compare", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    lattices = "/".join(sorted({str(r["lattice"]) for r in crafted_rows()}))
    assert "No cell measured in both (same work: engine, backend, device class, lattice, particles, turns; see " in text
    assert f"lattice: {lattices} in a, other.json in b" in text
    assert "particles: " in text


def test_disjoint_loss_intervals_of_two_machines_are_a_spread_never_agreement(tmp_path, capsys):
    """The same cell on two H200s (copies of committed folders, GPU-0c614d80 and GPU-a162c5aa): time-slicing's loss
    intervals do not overlap, and compare says so; MPS's overlap."""
    a, b = (ROOT / "tests/data/results/h200" / f / "warm-10M-1turn" for f in ("warm", "warm-first"))
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    t = pd.read_csv(out / "compare.csv").set_index("mode")
    assert t.loc["timeslice:2", "losses"] == "disjoint" and t.loc["timeslice:2", "machines"] == "two machines"
    assert t.loc["mps:2", "losses"] == "overlap"
    text = capsys.readouterr().out
    assert "disjoint: a spread, not agreement (two machines)" in text
