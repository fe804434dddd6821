"""Telemetry samplers: the real psutil sampler, NVML behind its real interface, the summary arithmetic."""

from __future__ import annotations

import csv
import resource
import subprocess
import sys
import time

import psutil
import pytest
from numpy.testing import assert_allclose

from sharebench.devices.nvml import normalise_uuid
from sharebench.errors import UserError
from sharebench.telemetry import SUMMARY_COLUMNS, make_sampler, nvml_status, summarize

CPU_DEVICE = {"kind": "cpu", "backend": "cpu", "name": "host CPU", "uuid": None}
GPU_DEVICE = {"kind": "gpu", "backend": "cuda", "name": "NVIDIA H200", "uuid": None, "spec": "cuda:0"}
NVML_OK, NVML_REASON = nvml_status()

BUSY = "import time\nt = time.time() + {s}\nwhile time.time() < t: pass\n"


def _read_csv(path):
    with open(path, newline="") as fh:
        return [{k: (float(v) if v != "" else None) for k, v in row.items()} for row in csv.DictReader(fh)]


def test_psutil_sampler_records_a_busy_core(tmp_path):
    """One process spinning for 1.2 s on a 2+ core host: about one core busy, ~10 samples/s."""
    out = tmp_path / "telemetry.csv"
    sampler = make_sampler(CPU_DEVICE, interval_s=0.1, out_path=out).start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", BUSY.format(s=1.2)], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = sampler.stop()
    child_cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)

    assert set(summary) == set(SUMMARY_COLUMNS)
    assert summary["tel_source"] == "psutil"
    assert summary["tel_raw_file"] == str(out)
    rows = _read_csv(out)
    assert len(rows) == summary["tel_samples"]
    # start + ~12 samples at 0.1 s + the stop sample; a niced sampler on a loaded host may lag
    assert 6 <= summary["tel_samples"] <= 20, summary["tel_samples"]
    assert_allclose(summary["tel_duration_s"], rows[-1]["t_epoch_s"] - rows[0]["t_epoch_s"])
    # the summary is exactly what the raw samples give
    again = summarize(rows, {"source": "psutil", "interval_s": 0.1, "raw_file": str(out)})
    for col in ("tel_cpu_util_pct_mean", "tel_cpu_busy_cores_mean", "tel_host_mem_used_bytes_max"):
        assert_allclose(summary[col], again[col], rtol=1e-12)
    assert summary["tel_cpu_busy_cores_mean"] > 0.6, summary
    # the owner's (this process's) CPU: integrated over the samples it is the child's CPU time
    # (exact whatever else loads the host), plus a little of pytest's own
    t = [r["t_epoch_s"] for r in rows]
    used = sum(r["proc_busy_cores"] * (t1 - t0) for r, t0, t1 in zip(rows[1:], t, t[1:]))
    assert used == pytest.approx(child_cpu_s, abs=0.15 + 0.1 * child_cpu_s), (used, child_cpu_s)
    assert_allclose(summary["tel_proc_busy_cores_mean"], again["tel_proc_busy_cores_mean"], rtol=1e-12)
    cores = psutil.cpu_count()
    assert summary["tel_cpu_busy_cores_mean"] <= cores + 1e-9
    assert [c for c in rows[0] if c.startswith("cpu") and c.endswith("_util_pct") and c[3:-9].isdigit()] == [
        f"cpu{i}_util_pct" for i in range(cores)
    ]
    # no GPU columns were invented
    assert summary["tel_gpu_util_pct_mean"] is None and summary["tel_energy_j"] is None


def test_sampler_costs_the_replicas_almost_nothing():
    """The sampling process uses < 10% of one core at 100 ms (it also runs at nice +10)."""
    sampler = make_sampler(CPU_DEVICE, interval_s=0.1).start()
    child = psutil.Process(sampler.process.pid)
    assert child.nice() >= 10
    t0, c0 = time.monotonic(), sum(child.cpu_times()[:2])
    time.sleep(1.0)
    used = sum(child.cpu_times()[:2]) - c0
    wall = time.monotonic() - t0
    summary = sampler.stop()
    assert summary["tel_source"] == "psutil"
    assert used / wall < 0.10, f"sampler used {used:.3f} s CPU in {wall:.2f} s"


