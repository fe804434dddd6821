"""Where each class's costs come from (issue 44 items 3 and 4; issue 42's rule applied by advise); the cases on
the committed H200 folders are in test_pattern_costs.py.

Each measured cell is decided by interval (``sharebench.analysis.tail``) at advise's target: a below-1 cell
gives no cost, an undecided one only its upper bound, and the advice says which; a class is costed from
one workload (its own ``results=DIR``, or a borrowed one with why and the command that measures its own),
never interpolated across workloads; costs of another GPU model map their MIG points to the pool's
profiles by compute share and pack to the pool's memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sharebench.advise import advise, class_patterns, read_costs, usage_from_rows
from sharebench.advise.costread import map_profile
from sharebench.advise.isolation import ISOLATION, recommendable
from sharebench.advise.synthetic import synthetic_trace
from sharebench.cli import main
from sharebench.gpus import gpu_model
from sharebench.results import write_provenance
from sharebench.results.folder import append_sweep
from tests.advise.test_advise import ALONE_BUSY, results_folder, verdict_columns


def with_workload(folder: Path, name: str) -> Path:
    """The folder's sweep.json naming its workload (an exec program), as `sharebench run --engine exec` writes."""
    append_sweep(folder, {"sweep_id": name, "config": {"workload": {"engine": "exec", "name": name}}})
    return folder


def test_a_below_one_cell_is_left_out_with_the_reason_and_an_undecided_one_used_by_its_bound(tmp_path):
    folder = results_folder(tmp_path / "r")
    t = pd.read_csv(folder / "tables" / "latency.csv")
    below = (t["mode"] == "mps:2") & (t["pattern"] == "interactive")
    worst = ["worst_p95_slowdown", "worst_p95_slowdown_lo", "worst_p95_slowdown_hi"]
    t.loc[below, worst] = [verdict_columns(0.8, 2)[c] for c in worst]  # every user faster shared than alone
    loose = (t["mode"] == "timeslice:2") & (t["pattern"] == "interactive")
    t.loc[loose, ["worst_p95_slowdown_lo", "worst_p95_slowdown_hi"]] = [1.2, 2.6]  # straddles 2x: undecided
    t.to_csv(folder / "tables" / "latency.csv", index=False)
    costs = read_costs([folder], None)
    assert not [c for c in costs.points if c.family == "mps" and c.n == 2 and c.pattern == "interactive"]
    assert any(
        "mps:2" in line and "below 1" in line and "the baseline, not the sharing, is off" in line for line in costs.left
    )
    (ts2,) = [c for c in costs.points if c.family == "timeslice" and c.n == 2 and c.pattern == "interactive"]
    assert ts2.used == "upper bound" and ts2.slowdown_p95 == pytest.approx(2.6)
    usage = usage_from_rows(synthetic_trace({"nb": ("interactive", 4)}, 240), "nb")
    a = advise(usage, costs, class_patterns(usage, {}), 2.0)
    assert [line for line in a.cells_left if "below 1" in line]
    (mps2,) = [o for o in a.outcomes["nb"] if o.option.mode == "mps:2"]  # from the batch cell alone
    assert "batch at busy" in mps2.option.source and "interactive at busy" not in mps2.option.source


