"""sharebench advise: CSV and real-Prometheus usage, costs of the pool's model, packing, replay, the CLI."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharebench.advise import (
    Window,
    advise,
    class_patterns,
    read_costs,
    read_prometheus,
    read_usage_csv,
    to_json,
)
from sharebench.advise.synthetic import synthetic_trace
from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.patterns import PATTERNS
from sharebench.results import write_provenance

CLASSES = {"train": ("batch", 6), "notebooks": ("interactive", 8), "inference": ("serve", 4)}
# p95 slowdowns of the victim beside its own pattern (what a --pattern sweep's latency.csv holds)
MEASURED = {
    ("timeslice:2", "interactive"): 1.6,
    ("timeslice:4", "interactive"): 1.9,
    ("timeslice:8", "interactive"): 3.1,
    ("mps:2", "interactive"): 1.4,
    ("mps:4", "interactive"): 1.8,
    ("timeslice:2", "serve:rate=10,size=1"): 1.5,
    ("timeslice:4", "serve:rate=10,size=1"): 2.6,
    ("mps:2", "serve:rate=10,size=1"): 1.3,
    ("mps:4", "serve:rate=10,size=1"): 1.7,
    ("timeslice:2", "batch"): 2.7,
    ("mps:2", "batch"): 2.0,
}

ALONE_BUSY = {"interactive": 0.3, "serve:rate=10,size=1": 0.25, "batch": 1.0}  # the victims' busy alone


def verdict_columns(slowdown: float, users: int) -> dict:
    """The verdict columns a report writes into tables/latency.csv (issue 42's convention), for a cell whose
    worst user's p95 slowdown is ``slowdown`` with a +-5 % interval (advise decides it again at its target)."""
    return dict(
        users=users,
        samples=400,
        worst_replica="1",
        worst_p95_slowdown=slowdown,
        worst_p95_slowdown_lo=slowdown * 0.95,
        worst_p95_slowdown_hi=slowdown * 1.05,
        pooled_p95_slowdown=slowdown,
        pooled_p95_slowdown_lo=slowdown * 0.95,
        pooled_p95_slowdown_hi=slowdown * 1.05,
        alone_p95_s=0.1,
        alone_p95_lo_s=0.095,
        alone_p95_hi_s=0.105,
        below_one=slowdown * 1.05 < 1,
        verdict="",
        reason="",
    )


def results_folder(path: Path, model: str = "H200", measured: dict | None = None) -> Path:
    """A results folder as `sharebench report` leaves it: provenance and tables/latency.csv with the verdict
    columns (no bursts.csv: advise decides each cell from those columns)."""
    (path / "tables").mkdir(parents=True)
    write_provenance(path, {"gpu": {"model_key": model, "name": f"NVIDIA {model}"}})
    alone = [
        dict(mode="exclusive", pattern=p, role="victim", beside="", replicas=1, slowdown_p95=1.0, busy_fraction=b)
        for p, b in ALONE_BUSY.items()
    ]
    rows = alone + [
        dict(
            mode=m,
            pattern=p,
            role="victim",
            beside=p,
            replicas=int(m.split(":")[1]),
            slowdown_p95=s,
            slowdown_p95_lo=s * 0.95,
            slowdown_p95_hi=s * 1.05,
            busy_fraction=ALONE_BUSY[p],
            **verdict_columns(s, int(m.split(":")[1])),
        )
        for (m, p), s in (MEASURED if measured is None else measured).items()
    ]
    pd.DataFrame(rows).to_csv(path / "tables" / "latency.csv", index=False)
    return path


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return results_folder(tmp_path / "results")


def csv_usage(tmp_path: Path, classes: dict, steps: int = 720, seed: int = 0):
    path = tmp_path / "usage.csv"
    synthetic_trace(classes, steps, seed=seed).to_csv(path, index=False)
    return read_usage_csv(path)


def run_advice(usage, results: Path, slo: float = 2.0, overrides: dict | None = None):
    return advise(usage, read_costs([results], None), class_patterns(usage, overrides or {}), slo)


def test_patterns_are_inferred_from_the_busy_series(tmp_path):
    usage = csv_usage(tmp_path, CLASSES)
    found = class_patterns(usage, {})
    assert {c: p.name for c, p in found.items()} == {"train": "batch", "notebooks": "interactive", "inference": "serve"}
    assert all(p is PATTERNS[p.name] for p in found.values())  # the rows themselves, not strings
    assert class_patterns(usage, {"train": PATTERNS["serve"]})["train"] is PATTERNS["serve"]


def test_csv_advice_packs_idle_work_and_keeps_batch_whole(tmp_path, results):
    usage = csv_usage(tmp_path, CLASSES)
    a = run_advice(usage, results)
    rec = a.recommended
    assert rec is not None and a.today_total == 18
    assert rec.choice["train"].option.mode == "exclusive" and rec.choice["train"].gpus == 6
    assert rec.choice["notebooks"].gpus < 8 and rec.choice["inference"].gpus < 4
    assert all(o.p95 <= 2.0 for o in rec.choice.values())
    # the SLO binds: a stricter target never packs tighter, the strictest keeps every pod whole
    strict = run_advice(usage, results, slo=1.0)
    assert strict.recommended is not None and strict.recommended.gpus == 18
    assert a.next_best and all(lay.gpus >= rec.gpus for lay in a.next_best)


def test_no_work_dropped_or_duplicated(tmp_path, results):
    usage = csv_usage(tmp_path, CLASSES, steps=300, seed=3)
    a = run_advice(usage, results)
    for cls, outs in a.outcomes.items():
        pods = sorted(usage.pods_of(cls).tolist())
        for o in outs:
            if o.bins:
                assert sorted(p for b in o.bins for p in b) == pods, (cls, o.option.mode)
                assert o.work_replayed_s == pytest.approx(o.work_in_s, rel=1e-9)
    assert a.work["notebooks"][0] == pytest.approx(usage.work_s()["notebooks"], rel=1e-9)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pods=st.integers(1, 12), seed=st.integers(0, 10_000), slo=st.floats(1.0, 1.79))
