"""What else was busy on the host while a cell was measured, and whether that disturbed it.

:class:`Probe` reads ``/proc`` (Linux) at a cell's start and end:

* **foreign CPU**: the host's busy CPU time (``/proc/stat``: user, nice, system, irq, softirq, steal)
  minus this process's, its reaped children's (``os.times``: fresh replicas) and its live descendants'
  (``/proc``: warm replicas), in cores over the
  cell's wall time: other jobs competing with the measurement;
* **steal**: the share of CPU time the hypervisor gave to other guests, in %;
* **load average** at start and end, the **CPU frequency** (mean ``scaling_cur_freq``, where the host
  exposes it), and the **busiest other processes** (name, pid, cores), from ``/proc/<pid>/stat``;
* on an NVIDIA GPU (NVML, at the cell's end): **other compute processes on the GPU** (neither this
  process nor its replicas), the **clock-throttle reasons** and the **temperature**.

A cell is **disturbed** when foreign CPU exceeds :data:`FOREIGN_CORES_MAX` cores, steal exceeds
:data:`STEAL_MAX_PCT`, another process ran on the GPU, or the GPU throttled for heat or a power brake;
the reason is one line (``tel_disturbed`` in results.csv, a ``disturbed:`` flag in the report and the
Answer). ``--strict`` turns it into a stop (:class:`Disturbed`), and refuses to start a sweep on a
host already busy (:func:`check_quiet`). The GPU part is read through NVML and has run here only
where NVML is absent (it then adds nothing).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sharebench.devices import nvml
from sharebench.errors import UserError

FOREIGN_CORES_MAX = 0.5
STEAL_MAX_PCT = 5.0
COLUMN = "tel_disturbed"
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class Disturbed(Exception):
    """A measurement made under disturbance while ``--strict`` asked for none."""


def _cpu_jiffies() -> tuple[int, int] | None:
    """(busy, steal) jiffies of the whole host from /proc/stat; None where it cannot be read."""
    try:
        with open("/proc/stat") as fh:
            f = [int(x) for x in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (f + [0] * 8)[:8]
    return user + nice + system + irq + softirq + steal, steal


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _processes() -> dict[int, tuple[str, int, int]]:
    """pid -> (name, ppid, utime+stime jiffies) of every readable process."""
    out: dict[int, tuple[str, int, int]] = {}
    if not Path("/proc").is_dir():
        return out
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            raw = (d / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.find("(") + 1 : raw.rfind(")")]
        rest = raw[raw.rfind(")") + 2 :].split()
        if len(rest) > 12:
            out[int(d.name)] = (name, int(rest[1]), int(rest[11]) + int(rest[12]))
    return out


def _descendants(procs: dict[int, tuple[str, int, int]], me: int) -> set[int]:
    """This process's live descendants (the replicas; warm ones live from cell to cell)."""
    ours = {me}
    while True:
        kids = {p for p, (_, ppid, _) in procs.items() if ppid in ours} - ours
        if not kids:
            break
        ours |= kids
    return ours - {me}


def _ours(procs: dict[int, tuple[str, int, int]], me: int) -> set[int]:
    """This process, its ancestors (the shell, pytest's runner) and its descendants (the replicas)."""
    ours = {me} | _descendants(procs, me)
    pid = me
    while pid in procs and procs[pid][1] > 1:
        pid = procs[pid][1]
        ours.add(pid)
    return ours


def _load() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except OSError:
        return None


def _freq_mhz() -> float | None:
    vals = []
    for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_cur_freq"):
        try:
            vals.append(int(p.read_text()) / 1000)
        except (OSError, ValueError):
            continue
    return sum(vals) / len(vals) if vals else None


# NVML clocks-event (throttle) reason bits that slow a measurement down against its own baseline
THROTTLE_BITS = {
    0x8: "hardware slowdown",
    0x20: "thermal slowdown (software)",
    0x40: "thermal slowdown (hardware)",
    0x80: "power brake",
}  # not the software power cap (0x4): a GPU at full load sits there normally


