"""The sampler: a separate process that reads NVML / psutil at a fixed interval.

Why a process and not a thread: the sweep's own process runs the start barrier,
the progress bar and the CSV writer in Python; a sampling thread there would share
its GIL, so its sampling instants would jitter with the sweep's work and a slow or
hanging NVML call would stall the sweep. A separate process has its own
interpreter, runs at a lower priority (``nice`` +10) so that on a CPU run it yields
to the replicas, and if the driver library misbehaves only the sampler dies (the
cell's summary then says so). It is started with ``python -m`` (not
multiprocessing's spawn, which re-imports the caller's ``__main__``); it talks
through its stdin (a line or EOF = stop, so it also ends when the sweep dies; ``pause`` and
``resume`` keep it from one cell to the next) and stdout (one JSON line when a window is ready, one
with its summary at its end).

Run by hand: ``python -m sharebench.telemetry.sampler '{"device": {...}, "interval_s": 0.1,
"out_path": "t.csv"}'`` then press Enter.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sharebench import processes
from sharebench.devices import DeviceInfo, as_device
from sharebench.devices.host import cpu_model
from sharebench.errors import UserError
from sharebench.telemetry.cpu import CpuReader, CpuUnavailable
from sharebench.telemetry.gpu_readings import NvmlReader, NvmlUnavailable

# Flat per-cell summary columns (always all present; None = not measured here).
SUMMARY_COLUMNS = (
    "tel_source",  # "nvml" (GPU + host CPU), "psutil" (host CPU only), "none"
    "tel_note",  # why something is missing or how to read it; "" when nothing to say
    "tel_interval_s",  # requested sampling interval
    "tel_samples",  # number of samples taken
    "tel_duration_s",  # first to last sample
    "tel_device_name",  # GPU name (NVML) or CPU model
    "tel_device_uuid",  # physical GPU UUID (NVML)
    "tel_mig_instances",  # MIG instances on the GPU (0 = MIG off)
    "tel_gpu_util_pct_mean",  # NVML utilization.gpu, %
    "tel_gpu_util_pct_max",
    "tel_mem_util_pct_mean",  # NVML utilization.memory (memory-controller busy), %
    "tel_sm_clock_mhz_mean",  # NVML SM clock, MHz
    "tel_sm_clock_mhz_min",
    "tel_mem_used_bytes_max",  # GPU memory used, bytes (whole GPU)
    "tel_power_w_mean",  # board power, W
    "tel_power_w_max",
    "tel_energy_j",  # energy over the cell, J
    "tel_energy_source",  # "nvml_counter" (total-energy counter) or "power_integral"
    "tel_sm_active_pct_mean",  # GPM SM utilization, % (mean over MIG instances under MIG)
    "tel_sm_occupancy_pct_mean",
    "tel_fp64_active_pct_mean",
    "tel_dram_bw_util_pct_mean",
    "tel_cpu_util_pct_mean",  # host CPU, mean over cores, %
    "tel_cpu_busy_cores_mean",  # host CPU, sum over cores / 100 (everything on the host)
    "tel_proc_busy_cores_mean",  # cores used by the sweep's own processes (its replicas), not the sampler
    "tel_cpu_freq_mhz_mean",
    "tel_host_mem_used_bytes_max",
    "tel_raw_file",  # the raw samples CSV, the path given to make_sampler, or ""
)

_START_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 15.0

# the prefix of one MIG instance's columns (gpu_readings: mig<GI>_mem_used_bytes, mig<GI>_sm_active_pct)
INSTANCE_COLUMN = "mig"


def empty_summary(source: str, note: str, interval_s: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(SUMMARY_COLUMNS)
    out.update(tel_source=source, tel_note=note, tel_interval_s=interval_s, tel_samples=0, tel_raw_file="")
    return out


def _col(samples: list[dict], key: str) -> list[float]:
    vals = []
    for s in samples:
        v = s.get(key)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            vals.append(float(v))
    return vals


def _mean(v: list[float]) -> float | None:
    return sum(v) / len(v) if v else None


def summarize(samples: list[dict], meta: dict[str, Any]) -> dict[str, Any]:
    """Per-cell summary of raw samples (each a dict with ``t_epoch_s`` and reader columns).

    Energy: the difference of NVML's total-energy counter when present (mJ → J), else
    the trapezoidal integral of power over the sample instants. MIG per-instance GPM
    columns (``mig<G>_sm_active_pct`` …) are averaged over instances and time.
    """
    out = empty_summary(meta.get("source", "none"), meta.get("note", ""), meta.get("interval_s"))
    out["tel_samples"] = len(samples)
    out["tel_device_name"] = meta.get("device_name")
    out["tel_device_uuid"] = meta.get("device_uuid")
    out["tel_mig_instances"] = meta.get("mig_instances")
    out["tel_raw_file"] = meta.get("raw_file", "")
    t = _col(samples, "t_epoch_s")
    if len(t) >= 2:
        out["tel_duration_s"] = t[-1] - t[0]
    elif t:
        out["tel_duration_s"] = 0.0
    for col, stats in (
        ("gpu_util_pct", ("mean", "max")),
        ("mem_util_pct", ("mean",)),
        ("sm_clock_mhz", ("mean", "min")),
        ("mem_used_bytes", ("max",)),
        ("power_w", ("mean", "max")),
        ("cpu_util_pct", ("mean",)),
        ("cpu_busy_cores", ("mean",)),
        ("proc_busy_cores", ("mean",)),
        ("cpu_freq_mhz", ("mean",)),
        ("host_mem_used_bytes", ("max",)),
    ):
        v = _col(samples, col)
        if not v:
            continue
        reducers: dict[str, Callable[[list[float]], float | None]] = {"mean": _mean, "max": max, "min": min}
        for stat in stats:
            out[f"tel_{col}_{stat}"] = reducers[stat](v)
    keys = set().union(*samples) if samples else set()
    mig_mem = sorted(k for k in keys if k.startswith(INSTANCE_COLUMN) and k.endswith("_mem_used_bytes"))
    if out["tel_mem_used_bytes_max"] is None and mig_mem:  # MIG: the GPU's use = the instances' sum
        sums = [
            sum(float(s[k]) for k in mig_mem if s.get(k) is not None)
            for s in samples
            if any(s.get(k) is not None for k in mig_mem)
        ]
        out["tel_mem_used_bytes_max"] = max(sums) if sums else None
    for gpm in ("sm_active_pct", "sm_occupancy_pct", "fp64_active_pct", "dram_bw_util_pct"):
        cols = sorted(k for k in keys if k == gpm or (k.startswith(INSTANCE_COLUMN) and k.endswith("_" + gpm)))
        vals = [x for c in cols for x in _col(samples, c)]
        if vals:
            out[f"tel_{gpm}_mean"] = _mean(vals)
    # energy: the counter's difference, else the integral of power
    energy = [(s["t_epoch_s"], s["energy_mj"]) for s in samples if s.get("energy_mj") is not None]
    power = [(s["t_epoch_s"], s["power_w"]) for s in samples if s.get("power_w") is not None]
    if len(energy) >= 2 and energy[-1][1] >= energy[0][1]:
        out["tel_energy_j"] = (energy[-1][1] - energy[0][1]) / 1000.0
        out["tel_energy_source"] = "nvml_counter"
    elif len(power) >= 2:
        out["tel_energy_j"] = sum((t1 - t0) * (p0 + p1) / 2.0 for (t0, p0), (t1, p1) in zip(power, power[1:]))
        out["tel_energy_source"] = "power_integral"
    return out


# ---------------------------------------------------------------- child process


def _open_readers(dev: DeviceInfo) -> tuple[list[Any], dict[str, Any]]:
    readers: list[Any] = []
    notes: list[str] = []
    meta: dict[str, Any] = {
        "source": "none",
        "device_name": dev.name or None,
        "device_uuid": None,
        "mig_instances": None,
    }
    wants_gpu = dev.kind == "gpu" and dev.backend in ("cuda", "opencl", "")
    if wants_gpu:
        name = dev.name.lower()
        if dev.backend == "opencl" and name and "nvidia" not in name and not dev.uuid:
            notes.append(f"GPU telemetry: NVML covers NVIDIA GPUs only (device {dev.name!r})")
        else:
            try:
                r = NvmlReader(dev)
                readers.append(r)
                notes += r.notes
                meta.update(source="nvml", device_name=r.name, device_uuid=r.uuid, mig_instances=len(r.migs))
            except NvmlUnavailable as exc:
                notes.append(f"GPU telemetry not recorded: {exc}")
    try:
        c = CpuReader(owner_pid=os.getppid())
        readers.append(c)
        if meta["source"] == "none":
            meta["source"] = "psutil"
            if dev.kind != "gpu":
                meta["device_name"] = dev.name or cpu_model()
    except CpuUnavailable as exc:
        notes.append(f"CPU telemetry not recorded: {exc}")
    meta["note"] = "; ".join(notes)
    return readers, meta


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def child_main(config: dict[str, Any]) -> int:
    """Sample windows until stop: print a ready line when a window starts, its summary when it ends.

    On stdin: ``pause`` ends the window (summary) and waits; ``resume {"out_path": ...}`` starts the
    next window; any other line, or EOF, ends the window and the process."""
    try:
        os.nice(10)
    except OSError:
        pass
    # Ctrl-C reaches the whole process group: the sweep decides what to do; this process ends
    # when the sweep says stop or goes away (EOF on stdin)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    interval = float(config.get("interval_s") or 0.1)
    out_path = config.get("out_path")
    readers, meta = _open_readers(DeviceInfo.from_dict(config.get("device") or {"kind": "cpu", "backend": "cpu"}))
    meta["interval_s"] = interval
    try:
        while True:
            line = _window(readers, dict(meta), interval, out_path)
            if line.strip() != "pause":
                return 0
            words = sys.stdin.readline().strip().split(maxsplit=1)  # the next window, or the end
            if not words or words[0] != "resume":
                return 0
            out_path = (json.loads(words[1]) if len(words) > 1 else {}).get("out_path")
    finally:
        for r in readers:
            try:
                r.close()
            except Exception:  # noqa: BLE001 - closing a reader is best effort
                pass


def _window(readers: list[Any], meta: dict[str, Any], interval: float, out_path: str | None) -> str:
    """One window: samples until a line (returned) or EOF ('') arrives on stdin; emits ready and summary."""
    meta["raw_file"] = str(out_path) if out_path else ""
    columns = ["t_epoch_s"] + [c for r in readers for c in r.columns]
    samples: list[dict[str, Any]] = []
    with contextlib.ExitStack() as files:  # the raw file, where there is one, closes before the summary
        fh = writer = None
        if out_path:
            Path(out_path).parent.mkdir(parents=True, exist_ok=True)
            fh = files.enter_context(open(out_path, "w", newline=""))
            writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()

        def take() -> None:
            row: dict[str, Any] = {"t_epoch_s": time.time()}
            for r in readers:
                try:
                    row.update(r.read())
                except Exception as exc:  # noqa: BLE001 - one bad read must not end the cell's telemetry
                    meta["note"] = (meta["note"] + "; " if meta["note"] else "") + f"read failed once: {exc}"
            samples.append(row)
            if writer is not None and fh is not None:
                writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
                fh.flush()

        take()
        _emit({"ready": True, "source": meta["source"], "note": meta["note"]})
        next_t = time.monotonic() + interval
        stdin = sys.stdin
        while True:
            timeout = max(0.0, next_t - time.monotonic())
            ready, _, _ = select.select([stdin], [], [], timeout)
            if ready:
                line = stdin.readline()  # a line or EOF: the window ends
                break
            take()
            next_t += interval
            if next_t < time.monotonic():  # fell behind (niced, busy host): do not burst
                next_t = time.monotonic() + interval
        take()  # a last sample at the stop instant closes the window
    _emit({"summary": summarize(samples, meta)})
    return line


# ---------------------------------------------------------------- parent side


class Sampler:
    """Start before a cell's replicas pass their barrier, stop after the last one ends.

    ``stop()`` never raises: if the sampler could not run, its summary says why
    (``tel_source="none"``, ``tel_note``) and the cell's measurements are unaffected.
    """

    def __init__(
        self,
        device_info: DeviceInfo | dict[str, Any] | None,
        interval_s: float = 0.1,
        out_path: str | Path | None = None,
    ):
        if not (isinstance(interval_s, (int, float)) and 0.01 <= float(interval_s) <= 3600):
            raise UserError(f"telemetry interval {interval_s!r} s out of range; allowed: 0.01 .. 3600 s")
        self.device = as_device(device_info)
        self.interval_s = float(interval_s)
        self.out_path = Path(out_path) if out_path else None
        self._proc: subprocess.Popen | None = None
        self._stderr: Any = None
        self._summary: dict[str, Any] | None = None
        self.ready_info: dict[str, Any] = {}

    @property
    def process(self) -> subprocess.Popen | None:
        """The sampling process, read-only: None before :meth:`start`, or where it could not be started."""
        return self._proc

    def start(self) -> Sampler:
        """Start the sampling process and wait until it has taken its first sample."""
        if self._proc is not None:
            return self
        cfg = {
            "device": self.device.to_dict(),
            "interval_s": self.interval_s,
            "out_path": str(self.out_path) if self.out_path else None,
        }
        # a file, so a chatty child never blocks
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - kept past start(): stop() closes it
        try:
            self._proc = processes.spawn(
                [sys.executable, "-m", "sharebench.telemetry.sampler", json.dumps(cfg)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                text=True,
            )
        except OSError as exc:
            self._summary = empty_summary("none", f"telemetry sampler did not start: {exc}", self.interval_s)
            return self
        line = self._readline(_START_TIMEOUT_S)
        try:
            self.ready_info = json.loads(line) if line else {}
        except json.JSONDecodeError:
            self.ready_info = {}
        if not self.ready_info.get("ready"):
            err = self._finish_error()
            self._summary = empty_summary("none", f"telemetry sampler did not start: {err}", self.interval_s)
        return self

    def _readline(self, timeout_s: float) -> str:
        assert self._proc and self._proc.stdout
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout_s)
        return self._proc.stdout.readline() if ready else ""

    def _finish_error(self) -> str:
        proc = self._proc
        if proc is None:
            return "not started"
        processes.stop([proc], grace_s=0.0)
        self._close_streams()
        self._stderr.seek(0)
        err = self._stderr.read()
        self._stderr.close()
        lines = [ln for ln in (err or "").strip().splitlines() if ln.strip()]
        return lines[-1].strip() if lines else f"exit status {proc.returncode}"

    def _close_streams(self) -> None:
        proc = self._proc
        for stream in (proc.stdin, proc.stdout) if proc else ():
            try:
                if stream and not stream.closed:
                    stream.close()
            except OSError:
                pass

    def _read_summary(self) -> dict[str, Any] | None:
        """The window's summary line from the process; None when none came in time or it is not one."""
        line = self._readline(_STOP_TIMEOUT_S)
        try:
            return json.loads(line)["summary"] if line else None
        except (json.JSONDecodeError, KeyError, TypeError):
            return None

    def pause(self) -> dict[str, Any]:
        """End the window and keep the process (its NVML session, its interpreter) for :meth:`resume`;
        the window's flat ``tel_*`` summary. A sampler that fails here ends as :meth:`stop` would."""
        if self._summary is not None or self._proc is None:
            return self.stop()
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write("pause\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self.stop()
        summary = self._read_summary()
        if summary is None:
            self._summary = empty_summary("none", f"telemetry sampler failed: {self._finish_error()}", self.interval_s)
            return dict(self._summary)
        return {c: summary.get(c) for c in SUMMARY_COLUMNS}

    def resume(self, out_path: str | Path | None = None) -> Sampler:
        """Start the next window (after :meth:`pause`), writing its samples to ``out_path``; waits for its
        first sample. A sampler that cannot go on is replaced by a new process."""
        self.out_path = Path(out_path) if out_path else None
        if self._summary is None and self._proc is not None and self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write("resume " + json.dumps({"out_path": str(out_path) if out_path else None}) + "\n")
                self._proc.stdin.flush()
                line = self._readline(_START_TIMEOUT_S)
                if line and json.loads(line).get("ready"):
                    return self
            except (BrokenPipeError, OSError, json.JSONDecodeError):
                pass
            self.stop()
        self._proc, self._summary = None, None
        return self.start()

    def close(self) -> None:
        """End the process, paused or sampling, without reading a summary (the end of a sweep)."""
        proc = self._proc
        if proc is None or self._summary is not None:
            return
        self._summary = empty_summary("none", "telemetry sampler closed", self.interval_s)
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # EOF: the process ends
        except OSError:
            pass
        self._reap()

    def _reap(self) -> None:
        """Wait for the process to end (kill it after 5 s), then close its streams."""
        proc = self._proc
        assert proc is not None
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        processes.stop([proc], grace_s=0.0)  # what still runs of its group
        self._close_streams()
        self._stderr.close()

    def stop(self) -> dict[str, Any]:
        """Stop sampling; the flat ``tel_*`` summary of the window."""
        if self._summary is not None:
            return dict(self._summary)
        proc = self._proc
        if proc is None:
            return empty_summary("none", "telemetry sampler was not started", self.interval_s)
        try:
            assert proc.stdin is not None
            proc.stdin.write("stop\n")
            proc.stdin.flush()
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        summary = self._read_summary()
        if summary is None:
            self._summary = empty_summary("none", f"telemetry sampler failed: {self._finish_error()}", self.interval_s)
        else:
            self._reap()
            self._summary = {c: summary.get(c) for c in SUMMARY_COLUMNS}
        return dict(self._summary)

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def make_sampler(
    device_info: DeviceInfo | dict[str, Any] | None, interval_s: float = 0.1, out_path: str | Path | None = None
) -> Sampler:
    """A sampler for the device the replicas use (see :class:`Sampler`)."""
    return Sampler(device_info, interval_s=interval_s, out_path=out_path)


if __name__ == "__main__":
    sys.exit(child_main(json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}))
