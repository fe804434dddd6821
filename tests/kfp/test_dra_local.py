"""Placement 'dra' end to end: the real sweep pipeline through kfp.local against the simulated API server
and DRA driver (support/k8s_sim.py, support/dra_sim.py), the official kubernetes client in every task.

Each cell's ResourceClaim is created before its replicas (schedule_start), carries the mode's GpuConfig
(the interval included), and is deleted once the cell's rows are in (check_cell); a failed sweep's
claims are deleted by the exit task (restore_node). kfp.local makes no pods, so the simulated driver
allocates at once (``immediate``) instead of when a pod references the claim.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("kfp", reason="kfp not installed (pip install -e '.[kfp]')")

from kfp import local

from sharebench.results import load_results
from support.contexts import cpu_opencl_spec
from support.dra_sim import SimDraDriver
from support.k8s_sim import SimCluster

pytestmark = pytest.mark.slow  # two kfp.local sweeps: 174 s here, 2 shared cores under load (2026-12-03)


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    with SimCluster(tmp_path, delay_s=0.01) as sim:
        SimDraDriver(sim, node="gpu-node-a", gpus=1, immediate=True)
        monkeypatch.setenv("KUBECONFIG", str(sim.kubeconfig))  # every kfp.local task reaches the sim
        yield sim


def claims_in(sim) -> list[str]:
    return sorted(name for (r, _, name) in sim.objects if r == "resourceclaims")


def run_sweep(root: Path, lattice: Path, **kw):
    from sharebench.pipelines.sweep_pipeline import sweep_pipeline

    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root))
    args = dict(
        node_name="",
        gpu_model="H200",
        modes=["exclusive", "timeslice:2/long"],
        particle_counts=[300],
        repeats=1,
        warmup_repeats=0,
        turns=2,
        placement="dra",
        workload={"lattice": str(lattice), "device": cpu_opencl_spec()},
        start_delay_s=8.0,
    )
    sweep_pipeline(**{**args, **kw})


def test_dra_sweep_claims_each_cell_and_leaves_no_claim(cluster, tmp_path, lattice):
    root = tmp_path / "root"
    run_sweep(root, lattice)
    # one claim per cell (exclusive, timeslice:2/long), each allocated one GPU with its sharing config
    assert len(cluster.dra.created) == 2
    shared = [a.sharing for a in cluster.dra.applied]
    assert shared == [None, {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Long"}}]
    assert cluster.dra.timeslice["gpu-0"] == 3
    assert cluster.dra.most_at_once == 1  # check_cell deleted each cell's claim before the next
    assert claims_in(cluster) == []
    (run,) = root.glob("sharebench-sweep-*")
    (csv,) = run.rglob("results.csv")
    df = load_results(csv.parent)
    assert sorted(df["mode"].unique()) == ["exclusive", "timeslice:2/long"]
    assert set(df["status"]) == {"ok"}


def test_dra_sweep_failure_leaves_no_claim(cluster, tmp_path, lattice):
    with pytest.raises(RuntimeError):
        run_sweep(
            tmp_path / "root",
            lattice,
            modes=["timeslice:2/short"],
            workload={"lattice": str(lattice), "device": "cuda:7"},
        )  # no such device
    assert len(cluster.dra.created) == 1  # the cell's claim was made ...
    assert claims_in(cluster) == []  # ... and deleted by the exit task
