"""A committed campaign's per-cell scratch as one cells.tar.xz: packed, read back, and read by the report
(whose Markdown files begin with the line naming the command that rebuilds them)."""

from __future__ import annotations

import shutil
import tarfile

import pandas as pd

from sharebench.analysis.telemetry import cell_telemetry
from sharebench.cli import main
from sharebench.report.build import GENERATED
from sharebench.results.archive import CELLS_ARCHIVE, pack_scratch, scratch_root
from support.paths import ROOT
from tools import pack_results

# a trimmed copy of results/h200/warm/warm-10M-1turn: the documents and the packed scratch (NVML samples)
WARM = ROOT / "tests" / "data" / "results" / "h200" / "warm" / "warm-10M-1turn"


def scratch_folder(path):
    (path / "cells" / "exclusive_p1000_r1").mkdir(parents=True)
    (path / "cells" / "exclusive_p1000_r1" / "record.0.json").write_text('{"track_s": 1.5}')
    (path / "warm" / "prime").mkdir(parents=True)
    (path / "warm" / "prime" / "replica.0.log").write_text("primed\n")
    (path / ".sharebench.lock").write_text("")
    (path / "results.csv").write_text("sweep_id\n")
    return path


def test_pack_keeps_the_documents_and_packs_the_scratch(tmp_path):
    folder = scratch_folder(tmp_path / "run")
    archive = pack_scratch(folder)
    assert archive == folder / CELLS_ARCHIVE
    assert sorted(p.name for p in folder.iterdir()) == [CELLS_ARCHIVE, "results.csv"]
    with tarfile.open(archive) as tar:
        assert tar.getnames() == [
            "cells/exclusive_p1000_r1/record.0.json",
            "warm/prime/replica.0.log",
            ".sharebench.lock",
        ]
    unpacked = scratch_root(folder)
    assert unpacked is not None and unpacked != folder
    assert (unpacked / "cells" / "exclusive_p1000_r1" / "record.0.json").read_text() == '{"track_s": 1.5}'
    assert pack_scratch(folder) is None  # nothing left to pack


def test_a_resumed_folder_packs_old_and_new_cells_into_one_archive(tmp_path):
    folder = scratch_folder(tmp_path / "run")
    pack_scratch(folder)
    (folder / "cells" / "mps-2_p1000_r1").mkdir(parents=True)
    (folder / "cells" / "mps-2_p1000_r1" / "record.0.json").write_text("{}")
    pack_scratch(folder)
    with tarfile.open(folder / CELLS_ARCHIVE) as tar:
        names = tar.getnames()
    assert "cells/exclusive_p1000_r1/record.0.json" in names and "cells/mps-2_p1000_r1/record.0.json" in names
    assert not (folder / "cells").exists()


def test_the_report_reads_raw_telemetry_from_the_archive(tmp_path):
    """Energy over each cell's tracking window needs the raw NVML samples: found in cells.tar.xz; without
    the archive the report falls back to the whole sampled window and says so."""
    folder = shutil.copytree(WARM, tmp_path / "warm-10M-1turn")
    assert not (folder / "cells").exists()
    cells = cell_telemetry(folder)
    measured = cells[~cells["warmup"]]
    assert set(measured["track_energy_source"]) == {"nvml_counter"}
    assert main(["report", str(folder)]) == 0
    summary = pd.read_csv(folder / "telemetry_summary.csv")
    assert set(summary["energy_source"]) == {"nvml_counter"}, summary
    assert not (folder / "cells").exists()  # read from a temporary folder, the results folder unchanged
    # the report's Markdown files say what made them and the command that rebuilds them
    for md in [folder / "report.md", *sorted((folder / "tables").glob("*.md"))]:
        assert md.read_text().splitlines()[0] == GENERATED, md.name

    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("results.csv", "sweep.json", "provenance.json", "notes.txt"):
        shutil.copy(folder / name, bare / name)
    assert set(cell_telemetry(bare)["track_energy_source"]) == {"sampled window (includes set-up)"}


def test_the_pack_tool_packs_every_results_folder_under_a_campaign(tmp_path, capsys):
    for name in ("a", "b/c"):
        scratch_folder(tmp_path / "campaign" / name)
    assert pack_results.main([str(tmp_path / "campaign")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" (")[0] for line in out] == [
        str(tmp_path / "campaign" / "a" / CELLS_ARCHIVE),
        str(tmp_path / "campaign" / "b" / "c" / CELLS_ARCHIVE),
    ]
    assert pack_results.main([str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip() == f"pack_results: no folder {tmp_path / 'nowhere'}"
