"""One replica beside the time-slice probe: started by the sharing launcher (issue 32), the probe's half of
the barrier first. The probe itself needs CUDA; here a stand-in probe (same interface as
``ProbeProcesses``) records when it was asked to spin, and a real Simpletrack replica runs on the CPU."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sharebench.sweep import beside
from sharebench.telemetry.timeslice_probe import BesideRun, ProbeTrace, ProbeUnavailable
from sharebench.workloads import ReplicaJob, Workload

pytestmark = pytest.mark.slow  # a real replica process


@dataclass
class StandIn:
    """What ``start_probes`` returns, without CUDA: it 'spins' from :meth:`spin_first` on."""

    refuse: str = ""
    spun_at: list[float] = field(default_factory=list)
    stopped: bool = False

    def spin_first(self, setup_timeout_s: float) -> str:
        self.spun_at.append(time.time())
        return self.refuse

    def finish(self, timeout_s: float) -> list[ProbeTrace]:
        t0 = int(self.spun_at[0] * 1e9)
        return [ProbeTrace(0, 1, t0, t0 + 10**11, ())]

    def stop(self) -> None:
        self.stopped = True


def run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, lattice: Path, probe: StandIn) -> BesideRun | ProbeUnavailable:
    monkeypatch.setattr(beside, "unavailable_reason", lambda device: None)
    monkeypatch.setattr(beside, "start_probes", lambda *a, **k: probe)
    job = ReplicaJob.of(Workload(device="cpu", lattice=str(lattice)), particles=200, turns=2, start_at=1.0)
    return beside.run_beside_probe(job, tmp_path / "beside", 5.0, setup_timeout_s=120)


def test_the_replica_starts_through_the_launcher_after_the_probe_spins(monkeypatch, tmp_path, lattice):
    probe = StandIn()
    r = run(monkeypatch, tmp_path, lattice, probe)
    assert isinstance(r, BesideRun), r
    assert probe.stopped and len(probe.spun_at) == 1
    assert r.record["track_start"] >= probe.spun_at[0] and r.record["status"] == "ok"
    assert r.record["particles"] == 200 and r.covered()
    # the launcher's own files: the cell's job, its record and the replica's log (no third launch path)
    assert {"config.0.json", "record.0.json", "replica.0.log"} <= {p.name for p in (tmp_path / "beside").iterdir()}


def test_a_probe_that_cannot_spin_stops_the_replica_and_says_why(monkeypatch, tmp_path, lattice):
    probe = StandIn(refuse="the probe process failed: no CUDA context")
    r = run(monkeypatch, tmp_path, lattice, probe)
    assert r == ProbeUnavailable("the probe process failed: no CUDA context")
    assert probe.stopped and not (tmp_path / "beside" / "start").exists()
