"""Multipole, thin (``ST_MULT_THIN``) or thick (``ST_MULT_THICK``: drift-kick-drift-expanded with
the uniform integrator); its kick is the macro ``ST_MULT_KICK``.

Buffer: ``kind, order, inv_factorial_order, length, hxl, [num_kicks if thick], knl[order + 1],
ksl[order + 1]``."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sharebench.errors import UserError
from sharebench.kernel.elements.base import (
    DEFAULT_INTEGRATORS,
    DEFAULT_MODELS,
    Element,
    LineReference,
    NumpyParticles,
)
from sharebench.kernel.elements.drift import drift_expanded

MULT_THIN, MULT_THICK = 3, 4


def check_supported(el: Any, name: str) -> None:
    """UserError for what the kernel's multipole does not model: knl_rel/ksl_rel, radiation."""
    if np.any(np.asarray(el.knl_rel, dtype=float) != 0) or np.any(np.asarray(el.ksl_rel, dtype=float) != 0):
        raise UserError(f"element {name!r} (Multipole) has knl_rel/ksl_rel, not supported by the simpletrack engine")
    if int(getattr(el, "radiation_flag", 0)) != 0:
        raise UserError(f"element {name!r} (Multipole) has radiation on, not supported by the simpletrack engine")


def thick_kicks(el: Any, name: str, knl: np.ndarray, ksl: np.ndarray, order: int) -> int:
    """Kicks of a thick multipole; 0 (a plain drift) for xtrack's auto mode on an empty magnet."""
    if el.model not in DEFAULT_MODELS or el.integrator not in DEFAULT_INTEGRATORS:
        raise UserError(
            f"element {name!r} (thick Multipole) uses model {el.model}/integrator {el.integrator}; "
            "the simpletrack engine supports drift-kick-drift-expanded with the uniform integrator"
        )
    nk = int(el.num_multipole_kicks)
    if nk == 0:  # xtrack's auto mode for a straight magnet
        inactive = not (np.any(knl[: order + 1] != 0) or np.any(ksl[: order + 1] != 0))
        nk = 0 if inactive else 1
    return nk


def kick(
    p: NumpyParticles, order: int, inv_f: float, el_len: float, hxl: float, knl: np.ndarray, ksl: np.ndarray, w: float
) -> None:
    """The multipole kick of weight ``w`` (``ST_MULT_KICK``)."""
    idx = order
    dpx_mul = knl[idx] * inv_f
    dpy_mul = ksl[idx] * inv_f
    while idx > 0:
        zre = dpx_mul * p.x - dpy_mul * p.y
        zim = dpx_mul * p.y + dpy_mul * p.x
        inv_f *= idx
        idx -= 1
        dpx_mul = knl[idx] * inv_f + zre
        dpy_mul = ksl[idx] * inv_f + zim
    p.px = p.px + w * (-dpx_mul)
    p.py = p.py + w * dpy_mul
    if hxl != 0:
        hl = hxl * w
        dpx = hl * (1.0 + p.delta)
        dz = -(1.0 / p.rvv) * hl * p.x
        htot = hxl / el_len if el_len != 0 else 0.0
        k1l = knl[1] if order >= 1 else 0.0
        dpx = dpx + (-knl[0]) * w * htot * p.x
        dpx = dpx + htot * k1l * w * (-p.x * p.x + 0.5 * p.y * p.y)
        dpy = htot * k1l * w * p.x * p.y
        p.px = p.px + dpx
        p.py = p.py + dpy
        p.zeta = p.zeta + dz


class Multipole(Element):
    xtrack_type = "Multipole"
    kinds: ClassVar[dict[str, int]] = {"ST_MULT_THIN": MULT_THIN, "ST_MULT_THICK": MULT_THICK}
    c_macros = ("ST_MULT_KICK", "ST_DRIFT_EXP")

    @staticmethod
    def pack(el: Any, name: str, ref: LineReference) -> list[float]:
        knl = np.asarray(el.knl, dtype=float)
        ksl = np.asarray(el.ksl, dtype=float)
        order = int(el.order)
        check_supported(el, name)
        el_len = float(el.length)
        head = [order, float(el.inv_factorial_order), el_len, float(el.hxl)]
        if bool(el.isthick) and el_len != 0:
            head = [MULT_THICK, *head, thick_kicks(el, name, knl, ksl, order)]
        else:
            head = [MULT_THIN, *head]
        return head + list(knl[: order + 1]) + list(ksl[: order + 1])

    @staticmethod
    def decode(data: np.ndarray, pos: int) -> tuple[tuple, int]:
        kind = int(data[pos])
        order = int(data[pos + 1])
        extra = 1 if kind == MULT_THICK else 0
        head = data[pos + 2 : pos + 5 + extra]
        p = pos + 5 + extra
        knl = data[p : p + order + 1]
        ksl = data[p + order + 1 : p + 2 * order + 2]
        return (kind, order, *head, knl, ksl), p + 2 * order + 2

    @staticmethod
    def track(p: NumpyParticles, params: tuple) -> None:
        if params[0] == MULT_THIN:
            _, order, inv_f, el_len, hxl, knl, ksl = params
            kick(p, order, inv_f, el_len, hxl, knl, ksl, 1.0)
            return
        _, order, inv_f, el_len, hxl, nk, knl, ksl = params
        nk = int(nk)
        if nk == 0:
            drift_expanded(p, el_len)
            return
        w = 1.0 / nk
        for _k in range(nk):
            ds = 0.5 * w * el_len
            if ds != 0:
                drift_expanded(p, ds)
            kick(p, order, inv_f, el_len, hxl, knl, ksl, w)
            if ds != 0:
                drift_expanded(p, ds)
