"""Every context a kernel runs in, for tests parametrised over them (as xobjects' for_all_test_contexts):
the CPU (C + OpenMP), OpenCL (PoCL here, NVIDIA's on a GPU machine) and CUDA (marked ``gpu``: skipped
cleanly without an NVIDIA GPU, see conftest.py)."""

from __future__ import annotations

import pytest

from sharebench.devices import DeviceInfo, list_devices, resolve_device
from sharebench.errors import UserError

CUDA = pytest.param("cuda", marks=pytest.mark.gpu)
CONTEXTS = ["cpu", "opencl", CUDA]  # every context the kernel runs in
ACCELERATORS = ["opencl", CUDA]  # the contexts compared with the CPU one


def device_of(context: str) -> DeviceInfo:
    """The device of a context here (a CPU OpenCL device when there is no GPU one), or skip the test."""
    if context == "cuda":
        pytest.importorskip("cupy", reason="CUDA runs need CuPy")
        if not any(d.backend == "cuda" for d in list_devices()):
            pytest.skip("no CUDA GPU here")
    try:
        return resolve_device(context)
    except UserError as exc:
        pytest.skip(f"no {context} device here: {exc}")


def cpu_opencl_spec() -> str:
    """The spec of a CPU OpenCL device (PoCL), or skip."""
    for d in list_devices():
        if d.backend == "opencl" and d.kind == "cpu":
            return d.spec
    pytest.skip("no CPU OpenCL device (PoCL) here: pip install -e '.[pocl]'")
