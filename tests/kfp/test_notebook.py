"""notebooks/sharing_experiment.ipynb: committed executed from its defaults, and executed here top to bottom
in local mode (kfp.local) at tiny sizes; kfp.local's output kept out of the notebook, in the run's log."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("kfp", reason="kfp not installed (pip install -e '.[kfp]')")
nbclient = pytest.importorskip("nbclient", reason="nbclient not installed (pip install -e '.[test]')")
nbformat = pytest.importorskip("nbformat", reason="nbformat not installed (pip install -e '.[test]')")

from sharebench.pipelines.notebook import LOG_NAME, run_local  # noqa: E402 - after the importorskip above
from support.lattices import tiny_lattice  # noqa: E402 - after the importorskip above
from support.paths import ROOT  # noqa: E402 - after the importorskip above

NOTEBOOK = ROOT / "notebooks" / "sharing_experiment.ipynb"
EARLIER = ROOT / "tests" / "data" / "results" / "cpu-example"
# what the notebook may print (stdout, stderr) in all: one line per replica run and a few more; kfp.local's
# own output (187,472 characters at 2,000 particles before it was captured) goes to the run's log
STREAM_CHARS_MAX = 3000


def _outputs(nb, kind: str) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == kind]


def _text(outputs: list) -> str:
    parts = []
    for o in outputs:
        parts.append(o.get("text", ""))
        data = o.get("data", {})
        parts += [data.get("text/plain", ""), data.get("text/html", ""), data.get("text/markdown", "")]
    return "\n".join(parts)


def _cell_after(nb, heading: str):
    """The code cell right after the Markdown cell whose first line is ``heading``."""
    for i, c in enumerate(nb.cells):
        if c.cell_type == "markdown" and c.source.splitlines()[0] == heading:
            return nb.cells[i + 1]
    raise AssertionError(f"no Markdown cell {heading!r}")


def check_executed(nb) -> str:
    """What every executed copy shows: no error, the Answer first with its decision plot, kfp.local quiet."""
    assert not _outputs(nb, "error")
    streams = _outputs(nb, "stream")
    printed = "".join(o.get("text", "") for o in streams)
    assert len(printed) <= STREAM_CHARS_MAX, printed[-2000:]
    assert (
        "Executing task" not in printed and "RuntimeWarning" not in printed and "non-Python base image" not in printed
    )
    answer = _cell_after(nb, "## The Answer").outputs
    assert answer[0]["data"]["text/markdown"].startswith("## Answer")
    assert "throughput" in _text(answer) and "trust:" in _text(answer)
    assert any("image/png" in o.get("data", {}) for o in answer)  # the decision plot
    prose = [c for c in nb.cells if c.cell_type == "markdown"]
    titles = [c.source.splitlines()[0] for c in prose]
    assert titles.index("## The Answer") < titles.index("## Loss tables") < titles.index("## Plots")
    # the prose says what the tables compute (sharebench.analysis.statistics): means, Student-t intervals
    assert "Student-t" in prose[titles.index("## Loss tables")].source
    assert all("bootstrap" not in c.source.lower() and "median" not in c.source.lower() for c in prose)
    return _text(_outputs(nb, "stream") + _outputs(nb, "display_data") + _outputs(nb, "execute_result"))


def test_committed_notebook_is_executed_from_its_small_defaults():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    params = nb.cells[1]
    assert params.metadata.get("tags") == ["parameters"]
    assert 'param("particle_counts", [500])' in params.source and 'param("turns", 10)' in params.source
    assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code")
    text = check_executed(nb)
    # the run of those defaults: its replica lines, its time, its log, its results table
    assert "exclusive_p500_r1 replica 0: ok" in text and "timeslice:2_p500_r1 replica 1: ok" in text
    assert "finished in" in text and f"{LOG_NAME}" in text and "loss_pct/timeslice:2/p500" in text
    assert "exclusive_p500_r3" in text and "Time-slicing" in text


@pytest.mark.slow  # runs the notebook in a kernel, the pipeline through kfp.local
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
        "DEVICE": "cpu",
        "LATTICE": str(lattice),
        "PIPELINE_ROOT": str(tmp_path / "root"),
        "COMPARE_WITH": str(EARLIER),
    }
    for k, v in env.items():
        monkeypatch.setenv(f"SHAREBENCH_NB_{k}", json.dumps(v))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute(env=dict(os.environ))

    text = check_executed(nb)
    assert "finished in" in text and "loss_pct/timeslice:2/p2000" in text
    assert "timeslice:2_p2000_r1 replica 1: ok" in text
    # the results table and a loss table, shown inline
    assert "timeslice:2_p2000_r1" in text and "exclusive_p2000_r1" in text
    assert "Time-slicing" in text and "loss %" in text
    images = [o for o in _outputs(nb, "display_data") if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # the decision plot and the others
    # the comparison cannot match a cell (another lattice, other sizes): it says why, no table of NaN
    compared = _text(_cell_after(nb, "## Compare with an earlier results folder").outputs)
    assert "No cell measured in both" in compared and f"lattice: generated in {EARLIER.name}" in compared
    assert "particles: 500/1,000 in cpu-example, 2,000 in this run" in compared and "NaN" not in compared
    # kfp.local's whole output is in the run's log
    (run_dir,) = (tmp_path / "root").glob("sharebench-sweep-*")
    log = (run_dir / LOG_NAME).read_text()
    assert "Executing task" in log and "non-Python base image" in log
    assert (run_dir / "write-report" / "report_html").exists()


@pytest.mark.slow  # a kfp.local run whose replica fails
def test_a_failed_task_shows_its_own_log_lines(tmp_path, capsys):
    bad = tmp_path / "broken.json"
    bad.write_text("this is not an Xsuite line")
    with pytest.raises(RuntimeError, match="FAILURE"):
        run_local(
            tmp_path / "root",
            modes=["exclusive"],
            particle_counts=[100],
            turns=1,
            repeats=1,
            warmup_repeats=0,
            placement="processes",
            workload={"device": "cpu", "lattice": str(bad)},
        )
    shown = capsys.readouterr().out
    assert "kfp.local: the failed task's log:" in shown and "run-simpletrack" in shown
    assert "broken.json" in shown or "JSON" in shown  # the replica's own error
    assert "plan-sweep" not in shown  # only the failed task's lines, not every task's
    (run_dir,) = (tmp_path / "root").glob("sharebench-sweep-*")
    assert f"(all of kfp.local's output: {run_dir / LOG_NAME})" in shown
    assert "Executing task 'plan-sweep'" in (run_dir / LOG_NAME).read_text()
