"""What the machine was and did around each cell: NVML (GPU) and psutil (host CPU) samplers, the
provenance of a run, DCGM metrics from Prometheus for cluster runs, Grafana annotations.

The runner wraps every cell in a sampler::

    sampler = make_sampler(device, interval_s=0.1, out_path=cell_dir / "telemetry.csv").start()
    ...                       # the cell's replicas run
    summary = sampler.stop()  # flat tel_* columns, see SUMMARY_COLUMNS

and records the run's context once per sweep with ``provenance.collect``. This package stays
light (stdlib, psutil, pynvml): the sampler's own process imports it.
"""

from sharebench.devices.nvml import status as nvml_status
from sharebench.telemetry.provenance import collect as collect_provenance
from sharebench.telemetry.sampler import SUMMARY_COLUMNS, Sampler, make_sampler, summarize

__all__ = ["SUMMARY_COLUMNS", "Sampler", "collect_provenance", "make_sampler", "nvml_status", "summarize"]
