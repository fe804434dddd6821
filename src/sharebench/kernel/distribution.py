"""A seeded particle distribution matched to the ring's linear optics.

The 4D closed orbit and one-turn matrix come from tracking a few particles one
turn with the numpy tracker (same physics as the kernel), so no xtrack build is
needed on the machine that runs; results are cached per lattice in memory.
Transverse: Gaussian in normalised coordinates with the given normalised
emittances, matched with the uncoupled Twiss (beta, alpha) of each plane, on
the closed orbit. Longitudinal: Gaussian zeta (sigma_z) and delta (sigma_delta).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from typing import Any

import numpy as np

from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.kernel.cache import cache_dir
from sharebench.kernel.elements import PackedLine, decode, track_numpy
from sharebench.kernel.state import energy_deviations

_OPTICS_CACHE: dict[str, dict] = {}


def _one_turn(packed: PackedLine, elements: list[tuple], x4: np.ndarray) -> np.ndarray:
    """The first four coordinates after one turn of particles starting at ``x4`` (on momentum)."""
    coords = np.zeros((9, x4.shape[1]))
    coords[:4] = x4
    rpp, rvv, pzeta = energy_deviations(coords[5], packed.beta0)
    coords[6], coords[7], coords[8] = rpp, rvv, pzeta
    return track_numpy(packed, coords, 1, elements)[:4]


def closed_orbit(packed: PackedLine) -> tuple[np.ndarray, np.ndarray]:
    """The 4D closed orbit and the one-turn matrix around it (Newton steps on numpy tracking)."""
    elements = decode(packed)
    co = np.zeros(4)
    eps = np.array([1e-9, 1e-10, 1e-9, 1e-10])
    for _ in range(6):
        probes = np.repeat(co[:, None], 5, axis=1)
        for i in range(4):
            probes[i, i + 1] += eps[i]
        out = _one_turn(packed, elements, probes)
        m = (out[:, 1:] - out[:, :1]) / eps[None, :]
        resid = out[:, 0] - co
        step = np.linalg.solve(np.eye(4) - m, resid)
        co = co + step
        if np.max(np.abs(step)) < 1e-14:
            break
    return co, m


def uncoupled_twiss(m: np.ndarray) -> dict:
    """beta, alpha and fractional tune of each plane from the one-turn matrix; UserError if unstable."""
    optics = {}
    for plane, sl in (("x", slice(0, 2)), ("y", slice(2, 4))):
        mm = m[sl, sl]
        cos_mu = 0.5 * np.trace(mm)
        if not abs(cos_mu) < 1:
            raise UserError(
                f"the lattice is linearly unstable in {plane} (|cos mu| = {abs(cos_mu):.3f} >= 1); "
                "no matched distribution"
            )
        sin_mu = np.sign(mm[0, 1]) * np.sqrt(1 - cos_mu**2)
        optics[f"beta{plane}"] = float(mm[0, 1] / sin_mu)
        optics[f"alf{plane}"] = float((mm[0, 0] - mm[1, 1]) / (2 * sin_mu))
        mu = np.arctan2(sin_mu, cos_mu) % (2 * np.pi)
        optics[f"q{plane}_frac"] = float(mu / (2 * np.pi))
    return optics


def linear_optics(packed: PackedLine) -> dict:
    """4D closed orbit, one-turn matrix, Twiss beta/alpha and tunes at the start (cached in memory
    and on disk per line)."""
    key = hashlib.sha1(packed.data.tobytes() + repr((packed.beta0, packed.p0c)).encode()).hexdigest()[:24]
    if key in _OPTICS_CACHE:
        return _OPTICS_CACHE[key]
    disk = cache_dir("optics") / f"{key}.json"
    try:
        with open(disk) as fh:
            d = json.load(fh)
        d["closed_orbit"] = np.array(d["closed_orbit"])
        d["matrix"] = np.array(d["matrix"])
        _OPTICS_CACHE[key] = d
        return d
    except (OSError, ValueError, KeyError):
        pass
    co, m = closed_orbit(packed)
    optics = {"closed_orbit": co, "matrix": m, **uncoupled_twiss(m)}
    _OPTICS_CACHE[key] = optics
    try:
        write_atomic(disk, json.dumps({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in optics.items()}))
    except OSError:
        pass
    return optics


def xtrack_optics(line: Any) -> dict[str, Any]:
    """The same optics from xtrack's 4d twiss (lines simpletrack cannot pack)."""
    import xobjects as xo  # noqa: PLC0415 - slow to import: only for lines simpletrack cannot pack

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if line.tracker is None:
            line.build_tracker(_context=xo.ContextCpu())
        try:
            tw = line.twiss(method="4d")
        except Exception as exc:  # noqa: BLE001 - any twiss failure: one line, not a traceback
            raise UserError(f"no matched distribution: twiss failed on this lattice ({type(exc).__name__})") from None
    return {
        "closed_orbit": np.array([tw.x[0], tw.px[0], tw.y[0], tw.py[0]]),
        "betax": float(tw.betx[0]),
        "alfx": float(tw.alfx[0]),
        "betay": float(tw.bety[0]),
        "alfy": float(tw.alfy[0]),
    }


def matched_gaussian(
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
    """(6, n) array x, px, y, py, zeta, delta, from linear_optics()/xtrack_optics()."""
    rng = np.random.default_rng(seed)
    out = np.empty((6, n))
    co = optics["closed_orbit"]
    for i, (plane, nemitt) in enumerate((("x", nemitt_x), ("y", nemitt_y))):
        geo = nemitt / (beta0 * gamma0)
        bet, alf = optics[f"beta{plane}"], optics[f"alf{plane}"]
        u = rng.standard_normal(n) * np.sqrt(geo)
        v = rng.standard_normal(n) * np.sqrt(geo)
        out[2 * i] = np.sqrt(bet) * u + co[2 * i]
        out[2 * i + 1] = (-alf * u + v) / np.sqrt(bet) + co[2 * i + 1]
    out[4] = rng.standard_normal(n) * sigma_z
    out[5] = rng.standard_normal(n) * sigma_delta
    return out
