"""Lattices: an LHC-like ring generated in code, or any Xsuite line file.

The generated ring (``generate_ring``): 256 FODO cells over 26,658.8832 m at
7 TeV, sliced dipoles carrying random field errors up to order 15, two
quadrupole and two sextupole families (Q = 64.28 / 59.31, Q' = 2 / 2),
octupoles, correctors and spool pieces, misaligned sextupoles (XYShift pairs),
rolled quadrupoles (SRotation pairs) and 12 RF cavities. It has exactly the
element mix of the real LHC line of the original Simpletrack benchmark (18,657
elements, same counts per type and same histogram of multipole orders), so its
cost per turn matches that line's.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import warnings
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from sharebench.errors import UserError
from sharebench.files import write_atomic
from sharebench.kernel.cache import cache_dir
from sharebench.kernel.elements import SOURCE_DIR, PackedLine, pack_line

CIRCUMFERENCE_M = 26658.8832
P0C_EV = 7e12
PROTON_MASS_EV = 938272088.16


def _quiet() -> None:
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", DeprecationWarning)


def fix_missing_shifts(line: Any, elements_dict: dict[str, Any] | None = None) -> int:
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


def load_line(path: str | Path) -> Any:
    """Load an Xsuite line from JSON or JSON.gz; UserError if it is not one."""
    import xtrack as xt  # noqa: PLC0415 - slow to import: only where a line is built

    p = Path(path)
    if not p.is_file():
        raise UserError(f"lattice file {str(path)!r} not found")
    try:
        opener = gzip.open if p.name.endswith(".gz") else open
        with opener(p, "rt") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, EOFError) as exc:
        raise UserError(
            f"lattice file {str(path)!r} is not an Xsuite line (JSON or JSON.gz): {type(exc).__name__}"
        ) from None
    if not isinstance(data, dict) or "elements" not in data or "element_names" not in data:
        raise UserError(
            f"lattice file {str(path)!r} is not an Xsuite line: no 'elements'/'element_names' "
            "(save one with line.to_json)"
        )
    with warnings.catch_warnings():
        _quiet()
        try:
            line = xt.Line.from_dict(data)
        except Exception as exc:  # noqa: BLE001 - a malformed line: say so in one line
            raise UserError(
                f"lattice file {str(path)!r} could not be read as an Xsuite line: {type(exc).__name__}: {exc}"
            ) from None
    if line.particle_ref is None:
        raise UserError(f"lattice file {str(path)!r} has no reference particle (particle_ref)")
    elements = data["elements"] if isinstance(data["elements"], dict) else {}
    missing = [n for n in line.element_names if n not in line.element_dict]
    if missing:
        raise UserError(
            f"lattice file {str(path)!r} lists element {missing[0]!r} in element_names but does not "
            "define it in elements"
        )
    fix_missing_shifts(line, elements)
    check_line_numbers(line, str(path))
    return line


def check_line_numbers(line: Any, path: str) -> None:
    """A line a sweep can track: at least one element, every name it lists defined, every length
    and strength finite; otherwise a one-line UserError naming the file and the element."""
    names = list(line.element_names)
    if not names:
        raise UserError(f"lattice file {path!r} has no elements; give a line with at least one element")
    for name in names:
        element = line.element_dict.get(name)
        if element is None:
            raise UserError(
                f"lattice file {path!r} lists element {name!r} in element_names but does not define it in elements"
            )
        for attr in ("length", "knl", "ksl", "k1", "k2", "k3", "angle", "voltage", "frequency"):
            value = getattr(element, attr, None)
            if value is None:
                continue
            try:
                numbers = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                continue
            if not np.all(np.isfinite(numbers)):
                raise UserError(
                    f"lattice file {path!r}: element {name!r} has a non-finite {attr} "
                    f"({numbers.tolist()}); "
                    "every length and strength must be a finite number"
                )


# ----------------------------------------------------------------------------
# the generated LHC-like ring
# ----------------------------------------------------------------------------
N_CELLS = 256  # 104.1 m cells (the LHC's arc cell: 106.9 m)
HARMONIC = 35640
R_REF_M = 0.017  # reference radius of the field errors
DIPOLE_SLICE_M = 3.4  # as the LHC line's dipole slices
TARGET_Q = (64.28, 59.31)  # the LHC injection working point: fractional tunes 0.03 apart
TARGET_DQ = (2.0, 2.0)
# Integrated strengths from a Newton fit of the full ring's tunes and
# chromaticities with xtrack's 6d twiss (benchmarks/design_ring.py).
# tests/test_lattice.py checks the resulting tunes and chromaticities.
K1L_QF = 0.02723254749084114
K1L_QD = -0.026020043493609705
K2L_SF = 0.017977366723683705
K2L_SD = -0.03278322440304959


# The element mix of the real LHC line (rdemaria/simpletrack's, 18,657 thin
# elements): the generated ring has the same counts per type and the same
# histogram of multipole orders, so that its cost per turn matches.
N_MULTIPOLES = 10137
N_DRIFTS = 8316
N_DIPOLE_SLICES = 3722
N_SHIFT_PAIRS = 88
N_ROLL_PAIRS = 8
ORDER_HISTOGRAM = {15: 3722, 2: 2400, 3: 1616, 4: 792, 5: 616, 14: 458, 12: 440, 1: 89, 6: 4}


def _errors(rng: np.random.Generator, order: int, main: float, units: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Random normal/skew field errors b_n, a_n (in units of 1e-4 of main at
    R_REF_M) for n = 2..order, as integrated knl/ksl arrays of length order+1."""
    knl = np.zeros(order + 1)
    ksl = np.zeros(order + 1)
    for n in range(2, order + 1):
        scale = abs(main) * 1e-4 * units * math.factorial(n) / R_REF_M**n
        knl[n] = rng.normal() * scale
        ksl[n] = rng.normal() * scale
    return knl, ksl


