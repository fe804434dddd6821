"""tools.slow_tests: the slow list from a real pytest run's JUnit XML, and the marker conftest gives it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tools.slow_tests import main, node_id, timings

SAMPLE = """
import time

import pytest


def test_quick():
    pass


@pytest.mark.parametrize("s", [0.0, 0.3])
def test_sleeps(s):
    time.sleep(s)


class TestGroup:
    def test_slow_method(self):
        time.sleep(0.3)


@pytest.mark.skip(reason="never")
def test_skipped():
    time.sleep(5)
"""


def run_sample(tmp_path: Path) -> Path:
    """A real pytest run of a small test file, its JUnit XML beside it."""
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_sample.py").write_text(SAMPLE)
    junit = tmp_path / "junit.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", "tests"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return junit


def test_the_list_holds_the_tests_over_the_threshold_as_pytest_names_them(tmp_path):
    junit = run_sample(tmp_path)
    times = timings(junit, tmp_path)
    assert set(times) == {
        "tests/test_sample.py::test_quick",
        "tests/test_sample.py::test_sleeps[0.0]",
        "tests/test_sample.py::test_sleeps[0.3]",
        "tests/test_sample.py::TestGroup::test_slow_method",
    }  # the skipped one is left out
    out, long = tmp_path / "slow.txt", tmp_path / "long.txt"
    argv = [str(junit), "--threshold", "0.2", "--long-threshold", "100", "--out", str(out), "--long-out", str(long)]
    assert main([*argv, "--machine", "here", "--root", str(tmp_path)]) == 0
    listed = [line for line in out.read_text().splitlines() if not line.startswith("#")]
    assert listed == ["tests/test_sample.py::TestGroup::test_slow_method", "tests/test_sample.py::test_sleeps[0.3]"]
    assert "Tests over 0.2 s" in out.read_text() and "on here;\n# 2 tests" in out.read_text()
    assert [line for line in long.read_text().splitlines() if not line.startswith("#")] == []


def test_a_test_no_run_timed_keeps_its_tier_and_a_timed_one_moves(tmp_path):
    """make test leaves the long tests out: its JUnit XML alone keeps them long (and slow); a long test that
    a run timed under the threshold leaves the list, and a test whose file is gone leaves it too."""
    junit = run_sample(tmp_path)
    out, long = tmp_path / "slow.txt", tmp_path / "long.txt"
    untimed = "tests/test_sample.py::test_never_run_here"
    gone = "tests/test_gone.py::test_x"
    long.write_text(f"# before\n{untimed}\ntests/test_sample.py::test_quick\n{gone}\n")
    argv = [str(junit), "--threshold", "0.2", "--long-threshold", "0.25", "--out", str(out), "--long-out", str(long)]
    assert main([*argv, "--root", str(tmp_path)]) == 0
    assert [line for line in long.read_text().splitlines() if not line.startswith("#")] == [
        "tests/test_sample.py::TestGroup::test_slow_method",
        untimed,
        "tests/test_sample.py::test_sleeps[0.3]",
    ]


def test_a_junit_class_with_no_file_is_an_error(tmp_path):
    try:
        node_id("tests.nowhere.test_x", "test_y", tmp_path)
    except ValueError as exc:
        assert "no test file for JUnit class 'tests.nowhere.test_x'" in str(exc)
    else:
        raise AssertionError("no error for a class without a file")


def test_no_junit_is_one_line(tmp_path, capsys):
    assert main([str(tmp_path / "none.xml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("slow_tests: no JUnit XML at ") and err.count("\n") == 1


def test_the_committed_lists_name_tests_that_exist_and_conftest_marks_them():
    from conftest import LONG_TESTS, measured_slow

    slow, long = measured_slow(), measured_slow(LONG_TESTS)
    assert len(slow) > 100 and len(long) > 20
    root = Path(__file__).resolve().parents[2]
    missing = sorted({n.split("::")[0] for n in slow | long if not (root / n.split("::")[0]).is_file()})
    assert not missing, f"tests/slow_tests.txt or long_tests.txt names files that are gone (make slow-tests): {missing}"
    # one file's tests, collected as make test and make check select them: its long tests are in neither
    file = sorted(long)[0].split("::")[0]
    listed = {n for n in long if n.startswith(file + "::")}
    for marks in ("long", "not long", "not slow"):
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m", marks, file],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )
        chosen = {line for line in proc.stdout.splitlines() if line.startswith(file + "::")}
        assert (listed <= chosen) if marks == "long" else not (listed & chosen), (marks, proc.stdout[-2000:])
