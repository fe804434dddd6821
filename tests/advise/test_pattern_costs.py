"""advise from measured pattern costs scaled by load, pods counted by presence, units, --check (issue 33)."""

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
    check,
    class_options,
    class_patterns,
    read_costs,
    to_json,
    usage_from_rows,
)
from sharebench.advise.costs import curves_of
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
PATTERNS = ROOT / "results" / "h200" / "patterns-2026-12-03"
BATCH = ROOT / "results" / "h200" / "cuda"
H200_PATTERNS = sorted(p.parent.parent for p in PATTERNS.glob("*/*/tables/latency.csv"))
needs_h200 = pytest.mark.skipif(not H200_PATTERNS, reason="the H200 pattern folders are not in results/ yet")


INTERACTIVE = spec_of("interactive")


def names(patterns: dict[str, PatternSpec]) -> dict[str, str]:
    """A class -> pattern kind mapping as the kinds' names."""
    return {c: p.name for c, p in patterns.items()}


def h200_costs() -> Costs:
    return read_costs([*H200_PATTERNS, BATCH], None)


@needs_h200
def test_pool16_frees_four_within_target(tmp_path):
    usage = usage_from_rows(synthetic_usage(pool16(), 1, seed=3), "pool16")
    a = advise(usage, h200_costs(), class_patterns(usage, {}), 2.0)
    assert a.today_total == 16 and names(a.patterns) == {"train": "batch", "notebooks": "interactive"}
    assert a.recommended is not None and a.recommended.gpus <= 12 and not a.unmeasured
    assert all(o.p95 <= 2.0 for o in a.recommended.choice.values())
    assert a.recommended.choice["train"].gpus == 4  # two 97 %-busy jobs on one GPU would take twice as long
    written = json.loads(json.dumps(to_json(a)))
    assert written["frees_gpus"] >= 4
    pods = {row["pod"]: row["gpu"] for row in written["assignment"]}
    assert sorted(pods) == sorted(usage.pods) and len(set(pods.values())) == a.recommended.gpus


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
    """Only batch costs: the notebooks are not measured (kept whole, the command that measures them),
    and forcing them to batch applies saturated costs with a warning only."""
    batch = results_folder(tmp_path / "batch-only")
    lat = pd.read_csv(batch / "tables" / "latency.csv")
    lat[lat["pattern"] == "batch"].to_csv(batch / "tables" / "latency.csv", index=False)
    path = tmp_path / "u.csv"
    synthetic_usage(pool16(), 1, seed=3).to_csv(path, index=False)
    rc = main(["advise", "--usage", str(path), "--results", str(batch), "--out", str(tmp_path / "o")])
    out = capsys.readouterr().out
    assert rc == 0 and "notebooks (interactive): not measured, kept whole on 12 GPU(s)" in out
    assert "sharebench run --device cuda:0 --pattern interactive" in out
    assert json.loads((tmp_path / "o" / "advice.json").read_text())["not_measured"]["notebooks"]
    rc = main(
        ["advise", "--usage", str(path), "--results", str(batch), "--out", str(tmp_path / "f")]
        + ["--class", "notebooks=batch"]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "saturated batch costs applied to a lightly used class" in out


def point(n: int, level: float, bn: float, s: float, label: str) -> Cost:
    return Cost("timeslice", n, "interactive", "interactive", s, "test", label, level, bn)


def test_surface_interpolates_and_never_extrapolates():
    light, heavy = "interactive:burst=5,think=0.1", "interactive:burst=1,think=0.2"
    costs = Costs(gpu_model("H200"), [])
    costs.points += [point(2, 0.2, 0.2, 1.5, light), point(2, 0.4, 0.4, 2.5, heavy), point(2, 0.4, 1.0, 3.0, heavy)]
    costs.points += [point(2, 0.2, 0.2, 0.8, light)]  # below 1 (a baseline artefact) counts as 1; the max kept
    surf = costs.surface("timeslice", INTERACTIVE)
    bn = np.array([0.0, 0.1, 0.2, 0.4, 1.0])
    s_light, clamped = surf.lookup(2, 0.2, bn)
    np.testing.assert_allclose(s_light, [1.0, 1.25, 1.5, 1.5, 1.5])
    assert clamped.tolist() == [False, False, False, True, True]
    s_mid, _ = surf.lookup(2, 0.3, np.array([0.2]))  # halfway between the light (1.5) and heavy (1.75) curves
    np.testing.assert_allclose(s_mid, [(1.5 + 1 + 1.5 * 0.5) / 2])
    assert surf.lookup(2, 0.05, np.array([0.2]))[0][0] == pytest.approx(1.5)  # lighter: the lightest, a bound
    ok = class_options(costs, INTERACTIVE, np.array([0.1, 0.3]))
    assert any(o.mode == "timeslice:2" for o in ok.options) and any("upper bound" in n for n in ok.notes)
    busy = class_options(costs, INTERACTIVE, np.array([0.1, 0.8]))  # busier than any curve: left out
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
    ],
)
def test_bad_units_are_one_line_errors_without_numpy(tmp_path, capsys, edit, match):
    path = tmp_path / "u.csv"
    edit(synthetic_usage(pool16(), 0.1, seed=1)).to_csv(path, index=False)
    rc = main(["advise", "--usage", str(path), "--results", str(results_folder(tmp_path / "r"))])
    err = capsys.readouterr().err
    assert rc == 2 and match in err and err.count("\n") == 1
    assert "np." not in err and "array(" not in err


