"""Shared fixtures and the ``gpu`` marker; what tests import lies in tests/support/."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from pathlib import Path

import pytest

from sharebench.devices import DeviceInfo, nvml
from support.contexts import CONTEXTS, device_of
from support.lattices import tiny_lattice
from support.paths import LHC_LINE


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` are skipped, with the reason, where no NVIDIA GPU answers."""
    ok, reason = nvml.status()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"needs an NVIDIA GPU: {reason}")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _print_restored() -> Iterator[None]:
    """kfp.local indents its tasks' output by swapping ``builtins.print`` in and out; two ParallelFor
    iterations on two threads can leave its indenting print behind (kfp 2.17, logging_utils.indented_print).
    Every test gets back the print it started with, so no test sees another's leftovers."""
    before = builtins.print
    yield
    builtins.print = before


@pytest.fixture(scope="session")
def lhc_line_path() -> Path:
    """The real LHC lattice from ../shared (tests may read it; the product must not)."""
    if not LHC_LINE.exists():
        pytest.skip(f"real LHC lattice not found at {LHC_LINE}")
    return LHC_LINE


@pytest.fixture(scope="session")
def lattice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real Xsuite line (thin FODO ring) so replica set-up stays short."""
    return tiny_lattice(tmp_path_factory.mktemp("lattice") / "fodo.json")


@pytest.fixture(params=CONTEXTS)
def context(request: pytest.FixtureRequest) -> DeviceInfo:
    """The device of each context in turn (cpu, opencl, cuda); skipped where absent."""
    return device_of(request.param)
