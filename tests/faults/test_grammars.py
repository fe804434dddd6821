"""Bounds (issue 46, item 5): a service too slow to offer a handful of requests in a cell, a row duplicated by
hand in results.csv, node names and GPU models outside their grammars. Each refused (or flagged) in one
line naming the value and what is allowed; image references: tests/node/test_images.py."""

from __future__ import annotations

import shutil

import pytest

from sharebench.analysis import analyse
from sharebench.errors import UserError
from sharebench.gpus import gpu_model
from sharebench.patterns import MIN_RATE_PER_S, parse_pattern, resolve_load
from sharebench.placement import check_label_value, check_node_name, split_node
from sharebench.results import load_results
from sharebench.sweep.grid import plan_grid
from support.faults import one_line_error, sharebench
from support.paths import ROOT


@pytest.mark.parametrize(
    "text, refused",
    [
        ("serve:load=1e-9", "bad load 1e-09 in pattern 'serve:load=1e-9': a service that idle offers too few"),
        ("serve:rate=1e-9", "bad rate 1e-09 requests/s in pattern 'serve:rate=1e-9': fewer than 5 requests in a "
         "cell's 3600 s; allowed: requests/s >= 0.00139 and <= 1000000"),
        ("serve:rate=0.001,size=3", "fewer than 5 requests in a cell's 3600 s"),
    ],
)  # fmt: skip
def test_a_service_too_slow_for_its_cell_is_refused_when_parsed(text, refused):
    with pytest.raises(UserError) as exc:
        parse_pattern(text)
    assert refused in str(exc.value) and "\n" not in str(exc.value)
    assert parse_pattern(f"serve:rate={MIN_RATE_PER_S}").rate_per_s == MIN_RATE_PER_S  # the bound itself: allowed


def test_the_cli_refuses_the_load_before_anything_runs(tmp_path):
    p = sharebench("run", "--device", "cpu", "--pattern", "serve:load=1e-9", "--out", str(tmp_path / "o"), timeout=120)
    assert p.returncode == 2
    assert one_line_error(p.stderr).startswith("sharebench: error: bad load 1e-09 in pattern 'serve:load=1e-9'")
    assert not (tmp_path / "o").exists()


def test_a_load_resolved_below_a_handful_of_requests_is_refused():
    """A load allowed alone may still be too slow at the capacity measured: refused before a replica runs it."""
    with pytest.raises(UserError, match=r"is 1e-05 requests/s: fewer than 5 requests in a cell's 3600 s"):
        resolve_load(parse_pattern("serve:load=0.01,size=100"), 0.1)
    assert resolve_load(parse_pattern("serve:load=0.3"), 100.0).rate_per_s == 30.0


def test_a_duplicated_row_is_flagged_and_counted_once(tmp_path):
    """A row copied by hand into results.csv: its cell run is failed and flagged by the report, with the key
    named, instead of changing a mean and a count in silence; nothing is removed from the file."""
    folder = tmp_path / "cuda"
    shutil.copytree(ROOT / "tests/data/results/h200/cuda", folder)
    before = analyse(folder)
    csv = folder / "results.csv"
    lines = csv.read_text().splitlines(keepends=True)
    df = load_results(folder)
    i = int(df.index[(df["mode"] == "exclusive") & (df["status"] == "ok") & ~df["warmup"]][0])
    cell, sweep = df.at[i, "cell_id"], df.at[i, "sweep_id"]
    csv.write_text("".join([*lines, lines[i + 1]]))  # the header is line 0
    after = analyse(folder)
    (flag,) = after.flags[after.flags["cell_id"] == cell].itertuples()
    assert flag.kind == "failed" and flag.excluded
    assert flag.detail == (
        f"duplicated row: replica 0 of cell {cell} (sweep {sweep}) appears 2 times in results.csv; a row is "
        "recorded once: remove the copy"
    )
    row = after.cells[after.cells["cell_id"] == cell].iloc[0]
    assert bool(row["excluded"]) and not bool(before.cells[before.cells["cell_id"] == cell].iloc[0]["excluded"])
    assert len(csv.read_text().splitlines()) == len(lines) + 1  # flagged, never dropped
    p = sharebench("report", str(folder), timeout=300)
    assert p.returncode in (0, 1), p.stderr
    assert "duplicated row: replica 0 of cell" in (folder / "report.md").read_text()


@pytest.mark.parametrize("name", ["gpu;reboot", "gpu`id`", "GPU-1", "gpu node", "-gpu", "a" * 254, "gpu..1"])
def test_a_node_name_outside_dns_1123_is_refused(name):
    with pytest.raises(UserError) as exc:
        split_node(name)
    assert str(exc.value).startswith(f"node name {name!r} is not a Kubernetes node name; allowed: a DNS-1123")
    with pytest.raises(UserError, match="is not a Kubernetes node name"):
        plan_grid({"node_name": f"{name}=H200", "modes": ["exclusive"]})


def test_node_names_and_run_ids_in_their_grammars_pass():
    for name in ("gpu-node-1", "ip-10-0-0-1.ec2.internal", "a" * 253):
        assert check_node_name(name) == name
    assert split_node("gpu-node-1=A100-40GB") == ("gpu-node-1", "A100-40GB")
    assert check_label_value("run", "run-1.a_b") == "run-1.a_b"
    with pytest.raises(UserError, match=r"run 'run-1,nosuchlabel' is not a Kubernetes label value"):
        check_label_value("run", "run-1,nosuchlabel")


@pytest.mark.parametrize("name", ["H200;id", "H200`x`", "H200\nid", "$(H200)", "H" * 64])
def test_a_gpu_model_outside_its_grammar_is_refused(name):
    with pytest.raises(UserError) as exc:
        gpu_model(name)
    assert str(exc.value).startswith(f"GPU model {name!r} is not a GPU model name; allowed: at most 63")
    with pytest.raises(UserError, match="is not a GPU model name"):
        plan_grid({"node_name": "gpu-node-1", "gpu_model": name, "modes": ["exclusive"]})


def test_gpu_model_names_in_the_grammar_still_resolve():
    assert {gpu_model(n).key for n in ("H200", "NVIDIA H200", "NVIDIA-H200", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb")} == {
        "H200",
        "A100-40GB",
    }
