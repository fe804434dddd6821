"""What a sweep prints on stderr beside its progress bar: a line of its own, never glued to the bar
(issue 36: the budget's "... reached" line was written after the bar's text on the bar's line)."""

from __future__ import annotations

import re

import pytest

from sharebench.sweep import SweepConfig, run_sweep
from sharebench.workloads import Workload

pytestmark = pytest.mark.slow  # a real replica process


def test_the_stopped_line_is_not_glued_to_the_progress_bar(lattice, tmp_path, capsys):
    config = SweepConfig(
        workload=Workload.from_dict({"device": "cpu", "lattice": lattice}),
        modes=["exclusive"],
        particles=[2000],
        turns=20,
        repeats=2,
        warmup_repeats=0,
        progress=True,  # the bar drawn on stderr, as a terminal user sees it
        telemetry_interval_s=None,
        stop_after_s=0.05,  # the first cell runs, then the sweep stops with one left
        command=["test"],
    )
    run_sweep(config, tmp_path / "r")
    err = capsys.readouterr().err
    assert "M particle-turns" in err  # the bar was drawn
    assert "sharebench: stopped after 0.05 s (--stop-after): 1 of 2 cell(s) not run" in err
    # the line starts a line: after a newline or the bar's carriage return that clears it, not after the bar
    assert not re.search(r"[^\r\n]sharebench: stopped", err), err
