"""report.md / report.html from a crafted results folder, alone and beside a second one."""

from __future__ import annotations

import re

import pytest

from sharebench.errors import UserError
from sharebench.report import build_report
from sharebench.results import ResultsWriter
from support.crafted import crafted_rows


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    a = tmp_path_factory.mktemp("a100ish")
    ResultsWriter(a).append(crafted_rows())
    # a second folder: the same cells 10% slower (like another GPU model)
    b = tmp_path_factory.mktemp("other")
    rows = crafted_rows()
    for r in rows:
        if r.get("track_s") is not None:
            r["track_s"] *= 1.1
            r["track_end"] = r["track_start"] + r["track_s"]
    ResultsWriter(b).append(rows)
    return a, b


def test_report_alone(folders):
    a, _ = folders
    paths = build_report(a)
    md = paths["markdown"].read_text()
    for title in (
        "Time-slicing: N replicas on one device at once",
        "MPS: N replicas as clients of one MPS server",
        "MIG: one replica per MIG instance against the full GPU",
        "Partition scaling against the ideal",
        "Aggregate throughput per physical device and sharing gain",
        "Flags",
        "Machine",
        "Definitions",
    ):
        assert f"## {title}" in md
    # the numbers of the crafted sweep (see test_analysis): 3.03% time-slicing, 40.91% MPS (2 repeats: no
    # interval, no "≠ 0?"), 135.90% MIG loss
    assert "| 1,000 | timeslice:2 | 2 | 11.000 | [8.776, 13.787] | 22.000 | 22.667 |" in md
    assert "| 3.03 | [-14.59, 24.29] | no |" in md and "| 40.91 |  |  |" in md and "| 135.90 |" in md
    # the Answer is the first section, with its decision plot and its CSVs
    assert md.split("\n## ")[1].startswith("Answer\n")
    assert "![decision](plots/decision.png)" in md
    assert (a / "tables" / "answer.csv").exists() and (a / "tables" / "choices.csv").exists()
    assert "overlap 50.00% < 95%: replicas did not track together; left out of the loss" in md
    assert "no provenance.json in this folder" in md
    for name in ("loss_vs_particles", "time_vs_particles", "throughput"):
        assert f"![{name}](plots/{name}.png)" in md
        assert (a / "plots" / f"{name}.svg").read_text().lstrip().startswith("<?xml")
    for name in ("timeslice", "mps", "mig", "partition", "throughput", "flags", "cells"):
        assert (a / "tables" / f"{name}.csv").exists()
    # rebuilt from the same results, the figures are the same files (no dates, fixed ids)
    before = {p.name: p.read_bytes() for p in (a / "plots").glob("*_vs_particles.*")}
    build_report(a)
    assert before == {p.name: p.read_bytes() for p in (a / "plots").glob("*_vs_particles.*")}


def test_html_is_self_contained(folders):
    a, _ = folders
    page = build_report(a)["html"].read_text()
    srcs = re.findall(r"src='([^']*)'", page) + re.findall(r'src="([^"]*)"', page)
    assert len(srcs) >= 3 and all(s.startswith("data:image/") for s in srcs)
    assert "<link" not in page and "http://" not in page and "https://" not in page
    assert page.count("<table") >= 6 and "135.90" in page


def test_report_beside_a_second_folder(folders):
    a, b = folders
    md = build_report(a, compare=b)["markdown"].read_text()
    assert f"Compared with **{b.name}**." in md
    # the slower folder: T_1 = 11 * 1.1 = 12.1, same loss (all times scaled alike)
    assert "| 1,000 | timeslice:2 | 2 | 12.100 | [9.654, 15.166] | 24.200 | 24.933 |" in md
    section = md.split("## Time-slicing")[1].split("\n## ")[0]
    assert section.count("| 3.03 | [-14.59, 24.29] |") == 2
    page = (a / "report.html").read_text()
    assert "<div class='side'>" in page and b.name in page