def gpu_state(device: Any, own: set[int]) -> dict[str, Any]:
    """Other processes on the GPU, throttle reasons and temperature (NVML); {} where NVML cannot answer."""
    try:
        nv = nvml.start()
    except nvml.NvmlUnavailable:
        return {}
    try:
        handle, _notes = nvml.find_handle(nv, device)
        procs = nv.nvmlDeviceGetComputeRunningProcesses(handle)
        others = sorted({int(p.pid) for p in procs} - own)
        reasons = int(nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
        temp = nv.nvmlDeviceGetTemperature(handle, 0)  # NVML_TEMPERATURE_GPU
    except Exception:  # noqa: BLE001 - a GPU the probe cannot read is not a disturbance
        return {}
    finally:
        nvml.shutdown(nv)
    return {
        "tel_gpu_other_pids": " ".join(map(str, others)),
        "tel_gpu_throttle": ", ".join(t for bit, t in THROTTLE_BITS.items() if reasons & bit),
        "tel_gpu_temp_c": temp,
    }


class Probe:
    """Snapshots at a cell's start; :meth:`stop` gives the disturbance columns (``tel_*``).
    ``device`` (a DeviceInfo): on a GPU the NVML part is read as well."""

    def __init__(self, device: Any = None) -> None:
        self.device = device if device is not None and getattr(device, "kind", "") == "gpu" else None
        self.t0 = time.monotonic()
        self.cpu0 = _cpu_jiffies()
        self.own0 = _own_seconds()
        self.load0 = _load()
        self.procs0 = _processes()
        self.others: dict[int, tuple[str, float]] = {}

    def stop(self) -> dict[str, Any]:
        wall = max(time.monotonic() - self.t0, 1e-6)
        cpu1, own1, load1, procs1 = _cpu_jiffies(), _own_seconds(), _load(), _processes()
        out: dict[str, Any] = {}
        if self.cpu0 and cpu1:
            busy = (cpu1[0] - self.cpu0[0]) / _HZ
            total = wall * (os.cpu_count() or 1)
            # ours: this process, its reaped children (os.times) and its live descendants (warm replicas)
            live = (
                sum(
                    procs1[p][2] - (self.procs0[p][2] if p in self.procs0 and self.procs0[p][0] == procs1[p][0] else 0)
                    for p in _descendants(procs1, os.getpid())
                )
                / _HZ
            )
            out["tel_foreign_cpu_cores"] = round(max(0.0, busy - (own1 - self.own0) - live) / wall, 3)
            out["tel_steal_pct"] = round(100.0 * (cpu1[1] - self.cpu0[1]) / _HZ / total, 2)
        if self.load0 and load1:
            out["tel_load1_max"] = round(max(self.load0[0], load1[0]), 2)
        freq = _freq_mhz()
        if freq:
            out["tel_cpu_mhz"] = round(freq, 1)
        ours = _ours(procs1, os.getpid())
        busiest = sorted(
            ((procs1[p][2] - self.procs0[p][2]) / _HZ / wall, procs1[p][0], p)
            for p in procs1
            if p in self.procs0 and p not in ours and procs1[p][0] == self.procs0[p][0]
        )
        self.others = {pid: (name, cores) for cores, name, pid in busiest}  # every other process, in cores
        top = [f"{name} (pid {pid}) {cores:.2f}" for cores, name, pid in reversed(busiest[-5:]) if cores >= 0.05]
        out["tel_busy_processes"] = "; ".join(top)
        if self.device is not None:  # the MPS daemons sharebench starts are detached: not another job
            mps = {p for p, (name, _, _) in procs1.items() if name.startswith("nvidia-cuda-mps")}
            out.update(gpu_state(self.device, ours | mps))
        out[COLUMN] = verdict(out)
        return out


def verdict(d: dict[str, Any]) -> str:
    """'' when undisturbed; else one line saying what disturbed the cell."""
    reasons = []
    foreign, steal = d.get("tel_foreign_cpu_cores"), d.get("tel_steal_pct")
    if foreign is not None and foreign > FOREIGN_CORES_MAX:
        busiest = d.get("tel_busy_processes") or ""
        reasons.append(
            f"other processes used {foreign:.2f} cores (> {FOREIGN_CORES_MAX})"
            + (f", busiest: {busiest}" if busiest else "")
        )
    if steal is not None and steal > STEAL_MAX_PCT:
        reasons.append(f"CPU steal {steal:.1f}% (> {STEAL_MAX_PCT:.0f}%)")
    if d.get("tel_gpu_other_pids"):
        reasons.append(f"other processes on the GPU: pid {d['tel_gpu_other_pids']}")
    if d.get("tel_gpu_throttle"):
        reasons.append(f"GPU throttled: {d['tel_gpu_throttle']}")
    return "; ".join(reasons)


def check_quiet(seconds: float = 1.0) -> None:
    """--strict: refuse to start on a host already busy (a one-line :class:`UserError`)."""
    probe = Probe()
    time.sleep(seconds)
    reason = probe.stop()[COLUMN]
    if reason:
        raise UserError(
            f"--strict: the host is busy before the sweep starts ({reason}); wait, or run without "
            "--strict (disturbed cells are then flagged)"
        )


def strict_guard(rows: list[dict[str, Any]]) -> None:
    """--strict: stop the sweep after a disturbed cell (its rows are already on disk)."""
    for r in rows:
        if r.get(COLUMN):
            raise Disturbed(f"--strict: cell {r.get('cell_id')} was measured under disturbance ({r[COLUMN]})")
