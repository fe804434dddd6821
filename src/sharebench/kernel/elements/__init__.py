"""The element types the simpletrack kernel runs, one class per xtrack type, as xtrack keeps one
class and one C source per element: its packer (xtrack element -> doubles in the kernel's buffer),
its decoder, and its numpy step with the C code's arithmetic. The C code of all of them is one
source, engines/simpletrack.c; each class names its ``#define`` kind codes and macros there.

Modules: ``base`` (the Element interface, NumpyParticles, LineReference), ``drift``, ``multipole``,
``cavity``, ``xyshift``, ``srotation`` (one per element type; a Marker is dropped), ``line``
(pack_line, decode, track_numpy over a whole line).
"""

from pathlib import Path

from sharebench.kernel.elements.base import Element, LineReference, NumpyParticles
from sharebench.kernel.elements.cavity import CAVITY, Cavity
from sharebench.kernel.elements.drift import DRIFT_EXACT, DRIFT_EXPANDED, Drift
from sharebench.kernel.elements.line import (
    BY_KIND,
    DROPPED_TYPES,
    ELEMENTS,
    SUPPORTED_TYPES,
    PackedLine,
    decode,
    pack_line,
    track_numpy,
)
from sharebench.kernel.elements.multipole import MULT_THICK, MULT_THIN, Multipole
from sharebench.kernel.elements.srotation import SROTATION, SRotation
from sharebench.kernel.elements.xyshift import XYSHIFT, XYShift

SOURCE_DIR = Path(__file__).parent  # the packers' sources (a lattice cache key hashes them)

__all__ = [
    "BY_KIND",
    "CAVITY",
    "DRIFT_EXACT",
    "DRIFT_EXPANDED",
    "DROPPED_TYPES",
    "ELEMENTS",
    "MULT_THICK",
    "MULT_THIN",
    "SOURCE_DIR",
    "SROTATION",
    "SUPPORTED_TYPES",
    "XYSHIFT",
    "Cavity",
    "Drift",
    "Element",
    "LineReference",
    "Multipole",
    "NumpyParticles",
    "PackedLine",
    "SRotation",
    "XYShift",
    "decode",
    "pack_line",
    "track_numpy",
]
