"""XYShift (``ST_XYSHIFT``): a transverse shift of the frame. Buffer: ``kind, dx, dy``."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sharebench.kernel.elements.base import Element, LineReference, NumpyParticles

XYSHIFT = 6


class XYShift(Element):
    xtrack_type = "XYShift"
    kinds: ClassVar[dict[str, int]] = {"ST_XYSHIFT": XYSHIFT}

    @staticmethod
    def pack(el: Any, name: str, ref: LineReference) -> list[float]:
        return [XYSHIFT, float(el.dx), float(el.dy)]

    @staticmethod
    def decode(data: np.ndarray, pos: int) -> tuple[tuple, int]:
        return (XYSHIFT, data[pos + 1], data[pos + 2]), pos + 3

    @staticmethod
    def track(p: NumpyParticles, params: tuple) -> None:
        _, dx, dy = params
        p.x = p.x + (-dx)
        p.y = p.y + (-dy)
