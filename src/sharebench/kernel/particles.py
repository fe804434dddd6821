"""Matched particles made once per size and shared through a file: the replicas of a cell (and the
cells of a sweep that share a size, seed and lattice) load the same seeded distribution from the
kernel cache instead of drawing it again (issue 15: a cheaper campaign).

The file is keyed by everything the distribution depends on (optics, beta0, gamma0, particle count,
seed, emittances, bunch length, energy spread), so a cached file is the very array
:func:`sharebench.kernel.distribution.matched_gaussian` would return. One process draws it under a
file lock while the cell's other replicas wait and then load it. ``SHAREBENCH_PARTICLE_CACHE=0``
turns the cache off (each replica draws its own, as before).
"""

from __future__ import annotations

import hashlib
import os

import numpy as np
from filelock import FileLock

from sharebench.kernel.cache import cache_dir
from sharebench.kernel.distribution import matched_gaussian

ENV = "SHAREBENCH_PARTICLE_CACHE"
OPTICS_KEYS = ("closed_orbit", "betax", "alfx", "betay", "alfy")


def particles_key(
    optics: dict,
    beta0: float,
    gamma0: float,
    n: int,
    seed: int,
    nemitt_x: float,
    nemitt_y: float,
    sigma_z: float,
    sigma_delta: float,
) -> str:
    """The cache key of one distribution: a digest of everything it depends on."""
    parts = [np.asarray(optics[k], dtype=float).tobytes() for k in OPTICS_KEYS]
    parts.append(
        repr(
            (
                float(beta0),
                float(gamma0),
                int(n),
                int(seed),
                float(nemitt_x),
                float(nemitt_y),
                float(sigma_z),
                float(sigma_delta),
            )
        ).encode()
    )
    return hashlib.sha1(b"|".join(parts)).hexdigest()[:24]


def cache_enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "no", "off", "false")


def shared_particles(
    optics: dict,
    beta0: float,
    gamma0: float,
    n: int,
    seed: int = 1,
    nemitt_x: float = 2.5e-6,
    nemitt_y: float = 2.5e-6,
    sigma_z: float = 0.05,
    sigma_delta: float = 1e-4,
) -> np.ndarray:
    """The (6, n) matched distribution, from the cache file when one holds it, else drawn and saved."""
    args = (optics, beta0, gamma0, n, seed, nemitt_x, nemitt_y, sigma_z, sigma_delta)
    if not cache_enabled():
        return matched_gaussian(*args)
    folder = cache_dir("particles")
    path = folder / f"{particles_key(*args)}.npy"
    try:
        with FileLock(str(path) + ".lock", timeout=600):
            try:
                x6 = np.load(path)
                if x6.shape == (6, n):
                    return x6
            except (OSError, ValueError):
                pass
            x6 = matched_gaussian(*args)
            tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npy")
            np.save(tmp, x6)
            os.replace(tmp, path)
            return x6
    except OSError:  # no writable cache (full disk, read-only home): draw it here, as before
        return matched_gaussian(*args)
