"""One replica of a workload beside one time-slice probe process (issue 29; issue 32: one launch path).

The replica is started by the sharing launcher like every replica (an ``exclusive`` cell through
``sharebench.sharing.run_cell``); the probe (``sharebench.telemetry.timeslice_probe``) sets up beside it,
and at the replica's barrier (the cell's ``check_ready``) starts spinning first
(:meth:`ProbeProcesses.spin_first`), so that the replica's timed window opens inside the probe's. Both
layers stay below this one: ``sharing`` and ``telemetry`` know nothing of each other.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from sharebench.devices import resolve_device
from sharebench.kernel import Barrier
from sharebench.modes import BASELINE
from sharebench.probe_settings import DEFAULT_THRESHOLD_US
from sharebench.sharing import FreshLauncher, cell_run, run_cell
from sharebench.telemetry.timeslice_probe import BesideRun, ProbeUnavailable, start_probes, unavailable_reason
from sharebench.workloads import ReplicaJob

START_DELAY_S = 0.05  # the replica's window opens this long after the probe runs


def run_beside_probe(
    job: ReplicaJob,
    folder: Path,
    probe_seconds: float,
    *,
    grid: str = "one",
    threshold_us: float = DEFAULT_THRESHOLD_US,
    neighbour: str = "light",
    setup_timeout_s: float = 900.0,
    python: str = sys.executable,
) -> BesideRun | ProbeUnavailable:
    """Set up one replica of ``job`` and one probe process; start the probe, then the replica's timed
    window while the probe spins (``probe_seconds`` must outlast the window). ``neighbour``: the probe's
    kernel (``timeslice_probe.Neighbour.label``: light, stream:MB, heavy:MB). Never raises for a failed
    replica or probe: a :class:`ProbeUnavailable` says why."""
    bad = unavailable_reason(job.run.device)
    if bad:
        return ProbeUnavailable(bad)
    folder.mkdir(parents=True, exist_ok=True)
    probes = start_probes(
        folder / "probe",
        1,
        probe_seconds,
        device=job.run.device,
        grid=grid,
        threshold_us=threshold_us,
        neighbour=neighbour,
        python=python,
    )
    why: list[str] = []  # the probe's answer at the barrier ('' it spins), once the replica got there

    def probe_first(pids: list[int]) -> str:
        why.append(probes.spin_first(setup_timeout_s))
        return why[-1]

    try:
        run = cell_run(
            BASELINE,
            replace(job, barrier=Barrier()),
            folder,
            device=resolve_device(job.run.device),
            ready_timeout_s=setup_timeout_s,
            start_delay_s=START_DELAY_S,
            check_ready=probe_first,
        )
        (row,) = run_cell(run, FreshLauncher(python))
        traces = probes.finish(probe_seconds + 60.0) if why == [""] else None
    finally:
        probes.stop()
    if why and why[-1]:
        return ProbeUnavailable(why[-1])
    if row["status"] != "ok" or traces is None:
        return ProbeUnavailable(f"the workload beside the probe failed: {row['error'] or row['cell_error']}")
    if isinstance(traces, ProbeUnavailable):
        return traces
    return BesideRun(row, traces[0])
