"""The default CPU sweep is sized by a real calibration run (sharebench.sweep.calibrate)."""

from __future__ import annotations

import re

import pytest

from sharebench.results import ResultsWriter
from sharebench.sweep import SweepConfig, validate
from sharebench.sweep.calibrate import MAX_PARTICLES, PROBE_PARTICLES, TARGET_TRACK_S, calibrate, round2
from sharebench.workloads import Workload
from support.crafted import crafted_rows
from support.lattices import tiny_lattice


@pytest.mark.parametrize("x, want", [(12_345, 12_000), (1_049, 1_000), (987, 990), (0, PROBE_PARTICLES)])
def test_two_significant_digits(x, want):
    assert round2(x) == want


def test_calibration_sizes_one_particle_count_from_the_measured_rate(tmp_path):
    plan = validate(
        SweepConfig(workload=Workload(device="cpu", lattice=str(tiny_lattice(tmp_path / "fodo.json"))), turns=50)
    )
    sized, note = calibrate(plan, None)
    m = re.fullmatch(
        r"calibration: 1,000 particles x 50 turns tracked in ([0-9.]+) s \(([0-9,]+) particle-turns/s\): "
        r"([0-9,]+) particles for about 2 s of exclusive tracking per cell \(kept between 1,000 and "
        r"1,000,000\)",
        note,
    )
    assert m, note
    rate, particles = int(m[2].replace(",", "")), int(m[3].replace(",", ""))
    assert sized.particles == (particles,) and plan.particles != sized.particles  # a new plan: frozen
    assert particles == min(MAX_PARTICLES, max(PROBE_PARTICLES, round2(rate * TARGET_TRACK_S / 50)))


def test_a_resumed_folder_keeps_its_sizes(tmp_path):
    ResultsWriter(tmp_path).append(crafted_rows())
    plan = validate(SweepConfig(workload=Workload(device="cpu", lattice=str(tiny_lattice(tmp_path / "fodo.json")))))
    sized, note = calibrate(plan, tmp_path)
    assert note == "calibration: kept the folder's particle counts 1,000, 2,000"
    assert sized.particles == (1000, 2000)
