"""Issue 14: every API call has a connect and read timeout, 429/5xx are retried with backoff while
the deadline allows, a failed apply names the restore to run, and waiting prints a line only when
the state changes. Against the simulated API server (tests/support/k8s_sim.py)."""

from __future__ import annotations

import time

import pytest

from sharebench.node import NodeError, ReconfigureOptions, make_api_client, reconfigure, restore
from sharebench.node import client as node_client
from support.k8s_sim import SIM_WAIT_S, SimCluster

NODE = "gpu-node-1"


@pytest.fixture
def sim(tmp_path):
    with SimCluster(tmp_path) as cluster:
        cluster.add_gpu_node(NODE, "H200", gpus=2)
        yield cluster


def apply(sim, mode, timeout_s=SIM_WAIT_S, progress=None):
    return reconfigure(
        NODE,
        mode,
        ReconfigureOptions(timeout_s=timeout_s, poll_s=0.01),
        api_client=make_api_client(sim.kubeconfig),
        progress=progress,
    )


@pytest.mark.parametrize("status", [429, 500, 503])
def test_transient_errors_while_waiting_are_retried(sim, status, monkeypatch):
    monkeypatch.setattr(node_client, "BACKOFF_S", (0.01, 0.02, 0.05))
    sim.fail_next("get", "nodes", status=status, times=3)
    sim.fail_next("list", "pods", status=status, times=2)
    res = apply(sim, "timeslice:2")
    assert res["resources"] == {"nvidia.com/gpu": 4}
    assert all(f[3] == 0 for f in sim.failures)  # every injected failure was met, and survived


def test_lasting_5xx_fails_with_the_restore_command(sim):
    apply(sim, "mps:2")
    sim.fail_next("update", "configmaps", status=502, times=10_000)
    t0 = time.monotonic()
    with pytest.raises(NodeError) as exc:
        apply(sim, "mps:3", timeout_s=1.0)  # a new entry: an update
    assert time.monotonic() - t0 < 5
    msg = str(exc.value)
    assert "HTTP 502" in msg and "attempts" in msg and "\n" not in msg
    assert msg.endswith(f"run 'sharebench node restore {NODE}' to put it back as it was")
    sim.failures.clear()
    assert restore(NODE, api_client=make_api_client(sim.kubeconfig), timeout_s=SIM_WAIT_S, poll_s=0.01)["restored"]


def test_frozen_api_server_ends_near_the_deadline(sim, monkeypatch):
    monkeypatch.setattr(node_client, "READ_TIMEOUT_S", 0.4)
    monkeypatch.setattr(node_client, "CONNECT_TIMEOUT_S", 0.4)
    sim.freeze()
    t0 = time.monotonic()
    with pytest.raises(
        NodeError,
        match=r"get nodes: no answer from the Kubernetes API at http://127\.0\.0\.1:\d+ "
        r"within 0\.4 s \(connect\) / 0\.4 s \(read\)",
    ):
        apply(sim, "timeslice:2", timeout_s=1.5)
    elapsed = time.monotonic() - t0
    sim.thaw()
    assert 1.0 < elapsed < 1.5 + 0.4 + 4.0 + 1.0  # deadline + one read timeout + at most one backoff


def test_frozen_api_server_mid_wait_names_the_restore(sim, monkeypatch):
    monkeypatch.setattr(node_client, "READ_TIMEOUT_S", 0.3)
    sim.pause_operator()  # the node never advertises: apply waits, then the API freezes
    lines = []

    def progress(line):
        lines.append(line)
        if "waiting for" in line:
            sim.freeze()

    with pytest.raises(NodeError, match=rf"no answer.*run 'sharebench node restore {NODE}'"):
        apply(sim, "timeslice:2", timeout_s=1.0, progress=progress)
    sim.thaw()


def test_waiting_prints_a_line_only_when_the_state_changes(sim):
    sim.pause_operator()
    lines = []
    with pytest.raises(NodeError, match="timed out"):
        apply(sim, "timeslice:2", timeout_s=0.6, progress=lines.append)
    waiting = [ln for ln in lines if "waiting for nvidia.com/gpu=4" in ln]
    assert len(waiting) == 1, lines  # ~60 polls of an unchanged node: one line


def test_dry_run_prints_the_changes_and_changes_nothing(sim, capsys):
    from sharebench.cli import main

    before = [r for r in sim.requests if r[0] != "GET"]
    code = main(["node", "apply", NODE, "timeslice:3", "--dry-run", "--kubeconfig", str(sim.kubeconfig)])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert "dry_run: True" in out
    assert "entry: sharebench-timeslice-3: add" in out
    assert "label_changes: nvidia.com/device-plugin.config=(absent) -> sharebench-timeslice-3" in out
    assert "restarts_device_plugin: True" in out
    assert any(line.startswith("lease: taken by sharebench-cli@") for line in out)
    assert [r for r in sim.requests if r[0] != "GET"] == before  # nothing written
    apply(sim, "timeslice:2")
    code = main(
        ["node", "apply", NODE, "mig:1g", "--dry-run", "--holder", "run-b", "--kubeconfig", str(sim.kubeconfig)]
    )
    out = capsys.readouterr().out.splitlines()
    assert "entry: sharebench-exclusive: unchanged" in out and "restarts_device_plugin: False" in out
    assert (
        "label_changes: nvidia.com/device-plugin.config=sharebench-timeslice-2 -> sharebench-exclusive, "
        "nvidia.com/mig.config=all-disabled -> all-1g.18gb"
    ) in out
    assert any(line.startswith("lease: held by sharebench-cli@") and line.endswith(": refused") for line in out)
