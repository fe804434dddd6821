"""advise from measured pattern costs scaled by load, pods counted by presence, units, --check (issues 33, 44)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sharebench.advise import (
    CheckOptions,
    Cost,
    Costs,
    advise,
    class_options,
    class_patterns,
    read_costs,
    to_json,
    usage_from_rows,
)
from sharebench.advise.check import check
from sharebench.advise.costs import curves_of
from sharebench.advise.pool import Pool
from sharebench.advise.replay import Costing
from sharebench.advise.synthetic import (
    TraceOrigin,
    churn48,
    inference_like,
    pool16,
    synthetic_trace,
    synthetic_usage,
)
from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.gpus import gpu_model
from sharebench.patterns import PatternSpec, spec_of
from tests.advise.test_advise import results_folder

ROOT = Path(__file__).resolve().parents[2]
H200 = ROOT / "results" / "h200"
BATCH = H200 / "cuda"
needs_h200 = pytest.mark.skipif(not (H200 / "patterns-2026-12-03").is_dir(), reason="the H200 folders are not here")


INTERACTIVE = spec_of("interactive")


def names(patterns: dict[str, PatternSpec]) -> dict[str, str]:
    """A class -> pattern kind mapping as the kinds' names."""
    return {c: p.name for c, p in patterns.items()}


def h200_costs() -> Costs:
    return read_costs([H200], None)


@needs_h200
def test_pool16_every_notebook_within_target_by_its_own_p95():
    """The 16-GPU example: every pod's own p95 within 2x by its upper end, the worst pod and the pods'
    distribution said, whole GPUs for the 97 %-busy jobs, and fewer GPUs than today."""
    usage = usage_from_rows(synthetic_usage(pool16(), 1, seed=3), "pool16")
    a = advise(usage, h200_costs(), class_patterns(usage, {}), 2.0)
    assert a.today_total == 16 and names(a.patterns) == {"train": "batch", "notebooks": "interactive"}
    rec = a.recommended
    assert rec is not None and rec.gpus < 16 and not a.unmeasured
    nb = rec.choice["notebooks"]
    assert nb.pods.active().sum() == 12 and np.all(nb.pods.hi[nb.pods.active()] <= 2.0)
    assert nb.p95_hi == pytest.approx(float(np.max(nb.pods.hi[nb.pods.active()])))
    assert rec.choice["train"].gpus == 4 and rec.choice["train"].option.mode == "exclusive"
    written = json.loads(json.dumps(to_json(a)))
    summary = written["recommended"]["classes"]["notebooks"]
    assert summary["verdict"] == "within" and summary["worst_pod"].startswith("notebooks-")
    assert set(summary["pods_p95"]) == {"min", "median", "p90", "max"} and summary["pods"] == 12
    assert written["isolation"]["notebooks"].startswith("memory: ")
    pods = {row["pod"]: row["gpu"] for row in written["assignment"]}
    assert sorted(pods) == sorted(usage.pods) and len(set(pods.values())) == rec.gpus


@needs_h200
def test_churn48_needs_four_gpus_and_is_batch():
    usage = usage_from_rows(synthetic_usage(churn48(), 1), "churn48")
    assert len(usage.pods) == 48 and usage.peak_pods() == 4
    a = advise(usage, h200_costs(), class_patterns(usage, {}), 2.0)
    assert names(a.patterns) == {"jobs": "batch"} and a.today_total == 4
    assert a.recommended is not None and a.recommended.gpus <= 4


def test_presence_not_distinct_pods_counts_today():
    """4 GPUs, a new pod every 2 hours: today is 4 GPUs; 12 pods on one GPU one after another share it."""
    usage = usage_from_rows(synthetic_usage(churn48(), 1, origin=TraceOrigin(gpu_model=None)), "churn48")
    assert usage.gpus_present() == 4 and len(set(usage.gpus)) == 4
    assert names(class_patterns(usage, {})) == {"jobs": "batch"}  # busy 0.97 while present, absent otherwise
    assert usage.level().min() > 0.9