def test_typed_in_publication_figures(tmp_path, folders):
    """A folder typed in from a paper: only the columns it knows (no wall-clock windows)."""
    a, _ = folders
    pub = tmp_path / "publication"
    pub.mkdir()
    lines = [
        "schema_version,sweep_id,cell_id,mode,mode_kind,replicas,replica,repeat,device_class,backend,engine,"
        "lattice,particles,turns,track_s,status,cell_status"
    ]
    for r, (t1, t2) in enumerate([(26.0, 60.0), (26.4, 61.0), (25.8, 59.0)], start=1):
        common = "paper,{cid},{mode},{kind},{n},{i},{r},gpu,opencl,simpletrack,lhc,5000000,100,{t},ok,ok"
        lines.append("1," + common.format(cid=f"ex_r{r}", mode="exclusive", kind="exclusive", n=1, i=0, r=r, t=t1))
        for i in range(2):
            lines.append(
                "1," + common.format(cid=f"ts_r{r}", mode="timeslice:2", kind="timeslice", n=2, i=i, r=r, t=t2)
            )
    (pub / "results.csv").write_text("\n".join(lines) + "\n")
    md = build_report(pub, compare=a)["markdown"].read_text()
    # without windows, T_N is the longest replica time: mean(60, 61, 59) = 60; T_1 = mean(26, 26.4, 25.8);
    # loss = (60 - 52.133) / 52.133 = 15.09%
    assert "| 5,000,000 | timeslice:2 | 2 | 26.067 | [25.319, 26.837] | 52.133 | 60.000 |" in md
    assert "| 15.09 |" in md


@pytest.mark.parametrize(
    "which, message",
    [
        ("missing", "results folder {d}/missing does not exist"),
        ("compare-missing", "comparison folder {d}/nope does not exist"),
        ("compare-self", "--compare {a} is the results folder itself; give a second results folder"),
    ],
)
def test_report_refusals(folders, tmp_path, which, message):
    a, _ = folders
    with pytest.raises(UserError) as e:
        if which == "missing":
            build_report(tmp_path / "missing")
        elif which == "compare-missing":
            build_report(a, compare=tmp_path / "nope")
        else:
            build_report(a, compare=a)
    assert str(e.value) == message.format(d=tmp_path, a=a)


def test_report_of_a_sweep_where_every_cell_failed(tmp_path):
    rows = [
        dict(r, status="failed", error="boom", cell_status="failed", cell_error="replica 0: boom")
        for r in crafted_rows()
    ]
    ResultsWriter(tmp_path).append(rows)
    md = build_report(tmp_path)["markdown"].read_text()
    assert "## Time-slicing" not in md and "## MIG" not in md  # nothing to compute, nothing invented
    # every measured cell is listed as excluded: 3 + 4 + 3 + 3 (CPU) + 3 + 4 (GPU) = 20
    assert md.count("| failed: replica 0: boom | yes |") == 20


def test_section_images_link_relative_to_the_folder_from_any_cwd(folders, monkeypatch):
    """A results folder given as a relative path (as `sharebench run --out x` does) still links its
    report sections' plots relative to report.md, so the folder can be moved or committed."""
    a, _ = folders
    monkeypatch.chdir(a.parent)
    md = build_report(a.relative_to(a.parent))["markdown"].read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert links and all(not link.startswith(("/", a.name)) for link in links), links
    assert all((a / link).exists() for link in links), links


def test_verdict_lines_are_built_in_report_from_the_answer_rows(tmp_path):
    """The Answer's Markdown comes from report.answer; analysis gives the rows only."""
    from sharebench import analysis
    from sharebench.analysis.answer import answer_rows
    from sharebench.report.answer import verdict_line
    from sharebench.results import load_results

    ResultsWriter(tmp_path).append(crafted_rows())
    rows = answer_rows(analysis.build_tables(load_results(tmp_path))).set_index("mode", drop=False)
    assert verdict_line(rows.loc["exclusive"]).startswith(
        "**exclusive** (2,000 particles): the baseline, throughput 1.00×"
    )
    ts = verdict_line(rows.loc["timeslice:2"])
    assert ts.startswith("**timeslice:2** (1,000 particles): throughput ")
    assert f"worst job {rows.loc['timeslice:2', 'slowdown']:.2f}× its time alone [" in ts
    assert ts.endswith(f"trust: {rows.loc['timeslice:2', 'trust']}")
