"""A disk that fills and a folder that turns read-only, for real: a small tmpfs the test mounts
(skipped, with the reason, where this process may not mount one: not root, no CAP_SYS_ADMIN)."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from sharebench.results import load_results
from support.faults import one_line_error, sharebench, sweep_argv

pytestmark = [pytest.mark.faults, pytest.mark.slow]


@pytest.fixture
def disk(tmp_path):
    """A 16 MiB tmpfs mounted for this test."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({p.stderr.strip() or p.returncode}); run as root to test a full disk")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(mnt):
    """Write until the disk says ENOSPC; returns the filler file."""
    filler = mnt / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_is_one_line_and_loses_nothing(disk, lattice):
    out = disk / "r"
    p = sharebench(*sweep_argv(lattice, out, "--repeats", "1"))
    assert p.returncode == 0, p.stderr
    before = (out / "results.csv").read_bytes()
    filler = fill(disk)
    p = sharebench("run", "--resume", "--repeats", "3", "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode in (1, 2)
    line = one_line_error(p.stderr)
    assert "No space left on device" in line and str(out) in line
    assert (out / "results.csv").read_bytes().startswith(before)
    assert load_results(out)["cell_id"].tolist()[0] == "exclusive_p2000_r1"
    filler.unlink()
    p = sharebench("run", "--resume", "--repeats", "3", "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode == 0, p.stderr
    assert sorted(load_results(out)["repeat"]) == [1, 2, 3]


def test_a_read_only_folder_is_one_line(disk, lattice):
    out = disk / "r"
    p = sharebench(*sweep_argv(lattice, out, "--repeats", "1"))
    assert p.returncode == 0, p.stderr
    before = (out / "results.csv").read_bytes()
    subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
    p = sharebench("run", "--resume", "--repeats", "2", "--out", str(out), "--no-progress", "--no-telemetry")
    assert p.returncode in (1, 2)
    assert "Read-only file system" in one_line_error(p.stderr)
    p = sharebench("report", str(out))
    assert p.returncode == 1
    assert "Read-only file system" in one_line_error(p.stderr)
    assert (out / "results.csv").read_bytes() == before
