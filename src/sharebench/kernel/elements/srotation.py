"""SRotation (``ST_SROTATION``): a rotation of the frame about s. Buffer: ``kind, sin_z, cos_z``."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sharebench.kernel.elements.base import Element, LineReference, NumpyParticles

SROTATION = 7


class SRotation(Element):
    xtrack_type = "SRotation"
    kinds: ClassVar[dict[str, int]] = {"ST_SROTATION": SROTATION}

    @staticmethod
    def pack(el: Any, name: str, ref: LineReference) -> list[float]:
        return [SROTATION, float(el.sin_z), float(el.cos_z)]

    @staticmethod
    def decode(data: np.ndarray, pos: int) -> tuple[tuple, int]:
        return (SROTATION, data[pos + 1], data[pos + 2]), pos + 3

    @staticmethod
    def track(p: NumpyParticles, params: tuple) -> None:
        _, s, c = params
        x, y, px, py = p.x, p.y, p.px, p.py
        p.x, p.y = c * x + s * y, -s * x + c * y
        p.px, p.py = c * px + s * py, -s * px + c * py
