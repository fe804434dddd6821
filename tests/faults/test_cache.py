"""A torn lattice cache entry (a disk that filled while it was written by an older sharebench, a
truncation) is detected when it is read and rebuilt, not a failure of every later run."""

from __future__ import annotations

import numpy as np
import pytest

from sharebench.kernel.lattice import get_packed

pytestmark = [pytest.mark.faults, pytest.mark.slow]


def test_a_truncated_packed_lattice_is_rebuilt(lattice, tmp_path, monkeypatch):
    monkeypatch.setenv("SHAREBENCH_CACHE", str(tmp_path / "cache"))
    first = get_packed(lattice)
    entries = list((tmp_path / "cache" / "lattices").glob("*.npz"))
    assert len(entries) == 1
    data = entries[0].read_bytes()
    for cut in (0, 10, len(data) // 2):
        entries[0].write_bytes(data[:cut])
        again = get_packed(lattice)
        np.testing.assert_array_equal(again.data, first.data)
        assert again.n_elements == first.n_elements
        assert entries[0].read_bytes() == data  # rewritten whole
