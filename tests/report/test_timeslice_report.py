"""The report's "Why time-slicing costs this workload X%" and the end screen's interval, from a synthetic
folder whose split is known (support.timeslice): a 2 ms slice, 0.2 ms switches and a 0.5 ms refill."""

from __future__ import annotations

import re

import pandas as pd

from sharebench.analysis.timeslice_split import SPLIT_COLUMNS, append_runs
from sharebench.report import build_report, end_screen
from sharebench.results import write_provenance
from support.timeslice import gpu_folder, pair_loss_pct

LOSS = pair_loss_pct(1050.0, 2.0, 0.2, 0.5)  # 46.67%


def test_the_section_states_the_split_in_one_sentence_with_one_plot(tmp_path) -> None:
    append_runs(tmp_path, gpu_folder(tmp_path))
    md = build_report(tmp_path)["markdown"].read_text()
    title = f"## Why time-slicing costs this workload {LOSS:.1f}%"
    assert title in md
    section = md.split(title, 1)[1].split("\n## ", 1)[0]
    sentence = next(line for line in section.splitlines() if line.startswith("simpletrack"))
    assert sentence.startswith(f"simpletrack (2k particles, 10 turns) under timeslice:2 loses {LOSS:.1f}% [")
    assert (
        "2.00 ms slices (9.1% of the time idle switching)" in sentence and "idle 0.200 ms at every switch" in sentence
    )
    assert "progresses at 0.75×" in sentence and "refill of 0.50" in sentence
    # the model named as what it is: the probe pair alone first, then the transfer from the run beside a probe
    assert (
        "Two probe processes alone (no workload)" in sentence
        and "10.0% of loss from slice and switch alone" in sentence
    )
    assert "a transfer from that time-sliced run, not a prediction from independent probes" in sentence
    # what another interval would do: predicted rows, the measured slice among them, and what NVIDIA documents
    assert "| 4 | " in section and "2.000 (measured)" in section and section.count("| predicted |") >= 7
    assert "A 4 ms time slice would cut the loss to 20." in section and "(predicted, not measured;" in section
    assert "documents their lengths in milliseconds" in section and "k8s-dra-driver-gpu" in section
    assert section.count("![") == 1 and (tmp_path / "plots" / "timeslice_split.png").stat().st_size > 10_000
    table = pd.read_csv(tmp_path / "tables" / "timeslice_split.csv")
    assert list(table.columns) == SPLIT_COLUMNS and len(table) == 1
    screen, status = end_screen(tmp_path)
    line = next(x for x in screen.splitlines() if x.startswith("  timeslice:2"))
    assert "a 4 ms time slice would cut its loss to 20." in line and "(predicted, not measured;" in line
    assert status == 0


def test_without_a_split_the_section_says_why_in_one_line(tmp_path) -> None:
    gpu_folder(tmp_path)
    reason = "an MPS daemon serves this machine (control pipe in /tmp/nvidia-mps): its clients share the GPU"
    write_provenance(tmp_path, {"timeslice_probe": {"status": "unavailable", "reason": reason}})
    md = build_report(tmp_path)["markdown"].read_text()
    section = md.split("## Why time-slicing costs what it costs", 1)[1].split("\n## ", 1)[0]
    assert section.strip() == f"No loss was split here: probe: cannot run here: {reason}."
    assert f"| time-slice probe | cannot run here: {reason} |" in md  # the provenance section
    assert not (tmp_path / "plots" / "timeslice_split.png").exists()
    assert pd.read_csv(tmp_path / "tables" / "timeslice_split.csv").empty


def test_the_section_names_the_evicted_term_and_what_stays_unexplained(tmp_path) -> None:
    """Beside a heavy neighbour with a 0.1 ms larger refill: the sentence names it and the rest, unexplained."""
    from support.timeslice import beside_probe

    runs = gpu_folder(tmp_path, refills=(0.35, 0.4, 0.45))
    heavy = []
    for r, refill in zip(runs, (0.45, 0.5, 0.55)):
        beside, rec = beside_probe(1050.0, 2.0, 0.2, refill)
        heavy.append(dict(r, neighbour="heavy:128", track_s=beside, window_ms=rec.window_ms, gaps_ms=list(rec.gaps_ms)))
    append_runs(tmp_path, runs + heavy)
    md = build_report(tmp_path)["markdown"].read_text()
    section = md.split(f"Why time-slicing costs this workload {LOSS:.1f}%", 1)[1].split("\n## ", 1)[0]
    sentence = next(line for line in section.splitlines() if line.startswith("simpletrack"))
    assert "beside a heavy neighbour (heavy:128" in sentence
    assert re.search(r"evicts 0\.(099|10\d) ms \[", sentence), sentence
    assert "the light probe alone predicts" in sentence and "Unexplained: " in sentence and " points [" in sentence


def test_a_rate_above_one_is_said_not_identified_never_a_negative_refill(tmp_path) -> None:
    """A workload faster inside a shared slice than alone (refill below zero): the sentence and the table say
    the refill is not identified; no negative time is printed."""
    runs = gpu_folder(tmp_path)
    faster = [dict(r, gaps_ms=[g * 0.7 for g in r["gaps_ms"]]) for r in runs]  # progress at more than 1x
    append_runs(tmp_path, faster)
    md = build_report(tmp_path)["markdown"].read_text()
    section = md.split("## Why time-slicing costs", 1)[1].split("\n## ", 1)[0]
    sentence = next(line for line in section.splitlines() if line.startswith("simpletrack"))
    assert "(faster than alone: the refill is not identified)" in sentence
    assert "| not identified |" in section and "refill of -" not in section
    table = pd.read_csv(tmp_path / "tables" / "timeslice_split.csv")
    assert table["refill_ms"].isna().all() and table["in_slice_rate"].iloc[0] > 1
    assert table["not_identified"].iloc[0].startswith("refill (in-slice rate above 1")
