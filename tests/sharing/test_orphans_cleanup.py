"""Issue 27: ``sharebench cleanup`` says "removed" only for what it removed. A symbolic link named like
an orphaned MPS daemon folder (its owner gone) is left in place, what it points at untouched, and the
report says so; a real orphaned folder is removed and reported removed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sharebench.sharing import stop_orphans


def gone_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def folder(base, name, owner):
    root = base / name
    (root / "pipe").mkdir(parents=True)
    (root / "owner.pid").write_text(f"{owner}\n")
    return root


def test_a_symlinked_folder_is_left_in_place_and_not_reported_removed(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    target = folder(tmp_path, "elsewhere", gone_pid())  # someone's folder outside the temporary folder
    link = tmp / "sbmps-link"
    link.symlink_to(target, target_is_directory=True)
    real = folder(tmp, "sbmps-real", gone_pid())
    done = stop_orphans(tmp, control="no-such-mps-control")
    assert done == [
        f"left {link} in place: a symbolic link, not a daemon folder a sweep made",
        f"stopped an orphaned MPS daemon (pid none running) and removed {real}",
    ]
    assert link.is_symlink() and (target / "owner.pid").exists() and not real.exists()


@pytest.mark.slow  # a real `sharebench cleanup` process
def test_cleanup_command_reports_the_link(tmp_path):
    target = folder(tmp_path, "elsewhere", gone_pid())
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp / "sbmps-link").symlink_to(target, target_is_directory=True)
    env = {**os.environ, "TMPDIR": str(tmp)}
    p = subprocess.run(
        [sys.executable, "-m", "sharebench", "cleanup"], capture_output=True, text=True, env=env, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"left {tmp / 'sbmps-link'} in place: a symbolic link, not a daemon folder a sweep made\n"
    assert "removed" not in p.stdout
