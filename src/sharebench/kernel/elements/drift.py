"""Drift: expanded (``ST_DRIFT_EXPANDED``, macro ``ST_DRIFT_EXP``) or exact (``ST_DRIFT_EXACT``,
macro ``ST_DRIFT_EXA``). Buffer: ``kind, length``."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sharebench.kernel.elements.base import Element, LineReference, NumpyParticles

DRIFT_EXPANDED, DRIFT_EXACT = 1, 2


def drift_expanded(p: NumpyParticles, ds: float) -> None:
    """xtrack's Drift_single_particle_expanded over ``ds`` metres (also inside thick elements)."""
    rv0v = 1.0 / p.rvv
    xp = p.px * p.rpp
    yp = p.py * p.rpp
    dz = 1 - rv0v * (1.0 + (xp * xp + yp * yp) / 2.0)
    p.x = p.x + xp * ds
    p.y = p.y + yp * ds
    p.zeta = p.zeta + ds * dz


def drift_exact(p: NumpyParticles, ds: float) -> None:
    """xtrack's Drift_single_particle_exact over ``ds`` metres."""
    rv0v = 1.0 / p.rvv
    opd = 1.0 + p.delta
    opz = 1.0 / np.sqrt(opd * opd - p.px * p.px - p.py * p.py)
    dz = 1 - rv0v * opd * opz
    p.x = p.x + p.px * opz * ds
    p.y = p.y + p.py * opz * ds
    p.zeta = p.zeta + dz * ds


class Drift(Element):
    xtrack_type = "Drift"
    kinds: ClassVar[dict[str, int]] = {"ST_DRIFT_EXPANDED": DRIFT_EXPANDED, "ST_DRIFT_EXACT": DRIFT_EXACT}
    c_macros = ("ST_DRIFT_EXP", "ST_DRIFT_EXA")

    @staticmethod
    def pack(el: Any, name: str, ref: LineReference) -> list[float]:
        kind = DRIFT_EXACT if (ref.exact_drifts or el.model == "exact") else DRIFT_EXPANDED
        return [kind, float(el.length)]

    @staticmethod
    def decode(data: np.ndarray, pos: int) -> tuple[tuple, int]:
        return (int(data[pos]), data[pos + 1]), pos + 2

    @staticmethod
    def track(p: NumpyParticles, params: tuple) -> None:
        kind, length_m = params
        (drift_expanded if kind == DRIFT_EXPANDED else drift_exact)(p, length_m)
