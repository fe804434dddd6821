"""Host CPU readings with psutil: per-core utilization, frequency, memory in use.

Used on every device: on the CPU it is the device's own telemetry, on a GPU it
shows how busy the host was (replicas feeding the GPU, the sweep itself).
"""

from __future__ import annotations


class CpuUnavailable(RuntimeError):
    """psutil is missing or cannot read this host's counters (the message says why)."""


class CpuReader:
    """Per-core utilization since the previous read, CPU frequency, host memory used."""

    def __init__(self) -> None:
        try:
            import psutil
        except ImportError as exc:  # psutil is a declared dependency; say so if it is gone
            raise CpuUnavailable(f"psutil not importable ({exc})") from exc
        self._ps = psutil
        try:
            first = psutil.cpu_percent(percpu=True)  # primes the per-core counters
        except Exception as exc:  # noqa: BLE001 - any failure here means: no CPU telemetry
            raise CpuUnavailable(f"psutil cannot read CPU times: {exc}") from exc
        self.cores = len(first)
        self._freq = True
        self._first = True  # the first read after priming covers ~no time: util not reported
        self.columns = ["cpu_util_pct", "cpu_busy_cores", "cpu_freq_mhz", "host_mem_used_bytes"] + [
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
        if self._freq:
            try:
                freq = ps.cpu_freq()
                row["cpu_freq_mhz"] = float(freq.current) if freq and freq.current else None
            except Exception:  # noqa: BLE001 - some kernels/containers expose no cpufreq
                self._freq = False
        for i, pct in enumerate(per_core):
            row[f"cpu{i}_util_pct"] = None if pct is None else float(pct)
        return row

    def close(self) -> None:
        pass
