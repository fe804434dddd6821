"""Small real Xsuite lines, so that a replica's set-up stays short in tests."""

from __future__ import annotations

from pathlib import Path

import xtrack as xt


def tiny_lattice(path: Path, cells: int = 25) -> Path:
    """A thin FODO ring of ``cells`` cells saved as an Xsuite line at ``path``."""
    els = []
    for _ in range(cells):
        els += [
            xt.Multipole(knl=[0, 1 / 12]),
            xt.Drift(length=10.0),
            xt.Multipole(knl=[0, -1 / 12]),
            xt.Drift(length=10.0),
        ]
    line = xt.Line(elements=els)
    line.particle_ref = xt.Particles(p0c=7e12, mass0=xt.PROTON_MASS_EV)
    line.to_json(str(path))
    return path
