"""Names that are not valid UTF-8 (issue 37, item 5): an ``--out`` from a Latin-1 file system reached the
report as a traceback. Every word of the command line is checked first: one line, exit 2, nothing made."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sharebench.cli import main
from support.faults import one_line_error

pytestmark = [pytest.mark.faults]

BAD = os.fsdecode(b"r\xffsults")  # what Python makes of the name: a surrogate for the byte 0xff


def test_a_non_utf8_out_is_refused_before_anything_runs(tmp_path):
    out = os.fsencode(tmp_path) + b"/r\xffsults"
    argv = [sys.executable.encode(), b"-m", b"sharebench", b"run", b"--device", b"cpu", b"--out", out]
    p = subprocess.run(argv, capture_output=True, timeout=120)
    assert p.returncode == 2
    err = p.stderr.decode()
    assert one_line_error(err) == (
        f"sharebench: error: --out '{tmp_path}/r\\xffsults' is not valid UTF-8; sharebench writes names into "
        "UTF-8 files: give one in UTF-8"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["run", f"--out={BAD}"], "--out 'r\\xffsults'"),
        (["report", BAD], "'r\\xffsults'"),
        (["compare", "a", BAD], "'r\\xffsults'"),
    ],
)
def test_every_word_is_checked(argv, shown, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"sharebench: error: {shown} is not valid UTF-8; sharebench writes names into UTF-8 files: give one in UTF-8\n"
    )
