"""The time-slice probe: its analysis on synthetic alternations, its one-line refusals, and (marked gpu)
the real probe on an NVIDIA GPU against a process pair whose alternation is known."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharebench.errors import UserError
from sharebench.probe_settings import Neighbour, check_args, parse_neighbour, parse_neighbours
from sharebench.sweep.beside import run_beside_probe
from sharebench.telemetry.timeslice_probe import (
    BesideRun,
    Distribution,
    ProbeTrace,
    ProbeUnavailable,
    TimesliceProbe,
    analyse,
    probe_for_sweep,
    run_probe,
    unavailable_reason,
)
from sharebench.workloads import ReplicaJob, Workload

MS = 1_000_000  # ns


def alternation(processes: int, slice_ns: int, switch_ns: int, cycles: int) -> list[ProbeTrace]:
    """Round-robin traces: process i runs slice i, i + P, ...; every slice is followed by one switch."""
    period = slice_ns + switch_ns
    traces = []
    for i in range(processes):
        starts = [(k * processes + i) * period for k in range(cycles)]
        gaps = tuple((a + slice_ns, b) for a, b in zip(starts, starts[1:]))
        traces.append(ProbeTrace(i, 100 + i, starts[0], starts[-1] + slice_ns, gaps, n_gaps=len(gaps), uuid="GPU-x"))
    return traces


def test_two_processes_slices_switches_and_shares() -> None:
    r = analyse(alternation(2, 2 * MS, MS // 5, 400), grid="one", seconds=1.0)
    assert r.slice_ms.p5 == pytest.approx(2.0) and r.slice_ms.p95 == pytest.approx(2.0)
    assert r.switch_ms.p50 == pytest.approx(0.2) and r.switch_ms.n > 700
    assert r.alternation == 1.0 and r.overlap_ms == 0.0
    assert r.share_sum == pytest.approx(2.0 / 2.2, abs=0.01)
    assert r.shares[0] == pytest.approx(r.shares[1], abs=0.01)
    assert r.uuid == "GPU-x" and r.processes == 2


@settings(max_examples=40, deadline=None)
@given(
    processes=st.integers(2, 6),
    slice_us=st.integers(200, 20_000),
    switch_us=st.integers(1, 1_000),
    cycles=st.integers(20, 60),
)
def test_any_alternation_is_recovered(processes: int, slice_us: int, switch_us: int, cycles: int) -> None:
    r = analyse(alternation(processes, slice_us * 1000, switch_us * 1000, cycles))
    assert r.slice_ms.p50 == pytest.approx(slice_us / 1e3)
    assert r.switch_ms.min == pytest.approx(switch_us / 1e3) and r.switch_ms.max == pytest.approx(switch_us / 1e3)
    assert r.alternation == 1.0
    edge = 2 * processes * (slice_us + switch_us) / 1e3 / r.window_ms  # slices cut at the window's edges
    assert r.share_sum == pytest.approx(slice_us / (slice_us + switch_us), abs=edge)


def test_overlapping_processes_are_not_time_sliced() -> None:
    """Two processes that never leave the GPU (side by side, as under MPS): no switches, overlap = window."""
    a = ProbeTrace(0, 1, 0, 1000 * MS, ())
    b = ProbeTrace(1, 2, 0, 1000 * MS, ())
    r = analyse([a, b])
    assert r.switch_ms.n == 0 and math.isnan(r.switch_ms.p50)
    assert r.overlap_ms == pytest.approx(1000.0) and r.share_sum == pytest.approx(2.0)


def test_slices_and_gaps_within_a_window() -> None:
    t = ProbeTrace(0, 1, 0, 10 * MS, ((2 * MS, 4 * MS), (6 * MS, 8 * MS)))
    assert t.slices() == [(0, 2 * MS), (4 * MS, 6 * MS), (8 * MS, 10 * MS)]
    assert t.slices(3 * MS, 7 * MS) == [(4 * MS, 6 * MS)]
    assert t.gaps_within(3 * MS, 7 * MS) == [(3 * MS, 4 * MS), (6 * MS, 7 * MS)]
    assert ProbeTrace.from_dict({**t.__dict__, "gaps": [[1, 2]], "n_gaps": 5}).overflowed


def test_distribution_percentiles() -> None:
    d = Distribution.of([float(x) for x in range(1, 101)])
    assert (d.n, d.min, d.max, d.p50) == (100, 1.0, 100.0, 50.5)
    assert Distribution.of([]).n == 0 and math.isnan(Distribution.of([]).p50)


def test_non_cuda_devices_get_one_line() -> None:
    for device in ("cpu", "opencl:0.0"):
        r = run_probe(2, 1.0, device=device)
        assert isinstance(r, ProbeUnavailable) and r.status == "unavailable"
        assert device in r.reason and "\n" not in r.reason
    assert probe_for_sweep("cpu")["timeslice_probe"] == [
        {"processes": 2, "status": "unavailable", "reason": run_probe(2, 1.0, device="cpu").reason}  # type: ignore[union-attr]
    ]


def test_mps_daemon_blocks_the_probe(tmp_path: Path) -> None:
    (tmp_path / "control").touch()
    reason = unavailable_reason("cuda:0", env={"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)})
    assert reason and "MPS" in reason and str(tmp_path) in reason
    assert unavailable_reason("cuda:0", env={"CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "none")}) != reason


def test_beside_needs_a_cuda_device(tmp_path: Path) -> None:
    r = run_beside_probe(ReplicaJob.of(Workload(device="cpu"), particles=10, turns=1), tmp_path, 1.0)
    assert isinstance(r, ProbeUnavailable) and "cpu" in r.reason


@pytest.mark.parametrize(
    "args, word",
    [
        ((0, 1.0, "one", 20.0), "count"),
        ((2, 0.0, "one", 20.0), "duration"),
        ((2, 1.0, "half", 20.0), "grid"),
        ((2, 1.0, "one", 0.0), "threshold"),
    ],
)
def test_bad_arguments(args: tuple, word: str) -> None:
    msg = check_args(*args)
    assert msg and word in msg
    r = run_probe(*args[:2], grid=args[2], threshold_us=args[3])
    assert isinstance(r, ProbeUnavailable) and r.reason == msg


def test_beside_window_maps_host_time_to_the_gpu_clock() -> None:
    t = ProbeTrace(0, 1, 5_000 * MS, 9_000 * MS, (), offset_ns=4_000 * MS)
    run = BesideRun({"track_start": 1.5, "track_end": 4.5, "track_s": 3.0}, t)
    assert run.window_ns() == (5_500 * MS, 8_500 * MS) and run.covered()
    assert not BesideRun({"track_start": 0.5, "track_end": 4.5}, t).covered()


@pytest.mark.parametrize(
    ("text", "kind", "mb"),
    [("light", "light", 0), ("stream", "stream", 128), ("stream:32", "stream", 32), (" HEAVY:4096 ", "heavy", 4096)],
)
def test_neighbours_parse(text: str, kind: str, mb: int) -> None:
    n = parse_neighbour(text)
    assert (n.kind, n.mb) == (kind, mb)
    assert parse_neighbour(n.label) == n


@pytest.mark.parametrize("text", ["", "bogus", "light:4", "stream:0", "heavy:x", "heavy:65537", "stream:-1"])
def test_bad_neighbours_are_one_line(text: str) -> None:
    with pytest.raises(UserError) as e:
        parse_neighbour(text)
    msg = str(e.value)
    assert repr(text) in msg and "light, stream[:MB] or heavy[:MB]" in msg and "\n" not in msg
    r = run_probe(2, 1.0, device="cuda:0", neighbour=text)
    assert isinstance(r, ProbeUnavailable)


def test_neighbour_lists_keep_order_without_repeats() -> None:
    assert parse_neighbours("heavy,light,heavy:128,stream:32") == [
        Neighbour("heavy", 128),
        Neighbour(),
        Neighbour("stream", 32),
    ]


def test_a_heavy_pair_reports_its_bytes_per_second_on_the_gpu() -> None:
    traces = alternation(2, 2 * MS, MS // 5, 50)
    heavy = [ProbeTrace(**{**t.__dict__, "neighbour": "heavy:64", "regs": 119, "bytes": 10**9}) for t in traces]
    r = analyse(heavy)
    on_gpu_s = sum(b - a for t in heavy for a, b in t.slices()) / 1e9
    assert r.neighbour == "heavy:64" and r.bytes_per_s == pytest.approx(2e9 / on_gpu_s)
    assert "heavy:64 probe processes" in r.summary() and "TB/s" in r.summary()
    assert math.isnan(analyse(traces).bytes_per_s) and analyse(traces).neighbour == "light"
    back = ProbeTrace.from_dict({**heavy[0].__dict__, "gaps": [list(g) for g in heavy[0].gaps]})
    assert back == heavy[0]


# --- on an NVIDIA GPU ---------------------------------------------------------------------------------------


def probe_or_skip(processes: int, seconds: float, grid: str = "one") -> TimesliceProbe:
    r = run_probe(processes, seconds, grid=grid)
    if isinstance(r, ProbeUnavailable) and ("CuPy" in r.reason or "MPS" in r.reason):
        pytest.skip(r.reason)
    assert isinstance(r, TimesliceProbe), r
    return r


@pytest.mark.gpu
def test_one_probe_alone_keeps_the_gpu() -> None:
    """Alone, the probe is never switched out: one slice the length of its run, share 1."""
    r = probe_or_skip(1, 1.0)
    assert r.shares[0] > 0.99 and r.uuid.startswith("GPU-")
    assert r.window_ms == pytest.approx(1000.0, rel=0.01)


@pytest.mark.gpu
@pytest.mark.parametrize("grid", ["one", "full"])
def test_a_process_pair_alternates(grid: str) -> None:
    """Two probes under the default time-slicing: strictly alternating, non-overlapping slices of a few
    ms, a switch between them well under a slice, shares that add up to a little under 1."""
    r = probe_or_skip(2, 2.0, grid)
    assert r.alternation > 0.95, r.summary()
    assert r.overlap_ms < 0.01 * r.window_ms, r.summary()
    assert 0.3 < r.slice_ms.p50 < 50.0 and r.slice_ms.n > 20, r.summary()
    assert 0.0 < r.switch_ms.p50 < r.slice_ms.p50, r.summary()
    assert 0.75 < r.share_sum <= 1.0 and min(r.shares) > 0.3, r.summary()
    assert not any(t.overflowed for t in r.traces)


@pytest.mark.gpu
def test_a_heavy_neighbour_pair_alternates() -> None:
    """Two heavy neighbours (a full register file, shared memory, 64 MiB streamed): they alternate in
    slices like the light probe's, record no false gaps, and fill the registers they were built for."""
    light = probe_or_skip(2, 1.0)
    r = run_probe(2, 1.0, neighbour="heavy:64")
    assert isinstance(r, TimesliceProbe), r
    assert r.neighbour == "heavy:64" and r.alternation > 0.95, r.summary()
    assert 0.3 < r.slice_ms.p50 < 50.0 and r.slice_ms.n > 20, r.summary()
    assert 0.0 < r.switch_ms.p50 < r.slice_ms.p50, f"{r.summary()}; light: {light.summary()}"
    assert all(t.regs >= 96 and t.threads == 512 and t.smem_bytes > 0 for t in r.traces), r.traces[0]
    assert r.bytes_per_s > 1e11, r.summary()  # over 100 GB/s while on the GPU


@pytest.mark.gpu
def test_simpletrack_beside_a_heavy_neighbour(tmp_path: Path) -> None:
    """One Simpletrack replica beside a heavy neighbour: the neighbour covers its window, which holds
    switch-outs, and its progress inside its own slices is at most about its rate alone."""
    if unavailable_reason("cuda:0"):
        pytest.skip(unavailable_reason("cuda:0") or "")
    job = ReplicaJob.of(Workload(device="cuda:0"), particles=100_000, turns=20)
    r = run_beside_probe(job, tmp_path, 8.0, neighbour="heavy:64")
    assert isinstance(r, BesideRun), r
    assert r.covered() and r.trace.neighbour == "heavy:64"
    lo, hi = r.window_ns()
    gaps = r.trace.gaps_within(lo, hi)
    assert len(gaps) >= 2, (r.record["track_s"], len(gaps))
