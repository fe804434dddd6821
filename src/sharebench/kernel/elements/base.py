"""What every element type shares: the reference values a packer reads from the line, the particles
as the numpy tracker holds them, and the :class:`Element` interface (pack, decode, track)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from sharebench.errors import UserError

C_LIGHT = 299792458.0
PI = 3.1415926535897932384626433832795028841971693993751
DEG2RAD = 0.0174532925199432957692369076848861271344287188854
ALIGNMENT_FIELDS = ("shift_x", "shift_y", "shift_s", "rot_s_rad", "rot_x_rad", "rot_y_rad", "rot_s_rad_no_frame")
DEFAULT_MODELS = ("adaptive", "drift-kick-drift-expanded")  # the thick-element models the kernel runs
DEFAULT_INTEGRATORS = ("adaptive", "uniform")  # the integrators the kernel runs


@dataclass(frozen=True)
class LineReference:
    """What a packer needs from the line besides the element itself."""

    beta0: float
    line_length_m: float
    exact_drifts: bool  # the line's XTRACK_USE_EXACT_DRIFTS


class NumpyParticles:
    """A few particles as the numpy tracker moves them: one float64 array per coordinate (rebound,
    never modified in place) and the reference values the steps read."""

    __slots__ = ("beta0", "delta", "p0c", "px", "py", "pzeta", "q0", "rpp", "rvv", "x", "y", "zeta")

    def __init__(self, coords: np.ndarray, beta0: float, p0c: float, q0: float):
        (self.x, self.px, self.y, self.py, self.zeta, self.delta, self.rpp, self.rvv, self.pzeta) = (
            np.array(c, dtype=float) for c in coords
        )
        self.beta0, self.p0c, self.q0 = beta0, p0c, q0

    def coords(self) -> np.ndarray:
        """The coordinates as a (9, n) array, in the order of ``state.COORDS``."""
        return np.array([self.x, self.px, self.y, self.py, self.zeta, self.delta, self.rpp, self.rvv, self.pzeta])


def check_no_alignment(el: Any, name: str) -> None:
    """UserError when the xtrack element ``el`` is shifted or rotated (simpletrack has no alignment)."""
    for f in ALIGNMENT_FIELDS:
        v = getattr(el, f, 0.0)
        try:
            nonzero = float(v) != 0.0
        except (TypeError, ValueError):
            nonzero = False
        if nonzero:
            raise UserError(
                f"element {name!r} ({type(el).__name__}) has {f}={v}: misaligned elements are not "
                "supported by the simpletrack engine"
            )


class Element:
    """One xtrack element type as the simpletrack kernel runs it (as xtrack keeps one class and one C
    source per element). A subclass says which xtrack type it packs, the kind codes it writes (the
    ``#define`` of each in engines/simpletrack.c) and the C macros of its physics there, and provides:

    * ``pack(el, name, ref)``: the element's doubles in the buffer, kind code first; UserError
      (naming the element) for what the kernel does not model;
    * ``decode(data, pos)``: ``((kind, params...), position of the next element)``;
    * ``track(p, params)``: one pass of :class:`NumpyParticles` through it, the same arithmetic as the
      C code operation by operation (no losses).
    """

    xtrack_type: ClassVar[str]
    kinds: ClassVar[dict[str, int]]  # C #define name -> kind code
    c_macros: ClassVar[tuple[str, ...]] = ()  # macros of engines/simpletrack.c holding its physics

    @staticmethod
    def pack(el: Any, name: str, ref: LineReference) -> list[float]:
        raise NotImplementedError

    @staticmethod
    def decode(data: np.ndarray, pos: int) -> tuple[tuple, int]:
        raise NotImplementedError

    @staticmethod
    def track(p: NumpyParticles, params: tuple) -> None:
        raise NotImplementedError
