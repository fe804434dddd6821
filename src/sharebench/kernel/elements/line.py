"""A whole line: packed into the one buffer the kernel reads (:func:`pack_line`), read back
(:func:`decode`) and tracked with numpy (:func:`track_numpy`), each element by its own class."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from sharebench.errors import UserError
from sharebench.kernel.elements.base import (
    Element,
    LineReference,
    NumpyParticles,
    check_no_alignment,
)
from sharebench.kernel.elements.cavity import Cavity
from sharebench.kernel.elements.drift import Drift
from sharebench.kernel.elements.multipole import Multipole
from sharebench.kernel.elements.srotation import SRotation
from sharebench.kernel.elements.xyshift import XYShift

ELEMENTS: tuple[type[Element], ...] = (Drift, Multipole, Cavity, XYShift, SRotation)
DROPPED_TYPES = ("Marker",)  # no physics: left out of the buffer
SUPPORTED_TYPES = (*(e.xtrack_type for e in ELEMENTS), *DROPPED_TYPES)
BY_XTRACK_TYPE: dict[str, type[Element]] = {e.xtrack_type: e for e in ELEMENTS}
BY_KIND: dict[int, type[Element]] = {kind: e for e in ELEMENTS for kind in e.kinds.values()}


@dataclass
class PackedLine:
    """A line as the kernel reads it."""

    data: np.ndarray  # float64, the element stream
    n_elements: int  # elements in the stream (markers dropped)
    kinds: np.ndarray  # int, per element
    line_length: float  # [m]
    p0c: float  # [eV]
    mass0: float  # [eV]
    q0: float
    beta0: float
    xy_limit: float  # [m] global aperture

    @property
    def gamma0(self) -> float:
        return 1.0 / math.sqrt(1.0 - self.beta0**2)


def line_settings(line: Any) -> tuple[float, bool]:
    """The line's global aperture [m] (inf when off) and whether it asks for exact drifts."""
    cfg = dict(line.config) if getattr(line, "config", None) is not None else {}
    xy_limit = cfg.get("XTRACK_GLOBAL_XY_LIMIT", 1.0)
    xy_limit = float("inf") if xy_limit is None or xy_limit is False else float(xy_limit)
    return xy_limit, bool(cfg.get("XTRACK_USE_EXACT_DRIFTS", False))


def pack_element(el: Any, name: str, ref: LineReference) -> list[float]:
    """One element's doubles (empty for a Marker); UserError naming an element the kernel lacks."""
    tname = type(el).__name__
    if tname in DROPPED_TYPES:
        return []
    if tname not in BY_XTRACK_TYPE:
        raise UserError(
            f"element {name!r} has type {tname}, which the simpletrack engine does not support "
            f"(supported: {', '.join(SUPPORTED_TYPES)}); use --engine xtrack"
        )
    check_no_alignment(el, name)
    return BY_XTRACK_TYPE[tname].pack(el, name, ref)


def pack_line(line: Any) -> PackedLine:
    """Pack an xtrack Line (Drift, Multipole, Cavity, XYShift, SRotation, Marker)."""
    ref = line.particle_ref
    beta0 = float(ref.beta0[0])
    line_length = float(line.get_length())
    xy_limit, exact_drifts = line_settings(line)
    reference = LineReference(beta0=beta0, line_length_m=line_length, exact_drifts=exact_drifts)
    out: list[float] = []
    kinds: list[int] = []
    for name in list(line.element_names):
        values = pack_element(line.element_dict[name], name, reference)
        if values:
            out += values
            kinds.append(int(values[0]))
    return PackedLine(
        data=np.asarray(out, dtype=np.float64),
        n_elements=len(kinds),
        kinds=np.asarray(kinds, dtype=np.int64),
        line_length=line_length,
        p0c=float(ref.p0c[0]),
        mass0=float(ref.mass0),
        q0=abs(float(ref.q0)),
        beta0=beta0,
        xy_limit=xy_limit,
    )


def decode(packed: PackedLine) -> list[tuple]:
    """The element stream as a list of (kind, params...) tuples."""
    d = packed.data
    out = []
    pos = 0
    for _ in range(packed.n_elements):
        kind = int(d[pos])
        if kind not in BY_KIND:  # pragma: no cover - pack_line writes only known kinds
            raise ValueError(f"unknown element kind {kind}")
        params, pos = BY_KIND[kind].decode(d, pos)
        out.append(params)
    return out


def track_numpy(
    packed: PackedLine, coords: np.ndarray, nturns: int = 1, elements: list[tuple] | None = None
) -> np.ndarray:
    """Track a few particles with numpy (no losses); returns coords (9, n).

    ``elements``: the line as :func:`decode` returns it, when already decoded."""
    elements = elements if elements is not None else decode(packed)
    steps = [(BY_KIND[params[0]].track, params) for params in elements]
    p = NumpyParticles(coords, packed.beta0, packed.p0c, packed.q0)
    for _ in range(nturns):
        for step, params in steps:
            step(p, params)
    return p.coords()
