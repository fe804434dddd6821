"""The particle state as the kernel holds it: a (9, n) float64 array of coordinates (``COORDS``) and
a (3, n) int64 array of counters (``COUNTERS``), 96 bytes per particle."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

COORDS = ("x", "px", "y", "py", "zeta", "delta", "rpp", "rvv", "pzeta")
COUNTERS = ("state", "at_turn", "at_element")
BYTES_PER_PARTICLE = 8 * (len(COORDS) + len(COUNTERS))  # 96


def energy_deviations(delta: np.ndarray, beta0: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rpp, rvv, pzeta from delta, as xtrack's LocalParticle_update_delta."""
    delta_beta0 = delta * beta0
    ptau_beta0 = np.sqrt(delta_beta0 * delta_beta0 + 2.0 * delta_beta0 * beta0 + 1.0) - 1.0
    one_plus_delta = 1.0 + delta
    rvv = one_plus_delta / (1.0 + ptau_beta0)
    rpp = 1.0 / one_plus_delta
    pzeta = ptau_beta0 / (beta0 * beta0)
    return rpp, rvv, pzeta


def make_state(
    x: npt.ArrayLike,
    px: npt.ArrayLike,
    y: npt.ArrayLike,
    py: npt.ArrayLike,
    zeta: npt.ArrayLike,
    delta: npt.ArrayLike,
    beta0: float,
    rpp: npt.ArrayLike | None = None,
    rvv: npt.ArrayLike | None = None,
    pzeta: npt.ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Host particle state: (coords (9, n) float64, counters (3, n) int64), every particle alive.

    rpp, rvv and pzeta are computed from delta unless given."""
    n = np.shape(x)[0]
    coords = np.empty((len(COORDS), n), dtype=np.float64)
    for i, v in enumerate((x, px, y, py, zeta, delta)):
        coords[i] = v
    if rpp is None:
        rpp, rvv, pzeta = energy_deviations(coords[5], beta0)
    coords[6], coords[7], coords[8] = rpp, rvv, pzeta
    counters = np.zeros((len(COUNTERS), n), dtype=np.int64)
    counters[0] = 1
    return coords, counters
