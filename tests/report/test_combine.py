"""One report over several results folders (sharebench.report.combine): pages joined as blocks,
rendered once; the folders themselves are left as they were."""

from __future__ import annotations

import pytest

from sharebench.errors import UserError
from sharebench.report.combine import combine_reports, folder_names, write_combined
from sharebench.report.render import Heading
from sharebench.results import ResultsWriter, read_provenance, write_provenance
from support.crafted import crafted_rows


def _folder(path, slower=1.0, node=""):
    rows = crafted_rows()
    for r in rows:
        if r.get("track_s") is not None:
            r["track_s"] *= slower
            r["track_end"] = r["track_start"] + r["track_s"]
    ResultsWriter(path).append(rows)
    if node:
        prov = read_provenance(path) or {}
        prov.setdefault("device", {})["node"] = node
        write_provenance(path, prov)
    return path


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    root = tmp_path_factory.mktemp("folders")
    return [
        _folder(root / "ours", node="gpu-node-a"),
        _folder(root / "earlier", slower=1.1),
        _folder(root / "third", slower=1.2, node="gpu node/b"),
    ]


def test_folders_are_named_by_their_node_and_kept_apart(three, tmp_path):
    assert folder_names(three) == ["gpu-node-a", "earlier", "gpu-node-b"]
    twins = [_folder(tmp_path / "x" / "results"), _folder(tmp_path / "y" / "results")]
    assert folder_names(twins) == ["results", "results-1"]


def test_one_page_per_comparison_rendered_once(three, tmp_path):
    before = sorted(p.name for p in three[0].iterdir())
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    combined = write_combined([str(d) for d in three], html, md, tmp_path / "work")
    page = html.read_text()
    assert page.count("<body") == 1 and page.count("</html>") == 1
    # the first page's title, then one heading per further comparison
    assert [b.text for b in combined.blocks if isinstance(b, Heading) and b.level == 1] == [
        "sharebench report: gpu-node-a, compared with gpu-node-b"
    ]
    assert page.count("<h1>") == 2 and md.read_text().count("\n# ") == 1 and md.read_text().startswith("# ")
    assert "Compared with **earlier**." in md.read_text() and "Compared with **gpu-node-b**." in md.read_text()
    assert "<div class='side'>" in page and page.count("data:image/png;base64,") >= 2
    assert (combined.plots / "loss_vs_particles.png").exists()
    assert sorted(p.name for p in three[0].iterdir()) == before  # the originals are not written into


def test_one_folder_is_its_own_report(three, tmp_path):
    combined = combine_reports([three[1]], tmp_path / "work")
    assert combined.title == "sharebench report: earlier"
    assert "Compared with" not in combined.markdown()
    assert not any(isinstance(b, Heading) and b.level == 1 for b in combined.blocks)


@pytest.mark.parametrize(
    "dirs, message",
    [
        ([], "no results folder to report on"),
        (["/nonexistent/results"], "results folder /nonexistent/results does not exist"),
    ],
)
def test_refusals_in_one_line(tmp_path, dirs, message):
    with pytest.raises(UserError) as exc:
        combine_reports(dirs, tmp_path / "work")
    assert str(exc.value) == message
