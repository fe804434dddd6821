"""Host CPU readings with psutil: per-core utilization, frequency, memory in use, and the
cores used by the sweep's own processes.

Used on every device: on the CPU it is the device's own telemetry, on a GPU it
shows how busy the host was (replicas feeding the GPU, the sweep itself).
"""

from __future__ import annotations

import os
import time

import psutil


class CpuUnavailable(RuntimeError):
    """psutil is missing or cannot read this host's counters (the message says why)."""


class CpuReader:
    """Per-core utilization since the previous read, CPU frequency, host memory used, and the
    cores used by the processes of the sweep that started the sampler (its replicas), which
    unlike the host's utilization leaves out whatever else runs on the machine."""

    def __init__(self, owner_pid: int | None = None) -> None:
        self._ps = psutil
        try:
            first = psutil.cpu_percent(percpu=True)  # primes the per-core counters
        except Exception as exc:
            raise CpuUnavailable(f"psutil cannot read CPU times: {exc}") from exc
        self.cores = len(first)
        self._freq = True
        self._first = True  # the first read after priming covers ~no time: util not reported
        self._owner = None
        self._last_proc: tuple[float, float | None] | None = None
        if owner_pid:
            try:
                self._owner = psutil.Process(owner_pid)
            except psutil.Error:
                self._owner = None
        self.columns = ["cpu_util_pct", "cpu_busy_cores", "proc_busy_cores", "cpu_freq_mhz", "host_mem_used_bytes"] + [
            f"cpu{i}_util_pct" for i in range(self.cores)
        ]

    def read(self) -> dict[str, float | None]:
        ps = self._ps
        per_core: list[float | None] = list(ps.cpu_percent(percpu=True))
        if self._first:
            self._first = False
            per_core = [None] * len(per_core)
        known = [p for p in per_core if p is not None]
        row: dict[str, float | None] = {
            "cpu_util_pct": sum(known) / len(known) if known else None,
            "cpu_busy_cores": sum(known) / 100.0 if known else None,
            "cpu_freq_mhz": None,
            "host_mem_used_bytes": float(ps.virtual_memory().used),
        }
        row["proc_busy_cores"] = self._proc_cores()  # None on the first read (no interval yet)
        if self._freq:
            try:
                freq = ps.cpu_freq()
                row["cpu_freq_mhz"] = float(freq.current) if freq and freq.current else None
            except Exception:  # noqa: BLE001 - some kernels/containers expose no cpufreq
                self._freq = False
        for i, pct in enumerate(per_core):
            row[f"cpu{i}_util_pct"] = None if pct is None else float(pct)
        return row

    def _cpu_seconds(self) -> float | None:
        """CPU seconds used so far by the owner and all its descendants, this sampler left out.

        user + system + reaped children's (``children_user/system``) of the owner and of every
        live descendant: cumulative, so a replica that starts or ends between two reads is
        counted in full (a process that exits unreaped between reads loses its last interval).
        """
        if self._owner is None:
            return None
        ps = self._ps
        me = os.getpid()
        try:
            procs = [self._owner] + self._owner.children(recursive=True)
        except ps.Error:
            return None
        total = 0.0
        for p in procs:
            try:
                t = p.cpu_times()
            except ps.Error:
                continue
            secs = t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
            if p.pid != me:
                total += secs
        return total

    def _proc_cores(self) -> float | None:
        """Cores used since the last read by the owner and its descendants (not this sampler)."""
        now, secs = time.monotonic(), self._cpu_seconds()
        prev = self._last_proc
        self._last_proc = (now, secs)
        if secs is None or prev is None or prev[1] is None or now <= prev[0]:
            return None
        return max(0.0, (secs - prev[1]) / (now - prev[0]))

    def close(self) -> None:
        pass