def _assign_orders(rng: np.random.Generator, min_orders: list[int]) -> list[int]:
    """Draw an order >= each role's minimum from ORDER_HISTOGRAM, without replacement."""
    left = dict(ORDER_HISTOGRAM)
    out = [0] * len(min_orders)
    for i in sorted(range(len(min_orders)), key=lambda k: -min_orders[k]):
        allowed = [o for o in sorted(left) if o >= min_orders[i] and left[o] > 0]
        weights = np.array([left[o] for o in allowed], dtype=float)
        o = allowed[rng.choice(len(allowed), p=weights / weights.sum())]
        left[o] -= 1
        out[i] = o
    return out


ROLE_MIN_ORDER = {"quad": 1, "sext": 2, "oct": 3, "corr": 0, "dipole": 0, "spool": 0}
FIXED_ROLES_PER_CELL = 10  # per sign: 2 quadrupole slices, a sextupole, an octupole, a corrector
DRIFTED_ROLES = ("dipole", "quad")  # always followed by a drift
DRIFT_AFTER_M = {"dipole": DIPOLE_SLICE_M, "quad": 0.8}  # any other role: 0.25 m
DIPOLE_ANGLE_RAD = 2 * math.pi / N_DIPOLE_SLICES


def _spread(rng: np.random.Generator, n_cells: int, total: int) -> np.ndarray:
    """``total`` items over ``n_cells`` as evenly as possible, the remainder on random cells."""
    per_cell = np.full(n_cells, total // n_cells)
    per_cell[rng.choice(n_cells, total - per_cell.sum(), replace=False)] += 1
    return per_cell


def _cell_roles(rng: np.random.Generator, n_cells: int) -> tuple[list[tuple[int, str, int]], np.ndarray, np.ndarray]:
    """Every multipole's (cell, role, sign): per cell 2 quadrupoles (2 slices each), 2 sextupoles,
    2 octupoles, 2 orbit correctors, dipole slices, and spool pieces / correctors; with the dipole
    slices and spool pieces per cell."""
    dip = _spread(rng, n_cells, N_DIPOLE_SLICES)
    spool = _spread(rng, n_cells, N_MULTIPOLES - N_DIPOLE_SLICES - FIXED_ROLES_PER_CELL * n_cells)
    roles = []
    for c in range(n_cells):
        for sign in (1, -1):
            roles += [(c, "quad", sign), (c, "quad", sign), (c, "sext", sign), (c, "oct", sign), (c, "corr", sign)]
        roles += [(c, "dipole", 0)] * int(dip[c]) + [(c, "spool", 0)] * int(spool[c])
    return roles, dip, spool


def _drift_after(rng: np.random.Generator, roles: list[tuple[int, str, int]]) -> np.ndarray:
    """Which multipoles a drift follows: all dipole and quadrupole slices, then a random choice among
    the others to reach N_DRIFTS."""
    others = [i for i, r in enumerate(roles) if r[1] not in DRIFTED_ROLES]
    n_dr_other = N_DRIFTS - sum(1 for r in roles if r[1] in DRIFTED_ROLES)
    drift_after = np.zeros(len(roles), dtype=bool)
    drift_after[[i for i, r in enumerate(roles) if r[1] in DRIFTED_ROLES]] = True
    drift_after[rng.choice(others, n_dr_other, replace=False)] = True
    return drift_after


def _magnet(
    rng: np.random.Generator,
    role: str,
    sign: int,
    order: int,
    strengths: tuple[float, float, float, float],
    errors: bool,
) -> dict[str, Any]:
    """A multipole's knl/ksl (and, for a dipole slice, hxl and length) for its role."""
    k1l_qf, k1l_qd, k2l_sf, k2l_sd = strengths
    if role == "dipole":
        theta = DIPOLE_ANGLE_RAD
        knl, ksl = _errors(rng, order, theta) if errors else (np.zeros(order + 1), np.zeros(order + 1))
        knl[0] = theta
        return {"knl": knl, "ksl": ksl, "hxl": theta, "length": DIPOLE_SLICE_M}
    knl, ksl = np.zeros(order + 1), np.zeros(order + 1)
    if role == "quad":
        k1l = (k1l_qf if sign > 0 else k1l_qd) / 2
        if errors:
            knl, ksl = _errors(rng, order, k1l, 0.5)
        knl[1] = k1l
    elif role == "sext":
        knl[2] = k2l_sf if sign > 0 else k2l_sd
    elif role == "oct":
        knl[3] = 0.4 * sign
    elif role == "corr":
        knl[0], ksl[0] = rng.normal(size=2) * 1e-7 if errors else (0.0, 0.0)
    elif errors:  # spool pieces: a small random component of their top order
        knl[order] = rng.normal() * 1e-3 * math.factorial(order) / R_REF_M ** max(order - 2, 0)
    return {"knl": knl, "ksl": ksl}


def _cell_sequence(roles: list[tuple[int, str, int]], idx: list[int]) -> list[int]:
    """One cell's multipoles in beam order: [QF a, QF b, SF, MO, MCB, half the dipoles and spools,
    QD a, QD b, SD, MO, MCB, the rest], spool pieces interleaved after dipole slices."""
    head_f, head_d = idx[0:5], idx[5:10]
    body = idx[10:]
    dips = [k for k in body if roles[k][1] == "dipole"]
    spls = [k for k in body if roles[k][1] == "spool"]
    order_body = []
    per = max(1, len(dips))
    for j, d in enumerate(dips):
        order_body.append(d)
        order_body += spls[j * len(spls) // per : (j + 1) * len(spls) // per]
    half = len(order_body) // 2
    return head_f + order_body[:half] + head_d + order_body[half:]


def _fill_cell(cell: list[tuple], pre_qd: int, n_cells: int) -> None:
    """Give the cell's remaining length to the drifts before each quadrupole (in place), keeping the
    number of drifts."""
    used = sum(e[2] for e in cell if e[2] is not None)
    fill = (CIRCUMFERENCE_M / n_cells - used) / 2
    for pos in (pre_qd, len(cell) - 1):
        kind, kw, d, role = cell[pos]
        cell[pos] = (kind, kw, (d or 0.0) + fill, role)
        if d is None:  # gained a drift: take one away elsewhere to keep the count
            for q in range(len(cell) - 2, -1, -1):
                if cell[q][2] is not None and cell[q][3] in ("spool", "sext", "oct", "corr") and q != pre_qd:
                    cell[q] = (cell[q][0], cell[q][1], None, cell[q][3])
                    cell[pos] = (kind, kw, cell[pos][2] + 0.25, role)
                    break


def _cells(
    rng: np.random.Generator,
    n_cells: int,
    k1l_qf: float,
    k1l_qd: float,
    k2l_sf: float,
    k2l_sd: float,
    errors: bool = True,
) -> list[list[tuple[str, dict[str, Any], float | None, str]]]:
    """The ring's cells as lists of (kind, kwargs, drift_after_m, role); None drift: adjacent."""
    roles, dip, spool = _cell_roles(rng, n_cells)
    orders = _assign_orders(rng, [ROLE_MIN_ORDER[r[1]] for r in roles])
    drift_after = _drift_after(rng, roles)
    strengths = (k1l_qf, k1l_qd, k2l_sf, k2l_sd)
    cells = []
    i = 0
    for c in range(n_cells):
        idx = list(range(i, i + FIXED_ROLES_PER_CELL + int(dip[c]) + int(spool[c])))
        i = idx[-1] + 1
        seq = _cell_sequence(roles, idx)
        cell = []
        for k in seq:
            _c, role, sign = roles[k]
            drift_m = DRIFT_AFTER_M.get(role, 0.25) if drift_after[k] else None
            cell.append(("Multipole", _magnet(rng, role, sign, orders[k], strengths, errors), drift_m, role))
        _fill_cell(cell, seq.index(idx[5]) - 1, n_cells)
        cells.append(cell)
    return cells


def _build(elements: list[Any], names: list[str]) -> Any:
    import xtrack as xt  # noqa: PLC0415 - slow to import: only where a line is built

    with warnings.catch_warnings():
        _quiet()
        line = xt.Line(elements=elements, element_names=names)
        line.particle_ref = xt.Particles(p0c=P0C_EV, mass0=PROTON_MASS_EV, q0=1)
    line.config.XTRACK_GLOBAL_XY_LIMIT = 1.0
    return line


def _make(kind: str, kw: dict[str, Any]) -> Any:
    import xtrack as xt  # noqa: PLC0415 - slow to import: only where a line is built

    with warnings.catch_warnings():
        _quiet()
        return getattr(xt, kind)(**kw)


def generate_ring(
    seed: int = 20241021,
    k1l: tuple[float, float] | None = None,
    k2l: tuple[float, float] | None = None,
    n_cells: int = N_CELLS,
    imperfections: bool = True,
) -> Any:
    """The default LHC-like ring (an xtrack Line), deterministic for a seed."""
    k1l_qf, k1l_qd = k1l if k1l is not None else (K1L_QF, K1L_QD)
    k2l_sf, k2l_sd = k2l if k2l is not None else (K2L_SF, K2L_SD)
    rng = np.random.default_rng(seed)
    cells = _cells(rng, n_cells, k1l_qf, k1l_qd, k2l_sf, k2l_sd, errors=imperfections)
    elements: list[Any] = []
    names: list[str] = []
    counts: Counter[str] = Counter()

    def add(kind: str, kw: dict[str, Any]) -> None:
        key = kind.lower()
        names.append(f"{key}.{counts[key]}")
        counts[key] += 1
        elements.append(_make(kind, kw))

    shift_cells = set(np.linspace(0, n_cells - 1, N_SHIFT_PAIRS).astype(int).tolist()) if imperfections else set()
    roll_cells = set(np.linspace(3, n_cells - 5, N_ROLL_PAIRS).astype(int).tolist()) if imperfections else set()
    beta0 = P0C_EV / math.sqrt(P0C_EV**2 + PROTON_MASS_EV**2)
    f_rf = HARMONIC * beta0 * 299792458.0 / CIRCUMFERENCE_M
    for icell, cell in enumerate(cells):
        for i, (kind, kw, drift, _role) in enumerate(cell):
            if icell in roll_cells and i == 0:  # a rolled QF (both slices)
                roll = float(rng.normal() * 0.02)  # degrees
                add("SRotation", {"angle": roll})
            shifted = icell in shift_cells and i == 2  # a misaligned SF
            if shifted:
                dx, dy = rng.normal(size=2) * 2e-4
                add("XYShift", {"dx": dx, "dy": dy})
            add(kind, kw)
            if shifted:
                add("XYShift", {"dx": -dx, "dy": -dy})
            if icell in roll_cells and i == 1:
                add("SRotation", {"angle": -roll})
            if drift is not None:
                add("Drift", {"length": drift})
            if icell == n_cells // 2 and i == 1:
                # the RF, as in the LHC line: 8 x 2 MV at 400 MHz, 4 x 0 V at 200 MHz
                for j in range(12):
                    on = j < 8
                    add("Cavity", {"voltage": 2e6 if on else 0.0, "frequency": f_rf if on else f_rf / 2, "lag": 180.0})
    return _build(elements, names)


# ----------------------------------------------------------------------------
# caches: the packed line (what the simpletrack engine reads) and the
# generated ring as a line file, so that a replica's set-up stays short
# ----------------------------------------------------------------------------
def _source_files() -> list[Path]:
    """The files the cached lattices depend on: this module and the element packers."""
    return [Path(__file__), *sorted(SOURCE_DIR.glob("*.py"))]


def _generator_key() -> str:
    import xtrack  # noqa: PLC0415 - slow to import: only where a line is built

    h = hashlib.sha1()
    for path in _source_files():
        h.update(path.read_bytes())
    h.update(xtrack.__version__.encode())
    return "generated-" + h.hexdigest()[:16]


def _file_key(path: str | Path) -> str:
    p = Path(path).resolve()
    st = p.stat()
    h = hashlib.sha1(f"{p}|{st.st_size}|{st.st_mtime_ns}".encode())
    for source in _source_files()[1:]:
        h.update(source.read_bytes())
    return "file-" + h.hexdigest()[:16]


def _lattice_file(lattice: str | Path | None) -> str | Path | None:
    """The lattice file a run reads, or None for the generated ring (None, "", "generated", "lhc-like")."""
    return None if lattice is None or str(lattice) in ("", "generated", "lhc-like") else lattice


def get_line_cached(lattice: str | Path | None = None) -> Any:
    """The line a run uses: the file, or (None) the generated ring, kept as a
    line file in the cache."""
    file = _lattice_file(lattice)
    if file is not None:
        return load_line(file)
    path = cache_dir("lattices") / f"{_generator_key()}.json"
    if path.exists():
        try:
            return load_line(path)
        except UserError:
            pass
    line = generate_ring()
    text = io.StringIO()
    with warnings.catch_warnings():
        _quiet()
        line.to_json(text)
    write_atomic(path, text.getvalue())
    return load_line(path)  # the same numbers whether cached or not


def _read_packed(path: Path) -> PackedLine | None:
    """The packed line cached at ``path``; None when it is missing or unreadable."""
    try:
        z = np.load(path)
        return PackedLine(
            data=z["data"],
            n_elements=int(z["n_elements"]),
            kinds=z["kinds"],
            **{k: float(z[k]) for k in ("line_length", "p0c", "mass0", "q0", "beta0", "xy_limit")},
        )
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):  # torn or foreign: rebuilt
        return None


def get_packed(lattice: str | Path | None = None) -> PackedLine:
    """The packed line for the simpletrack engine, cached per lattice."""
    file = _lattice_file(lattice)
    if file is not None and not Path(file).is_file():
        raise UserError(f"lattice file {str(file)!r} not found")
    key = _generator_key() if file is None else _file_key(file)
    path = cache_dir("lattices") / f"{key}.npz"
    if path.exists():
        packed = _read_packed(path)
        if packed is not None:
            return packed
    packed = pack_line(get_line_cached(lattice))
    buf = io.BytesIO()
    np.savez(
        buf,
        data=packed.data,
        n_elements=packed.n_elements,
        kinds=packed.kinds,
        line_length=packed.line_length,
        p0c=packed.p0c,
        mass0=packed.mass0,
        q0=packed.q0,
        beta0=packed.beta0,
        xy_limit=packed.xy_limit,
    )
    write_atomic(path, buf.getvalue())
    return packed


def describe(line: Any, twiss: bool = True) -> dict[str, Any]:
    """Element mix, circumference, reference particle; tunes and
    chromaticities from xtrack's 6d twiss (on the CPU) when twiss=True."""
    counts = Counter(type(line.element_dict[n]).__name__ for n in line.element_names)
    orders = Counter(
        int(line.element_dict[n].order)
        for n in line.element_names
        if type(line.element_dict[n]).__name__ == "Multipole"
    )
    ref = line.particle_ref
    out = {
        "elements": len(line.element_names),
        "element_types": dict(counts.most_common()),
        "multipole_orders": {str(k): v for k, v in sorted(orders.items())},
        "max_multipole_order": max(orders) if orders else None,
        "circumference_m": float(line.get_length()),
        "p0c_ev": float(ref.p0c[0]),
        "mass0_ev": float(ref.mass0),
        "q0": float(ref.q0),
    }
    if twiss:
        import xobjects as xo  # noqa: PLC0415 - slow to import: only where a line is built

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if line.tracker is None:
                line.build_tracker(_context=xo.ContextCpu())
            try:
                tw = line.twiss(method="6d")
            except Exception as exc:  # noqa: BLE001 - an unstable line: say so rather than crash
                raise UserError(
                    f"twiss failed on this lattice ({type(exc).__name__}: {exc}); is it a stable ring?"
                ) from None
        out.update(
            qx=float(tw.qx),
            qy=float(tw.qy),
            qs=float(tw.qs),
            dqx=float(tw.dqx),
            dqy=float(tw.dqy),
            betx_max_m=float(np.max(tw.betx)),
            bety_max_m=float(np.max(tw.bety)),
            dx_max_m=float(np.max(np.abs(tw.dx))),
        )
    return out
