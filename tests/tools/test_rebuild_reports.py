"""Every committed report is derived from its folder by the current code (issue 36 item 1): each committed
results folder's report is rebuilt in a temporary copy (``tools.rebuild_reports``) and any difference in
the text it writes fails, naming the file and the first changed line. A result that changes because the
analysis changed is rebuilt (``python -m tools.rebuild_reports --write``) and its diff reviewed, never
left stale."""

from __future__ import annotations

import shutil

import pytest

from support.paths import ROOT
from tools.rebuild_reports import committed_folders, first_difference, main, stale

pytestmark = pytest.mark.slow  # a report per committed folder, 5 to 10 s each

FOLDERS = committed_folders()


def test_the_committed_folders_are_found():
    names = {f.relative_to(ROOT).as_posix() for f in FOLDERS}
    assert {"results/cpu-default", "results/cpu-example", "results/h200/cuda"} <= names


@pytest.mark.parametrize("folder", FOLDERS, ids=[f.relative_to(ROOT).as_posix() for f in FOLDERS])
def test_a_committed_report_is_what_its_folder_rebuilds_to(folder):
    changes = stale(folder)
    assert not changes, (
        f"{folder.relative_to(ROOT)} is stale; rebuild with `python -m tools.rebuild_reports --write` and "
        "review the diff:\n" + "\n".join(changes)
    )


def test_a_stale_report_is_named_with_its_first_changed_line(tmp_path, capsys):
    folder = tmp_path / "cpu-example"
    shutil.copytree(ROOT / "results" / "cpu-example", folder)
    assert main(["--write", str(folder)]) == 0 and stale(folder) == []
    report = folder / "report.md"
    report.write_text(report.read_text().replace("## Answer", "## Answer (edited by hand)", 1))
    assert main([str(folder)]) == 1
    out = capsys.readouterr().out
    assert "stale: " in out and "report.md: differs, line " in out and "edited by hand" in out
    assert first_difference("a\nb\n", "a\nc\n") == "line 2: 'b' -> 'c'"
    assert main([str(tmp_path)]) == 2  # not a results folder