def test_unmeasured_pattern_is_named_with_its_command(tmp_path, capsys):
    """Only batch costs: the notebooks are not measured (kept whole, the command that measures the site's
    own program), and forcing them to batch applies saturated costs with a warning only."""
    batch = results_folder(tmp_path / "batch-only")
    lat = pd.read_csv(batch / "tables" / "latency.csv")
    lat[lat["pattern"] == "batch"].to_csv(batch / "tables" / "latency.csv", index=False)
    path = tmp_path / "u.csv"
    synthetic_usage(pool16(), 1, seed=3).to_csv(path, index=False)
    rc = main(["advise", "--usage", str(path), "--results", str(batch), "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == 0 and "notebooks (interactive): not measured, kept whole on 12 GPU(s)" in out
    assert "sharebench run --device cuda:0 --engine exec --exec 'YOUR-PROGRAM' --exec-name notebooks" in out
    assert "--pattern interactive " in out and "--class notebooks=interactive,results=results/h200/notebooks-own" in out
    assert json.loads((tmp_path / "o" / "advice.json").read_text())["not_measured"]["notebooks"]
    rc = main(
        ["advise", "--usage", str(path), "--results", str(batch), "--out", str(tmp_path / "f")]
        + ["--class", "notebooks=batch"]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "saturated batch costs applied to a lightly used class" in out


def point(n: int, level: float, bn: float, s: float, label: str) -> Cost:
    return Cost("timeslice", n, "interactive", "interactive", s, "test", label, level, bn, workload="w")


def test_surface_interpolates_and_never_extrapolates():
    light, heavy = "interactive:burst=5,think=0.1", "interactive:burst=1,think=0.2"
    costs = Costs(gpu_model("H200"), [])
    costs.points += [point(2, 0.2, 0.2, 1.5, light), point(2, 0.4, 0.4, 2.5, heavy), point(2, 0.4, 1.0, 3.0, heavy)]
    costs.points += [point(2, 0.2, 0.2, 0.8, light)]  # below 1 (a baseline artefact) counts as 1; the max kept
    surf = costs.surface("timeslice", INTERACTIVE, "w")
    assert costs.surface("timeslice", INTERACTIVE, "another workload").ns() == []  # never across workloads
    bn = np.array([0.0, 0.1, 0.2, 0.4, 1.0])
    got = surf.lookup(2, 0.2, bn)
    np.testing.assert_allclose(got.point, [1.0, 1.25, 1.5, 1.5, 1.5])
    assert got.clamped.tolist() == [False, False, False, True, True]
    mid = surf.lookup(2, 0.3, np.array([0.2]))  # halfway between the light (1.5) and heavy (1.75) curves
    np.testing.assert_allclose(mid.point, [(1.5 + 1 + 1.5 * 0.5) / 2])
    assert surf.lookup(2, 0.05, np.array([0.2])).point[0] == pytest.approx(1.5)  # lighter: the lightest, a bound
    pool, costing = Pool(gpu_model("H200")), Costing("w")
    ok = class_options(costs, INTERACTIVE, np.array([0.1, 0.3]), costing, pool)
    assert any(o.mode == "timeslice:2" for o in ok.options) and any("upper bound" in n for n in ok.notes)
    busy = class_options(costs, INTERACTIVE, np.array([0.1, 0.8]), costing, pool)  # busier than any curve: left out
    assert not any(o.mode == "timeslice:2" for o in busy.options)
    assert any("not extrapolated" in w for w in busy.left_out)
    assert curves_of({light: [point(2, 0.2, 0.5, 2.0, light), point(2, 0.2, 0.9, 1.2, light)]})[0].y.tolist() == [
        1.0,
        2.0,
        2.0,
    ]  # busier neighbours never help


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda df: df.assign(busy=df["busy"] * 100), "looks like percent"),
        (lambda df: df.assign(memory_bytes="lots"), "memory_bytes 'lots'"),
        (lambda df: df.assign(gpu_model="NVIDIA A100-SXM4-40GB"), "--allow-other-model"),
        (lambda df: df.assign(memory_bytes=df["memory_bytes"] / 2**20), "MiB given as bytes"),
        (lambda df: df.assign(memory_bytes=df["memory_bytes"] * 10), "above the H200's 141 GB"),
    ],
)
def test_bad_units_are_one_line_errors_without_numpy(tmp_path, capsys, edit, match):
    path = tmp_path / "u.csv"
    edit(synthetic_usage(pool16(), 0.1, seed=1)).to_csv(path, index=False)
    rc = main(
        ["advise", "--usage", str(path), "--results", str(results_folder(tmp_path / "r")), "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and match in err and err.count("\n") == 1
    assert "np." not in err and "array(" not in err
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_memory_that_cannot_be_bytes_is_advised_with_force_and_a_warning(tmp_path, capsys):
    df = synthetic_usage(pool16(), 0.1, seed=1)
    df["time"] = (df["time"] * 1000).astype("int64")  # milliseconds
    df.loc[df["class"] == "train", "memory_bytes"] = 200e9  # above the H200's 141 GB
    path = tmp_path / "u.csv"
    df.to_csv(path, index=False)
    out = tmp_path / "o"
    argv = ["advise", "--usage", str(path), "--results", str(results_folder(tmp_path / "r")), "--out", str(out)]
    assert main(argv) == 2 and "--force" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 0
    text = capsys.readouterr().out
    assert "epoch milliseconds" in text and "above the H200's 141 GB" in text
    assert "window 2027-01-15T08:00:00Z" in text  # converted: the window is where the seconds say
    warnings = json.loads((out / "advice.json").read_text())["warnings"]
    assert any("milliseconds" in w for w in warnings) and "milliseconds" in (out / "advice.md").read_text()


def test_other_model_allowed_with_a_warning_and_out_never_overwritten(tmp_path, capsys):
    path = tmp_path / "u.csv"
    synthetic_usage(pool16(), 0.1, seed=1).assign(gpu_model="NVIDIA A100-SXM4-40GB").to_csv(path, index=False)
    res, out = results_folder(tmp_path / "r"), tmp_path / "o"
    args = ["advise", "--usage", str(path), "--results", str(res), "--out", str(out), "--allow-other-model"]
    assert main(args) == 0
    warnings = json.dumps(json.loads((out / "advice.json").read_text())["warnings"])
    assert "measured on H200, used for a A100-40GB pool" in warnings and "another GPU's" in warnings
    before = (out / "advice.json").read_text()
    assert main(args) == 2 and "already holds an advice" in capsys.readouterr().err
    assert (out / "advice.json").read_text() == before
    assert main([*args, "--force"]) == 0


def test_check_prints_predicted_and_replayed_per_class(tmp_path, capsys):
    path = tmp_path / "u.csv"
    synthetic_usage(inference_like(), 1, seed=2).to_csv(path, index=False)
    out = tmp_path / "o"
    res = results_folder(tmp_path / "r")
    rc = main(["advise", "--usage", str(path), "--results", str(res), "--out", str(out), "--check", "0.6"])
    text = capsys.readouterr().out
    assert "predicted" in text and "replayed" in text
    got = json.loads((out / "check.json").read_text())
    assert rc == (0 if got["passed"] else 1) and ("check passed" in text) == got["passed"]
    assert {c["class"] for c in got["classes"]} == {"inference", "notebooks", "train"}
    for row in got["classes"]:
        assert row["predicted_worst_p95"] >= 1 and row["replayed_worst_p95"] >= 1 and row["overflow_gpus"] >= 0
        assert row["pods_kept"] + row["pods_new"] > 0
        assert row["within_target"] == (row["pods_not_within"] == 0)


def test_check_keeps_pods_on_their_gpus_and_counts_overflow(tmp_path):
    """Fit on a quiet half, replay on a half with twice the pods: the new ones overflow the layout, and the
    check fails saying so for the class."""
    quiet = synthetic_trace({"nb": ("interactive", 4)}, 240, seed=1)
    busy = synthetic_trace({"nb": ("interactive", 8)}, 240, seed=2, start=quiet["time"].max() + 60)
    usage = usage_from_rows(pd.concat([quiet, busy.assign(gpu=busy["gpu"] + "b")]), "trace")
    costs = read_costs([results_folder(tmp_path / "r")], None)
    got = check(usage, costs, {}, 2.0, CheckOptions(0.5))
    (row,) = got.rows
    assert (row.pods_kept, row.pods_new) == (4, 4)  # nb-0..3 stay on their GPUs, nb-4..7 arrive
    assert row.gpus >= 1 and row.replayed_p95 >= 1
    assert row.overflow_gpus > 0 and not got.passed
    assert any(f.startswith("nb: its pods need") and "beyond the layout's" in f for f in got.failures())
    with pytest.raises(UserError, match="0 < F < 1"):
        check(usage, costs, {}, 2.0, CheckOptions(1.5))


def test_inference_like_has_the_published_shape():
    usage = usage_from_rows(synthetic_usage(inference_like(), 2, seed=5), "inference")
    present = usage.present()
    samples = usage.busy[present]
    assert 120 <= usage.peak_pods() <= 140
    assert 0.03 <= float(samples.mean()) <= 0.12
    assert 0.55 <= float((samples <= 0.05).mean()) <= 0.8
