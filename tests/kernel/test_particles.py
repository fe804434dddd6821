"""The shared particle file: the same array matched_gaussian draws, drawn once, reused, keyed by its inputs."""

import numpy as np

from sharebench.kernel.distribution import matched_gaussian
from sharebench.kernel.particles import particles_key, shared_particles

OPTICS = {"closed_orbit": np.array([1e-4, 0.0, -2e-4, 0.0]), "betax": 150.0, "alfx": -1.2, "betay": 80.0, "alfy": 0.7}


def test_cached_particles_equal_fresh_and_are_drawn_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAREBENCH_CACHE", str(tmp_path))
    fresh = matched_gaussian(OPTICS, 0.99, 7000.0, 5000, 3)
    first = shared_particles(OPTICS, 0.99, 7000.0, 5000, 3)
    files = list((tmp_path / "particles").glob("*.npy"))
    assert len(files) == 1
    mtime = files[0].stat().st_mtime_ns
    second = shared_particles(OPTICS, 0.99, 7000.0, 5000, 3)
    np.testing.assert_array_equal(first, fresh)
    np.testing.assert_array_equal(second, fresh)
    assert files[0].stat().st_mtime_ns == mtime  # loaded, not drawn and written again


def test_key_depends_on_every_input(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAREBENCH_CACHE", str(tmp_path))
    base = (OPTICS, 0.99, 7000.0, 5000, 3, 2.5e-6, 2.5e-6, 0.05, 1e-4)
    keys = {particles_key(*base)}
    for i, other in ((3, 6000), (4, 4), (5, 3e-6), (7, 0.06)):
        args = list(base)
        args[i] = other
        keys.add(particles_key(*args))
    keys.add(particles_key({**OPTICS, "betax": 151.0}, *base[1:]))
    assert len(keys) == 6
    a = shared_particles(OPTICS, 0.99, 7000.0, 5000, 3)
    b = shared_particles(OPTICS, 0.99, 7000.0, 5000, 4)
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(b, matched_gaussian(OPTICS, 0.99, 7000.0, 5000, 4))


def test_a_corrupt_file_is_drawn_again_and_the_switch_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAREBENCH_CACHE", str(tmp_path))
    shared_particles(OPTICS, 0.99, 7000.0, 500, 1)
    (path,) = (tmp_path / "particles").glob("*.npy")
    path.write_bytes(b"not an array")
    np.testing.assert_array_equal(
        shared_particles(OPTICS, 0.99, 7000.0, 500, 1), matched_gaussian(OPTICS, 0.99, 7000.0, 500, 1)
    )
    monkeypatch.setenv("SHAREBENCH_PARTICLE_CACHE", "0")
    monkeypatch.setenv("SHAREBENCH_CACHE", str(tmp_path / "off"))
    shared_particles(OPTICS, 0.99, 7000.0, 500, 1)
    assert not list((tmp_path / "off").glob("particles/*.npy"))
