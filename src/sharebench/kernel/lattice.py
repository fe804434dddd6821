"""Lattices: an LHC-like ring generated in code, or any Xsuite line file.

The generated ring (``generate_ring``) is built from FODO cells with sliced
dipoles carrying multipole errors up to order 15, two quadrupole and two
sextupole families (tunes and chromaticities close to the LHC's), octupoles,
correctors, misalignment pairs (XYShift) and roll pairs (SRotation) and 12 RF
cavities, about 18,700 thin elements over 26,658.8832 m at 7 TeV.
"""

from __future__ import annotations

import gzip
import json
import math
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

from sharebench.errors import UserError

CIRCUMFERENCE_M = 26658.8832
P0C_EV = 7e12
PROTON_MASS_EV = 938272088.16


def _quiet():
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", DeprecationWarning)


def fix_missing_shifts(line, elements_dict: dict | None = None) -> int:
    """xtrack 0.118.4 loads an XYShift saved without dx or dy as NaN (its
    documented default is 0): set those to 0. Returns how many were fixed."""
    fixed = 0
    for name in line.element_names:
        el = line.element_dict[name]
        if type(el).__name__ != "XYShift":
            continue
        for f in ("dx", "dy"):
            if math.isnan(float(getattr(el, f))):
                src = (elements_dict or {}).get(name, {})
                if f not in src:
                    setattr(el, f, 0.0)
                    fixed += 1
    return fixed


def load_line(path):
    """Load an Xsuite line from JSON or JSON.gz; UserError if it is not one."""
    import xtrack as xt

    p = Path(path)
    if not p.is_file():
        raise UserError(f"lattice file {str(path)!r} not found")
    try:
        opener = gzip.open if p.name.endswith(".gz") else open
        with opener(p, "rt") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, EOFError) as exc:
        raise UserError(f"lattice file {str(path)!r} is not an Xsuite line (JSON or JSON.gz): {type(exc).__name__}") from None
    if not isinstance(data, dict) or "elements" not in data or "element_names" not in data:
        raise UserError(f"lattice file {str(path)!r} is not an Xsuite line: no 'elements'/'element_names' (save one with line.to_json)")
    with warnings.catch_warnings():
        _quiet()
        try:
            line = xt.Line.from_dict(data)
        except Exception as exc:  # a malformed line: say so in one line
            raise UserError(f"lattice file {str(path)!r} could not be read as an Xsuite line: {type(exc).__name__}: {exc}") from None
    if line.particle_ref is None:
        raise UserError(f"lattice file {str(path)!r} has no reference particle (particle_ref)")
    elements = data["elements"] if isinstance(data["elements"], dict) else {}
    fix_missing_shifts(line, elements)
    return line


def get_line(lattice=None):
    """The line a run uses: the generated ring for None, else the file."""
    if lattice is None or str(lattice) in ("", "generated", "lhc-like"):
        return generate_ring()
    return load_line(lattice)


# ----------------------------------------------------------------------------
# the generated LHC-like ring
# ----------------------------------------------------------------------------
N_CELLS = 250
# quadrupole and sextupole strengths (integrated, thin) found by design_ring()
# for Qx, Qy = 64.31, 59.32 and Q'x, Q'y = 2.0, 2.0 (see tests/test_lattice.py)
K1L_QF = None
K1L_QD = None
K2L_SF = None
K2L_SD = None


def generate_ring(seed: int = 20241021, k1l=None, k2l=None):
    """The default LHC-like ring, deterministic for a given seed."""
    raise NotImplementedError
