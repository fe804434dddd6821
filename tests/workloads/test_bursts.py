"""The per-burst driver (sharebench.workloads.bursts): each pattern's schedule on a real clock with real
work (sleeps, a numpy busy loop), the exact schedule on a simulated clock, and the JSON-lines record."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from sharebench.errors import UserError
from sharebench.patterns import BATCH, Pattern, parse_pattern
from sharebench.workloads.bursts import (
    BURSTS,
    COUNT,
    PATTERN,
    SECONDS,
    SEED,
    STOP_FILE,
    Burst,
    LiveRecord,
    burst_line,
    epoch_clock,
    limit_from_env,
    pattern_from_env,
    read_bursts,
    record_bursts,
    run_pattern,
    seed_from_env,
    write_bursts,
)


class SimClock:
    """Simulated time: every reading moves it on by 1 µs (as a real clock does), sleep and work move it on."""

    def __init__(self, t0: float = 1000.0):
        self.t = t0

    def __call__(self) -> float:
        self.t += 1e-6
        return self.t

    def sleep(self, s: float) -> None:
        self.t += max(0.0, s)

    def work(self, seconds_per_unit: float):
        def do(units: int) -> None:
            self.t += units * seconds_per_unit

        return do


def busy(units: int) -> None:
    """Real CPU work: a numpy matrix product per unit."""
    a = np.full((120, 120), 1.0001)
    for _ in range(units):
        a = a @ a / 120.0


def test_batch_runs_back_to_back_on_the_real_clock():
    calls = []
    t_before = time.time()
    out = run_pattern(BATCH, lambda n: (calls.append(n), time.sleep(0.003)), count=5, batch_units=4)
    assert calls == [4] * 5 and [b.i for b in out] == list(range(5))
    assert abs(out[0].arrival - t_before) < 0.05  # epoch seconds
    for prev, b in zip(out, out[1:]):
        assert b.arrival == prev.end and b.start - prev.end < 0.05
    assert all(b.end - b.start >= 0.003 and b.units == 4 and 0 <= b.start - b.arrival < 0.05 for b in out)


def test_interactive_think_times_are_the_seeded_exponential_draws():
    pattern = parse_pattern("interactive:burst=3,think=0.01")
    out = run_pattern(pattern, busy, count=6, seed=(7, 1, 2))
    draws = np.random.default_rng([7, 1, 2]).exponential(0.01, size=6)
    assert 0 <= out[0].start - out[0].arrival < 0.05
    for k, (prev, b) in enumerate(zip(out, out[1:]), start=1):
        assert b.arrival - prev.end == pytest.approx(draws[k], abs=1e-6)  # the k-th draw
        assert 0 <= b.start - b.arrival < 0.05  # the wake-up (a busy shared host; the benchmark measures it idle)
    assert all(b.units == 3 and b.end > b.start for b in out)


def test_interactive_phase_puts_users_out_of_step():
    pattern = Pattern("interactive", units=1, think_s=0.5)
    firsts = []
    for r in range(4):  # four users started at one instant, each with its own seed
        clock = SimClock()
        t0 = clock.t
        out = run_pattern(pattern, clock.work(0.01), count=1, seed=(1, r), clock=clock, sleep=clock.sleep)
        firsts.append(out[0].arrival - t0)
    expected = [np.random.default_rng([1, r]).exponential(0.5) for r in range(4)]
    assert firsts == pytest.approx(expected, abs=1e-4) and len({round(f, 6) for f in firsts}) == 4
    t0 = clock.t
    lockstep = run_pattern(pattern, clock.work(0.01), count=1, seed=3, phase=False, clock=clock, sleep=clock.sleep)
    assert lockstep[0].arrival - t0 < 1e-5


def test_serve_arrivals_are_a_seeded_poisson_process_and_requests_queue():
    clock = SimClock()
    pattern = Pattern("serve", units=2, rate_per_s=100.0)
    # each request takes 2 x 6 ms = 12 ms > the mean gap of 10 ms: the queue builds up
    out = run_pattern(pattern, clock.work(0.006), count=2000, seed=11, clock=clock, sleep=clock.sleep)
    gaps = np.diff([b.arrival for b in out])
    draws = np.random.default_rng(11).exponential(0.01, size=2000)
    np.testing.assert_allclose(gaps, draws[1:], atol=1e-9)
    assert stats.kstest(gaps, "expon", args=(0, 0.01)).pvalue > 0.001
    for prev, b in zip(out, out[1:]):
        assert b.start >= max(b.arrival, prev.end) and b.start - max(b.arrival, prev.end) < 1e-5
    latency = np.array([b.latency_s for b in out])
    assert latency[-100:].mean() > 10 * 0.012  # overloaded: later requests wait for many before them
    assert all(b.units == 2 for b in out)


def test_serve_on_the_real_clock_keeps_its_arrival_times():
    pattern = parse_pattern("serve:rate=200,size=1")
    out = run_pattern(pattern, lambda n: None, duration_s=0.3, seed=5)
    t0 = out[0].arrival - np.random.default_rng(5).exponential(1 / 200)
    assert 20 < len(out) < 120  # Poisson(60)
    assert all(b.arrival < t0 + 0.3 for b in out)
    lateness = np.array([b.start - b.arrival for b in out])
    assert (lateness >= 0).all() and np.median(lateness) < 0.01


def test_duration_stops_new_bursts_and_count_zero_runs_nothing():
    clock = SimClock()
    t0 = clock.t
    out = run_pattern(
        Pattern("interactive", units=1, think_s=0.2), clock.work(0.05), duration_s=10, clock=clock, sleep=clock.sleep
    )
    assert out and all(b.arrival < t0 + 10 for b in out) and out[-1].end > t0 + 9
    assert clock.t >= t0 + 10  # the window is the duration: the user thinks on after the last burst
    assert run_pattern(BATCH, busy, count=0) == []
    with pytest.raises(ValueError, match="exactly one"):
        run_pattern(BATCH, busy)
    with pytest.raises(ValueError, match="exactly one"):
        run_pattern(BATCH, busy, count=1, duration_s=1)


patterns = st.one_of(
    st.just(BATCH),
    st.builds(lambda n, t: Pattern("interactive", units=n, think_s=t), st.integers(1, 5), st.floats(1e-4, 2.0)),
    st.builds(lambda n, r: Pattern("serve", units=n, rate_per_s=r), st.integers(1, 5), st.floats(0.1, 1e4)),
)


@settings(max_examples=60, deadline=None)
@given(patterns, st.integers(0, 2**32), st.floats(1e-5, 0.2), st.integers(0, 40), st.booleans())
def test_every_schedule_is_ordered_and_reproducible(pattern, seed, work_s, count, phase):
    def run():
        clock = SimClock()
        return run_pattern(
            pattern, clock.work(work_s), count=count, seed=seed, phase=phase, clock=clock, sleep=clock.sleep
        )

    out = run()
    assert out == run()  # the same seed, the same schedule
    assert len(out) == count and [b.i for b in out] == list(range(count))
    for prev, b in zip([None, *out], out):
        assert b.arrival <= b.start < b.end and b.units == (pattern.units or 1)
        if prev is not None:
            assert b.start >= prev.end and b.arrival >= prev.arrival


def test_epoch_clock_is_epoch_seconds():
    clock = epoch_clock()
    a, b = clock(), time.time()
    assert abs(a - b) < 0.01 and clock() >= a


# ----------------------------------------------------------------- the record


def test_record_round_trips(tmp_path):
    pattern = parse_pattern("interactive:burst=2,think=0.01")
    out = run_pattern(pattern, busy, count=4, seed=3)
    path = tmp_path / "bursts.jsonl"
    write_bursts(path, out, pattern, [3, 0], unit="batches", replica=0)
    header, back = read_bursts(path)
    assert back == out
    assert header == {
        "kind": "bursts",
        "schema_version": 1,
        "pattern": "interactive:burst=2,think=0.01",
        "seed": [3, 0],
        "unit": "batches",
        "replica": 0,
    }
    assert parse_pattern(header["pattern"]) == pattern


def test_record_follows_the_environment(tmp_path, monkeypatch):
    out = [Burst(0, 1.0, 1.0, 2.0, 1)]
    monkeypatch.delenv(BURSTS, raising=False)
    monkeypatch.delenv(PATTERN, raising=False)
    monkeypatch.delenv(SEED, raising=False)
    assert record_bursts(out, BATCH, 0) is None  # outside a cell: nothing written
    assert pattern_from_env() == BATCH and seed_from_env(4) == 4
    monkeypatch.setenv(BURSTS, str(tmp_path / "b.jsonl"))
    monkeypatch.setenv(PATTERN, "serve:rate=3")
    monkeypatch.setenv(SEED, "12")
    assert record_bursts(out, pattern_from_env(), seed_from_env()) == tmp_path / "b.jsonl"
    header, back = read_bursts(tmp_path / "b.jsonl")
    assert back == out and header["pattern"] == "serve:rate=3,size=1" and header["seed"] == 12
    monkeypatch.setenv(PATTERN, "bursty")
    with pytest.raises(UserError, match="unknown pattern 'bursty'"):
        pattern_from_env()
    monkeypatch.setenv(SEED, "-1")
    with pytest.raises(UserError, match="bad SHAREBENCH_PATTERN_SEED '-1'"):
        seed_from_env()


PROGRAM = """
import time
from sharebench.workloads.bursts import pattern_from_env, record_bursts, run_pattern, seed_from_env
pattern, seed = pattern_from_env(), seed_from_env()
out = run_pattern(pattern, lambda n: time.sleep(0.001 * n), count=5, seed=seed)
print(record_bursts(out, pattern, seed, unit="ms"))
"""


def test_a_program_in_another_process_writes_a_record_the_harness_reads(tmp_path):
    env = {
        BURSTS: str(tmp_path / "b.jsonl"),
        PATTERN: "interactive:burst=2,think=0.005",
        SEED: "9",
        "PATH": "/usr/bin:/bin",
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},  # where sharebench is not installed
    }
    before = time.time()
    proc = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    header, out = read_bursts(tmp_path / "b.jsonl")
    assert header["seed"] == 9 and header["unit"] == "ms" and len(out) == 5
    assert all(before < b.arrival <= b.start < b.end < time.time() for b in out)  # epoch seconds, comparable here
    assert all(b.end - b.start >= 0.002 for b in out)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("", "is empty"),
        ('{"kind": "rows", "schema_version": 1}\n', "is not a burst record (kind 'rows'"),
        ('{"kind": "bursts", "schema_version": 2}\n', "has schema_version 2; this sharebench reads 1..1"),
        ('{"kind": "bursts", "schema_version": 1}\n{"i": 0, "arrival": 1,\n', "line 2: not JSON"),
        ('{"kind": "bursts", "schema_version": 1}\n{"i": 0, "arrival": 1}\n', "line 2: missing start, end, units"),
        (
            '{"kind": "bursts", "schema_version": 1}\n{"i": 0, "arrival": 1, "start": 1, "end": NaN, "units": 1}\n',
            "line 2: end nan is not a finite number",
        ),
        (
            '{"kind": "bursts", "schema_version": 1}\n{"i": 0, "arrival": 1, "start": 3, "end": 2, "units": 1}\n',
            "line 2: end 2 before its arrival or start",
        ),
        ("[1, 2]\n", "line 1: a JSON object is needed"),
    ],
)
def test_bad_records_are_one_line(tmp_path, text, fragment):
    path = tmp_path / "b.jsonl"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        read_bursts(path)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_a_missing_record_is_one_line(tmp_path):
    with pytest.raises(UserError, match="unreadable"):
        read_bursts(tmp_path / "absent.jsonl")


def test_the_live_record_holds_each_burst_as_it_ends_and_a_bad_file_costs_nothing(tmp_path):
    live = tmp_path / "progress.0"
    out = run_pattern(parse_pattern("interactive:burst=1,think=0.001"), lambda n: None, count=7, progress=live)
    reader = LiveRecord(live)
    assert reader.read() == 7 and reader.bursts == out  # the same bursts, to the last digit
    served = run_pattern(parse_pattern("serve:rate=500"), lambda n: None, count=4, progress=live)
    assert reader.read() == 4 and reader.bursts[7:] == served and reader.done == 11  # appended: read on from there
    assert len(run_pattern(BATCH, lambda n: None, count=3, progress=tmp_path)) == 3  # a folder: lines dropped


def test_the_live_record_reader_waits_for_a_torn_line_and_counts_the_earlier_ticks(tmp_path):
    live = tmp_path / "progress.1"
    reader = LiveRecord(live)
    assert reader.read() == 0 and reader.done == 0  # not there yet
    b = Burst(0, 10.0, 10.5, 11.0, 2)
    line = burst_line(b).encode()
    live.write_bytes(b".." + line[:20])  # the earlier form's ticks, then a line still being written
    assert reader.read() == 2 and reader.bursts == [] and reader.done == 2
    with live.open("ab") as fh:
        fh.write(line[20:] + b"not json\n" + b'{"i": 1}\n' + burst_line(Burst(1, 11.0, 11.0, 11.2, 2)).encode())
    assert reader.read() == 2 and reader.bursts == [b, Burst(1, 11.0, 11.0, 11.2, 2)]  # the bad lines skipped
    assert [x.latency_s for x in reader.bursts] == pytest.approx([1.0, 0.2])


def test_a_program_reads_its_window_or_its_cap_and_the_stop_file(tmp_path, monkeypatch):
    stop = tmp_path / "stop"
    monkeypatch.setenv(STOP_FILE, str(stop))
    monkeypatch.setenv(COUNT, "40")
    limit, stopped = limit_from_env({"count": 5})
    assert limit == {"count": 40} and stopped is not None and not stopped()
    monkeypatch.setenv(SECONDS, "6.5")  # an open loop's victim: its window wins over the count
    limit, stopped = limit_from_env({"count": 5})
    stop.write_text("decided\n")
    assert limit == {"duration_s": 6.5} and stopped()
    monkeypatch.setenv(SECONDS, "-1")
    with pytest.raises(UserError, match="bad SHAREBENCH_PATTERN_SECONDS '-1'; allowed: seconds > 0"):
        limit_from_env({})
