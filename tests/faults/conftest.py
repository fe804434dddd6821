"""Fault injection, done for real (tests/faults, marker ``faults``): signals to the sweep and its
replicas, a full and a read-only tmpfs, torn files, two sweeps on one folder, absurd values."""

from __future__ import annotations

import pytest

from support.lattices import tiny_lattice


@pytest.fixture(scope="session")
def lattice(tmp_path_factory) -> str:
    return str(tiny_lattice(tmp_path_factory.mktemp("lat") / "fodo.json"))
