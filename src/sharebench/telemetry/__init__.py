"""Telemetry around each cell: NVML (GPU) and psutil (host CPU) samplers, DCGM queries
from Prometheus for cluster runs, and the monitoring manifests.

The sweep's hook (see docs/architecture.md)::

    sampler = make_sampler(device_info, interval_s=0.1, out_path=cell_dir / "telemetry.csv")
    sampler.start()
    ...                       # the cell's replicas run
    summary = sampler.stop()  # flat tel_* columns, see SUMMARY_COLUMNS

This module stays light (stdlib + psutil + pynvml): the sampler process imports it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sharebench.telemetry.sampler import SUMMARY_COLUMNS, Sampler, make_sampler, summarize

__all__ = ["SUMMARY_COLUMNS", "Sampler", "make_sampler", "summarize", "nvml_status", "report_section"]


def nvml_status() -> tuple[bool, str]:
    """(True, driver) if NVML answers on this machine, else (False, the stated reason)."""
    from sharebench.telemetry.nvml import status

    return status()


def report_section(results_dir: Path, tables: dict[str, Any]) -> dict[str, Any]:
    """Report section: telemetry per cell, energy and cost (see sharebench.telemetry.report)."""
    from sharebench.telemetry.report import report_section as _section

    return _section(results_dir, tables)
