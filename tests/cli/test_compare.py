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
    src = ROOT / "docs" / "results" / "h200"
    for name in ("cuda", "opencl"):
        (tmp_path / name).mkdir()
        shutil.copy(src / name / "results.csv", tmp_path / name / "results.csv")
    assert main(["compare", str(tmp_path / "cuda"), str(tmp_path / "opencl"), "--ignore", "backend"]) == 0
    text = capsys.readouterr().out
    rows = [line for line in text.splitlines() if "| exclusive |" in line]
    assert len(rows) == 3 and all("| slower |" in line for line in rows)