@pytest.mark.skipif(NVML_OK, reason=f"NVML works here ({NVML_REASON}): the absent-library path cannot run")
def test_gpu_without_nvml_falls_back_with_the_stated_reason(tmp_path):
    summary = make_sampler(GPU_DEVICE, interval_s=0.1, out_path=tmp_path / "t.csv").start().stop()
    assert summary["tel_source"] == "psutil"  # host CPU still sampled
    assert NVML_REASON.startswith("NVML unavailable: ")
    assert f"GPU telemetry not recorded: {NVML_REASON}" in summary["tel_note"]
    for col in (
        "tel_gpu_util_pct_mean",
        "tel_sm_clock_mhz_mean",
        "tel_power_w_mean",
        "tel_energy_j",
        "tel_mem_used_bytes_max",
        "tel_device_uuid",
    ):
        assert summary[col] is None, col
    header = (tmp_path / "t.csv").read_text().splitlines()[0].split(",")
    assert not any(c.startswith(("gpu_", "sm_", "power", "energy")) for c in header)


@pytest.mark.gpu
def test_nvml_sampler_on_a_real_gpu(tmp_path):
    sampler = make_sampler(GPU_DEVICE, interval_s=0.1, out_path=tmp_path / "t.csv").start()
    time.sleep(1.0)
    summary = sampler.stop()
    assert summary["tel_source"] == "nvml"
    assert summary["tel_device_uuid"].startswith("GPU-")
    assert summary["tel_sm_clock_mhz_mean"] > 0
    assert summary["tel_mem_used_bytes_max"] >= 0
    if summary["tel_power_w_mean"] is not None:
        assert summary["tel_energy_j"] > 0
    if not summary["tel_mig_instances"]:
        assert 0 <= summary["tel_gpu_util_pct_mean"] <= 100


def test_a_dead_sampler_says_so_and_does_not_raise():
    sampler = make_sampler(CPU_DEVICE, interval_s=0.1).start()
    sampler.process.kill()
    sampler.process.wait()
    summary = sampler.stop()
    assert summary["tel_source"] == "none"
    assert summary["tel_note"].startswith("telemetry sampler failed: ")
    assert set(summary) == set(SUMMARY_COLUMNS)


@pytest.mark.parametrize("interval", [0, -1, 0.001, "fast"])
def test_bad_interval_is_a_user_error(interval):
    with pytest.raises(UserError, match=r"telemetry interval .* out of range; allowed: 0.01 .. 3600 s"):
        make_sampler(CPU_DEVICE, interval_s=interval)


def _s(t, **kw):
    return {"t_epoch_s": t, **kw}


SUMMARY_CASES = {
    "energy from the counter": (
        [
            _s(0.0, power_w=100.0, energy_mj=5000.0),
            _s(0.5, power_w=300.0, energy_mj=5100.0),
            _s(1.0, power_w=200.0, energy_mj=5250.0),
        ],
        {
            "tel_energy_j": 0.25,
            "tel_energy_source": "nvml_counter",
            "tel_power_w_mean": 200.0,
            "tel_power_w_max": 300.0,
            "tel_duration_s": 1.0,
        },
    ),
    # no counter: trapezoids 0.5*(100+300)/2 + 1.5*(300+200)/2 = 100 + 375
    "energy from power": (
        [_s(0.0, power_w=100.0), _s(0.5, power_w=300.0), _s(2.0, power_w=200.0)],
        {"tel_energy_j": 475.0, "tel_energy_source": "power_integral", "tel_duration_s": 2.0},
    ),
    # MIG: per-instance GPM SM activity averaged over instances and time; a missing read is skipped
    "mig instances": (
        [
            _s(0.0, mig1_sm_active_pct=80.0, mig2_sm_active_pct=None, sm_clock_mhz=1980.0),
            _s(0.1, mig1_sm_active_pct=90.0, mig2_sm_active_pct=40.0, sm_clock_mhz=1500.0),
        ],
        {
            "tel_sm_active_pct_mean": 70.0,
            "tel_sm_clock_mhz_mean": 1740.0,
            "tel_sm_clock_mhz_min": 1500.0,
            "tel_energy_j": None,
        },
    ),
    # MIG without a whole-GPU memory reading: the largest sum over the instances
    "mig memory": (
        [
            _s(0.0, mig1_mem_used_bytes=100.0, mig2_mem_used_bytes=50.0),
            _s(0.1, mig1_mem_used_bytes=120.0, mig2_mem_used_bytes=None),
            _s(0.2, mig1_mem_used_bytes=90.0, mig2_mem_used_bytes=70.0),
        ],
        {"tel_mem_used_bytes_max": 160.0},
    ),
}


@pytest.mark.parametrize("samples,expected", SUMMARY_CASES.values(), ids=SUMMARY_CASES.keys())
def test_summary_arithmetic(samples, expected):
    got = summarize(samples, {"source": "nvml", "interval_s": 0.1})
    for key, want in expected.items():
        if want is None or isinstance(want, str):
            assert got[key] == want, key
        else:
            assert_allclose(got[key], want, rtol=1e-12, err_msg=key)


