"""notebooks/sharing_experiment.ipynb, executed top to bottom in local mode (kfp.local) at tiny sizes."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("kfp", reason="kfp not installed (pip install -e '.[kfp]')")
nbclient = pytest.importorskip("nbclient", reason="nbclient not installed (pip install -e '.[test]')")
nbformat = pytest.importorskip("nbformat", reason="nbformat not installed (pip install -e '.[test]')")

from support.contexts import cpu_opencl_spec  # noqa: E402 - after the importorskip above
from support.lattices import tiny_lattice  # noqa: E402 - after the importorskip above
from support.paths import ROOT  # noqa: E402 - after the importorskip above

pytestmark = pytest.mark.slow  # runs the notebook in a kernel

NOTEBOOK = ROOT / "notebooks" / "sharing_experiment.ipynb"
EARLIER = ROOT / "tests" / "data" / "results" / "cpu-example"


def _outputs(nb, kind: str) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == kind]


def _text(nb) -> str:
    parts = []
    for c in nb.cells:
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            parts.append(o.get("text", ""))
            data = o.get("data", {})
            parts += [data.get("text/plain", ""), data.get("text/html", ""), data.get("text/markdown", "")]
    return "\n".join(parts)


def test_notebook_runs_locally_top_to_bottom(tmp_path, monkeypatch):
    if not (EARLIER / "results.csv").exists():
        pytest.skip(f"no earlier results folder to compare with at {EARLIER}")
    lattice = tiny_lattice(tmp_path / "fodo.json")
    env = {
        "RUN_ON_CLUSTER": False,
        "MODES": ["exclusive", "timeslice:2"],
        "PARTICLE_COUNTS": [2000],
        "TURNS": 200,
        "REPEATS": 1,
        "WARMUP_REPEATS": 0,
        "PLACEMENT": "processes",
        "DEVICE": cpu_opencl_spec(),
        "LATTICE": str(lattice),
        "PIPELINE_ROOT": str(tmp_path / "root"),
        "COMPARE_WITH": str(EARLIER),
    }
    for k, v in env.items():
        monkeypatch.setenv(f"SHAREBENCH_NB_{k}", json.dumps(v))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert nb.cells[1].metadata.get("tags") == ["parameters"]
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute(env=dict(os.environ))

    assert not _outputs(nb, "error")
    text = _text(nb)
    # the run: kfp.local, with the loss metric of the one shared cell
    assert "finished in" in text and "loss_pct/timeslice:2/p2000" in text
    # the results table and a loss table, shown inline
    assert "timeslice:2_p2000_r1" in text and "exclusive_p2000_r1" in text
    assert "Time-slicing" in text and "loss %" in text
    # plots inline
    images = [o for o in _outputs(nb, "display_data") if "image/png" in o.get("data", {})]
    assert len(images) >= 2
    # the comparison with the earlier folder: side-by-side loss and a comparison report
    assert f"loss_pct {EARLIER.name}" in text and "comparison report:" in text
    (run_dir,) = (tmp_path / "root").glob("sharebench-sweep-*")
    assert (run_dir / "write-report" / "report_html").exists()
