"""The Answer's "Measure it" commands fit a stated time on the machine that measured the folder (issue 43):
the workload's own burst size, the campaigns' bursts, a tracker's size shrunk until the cells fit, and the
line says the time its dry run will predict."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from sharebench.analysis import analyse
from sharebench.analysis.reproduce import Reproduce
from sharebench.analysis.suggest import BURSTS, MIN_PARTICLES, Ask, sized, sized_command, unit_pattern
from sharebench.cli import main
from sharebench.report.answer import Answer
from support.paths import ROOT

DATA = ROOT / "tests" / "data" / "results"
ABOUT = re.compile(r"\(about (\d+(?:\.\d+)?) (s|min|h): (\d+) cells")
H200 = Reproduce(
    ("--device", "cuda:0", "--turns", "1", "--particles", "15000000"), "particles", 30.0, unit_s=1.43, gap_s=0.8
)
MODES = ("exclusive", "timeslice:2", "timeslice:4", "mps:2")
USERS = Ask(MODES, 3, "interactive")


def seconds(line: str) -> float:
    found = ABOUT.search(line)
    assert found, line
    return float(found[1]) * {"s": 1, "min": 60, "h": 3600}[found[2]]


def measure_lines(folder: Path, suggest_s: float = 600.0) -> list[str]:
    answer = Answer(folder, analyse(folder), suggest_s=suggest_s)
    return [r.split("Measure it: ", 1)[1] for r in answer.choices["reason"] if "Measure it: " in r]


def test_the_default_cpu_sweeps_answer_suggests_nothing_over_ten_minutes():
    """The default CPU sweep's Answer suggested an interactive measurement of about 59 min; now each command
    fits 10 minutes here, at one-unit bursts (the default pattern's duty cycle) and the campaigns' 20 bursts."""
    lines = measure_lines(DATA / "cpu-default")
    assert len(lines) == 3
    for line in lines:
        assert seconds(line) <= 600, line
        assert f"--bursts {BURSTS} " in line and "--particles 1700 " in line, line  # it fits at its own size
    assert "--pattern interactive:burst=1,think=0.05 " in lines[0] and "--pattern serve:rate=1.5,size=1 " in lines[1]


def test_a_size_that_does_not_fit_is_halved_until_the_cells_do():
    """The H200 folder's 15 M particles take 1.43 s a turn: an interactive command at that size runs for 18
    minutes here (20 bursts a cell, alone too: --bursts is every cell's cap; the committed report's, of 7 modes
    and 10-unit bursts, said 15.9 h); halved down to 7.5 M particles it fits 10 minutes, to 3.8 M 5 minutes:
    a longer time asked keeps more of the size."""
    five = sized(H200, USERS, 300.0)
    ten = sized(H200, USERS, 600.0)
    size = {s: int(dict(zip(s.options, s.options[1:]))["--particles"]) for s in (five, ten)}
    assert five.cells_s <= 300 < sized(H200, USERS, 1e9).cells_s
    assert MIN_PARTICLES <= size[five] < size[ten] < 15_000_000 and ten.cells_s <= 600
    line = sized_command(H200, ["sharebench run"], USERS)
    assert f"--particles {size[ten]} " in line and seconds(line) == pytest.approx(ten.cells_s, rel=0.1)
    assert "1.43 s per unit alone at 15,000,000 particles, " in line  # the basis, and how it was scaled


def test_nothing_fits_says_so_and_a_measured_label_keeps_its_settings():
    slow = Reproduce(("--turns", "1", "--particles", "200"), "particles", unit_s=60.0)  # a minute a unit at 200
    line = sized_command(slow, ["sharebench run"], USERS)
    assert line.endswith(", more than the 10 min asked)") and f"--particles {MIN_PARTICLES} " in line
    assert unit_pattern("interactive:burst=4,think=1", 0.1) == "interactive:burst=4,think=1"
    assert unit_pattern("interactive", 0.1) == "interactive:burst=1,think=0.05"
    assert unit_pattern("serve", 0.1) == "serve:rate=3,size=1"  # 0.3 of the 10 requests/s one replica serves alone
    assert unit_pattern("interactive", float("nan")) == "interactive"  # no unit here to size by


def test_suggest_minutes_sizes_the_report_for_the_time_asked(tmp_path, capsys):
    folder = tmp_path / "cuda"
    shutil.copytree(DATA / "h200" / "cuda", folder)
    assert main(["report", str(folder), "--suggest-minutes", "60"]) == 0
    capsys.readouterr()
    report = (folder / "report.md").read_text()
    hour = [seconds(ln) for ln in report.splitlines() if "Measure it: " in ln]
    assert hour and all(s <= 3600 for s in hour) and max(hour) > 600, hour  # more of the size, within the hour
    assert main(["report", str(folder), "--suggest-minutes", "0"]) == 2
    assert "bad --suggest-minutes '0'" in capsys.readouterr().err


@pytest.mark.slow  # a real tiny CPU sweep, then the dry run of the command its Answer suggests
def test_the_line_says_what_the_dry_run_of_its_command_predicts(tmp_path, capsys, lattice):
    folder = tmp_path / "folder"
    argv = ["run", "--device", "cpu", "--lattice", str(lattice), "--particles", "3000", "--turns", "5"]
    assert main([*argv, "--modes", "exclusive,timeslice:2", "--out", str(folder), "--no-progress"]) == 0
    capsys.readouterr()
    line = next(ln for ln in measure_lines(folder) if "--neighbours" not in ln and "interactive" in ln)
    command = shlex.split(line.split("`")[1])
    assert command[:2] == ["sharebench", "run"]
    assert main([*command[1:], "--dry-run", "--out", str(tmp_path / "dry")]) == 0
    dry = re.search(r"^predicted: \d+ s \(cells (\d+) s", capsys.readouterr().out, re.M)
    assert dry, line
    # the same model from two measurements of one unit on this machine, minutes apart: within the noise
    assert seconds(line) == pytest.approx(float(dry[1]), rel=0.3, abs=5), (line, dry[0])
