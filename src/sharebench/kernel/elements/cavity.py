"""Cavity (``ST_CAVITY``): drift-kick-drift-expanded with energy kicks (macro ``ST_RF_KICK``).

Buffer: ``kind, length, voltage, phase_const, omega_over_c, num_kicks``; the harmonic, lag and phase
(and their tapers) are folded into ``phase_const`` and ``omega_over_c`` when packing."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from sharebench.errors import UserError
from sharebench.kernel.elements.base import (
    C_LIGHT,
    DEFAULT_INTEGRATORS,
    DEFAULT_MODELS,
    DEG2RAD,
    PI,
    Element,
    LineReference,
    NumpyParticles,
)
from sharebench.kernel.elements.drift import drift_expanded

CAVITY = 5


def rf_kick(p: NumpyParticles, voltage: float, phase_const: float, omega_over_c: float, w: float) -> None:
    """The energy kick of weight ``w`` and the energy deviations after it (``ST_RF_KICK``)."""
    beta0 = p.beta0
    tau = p.zeta / beta0
    ek = p.q0 * (voltage * w) * np.sin(phase_const - omega_over_c * tau)
    p.pzeta = p.pzeta + ek / (beta0 * p.p0c)
    ptau = p.pzeta * beta0
    irpp = np.sqrt(ptau * ptau + 2.0 * p.pzeta + 1.0)
    p.rpp = 1.0 / irpp
    p.rvv = irpp / (1.0 + beta0 * ptau)
    p.delta = irpp - 1.0


class Cavity(Element):
    xtrack_type = "Cavity"
    kinds: ClassVar[dict[str, int]] = {"ST_CAVITY": CAVITY}
    c_macros = ("ST_RF_KICK", "ST_DRIFT_EXP")

    @staticmethod
    def pack(el: Any, name: str, ref: LineReference) -> list[float]:
        if el.model not in DEFAULT_MODELS or el.integrator not in DEFAULT_INTEGRATORS:
            raise UserError(
                f"element {name!r} (Cavity) uses model {el.model}/integrator {el.integrator}; "
                "only the defaults are supported"
            )
        if int(el.absolute_time) != 0:
            raise UserError(f"element {name!r} (Cavity) has absolute_time=1, not supported by the simpletrack engine")
        frequency = float(el.frequency)
        harmonic = float(el.harmonic)
        if harmonic != 0:
            t_rev0 = ref.line_length_m / (ref.beta0 * C_LIGHT)
            frequency += harmonic / t_rev0
        lag = float(el.lag) + float(el.lag_taper)
        phase = float(el.phase) + float(el.phase_taper)
        phase_const = (0.0 + DEG2RAD * lag) + phase
        omega_over_c = (2.0 * PI) / C_LIGHT * frequency
        nk = int(el.num_kicks) or 1
        return [CAVITY, float(el.length), float(el.voltage), phase_const, omega_over_c, nk]

    @staticmethod
    def decode(data: np.ndarray, pos: int) -> tuple[tuple, int]:
        return (CAVITY, *data[pos + 1 : pos + 6]), pos + 6

    @staticmethod
    def track(p: NumpyParticles, params: tuple) -> None:
        _, el_len, voltage, phase_const, omega_over_c, nk = params
        nk = int(nk)
        w = 1.0 / nk
        for _k in range(nk):
            ds = 0.5 * w * el_len
            if ds != 0:
                drift_expanded(p, ds)
            rf_kick(p, voltage, phase_const, omega_over_c, w)
            if ds != 0:
                drift_expanded(p, ds)