def test_saturating_work_stays_whole(tmp_path_factory, pods, seed, slo):
    """Two pods busy >= 0.9 on one GPU need >= 1.8x its time: below that target nothing is shared."""
    tmp = tmp_path_factory.mktemp("sat")
    usage = csv_usage(tmp, {"train": ("batch", pods)}, steps=120, seed=seed)
    a = run_advice(usage, results_folder(tmp / "r"), slo=slo)
    assert a.recommended is not None
    assert a.recommended.gpus == pods
    assert a.recommended.choice["train"].p95 == pytest.approx(1.0, abs=1e-9)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pods=st.integers(4, 16), seed=st.integers(0, 10_000))
def test_idle_work_packs_until_the_target_binds(tmp_path_factory, pods, seed):
    tmp = tmp_path_factory.mktemp("idle")
    usage = csv_usage(tmp, {"nb": ("interactive", pods)}, steps=240, seed=seed)
    res = results_folder(tmp / "r")
    a = run_advice(usage, res, slo=2.0)
    rec = a.recommended.choice["nb"]
    assert rec.p95 <= 2.0 and rec.gpus < pods
    # every option that packs tighter breaks the target
    for o in a.outcomes["nb"]:
        if o.gpus and o.gpus < rec.gpus:
            assert o.p95 > 2.0, o.option.mode


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda df: df.drop(columns=["busy"]), "lacks column"),
        (lambda df: df.assign(busy=df["busy"] + 1.5), "outside 0-1"),
        (lambda df: df.iloc[:0], "no samples"),
        (lambda df: df.assign(time="yesterday"), "bad time"),
    ],
)
def test_bad_csv_is_a_one_line_error(tmp_path, edit, match):
    path = tmp_path / "u.csv"
    edit(synthetic_trace({"a": ("batch", 2)}, 10)).to_csv(path, index=False)
    with pytest.raises(UserError, match=match) as exc:
        read_usage_csv(path)
    assert "\n" not in str(exc.value)


def test_iso_times_read_as_epoch_seconds(tmp_path):
    df = synthetic_trace({"a": ("batch", 2)}, 10)
    iso = df.assign(time=pd.to_datetime(df["time"], unit="s", utc=True).map(lambda t: t.isoformat()))
    df.to_csv(tmp_path / "e.csv", index=False)
    iso.to_csv(tmp_path / "i.csv", index=False)
    a, b = read_usage_csv(tmp_path / "e.csv"), read_usage_csv(tmp_path / "i.csv")
    assert a.start == b.start and np.array_equal(a.busy, b.busy)


def test_results_of_another_model_are_refused(tmp_path, capsys):
    other = results_folder(tmp_path / "a100", model="A100-40GB")
    synthetic_trace({"a": ("batch", 2)}, 10).to_csv(tmp_path / "u.csv", index=False)
    rc = main(["advise", "--usage", str(tmp_path / "u.csv"), "--results", str(other), "--gpu-model", "H200"])
    err = capsys.readouterr().err
    assert rc == 2 and "A100-40GB" in err and "H200" in err and err.count("\n") == 1


