"""The default CPU sweep is sized by a real calibration run (sharebench.sweep.calibrate)."""

from __future__ import annotations

import re

import pytest

from sharebench.results import ResultsWriter
from sharebench.sweep import SweepConfig, validate
from sharebench.sweep.calibrate import MAX_PARTICLES, PROBE_PARTICLES, TARGET_TRACK_S, calibrate, round2, size_for
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
        r"([0-9,]+) particles, about ([0-9.]+) s of exclusive tracking per replica run \(aimed at 2 s, kept "
        r"between 1,000 and 1,000,000(: the smallest size tracks longer here)?\)",
        note,
    )
    assert m, note
    rate, particles = int(m[2].replace(",", "")), int(m[3].replace(",", ""))
    assert sized.particles == (particles,) and plan.particles != sized.particles  # a new plan: frozen
    assert particles == min(MAX_PARTICLES, max(PROBE_PARTICLES, round2(rate * TARGET_TRACK_S / 50)))
    assert float(m[4]) == pytest.approx(particles * 50 / rate, rel=0.01)  # the size's seconds, from the rate


@pytest.mark.parametrize(
    ("rate", "particles", "said"),
    [
        (10_000.0, 2_000, "2,000 particles, about 2 s of exclusive tracking per replica run (aimed at 2 s, kept "
         "between 1,000 and 1,000,000)"),
        # the machine: 1,000 particles x 10 turns in 4.35 s; the note said "about 2 s"
        (10_000 / 4.35, 1_000, "1,000 particles, about 4.35 s of exclusive tracking per replica run (aimed at 2 s, "
         "kept between 1,000 and 1,000,000: the smallest size tracks longer here)"),
    ],
)  # fmt: skip
def test_the_note_says_the_seconds_of_the_size_picked(rate, particles, said):
    assert size_for(rate, 10) == (particles, said)


def test_a_resumed_folder_keeps_its_sizes(tmp_path):
    ResultsWriter(tmp_path).append(crafted_rows())
    plan = validate(SweepConfig(workload=Workload(device="cpu", lattice=str(tiny_lattice(tmp_path / "fodo.json")))))
    sized, note = calibrate(plan, tmp_path)
    assert note == "calibration: kept the folder's particle counts 1,000, 2,000"
    assert sized.particles == (1000, 2000)
