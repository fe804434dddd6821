"""The layout of the whole pool (issue 44 items 1 and 5): every pod within the target by its own p95, the
next option near the target, classes whose modes agree sharing GPUs, never more GPUs than today without
the reason, and ``--check`` failing per class."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharebench.advise import CheckOptions, advise, class_patterns, read_costs, usage_from_rows
from sharebench.advise.check import check
from sharebench.advise.replay import PodP95, verdict
from sharebench.advise.synthetic import synthetic_trace
from sharebench.cli import main
from tests.advise.test_advise import CLASSES, results_folder

START = 1_800_000_000.0 - 8 * 3600  # 2027-01-15T00:00:00Z


def at_hours(name: str, pods: int, hours: tuple[float, float], busy: float, seed: int) -> pd.DataFrame:
    """``pods`` pods of class ``name``, each on a GPU of its own, present from hour ``hours[0]`` to
    ``hours[1]`` of one day (past 24: the next morning), busy about ``busy`` (a Beta around it), 10 GB each."""
    rng = np.random.default_rng(seed)
    steps = np.arange(int(hours[0] * 60), int(hours[1] * 60))
    frames = []
    for i in range(pods):
        b = rng.beta(busy * 40, (1 - busy) * 40, steps.size) if busy < 1 else np.ones(steps.size)
        frames.append(
            pd.DataFrame(
                {
                    "time": START + 60.0 * steps,
                    "gpu": f"{name}-gpu-{i}",
                    "pod": f"{name}-{i}",
                    "class": name,
                    "busy": np.round(b, 4),
                    "memory_bytes": 10e9,
                    "gpu_model": "NVIDIA H200",
                }
            )
        )
    return pd.concat(frames)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    day=st.integers(1, 8),
    night=st.integers(1, 8),
    busy=st.sampled_from([0.95, 0.5, 0.2]),
    seed=st.integers(0, 1000),
)
def test_classes_peaking_at_different_hours_never_need_more_than_the_peak_present(
    tmp_path_factory, day, night, busy, seed
):
    """A day class and a night class on GPUs of their own: today is the peak of GPUs present at once, and the
    advice never asks more (their pods take turns on the same GPUs when their modes agree)."""
    tmp = tmp_path_factory.mktemp("hours")
    trace = pd.concat([at_hours("day", day, (8, 18), busy, seed), at_hours("night", night, (20, 30), 0.95, seed + 1)])
    usage = usage_from_rows(trace, "hours")
    assert usage.gpus_present() == max(day, night)
    a = advise(usage, read_costs([results_folder(tmp / "r")], None), class_patterns(usage, {}), 2.0)
    assert a.recommended is not None
    assert a.recommended.gpus <= a.today_total, a.beyond_today
    assert not a.beyond_today
    gpus_of = {}
    for row in a.assignment:
        gpus_of.setdefault(row["gpu"], set()).add(row["class"])
    assert len(gpus_of) == a.recommended.gpus
    if a.recommended.choice["day"].option.mode == a.recommended.choice["night"].option.mode:
        assert any(classes == {"day", "night"} for classes in gpus_of.values())  # they share GPUs


def test_more_gpus_than_today_says_which_constraint(tmp_path):
    """Four busy pods shared one GPU today; none may share within the target now: 4 GPUs, and why."""
    trace = at_hours("jobs", 4, (8, 12), 0.95, 1).assign(gpu="the-one-gpu")
    usage = usage_from_rows(trace, "shared today")
    assert usage.gpus_present() == 1
    a = advise(usage, read_costs([results_folder(tmp_path / "r")], None), class_patterns(usage, {}), 2.0)
    assert a.recommended is not None and a.recommended.gpus == 4
    assert "jobs: up to 4 of its pods shared a GPU today; now exclusive" in a.beyond_today


def test_a_pod_over_the_target_is_not_hidden_by_the_others():
    pods = np.arange(4)
    within = PodP95(
        pods, np.array([1.1, 1.2, 1.3, 1.9]), np.array([1.0, 1.1, 1.2, 1.8]), np.array([1.2, 1.3, 1.4, 1.95])
    )
    assert verdict(within, 2.0)[0] == "within"
    one_over = PodP95(pods, within.point, within.lo, np.array([1.2, 1.3, 1.4, 2.3]))
    got, why = verdict(one_over, 2.0)
    assert got == "undecided" and "1 pod(s) not shown within 2x" in why
    above = PodP95(pods, within.point, np.array([1.0, 1.1, 1.2, 2.1]), np.array([1.2, 1.3, 1.4, 2.3]))
    assert verdict(above, 2.0)[0] == "above"
    assert one_over.worst() == 3 and one_over.quantiles()["max"] == pytest.approx(1.9)


def test_worst_pod_distribution_and_next_option_near_the_target(tmp_path, capsys):
    """Notebooks at mps:4 reach 1.89x by their upper end, within 10 % of 2x: the next option (mps:2) is offered
    with its worst pod and the pool's GPUs; the headline names the worst pod and the pods' p90."""
    path = tmp_path / "u.csv"
    synthetic_trace(CLASSES, 720, seed=0).assign(gpu_model="NVIDIA H200").to_csv(path, index=False)
    res, out = results_folder(tmp_path / "r"), tmp_path / "o"
    assert main(["advise", "--usage", str(path), "--results", str(res), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    advice = json.loads((out / "advice.json").read_text())
    nb = advice["recommended"]["classes"]["notebooks"]
    assert nb["mode"] == "mps:4" and nb["worst_p95_slowdown_hi"] >= 0.9 * 2
    assert f"worst pod {nb['worst_pod']}" in text and "pods' p95: median" in text
    (near,) = advice["next_options"]
    assert near.startswith("notebooks: its worst pod") and "within 10% of 2x; next option: mps:2" in near
    assert f"next option: {near}" in text


def test_isolation_said_and_required(tmp_path, capsys):
    path = tmp_path / "u.csv"
    synthetic_trace(CLASSES, 720, seed=0).assign(gpu_model="NVIDIA H200").to_csv(path, index=False)
    res = results_folder(tmp_path / "r")
    argv = ["advise", "--usage", str(path), "--results", str(res)]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    text = capsys.readouterr().out
    assert "shares without isolation: inference (mps:4), notebooks (mps:4)" in text
    assert "a fatal fault in one client reaches every client on the GPU" in text
    md = (tmp_path / "a" / "advice.md").read_text()
    assert "## Isolation" in md and "- mps: memory: shared" in md and "dcgm-exporter cannot associate" in md
    assert main([*argv, "--out", str(tmp_path / "b"), "--class", "notebooks=isolation=required"]) == 0
    advice = json.loads((tmp_path / "b" / "advice.json").read_text())
    modes = {o["mode"].partition(":")[0] for o in advice["options"]["notebooks"]}
    assert modes == {"exclusive", "mig"}  # only the modes that isolate memory and faults are offered
    assert advice["recommended"]["classes"]["notebooks"]["isolation"] == "isolated"
    assert any("not offered: the class needs isolation" in w for w in advice["left_out"]["notebooks"])


def test_check_fails_on_a_pod_over_the_target(tmp_path):
    """Fit on a quiet morning (timeslice:8 keeps every pod within), replay on a busy afternoon: the same
    pods on the same GPUs leave the target, and the check fails naming the class."""
    quiet = at_hours("nb", 8, (8, 12), 0.02, 1)
    busy = at_hours("nb", 8, (12, 16), 0.3, 2)
    usage = usage_from_rows(pd.concat([quiet, busy]), "day")
    costs = read_costs([results_folder(tmp_path / "r")], None)
    got = check(usage, costs, {}, 2.0, CheckOptions(0.5))
    (row,) = got.rows
    assert row.mode == "timeslice:8" and row.predicted_p95 <= 2.0 and row.overflow_gpus == 0
    assert row.pods_not_within > 0 and not row.within and not got.passed
    assert any(f.startswith("nb: ") and "not within 2x" in f for f in got.failures())
    assert "check FAILED: nb: " in got.lines()[-1]