def test_class_that_matches_no_pod_is_an_error(tmp_path, results, capsys):
    synthetic_trace({"a": ("batch", 2)}, 10).to_csv(tmp_path / "u.csv", index=False)
    argv = ["advise", "--usage", str(tmp_path / "u.csv"), "--results", str(results), "--gpu-model", "H200"]
    rc = main([*argv, "--class", "zzz=batch"])
    assert rc == 2 and "'zzz'" in capsys.readouterr().err


def test_cli_writes_the_advice(tmp_path, results):
    synthetic_trace(CLASSES, 240).to_csv(tmp_path / "u.csv", index=False)
    out = tmp_path / "out"
    argv = ["advise", "--usage", str(tmp_path / "u.csv"), "--results", str(results), "--gpu-model", "H200"]
    assert main([*argv, "--out", str(out)]) == 0
    md = (out / "advice.md").read_text()
    assert "Recommended" in md and "sharebench node apply NODE" in md
    assert (out / "advice.png").stat().st_size > 1000 and "data:image/png" in (out / "advice.html").read_text()
    assert "predicted: SM share" in md  # MIG profiles not measured are predicted and labelled so


# ------------------------------------------------------------------ a real Prometheus, backfilled

PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None, reason="prometheus/promtool not installed (apt-get install prometheus)"
)
PROM_CLASSES = {"train": ("batch", 5), "notebooks": ("interactive", 7), "inference": ("serve", 4)}  # 16 GPUs


def openmetrics(df: pd.DataFrame) -> str:
    """dcgm-exporter's per-pod series of the trace, in OpenMetrics (memory in MiB, as FB_USED)."""
    lines = []
    for metric, col, scale in (
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "busy", 1.0),
        ("DCGM_FI_DEV_FB_USED", "memory_bytes", 2**-20),
    ):
        lines.append(f"# TYPE {metric} gauge")
        for (gpu, pod, ns), g in df.groupby(["gpu", "pod", "class"], sort=False):
            labels = f'gpu="0",UUID="{gpu}",Hostname="node-{gpu}",modelName="NVIDIA H200",pod="{pod}",namespace="{ns}"'
            lines.extend(f"{metric}{{{labels}}} {v * scale!r} {int(t)}" for t, v in zip(g["time"], g[col]))
    return "\n".join([*lines, "# EOF", ""])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_prometheus
def test_prometheus_gives_the_same_advice_as_the_csv(tmp_path, results):
    steps = 360
    start = float(int(time.time() // 60 * 60) - (steps + 30) * 60)
    df = synthetic_trace(PROM_CLASSES, steps, start=start, seed=7)
    df["memory_bytes"] = np.where(df["busy"] > 0, df["memory_bytes"] // 2**20 * 2**20, 0)  # whole MiB
    (tmp_path / "om.txt").write_text(openmetrics(df))
    subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(tmp_path / "om.txt"), str(tmp_path / "data")],
        check=True,
        capture_output=True,
    )
    port = free_port()
    (tmp_path / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\n")
    with open(tmp_path / "prometheus.log", "w") as log:
        proc = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=10y",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        window = Window(start, start + (steps - 1) * 60, 60.0)
        deadline = time.time() + 30
        while True:
            try:
                prom = read_prometheus(url, window, "namespace")
                break
            except UserError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        df.to_csv(tmp_path / "u.csv", index=False)
        csv = read_usage_csv(tmp_path / "u.csv")
        assert len(set(prom.gpus)) == 16 and sorted(prom.class_names()) == sorted(PROM_CLASSES)
        order = [prom.pods.index(p) for p in csv.pods]
        np.testing.assert_allclose(prom.busy[order], csv.busy, atol=1e-6)
        a, b = run_advice(csv, results), run_advice(prom, results)
        assert to_json(a)["recommended"] == to_json(b)["recommended"]
        assert to_json(a)["next_best"] == to_json(b)["next_best"]
        with pytest.raises(UserError, match="no DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
            read_prometheus(url, Window(start - 86400 * 3, start - 86400 * 2, 60.0), "namespace")
        with pytest.raises(UserError, match="no label 'team'"):
            read_prometheus(url, window, "team")
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_unreachable_prometheus_is_a_one_line_error():
    with pytest.raises(UserError, match="not reachable"):
        read_prometheus(f"http://127.0.0.1:{free_port()}", Window(0, 600, 60), "namespace")
