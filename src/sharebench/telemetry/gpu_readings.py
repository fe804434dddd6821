"""NVIDIA GPU readings through NVML (the ``pynvml`` module of nvidia-ml-py).

What one read gives, per field (a field NVML refuses is dropped once, with the
reason kept in :attr:`NvmlReader.notes`; nothing is ever made up):

=====================  ==========================================================  =========
column                 NVML call                                                   scope
=====================  ==========================================================  =========
gpu_util_pct           nvmlDeviceGetUtilizationRates(h).gpu                        GPU (not under MIG)
mem_util_pct           nvmlDeviceGetUtilizationRates(h).memory                     GPU (not under MIG)
sm_clock_mhz           nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM)                    GPU
mem_used_bytes         nvmlDeviceGetMemoryInfo(h).used                             GPU
power_w                nvmlDeviceGetPowerUsage(h) / 1000 (mW)                      GPU
energy_mj              nvmlDeviceGetTotalEnergyConsumption(h) (mJ since load)      GPU
sm_active_pct          GPM NVML_GPM_METRIC_SM_UTIL between two reads               GPU (Hopper+)
sm_occupancy_pct       GPM NVML_GPM_METRIC_SM_OCCUPANCY                            GPU (Hopper+)
fp64_active_pct        GPM NVML_GPM_METRIC_FP64_UTIL                               GPU (Hopper+)
dram_bw_util_pct       GPM NVML_GPM_METRIC_DRAM_BW_UTIL                            GPU (Hopper+)
mig<G>_mem_used_bytes  nvmlDeviceGetMemoryInfo(mig handle).used                    MIG instance G
mig<G>_sm_active_pct   GPM via nvmlGpmMigSampleGet(parent, G, ...)                 MIG instance G
=====================  ==========================================================  =========

Under MIG the parent GPU's clock, power and energy are whole-GPU values shared by
all instances, and NVML reports no utilization (``Not Supported``); per-instance
memory and (on Hopper and later) per-instance GPM activity are what NVML gives.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from sharebench.devices import as_device, nvml
from sharebench.devices.nvml import NvmlUnavailable
from sharebench.errors import one_line

# GPM metric ids (pynvml constants) -> our column suffix; resolved lazily so that
# an older nvidia-ml-py without GPM simply has none of them.
_GPM_METRICS = (
    ("NVML_GPM_METRIC_SM_UTIL", "sm_active_pct"),
    ("NVML_GPM_METRIC_SM_OCCUPANCY", "sm_occupancy_pct"),
    ("NVML_GPM_METRIC_FP64_UTIL", "fp64_active_pct"),
    ("NVML_GPM_METRIC_DRAM_BW_UTIL", "dram_bw_util_pct"),
)
GPM_MIN_INTERVAL_S = 0.1  # NVML documents GPM samples at least 100 ms apart


def _mem_used_bytes(nv: Any, handle: Any) -> float:
    return float(nv.nvmlDeviceGetMemoryInfo(handle).used)


def _gi_label(inst: dict[str, Any]) -> str:
    """Column label of a MIG instance: its GPU instance id, else ``x<device index>``."""
    gi = inst.get("gpu_instance_id")
    return str(gi) if gi is not None else f"x{inst['index']}"


class _Gpm:
    """GPM counters of one scope (the whole GPU, or one MIG GPU instance), read pairwise."""

    def __init__(self, nv: Any, parent: Any, gpu_instance_id: int | None, metrics: list[tuple[int, str]]):
        self.nv, self.parent, self.gi, self.metrics = nv, parent, gpu_instance_id, metrics
        self.prev = nv.nvmlGpmSampleAlloc()
        self.cur = nv.nvmlGpmSampleAlloc()
        self._take(self.prev)
        self.prev_t = time.monotonic()

    def _take(self, sample: Any) -> None:
        if self.gi is None:
            self.nv.nvmlGpmSampleGet(self.parent, sample)
        else:
            self.nv.nvmlGpmMigSampleGet(self.parent, self.gi, sample)

    def read(self) -> dict[str, float | None] | None:
        """Metric values since the previous read; None while <100 ms have passed."""
        now = time.monotonic()
        if now - self.prev_t < GPM_MIN_INTERVAL_S:
            return None
        nv = self.nv
        self._take(self.cur)
        get = nv.c_nvmlGpmMetricsGet_t()
        get.version = nv.NVML_GPM_METRICS_GET_VERSION
        get.numMetrics = len(self.metrics)
        get.sample1 = self.prev
        get.sample2 = self.cur
        for k, (metric_id, _col) in enumerate(self.metrics):
            get.metrics[k].metricId = metric_id
        nv.nvmlGpmMetricsGet(get)
        out: dict[str, float | None] = {}
        for k, (_mid, col) in enumerate(self.metrics):
            m = get.metrics[k]
            out[col] = float(m.value) if m.nvmlReturn == nv.NVML_SUCCESS else None
        self.prev, self.cur = self.cur, self.prev
        self.prev_t = now
        return out

    def close(self) -> None:
        for s in (self.prev, self.cur):
            try:
                self.nv.nvmlGpmSampleFree(s)
            except Exception:  # noqa: BLE001 - freeing on the way out
                pass


class NvmlReader:
    """Reads one GPU (or the GPU holding one MIG instance) and all its MIG instances."""

    def __init__(self, device_info: Any):
        nv = nvml.start()
        self.nv = nv
        self.notes: list[str] = []
        try:
            target, notes = nvml.find_handle(nv, as_device(device_info))
        except nv.NVMLError as exc:
            nvml.shutdown(nv)
            raise NvmlUnavailable(f"NVML cannot find the device: {one_line(exc)}") from exc
        except NvmlUnavailable:
            nvml.shutdown(nv)
            raise
        self.notes += notes
        is_mig_handle = False
        try:
            is_mig_handle = bool(nv.nvmlDeviceIsMigDeviceHandle(target))
        except nv.NVMLError:
            pass
        self.parent = nv.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(target) if is_mig_handle else target
        self.name = self._safe(lambda: nvml.text(nv.nvmlDeviceGetName(self.parent)))
        self.uuid = self._safe(lambda: nvml.text(nv.nvmlDeviceGetUUID(self.parent)))
        self.target_uuid = self._safe(lambda: nvml.text(nv.nvmlDeviceGetUUID(target)))
        # one entry per GPU instance (a GPU instance split into compute instances has several
        # MIG devices sharing its memory and GPM counters)
        by_instance: dict[str, dict[str, Any]] = {}
        for inst in nvml.mig_devices(nv, self.parent):
            by_instance.setdefault(_gi_label(inst), inst)
        self.migs = list(by_instance.values())
        self.mig = bool(self.migs)
        if self.mig:
            self.notes.append(
                f"MIG on ({len(self.migs)} instances): NVML reports no utilization under MIG; "
                "SM clock, power and energy are whole-GPU values; memory and GPM activity per instance"
            )
        self._fields: list[tuple[str, Callable[[], float]]] = []
        util_note = "utilization not reported under MIG" if self.mig else "utilization"
        candidates: list[tuple[str, Callable[[], float]]] = [
            ("sm_clock_mhz", lambda: float(nv.nvmlDeviceGetClockInfo(self.parent, nv.NVML_CLOCK_SM))),
            ("mem_used_bytes", lambda: float(nv.nvmlDeviceGetMemoryInfo(self.parent).used)),
            ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(self.parent) / 1000.0),
            ("energy_mj", lambda: float(nv.nvmlDeviceGetTotalEnergyConsumption(self.parent))),
        ]
        for inst in self.migs:
            h, gi = inst["handle"], _gi_label(inst)
            candidates.append((f"mig{gi}_mem_used_bytes", functools.partial(_mem_used_bytes, nv, h)))
        # utilization is one call giving two values
        self._util = self._probe(lambda: nv.nvmlDeviceGetUtilizationRates(self.parent), util_note)
        for col, fn in candidates:
            if self._probe(fn, col.replace("_", " ")):
                self._fields.append((col, fn))
        self._gpm: list[tuple[str, _Gpm]] = []
        self._open_gpm()
        self.columns = (["gpu_util_pct", "mem_util_pct"] if self._util else []) + [c for c, _ in self._fields]
        for prefix, g in self._gpm:
            self.columns += [prefix + col for _mid, col in g.metrics]

    def _safe(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except self.nv.NVMLError:
            return None

    def _probe(self, fn: Callable[[], Any], what: str) -> bool:
        try:
            fn()
            return True
        except self.nv.NVMLError as exc:
            self.notes.append(f"{what}: {one_line(exc)}")
            return False
        except Exception as exc:  # noqa: BLE001 - a binding mismatch must not stop sampling
            self.notes.append(f"{what}: {type(exc).__name__}: {one_line(exc)}")
            return False

    def _open_gpm(self) -> None:
        nv = self.nv
        metrics = [(getattr(nv, const), col) for const, col in _GPM_METRICS if hasattr(nv, const)]
        if not metrics or not hasattr(nv, "nvmlGpmQueryDeviceSupport"):
            self.notes.append("GPM: not in this nvidia-ml-py")
            return
        try:
            if not nv.nvmlGpmQueryDeviceSupport(self.parent).isSupportedDevice:
                self.notes.append("GPM (SM/DRAM activity): not supported on this GPU (Hopper or later)")
                return
        except Exception as exc:  # noqa: BLE001 - GPM is optional: its failure becomes a note
            self.notes.append(f"GPM: {one_line(exc)}")
            return
        scopes: list[tuple[str, int | None]] = (
            [(f"mig{_gi_label(i)}_", i.get("gpu_instance_id")) for i in self.migs] if self.mig else [("", None)]
        )
        for prefix, gi in scopes:
            if self.mig and gi is None:
                continue
            try:
                self._gpm.append((prefix, _Gpm(nv, self.parent, gi, metrics)))
            except Exception as exc:  # noqa: BLE001 - GPM is optional: its failure becomes a note
                self.notes.append(f"GPM {prefix or 'gpu'}: {one_line(exc)}")

    def read(self) -> dict[str, float | None]:
        nv = self.nv
        row: dict[str, float | None] = {}
        if self._util:
            try:
                u = nv.nvmlDeviceGetUtilizationRates(self.parent)
                row["gpu_util_pct"], row["mem_util_pct"] = float(u.gpu), float(u.memory)
            except nv.NVMLError:
                row["gpu_util_pct"] = row["mem_util_pct"] = None
        for col, fn in self._fields:
            try:
                row[col] = fn()
            except nv.NVMLError:
                row[col] = None
        for prefix, g in self._gpm:
            try:
                vals = g.read()
            except nv.NVMLError:
                vals = None
            for _mid, col in g.metrics:
                row[prefix + col] = vals.get(col) if vals else None
        return row

    def close(self) -> None:
        for _p, g in self._gpm:
            g.close()
        nvml.shutdown(self.nv)
