"""Shared fixtures and the ``gpu`` marker; what tests import lies in tests/support/."""

from __future__ import annotations

import builtins
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from sharebench.devices import DeviceInfo, nvml
from support.contexts import CONTEXTS, device_of
from support.lattices import tiny_lattice
from support.paths import LHC_LINE

# A shell without job control starts a background command with SIGINT ignored, and an ignored signal stays
# ignored through exec: Python then installs no KeyboardInterrupt, and the tests of Ctrl-C (here and in the
# programs they start) would test nothing. Ctrl-C is what they are about: give it back.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SLOW_TESTS = Path(__file__).with_name("slow_tests.txt")
LONG_TESTS = Path(__file__).with_name("long_tests.txt")


def measured_slow(path: Path = SLOW_TESTS) -> set[str]:
    """The node ids tests/slow_tests.txt lists (made by ``python -m tools.slow_tests`` from a full run);
    ``path`` LONG_TESTS: those tests/long_tests.txt lists."""
    if not path.exists():
        return set()
    return {line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests a full run measured slow are marked ``slow`` (make check leaves them out), those it
    measured long ``long`` and ``slow`` (make test leaves them out, make test-long runs them); a test its
    own file marks ``long`` is ``slow`` too. Tests marked ``gpu`` are skipped, with the reason, where no
    NVIDIA GPU answers."""
    slow, long = measured_slow(), measured_slow(LONG_TESTS)
    for item in items:
        if item.nodeid in long:
            item.add_marker(pytest.mark.long)
        if item.nodeid in slow or "long" in item.keywords:
            item.add_marker(pytest.mark.slow)
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


@pytest.fixture
def own_children() -> Callable[[], list[psutil.Process]]:
    """A callable listing this test's child processes (recursive, zombies too): the children of the test
    process that were not there when the test began. A server that another module's session fixture keeps
    (podman's API service, Prometheus) is a child of the same pytest-xdist worker, and is not the test's."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}

    def children() -> list[psutil.Process]:
        return [p for p in psutil.Process().children(recursive=True) if p.pid not in before]

    return children