def test_implausible_units_warn(tmp_path, capsys):
    df = synthetic_usage(pool16(), 0.1, seed=1)
    df["time"] = (df["time"] * 1000).astype("int64")  # milliseconds
    df.loc[df["class"] == "train", "memory_bytes"] = 200e9  # above the H200's 141 GB
    path = tmp_path / "u.csv"
    df.to_csv(path, index=False)
    out = tmp_path / "o"
    assert (
        main(["advise", "--usage", str(path), "--results", str(results_folder(tmp_path / "r")), "--out", str(out)]) == 0
    )
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
    assert "the costs were measured on H200" in json.dumps(json.loads((out / "advice.json").read_text())["warnings"])
    before = (out / "advice.json").read_text()
    assert main(args) == 2 and "already holds an advice" in capsys.readouterr().err
    assert (out / "advice.json").read_text() == before
    assert main([*args, "--force"]) == 0


def test_check_prints_predicted_and_replayed_per_class(tmp_path, capsys):
    path = tmp_path / "u.csv"
    synthetic_usage(inference_like(), 1, seed=2).to_csv(path, index=False)
    out = tmp_path / "o"
    res = results_folder(tmp_path / "r")
    assert main(["advise", "--usage", str(path), "--results", str(res), "--out", str(out), "--check", "0.6"]) == 0
    text = capsys.readouterr().out
    assert "predicted" in text and "replayed" in text
    got = json.loads((out / "check.json").read_text())
    assert {c["class"] for c in got["classes"]} == {"inference", "notebooks", "train"}
    for row in got["classes"]:
        assert row["predicted_p95"] >= 1 and row["replayed_p95"] >= 1 and row["overflow_gpus"] >= 0
        assert row["pods_kept"] + row["pods_new"] > 0


def test_check_keeps_pods_on_their_gpus_and_counts_overflow(tmp_path):
    """Fit on a quiet half, replay on a half with twice the pods: the new ones overflow the layout."""
    quiet = synthetic_trace({"nb": ("interactive", 4)}, 240, seed=1)
    busy = synthetic_trace({"nb": ("interactive", 8)}, 240, seed=2, start=quiet["time"].max() + 60)
    usage = usage_from_rows(pd.concat([quiet, busy.assign(gpu=busy["gpu"] + "b")]), "trace")
    costs = read_costs([results_folder(tmp_path / "r")], None)
    got = check(usage, costs, {}, 2.0, CheckOptions(0.5))
    (row,) = got.rows
    assert (row.pods_kept, row.pods_new) == (4, 4)  # nb-0..3 stay on their GPUs, nb-4..7 arrive
    assert row.gpus >= 1 and row.overflow_gpus >= 0 and row.replayed_p95 >= 1
    with pytest.raises(UserError, match="0 < F < 1"):
        check(usage, costs, {}, 2.0, CheckOptions(1.5))


def test_inference_like_has_the_published_shape():
    usage = usage_from_rows(synthetic_usage(inference_like(), 2, seed=5), "inference")
    present = usage.present()
    samples = usage.busy[present]
    assert 120 <= usage.peak_pods() <= 140
    assert 0.03 <= float(samples.mean()) <= 0.12
    assert 0.55 <= float((samples <= 0.05).mean()) <= 0.8
