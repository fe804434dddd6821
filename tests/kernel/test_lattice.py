"""Lattices: the generated LHC-like ring (mix, optics, stability) and line files."""

from __future__ import annotations

import gzip
import json
import math
import warnings
from collections import Counter

import numpy as np
import pytest
from numpy.testing import assert_allclose

from sharebench.cli import main as cli_main
from sharebench.errors import UserError
from sharebench.kernel import RunConfig, run_replica
from sharebench.kernel.distribution import linear_optics
from sharebench.kernel.elements import pack_line, track_numpy
from sharebench.kernel.lattice import (
    CIRCUMFERENCE_M,
    generate_ring,
    get_line_cached,
    load_line,
)
from sharebench.kernel.state import energy_deviations

pytestmark = pytest.mark.slow  # builds and tracks the rings: 362 s measured under load 7 on 2 cores

warnings.simplefilter("ignore", FutureWarning)


def _mix(line):
    types = Counter(type(line.element_dict[n]).__name__ for n in line.element_names)
    orders = Counter(
        int(line.element_dict[n].order)
        for n in line.element_names
        if type(line.element_dict[n]).__name__ == "Multipole"
    )
    return types, orders


@pytest.fixture(scope="module")
def ring():
    return get_line_cached(None)


def test_generated_ring_has_the_real_lhc_line_mix(ring, lhc_line_path):
    lhc = load_line(lhc_line_path)
    assert _mix(ring) == _mix(lhc)
    types, orders = _mix(ring)
    assert types == {"Multipole": 10137, "Drift": 8316, "XYShift": 176, "SRotation": 16, "Cavity": 12}
    assert max(orders) == 15
    assert len(ring.element_names) == 18657
    assert_allclose(ring.get_length(), CIRCUMFERENCE_M, rtol=1e-12)
    assert_allclose(ring.particle_ref.p0c[0], 7e12)
    assert_allclose(ring.particle_ref.mass0, 938272088.16, rtol=1e-9)
    cav = [ring.element_dict[n] for n in ring.element_names if type(ring.element_dict[n]).__name__ == "Cavity"]
    assert sum(c.voltage for c in cav) == 16e6


def test_generated_ring_is_deterministic(ring):
    # the cached ring went through JSON: SRotation keeps its angle, sin/cos may move by 1 ulp
    assert_allclose(pack_line(generate_ring()).data, pack_line(ring).data, rtol=1e-15, atol=0)


def test_lattice_command_prints_lhc_like_optics(capsys):
    assert cli_main(["lattice", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["elements"] == 18657
    assert_allclose([info["qx"], info["qy"]], [64.28, 59.31], atol=0.01)
    assert 0.0005 < info["qs"] < 0.005
    assert_allclose([info["dqx"], info["dqy"]], [2.0, 2.0], atol=0.5)
    assert_allclose(info["circumference_m"], CIRCUMFERENCE_M)


def test_lattice_command_text_on_a_file(lhc_line_path, capsys):
    assert cli_main(["lattice", "--lattice", str(lhc_line_path), "--no-twiss"]) == 0
    out = capsys.readouterr().out
    assert "elements        18,657  Multipole 10,137, Drift 8,316, XYShift 176, SRotation 16, Cavity 12" in out
    assert "circumference   26658.8832 m" in out


def test_default_particles_survive_1000_turns():
    rec = run_replica(RunConfig(device="cpu", particles=48, turns=1000, warmup_turns=0, seed=11))
    assert rec.survived == 48


def test_real_lhc_line_loads_without_nan_shifts(lhc_line_path):
    line = load_line(lhc_line_path)
    shifts = [line.element_dict[n] for n in line.element_names if type(line.element_dict[n]).__name__ == "XYShift"]
    assert len(shifts) == 176
    assert not any(math.isnan(s.dx) or math.isnan(s.dy) for s in shifts)
    assert any(s.dx != 0 for s in shifts)


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_any_line_file_round_trips(tmp_path, suffix):
    import xtrack as xt

    line = xt.Line(
        elements=[xt.Drift(length=2.0), xt.Multipole(knl=[0.0, 1e-3]), xt.Drift(length=3.0)],
        element_names=["d0", "q0", "d1"],
    )
    line.particle_ref = xt.Particles(p0c=450e9)
    path = tmp_path / f"line{suffix}"
    line.to_json(str(path))
    again = load_line(path)
    assert list(again.element_names) == ["d0", "q0", "d1"]
    assert_allclose(again.get_length(), 5.0)


def _write(path, text: str, gz=False):
    if gz:
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(
    "name, content, gz, fragment",
    [
        ("notes.txt", "hello", False, "is not an Xsuite line (JSON or JSON.gz): JSONDecodeError"),
        ("empty.json", "", False, "is not an Xsuite line (JSON or JSON.gz)"),
        ("list.json", "[1, 2]", False, "is not an Xsuite line: no 'elements'/'element_names'"),
        ("other.json.gz", json.dumps({"a": 1}), True, "is not an Xsuite line: no 'elements'/'element_names'"),
        ("notgz.json.gz", "{}", False, "is not an Xsuite line (JSON or JSON.gz): BadGzipFile"),
    ],
)
def test_a_file_that_is_not_a_line(tmp_path, name, content, gz, fragment):
    path = _write(tmp_path / name, content, gz)
    with pytest.raises(UserError) as info:
        load_line(path)
    assert str(info.value).startswith(f"lattice file '{path}'")
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_lattice_file_via_cli(tmp_path, capsys):
    assert cli_main(["lattice", "--lattice", str(tmp_path / "nope.json")]) == 2
    assert (
        capsys.readouterr().err
        == f"sharebench: error: lattice file '{tmp_path / 'nope.json'}' not found; give an Xsuite line JSON or JSON.gz\n"
    )


def test_closed_orbit_is_found(ring):
    """The matched distribution is centred on the 4D closed orbit (the ring has misalignments)."""
    packed = pack_line(ring)
    optics = linear_optics(packed)
    co = optics["closed_orbit"]
    assert np.max(np.abs(co[[0, 2]])) > 1e-7  # a real orbit, not zero
    c = np.zeros((9, 1))
    c[:4, 0] = co
    c[6], c[7], c[8] = energy_deviations(c[5], packed.beta0)
    after = track_numpy(packed, c, 1)
    assert_allclose(after[:4, 0], co, atol=1e-10)