def test_a_class_is_costed_from_one_workload_borrowed_with_why_or_its_own(tmp_path, capsys):
    """Two programs measured the interactive pattern: a light one and a heavy one. A class is costed from
    the one whose load is nearest its own (said, with the command that measures the site's own program);
    results=DIR costs it from that folder's workload, with no borrowing said."""
    light = with_workload(results_folder(tmp_path / "light"), "light-infer")
    heavy_costs = {
        ("timeslice:2", "interactive"): 1.9,
        ("timeslice:4", "interactive"): 3.5,
        ("mps:2", "interactive"): 1.8,
    }
    heavy = with_workload(results_folder(tmp_path / "heavy", measured=heavy_costs), "heavy-train")
    lat = pd.read_csv(heavy / "tables" / "latency.csv")
    lat.loc[lat["pattern"] == "interactive", "busy_fraction"] = 0.9  # the heavy program's users are busy
    lat.to_csv(heavy / "tables" / "latency.csv", index=False)
    path = tmp_path / "u.csv"
    synthetic_trace({"nb": ("interactive", 8)}, 480, seed=3).assign(gpu_model="H200").to_csv(path, index=False)
    argv = ["advise", "--usage", str(path), "--results", str(light), str(heavy)]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    text = capsys.readouterr().out
    advice = json.loads((tmp_path / "a" / "advice.json").read_text())
    nb = advice["costing"]["nb"]
    assert nb["workload"] == "light-infer" and not nb["own"]
    assert "of 2 workloads measured for interactive, the one whose load is nearest the class's" in nb["why"]
    assert "heavy-train (busy 0.90)" in nb["why"]
    assert nb["measure"].startswith("sharebench run --device cuda:0 --engine exec --exec 'YOUR-PROGRAM' --exec-name nb")
    assert (
        "--pattern interactive:burst=10,think=" in nb["measure"] and "--class nb=interactive,results=" in nb["measure"]
    )
    assert "nb: costs borrowed from light-infer" in text and "measure its own: sharebench run" in text
    sources = [o["source"] for o in advice["options"]["nb"] if o["mode"].startswith(("timeslice", "mps"))]
    assert sources and all("(light-infer)" in s and "heavy-train" not in s for s in sources)  # never mixed

    assert main([*argv, "--out", str(tmp_path / "b"), "--class", f"nb=interactive,results={heavy}"]) == 0
    capsys.readouterr()
    own = json.loads((tmp_path / "b" / "advice.json").read_text())
    assert own["costing"]["nb"] == {
        "workload": "heavy-train",
        "own": True,
        "why": f"its own results ({heavy}: heavy-train)",
        "measure": None,
    }
    sources = [o["source"] for o in own["options"]["nb"] if o["mode"].startswith(("timeslice", "mps"))]
    assert all("(heavy-train)" in s for s in sources)


def test_results_of_a_class_that_hold_none_of_its_pattern_are_refused(tmp_path, capsys):
    batch = results_folder(tmp_path / "batch", measured={("timeslice:2", "batch"): 2.7})
    lat = pd.read_csv(batch / "tables" / "latency.csv")
    lat[lat["pattern"] == "batch"].to_csv(batch / "tables" / "latency.csv", index=False)
    path = tmp_path / "u.csv"
    synthetic_trace({"nb": ("interactive", 2)}, 60).assign(gpu_model="H200").to_csv(path, index=False)
    rc = main(
        ["advise", "--usage", str(path), "--class", f"nb=interactive,results={batch}", "--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "holds no interactive cost" in err and err.count("\n") == 1


def test_results_of_the_cpu_or_another_model_name_what_to_pass(tmp_path, capsys):
    cpu = tmp_path / "cpu"
    (cpu / "tables").mkdir(parents=True)
    write_provenance(cpu, {"device": {"name": "AMD EPYC 9454"}})
    path = tmp_path / "u.csv"
    synthetic_trace({"a": ("batch", 2)}, 30).assign(gpu_model="H200").to_csv(path, index=False)
    rc = main(["advise", "--usage", str(path), "--results", str(cpu), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "'AMD EPYC 9454', not a GPU model advise knows (A100-40GB," in err
    assert "give results measured on the pool's GPUs (`sharebench run --device cuda:0`" in err
    a100 = results_folder(tmp_path / "a100", model="A100-80GB")
    rc = main(["advise", "--usage", str(path), "--results", str(a100), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2 and "give results of H200, or --allow-other-model" in err and err.count("\n") == 1


def test_mig_profiles_map_by_compute_share_or_are_left_out():
    h200, a100 = gpu_model("H200"), gpu_model("A100-80GB")
    assert map_profile(h200, "1g.18gb", h200)[0].name == "1g.18gb"
    assert map_profile(h200, "1g.18gb", a100)[0].name == "1g.10gb"
    assert map_profile(h200, "2g.35gb", a100)[0].name == "2g.20gb"
    assert map_profile(h200, "3g.71gb", a100)[0].name == "3g.40gb"  # the same slices, within 20 %
    none, why = map_profile(h200, "1g.35gb", a100)  # 26/132 SMs: no A100 profile within 20 % of that share
    assert none is None and "no A100-80GB profile within 20% of its compute share" in why


def test_every_mode_advise_may_recommend_says_what_it_isolates():
    assert set(recommendable()) == set(ISOLATION)
    assert ISOLATION["exclusive"].isolates and ISOLATION["mig"].isolates
    assert not ISOLATION["timeslice"].isolates and not ISOLATION["mps"].isolates
    assert set(ALONE_BUSY)  # the fixture's patterns, used above