@pytest.mark.parametrize(
    "raw,want",
    [
        ("GPU-8c1b3e5a-0f0e-4b7e-9a55-3c5f0f1e2d3c", "GPU-8c1b3e5a-0f0e-4b7e-9a55-3c5f0f1e2d3c"),
        ("MIG-4a2f0b1c-aaaa-bbbb-cccc-0123456789ab", "MIG-4a2f0b1c-aaaa-bbbb-cccc-0123456789ab"),
        ("8C1B3E5A0F0E4B7E9A553C5F0F1E2D3C", "GPU-8c1b3e5a-0f0e-4b7e-9a55-3c5f0f1e2d3c"),
        (b"GPU-8c1b3e5a-0f0e-4b7e-9a55-3c5f0f1e2d3c", "GPU-8c1b3e5a-0f0e-4b7e-9a55-3c5f0f1e2d3c"),
        ("", None),
        (None, None),
    ],
)
def test_uuid_spelling(raw, want):
    assert normalise_uuid(raw) == want


def test_sampler_takes_the_kernels_device_info(context):
    dev = context
    summary = make_sampler(dev, interval_s=0.05).start().stop()
    if dev.kind == "gpu":  # an NVIDIA GPU: NVML's name for it
        assert summary["tel_source"] == "nvml" and summary["tel_device_uuid"]
    else:
        assert summary["tel_source"] == "psutil" and summary["tel_device_name"] == dev.name
    assert summary["tel_samples"] >= 2


def test_ctrl_c_to_the_group_does_not_kill_the_sampler():
    """SIGINT (Ctrl-C reaches the whole process group) leaves the sampler running; stop() still
    returns a real summary, so the interrupted cell keeps its telemetry."""
    import signal

    sampler = make_sampler(CPU_DEVICE, interval_s=0.1).start()
    sampler.process.send_signal(signal.SIGINT)
    time.sleep(0.3)
    assert sampler.process.poll() is None
    summary = sampler.stop()
    assert summary["tel_source"] == "psutil" and summary["tel_samples"] >= 3


def test_the_sampler_ends_when_the_sweep_dies():
    """The sweep process is SIGKILLed: the sampler sees EOF on its stdin and exits (no orphan)."""
    code = (
        "import sys, time\nfrom sharebench.telemetry import make_sampler\n"
        "s = make_sampler({'kind': 'cpu'}, interval_s=0.1).start()\n"
        "print(s.process.pid, flush=True)\ntime.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        parent.kill()
        parent.wait(timeout=10)
        gone, alive = psutil.wait_procs([child], timeout=5)
        assert not alive, "sampler still running after its sweep died"
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.stdout.close()


def test_a_paused_sampler_keeps_its_process_and_samples_each_window_apart(tmp_path):
    """pause / resume: one process for several cells, each window its own raw file and summary, nothing
    sampled while paused; close ends it."""
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    sampler = make_sampler(CPU_DEVICE, interval_s=0.05, out_path=first).start()
    pid = sampler.process.pid
    time.sleep(0.5)
    s1 = sampler.pause()
    paused_at = time.time()
    time.sleep(0.6)  # paused: no samples
    assert sampler.resume(second) is sampler and sampler.process.pid == pid
    resumed_at = time.time()
    subprocess.run([sys.executable, "-c", BUSY.format(s=0.6)], check=True)
    s2 = sampler.pause()
    sampler.close()
    assert sampler.process.poll() is not None
    rows1, rows2 = _read_csv(first), _read_csv(second)
    assert s1["tel_raw_file"] == str(first) and s2["tel_raw_file"] == str(second)
    assert s1["tel_samples"] == len(rows1) >= 5 and s2["tel_samples"] == len(rows2) >= 5
    assert rows1[-1]["t_epoch_s"] <= paused_at and rows2[0]["t_epoch_s"] <= resumed_at
    assert rows2[0]["t_epoch_s"] > paused_at + 0.5  # the pause left no sample behind
    for summary, rows in ((s1, rows1), (s2, rows2)):  # each window summarised from its own samples only
        own = [r["cpu_busy_cores"] for r in rows if r["cpu_busy_cores"] is not None]
        assert summary["tel_cpu_busy_cores_mean"] == pytest.approx(sum(own) / len(own))
    # (not s2 > s1: the host-wide busy cores of a loaded 2-core machine saturate in both windows)


def test_a_sampler_that_died_while_paused_is_started_again(tmp_path):
    sampler = make_sampler(CPU_DEVICE, interval_s=0.1).start()
    sampler.pause()
    sampler.process.kill()
    sampler.process.wait()
    assert sampler.resume(tmp_path / "t.csv").process.poll() is None
    assert sampler.stop()["tel_source"] == "psutil"
