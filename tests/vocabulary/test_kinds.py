"""Every sharing-mode kind of ``KINDS`` has its row in each layer's behaviour table, and no layer tests a
kind by its name.

:func:`missing_places` is the coverage check: it walks ``KINDS`` and names each place a kind lacks (a
planner, a predictor, an isolation text, its loss table's builder, formatter and section, and, unless
it is local-only, a node target). A toy kind added in a test shows what adding a mode takes: a
``KINDS`` row, a planner, a predictor and an isolation text, four files (``modes.py``,
``sharing/layout.py``, ``analysis/prediction.py``, ``analysis/answer.py``) when it reuses a loss table.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sharebench.analysis import answer, prediction, tables
from sharebench.analysis.format import ROW_DISPLAY
from sharebench.errors import UserError
from sharebench.manifests import dra, operator
from sharebench.modes import KINDS, KindSpec, Mode, parse_mode
from sharebench.node import targets
from sharebench.report.build import TABLE_TITLES
from sharebench.results import ResultsWriter, load_results
from sharebench.sharing import layout
from support.crafted import CPU, cell, crafted_rows

ROOT = Path(__file__).resolve().parents[2]


def missing_places(kinds: dict[str, KindSpec]) -> list[str]:
    """Each behaviour table a kind has no row in, as ``kind 'K': no WHAT (module.TABLE)``."""
    out = []
    for name, spec in kinds.items():
        places = [
            (name in layout.PLANNERS, "planner", "sharebench.sharing.layout.PLANNERS"),
            (name in prediction.PREDICTORS, "predictor", "sharebench.analysis.prediction.PREDICTORS"),
            (name in answer.ISOLATION, "isolation text", "sharebench.analysis.answer.ISOLATION"),
            (spec.local_only or name in targets.NODE_TARGETS, "node target", "sharebench.node.targets.NODE_TARGETS"),
        ]
        if spec.table:  # the baseline has no loss table: its cells are every loss's reference
            built = spec.table in tables.LOSS_ROWS or spec.table in tables.WHOLE_TABLES
            places += [
                (built, f"loss table {spec.table!r}", "sharebench.analysis.tables.LOSS_ROWS"),
                (spec.table in tables.TABLES, f"Tables attribute {spec.table!r}", "sharebench.analysis.tables.Tables"),
                (spec.table in ROW_DISPLAY, f"formatter of {spec.table!r}", "sharebench.analysis.format.ROW_DISPLAY"),
                (spec.table in TABLE_TITLES, f"section of {spec.table!r}", "sharebench.report.build.TABLE_TITLES"),
            ]
        if spec.plugin_sharing and not spec.local_only:
            places += [
                (spec.plugin_sharing in operator.PLUGIN_SHARING_KEYS, "device-plugin key", "manifests.operator"),
                (spec.plugin_sharing in dra.DRA_SHARING, "DRA sharing config", "sharebench.manifests.dra.DRA_SHARING"),
            ]
        out += [f"kind {name!r}: no {what} ({where})" for ok, what, where in places if not ok]
    return out


def test_every_kind_has_every_place():
    assert missing_places(KINDS) == []


def test_every_behaviour_table_names_only_kinds():
    """A row for a kind no KINDS row declares is a leftover of a removed or renamed kind."""
    for table in (layout.PLANNERS, prediction.PREDICTORS, answer.ISOLATION, targets.NODE_TARGETS):
        assert set(table) <= set(KINDS), set(table) - set(KINDS)
    assert not [k for k in targets.NODE_TARGETS if KINDS[k].local_only]


# ------------------------------------------------------------------ a toy kind


def parse_toy(spec: KindSpec, text: str, arg: str) -> Mode:
    if not arg.isdigit() or int(arg) < 1:
        raise UserError(f"bad count in {text!r}; allowed: toy:N, N >= 1")
    return Mode(spec.name, int(arg))


def plan_toy(m: Mode, place: layout.Place) -> layout.CellPlan:
    """N replicas on the whole device, as time-slicing lays them out."""
    return layout.CellPlan(m, place.device, place.same(int(m.replicas or 1)))


TOY = KindSpec(
    "toy",
    "toy:N",
    "a toy: N replicas side by side",
    5,
    "shared",
    "timeslice",
    "any",
    "count",
    parse_toy,
    local_only=True,
)


@pytest.fixture
def toy(monkeypatch):
    """The toy kind: its KINDS row (modes.py) and its planner (sharing/layout.py)."""
    monkeypatch.setitem(KINDS, "toy", TOY)
    monkeypatch.setitem(layout.PLANNERS, "toy", plan_toy)


@pytest.mark.usefixtures("toy")
def test_a_toy_kind_names_exactly_the_places_still_missing(monkeypatch):
    assert missing_places(KINDS) == [
        "kind 'toy': no predictor (sharebench.analysis.prediction.PREDICTORS)",
        "kind 'toy': no isolation text (sharebench.analysis.answer.ISOLATION)",
    ]
    monkeypatch.setitem(prediction.PREDICTORS, "toy", prediction.predict_timeslice)  # analysis/prediction.py
    monkeypatch.setitem(answer.ISOLATION, "toy", "none: memory and faults shared")  # analysis/answer.py
    assert missing_places(KINDS) == []


@pytest.mark.usefixtures("toy")
def test_a_toy_kind_parses_plans_and_lands_in_its_loss_table(tmp_path, monkeypatch):
    monkeypatch.setitem(prediction.PREDICTORS, "toy", prediction.predict_timeslice)
    m = parse_mode("toy:2")
    assert (m.label, m.table, m.is_baseline) == ("toy:2", "timeslice", False)
    plan = layout.plan_cell(m, {"spec": "cpu", "kind": "cpu", "backend": "cpu", "name": "x"}, cpus=[0, 1])
    assert plan.n == 2 and not plan.mps
    with pytest.raises(UserError, match="toy:2 is a local mode; a node takes exclusive, timeslice:N, mps:N"):
        targets.check_node_mode(m)
    rows = crafted_rows()
    for r, (a, b) in zip((1, 2, 3), ((21, 22), (22, 22), (23, 22))):
        rows += cell(CPU, "toy:2", r, [(5000 + 100 * r, 5000 + 100 * r + a), (5000 + 100 * r, 5000 + 100 * r + b)])
    ResultsWriter(tmp_path).append(rows)
    t = tables.build_tables(load_results(tmp_path))
    toy_rows = t.timeslice[t.timeslice["mode"] == "toy:2"]
    assert len(toy_rows) == 1 and toy_rows["loss_pct"].notna().all()
    assert not (t.flags["kind"] == "kind").any()
    assert "toy:2" in set(prediction.predicted_vs_measured(t)["mode"])


def test_a_kind_this_sharebench_does_not_know_is_flagged_not_dropped(tmp_path):
    """A results folder of another sharebench, with a kind unknown here: its cells keep their throughput row
    and a flag says why no loss table shows them."""
    rows = crafted_rows()
    for r in (1, 2, 3):
        rows += cell(CPU, "halves:2", r, [(6000 + 100 * r, 6000 + 100 * r + 22), (6000 + 100 * r, 6000 + 100 * r + 23)])
    ResultsWriter(tmp_path).append(rows)
    t = tables.build_tables(load_results(tmp_path))
    assert "halves:2" in set(t.throughput["mode"])
    assert not any("halves:2" in set(getattr(t, name)["mode"]) for name in tables.LOSS_ROWS)
    flag = t.flags[t.flags["kind"] == "kind"]
    assert list(flag["mode"]) == ["halves:2"] and not flag["excluded"].any()
    assert list(flag["detail"]) == ["halves:2: kind 'halves' unknown to this sharebench"]
    assert "in the cells and throughput tables only" in flag["flag"].iloc[0]


# ------------------------------------------------------------------ no kind tested by name

KIND = r"(?:timeslice|mps|mig|mig-emulated|mig_emulated|partition|exclusive)"
BY_NAME = re.compile(
    "|".join(
        [
            rf'[!=]=\s*"{KIND}"',  # kind == "mig", mode != "exclusive"
            rf'"{KIND}"\s*[!=]=',  # "mig" == kind
            rf'\bin\s*[(\[{{]\s*"{KIND}"',  # kind in ("timeslice", "mps"), not in ("exclusive", ...)
            rf'[(\[{{]\s*"{KIND}"\s*,\s*"{KIND}"',  # ("timeslice", "mps"): a tuple of kinds
            rf'startswith\(\s*"{KIND}[":]',  # label.startswith("mig:")
            rf'isin\(\s*\[\s*"{KIND}"',  # frame["mode_kind"].isin(["timeslice", ...])
            rf'Mode\(\s*"{KIND}"',  # Mode("mig", ...): a mode of a named kind
        ]
    )
)


def kind_tests_by_name() -> list[str]:
    """``path:line: text`` of each string test of a mode kind outside modes.py."""
    hits = []
    for folder in ("src", "components", "pipelines"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "src" / "sharebench" / "modes.py":
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if BY_NAME.search(line.split("#")[0]):
                    hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    return hits


def test_the_grep_catches_the_forms_that_existed():
    for line in [
        'if m.kind == "timeslice":',
        'replicas = t.per_gpu if t.mode.kind in ("timeslice", "mps") else None',
        'ex = cells[cells["mode_kind"] == "exclusive"]',
        'shared = df[df["mode"] != "exclusive"]',
        'if m.split(":")[0] not in ("exclusive", "mig-emulated")',
        'for kind in ("mig", "partition"):',
        'if not str(mode).startswith("mig:"):',
        'np.where(kind.isin(["timeslice", "mps"]), a, b)',
        'return CellPlan(Mode("mig", len(reps), layout=m.layout), dev, reps)',
    ]:
        assert BY_NAME.search(line), line
    for line in ['"mig": {"strategy": mig_strategy}', 'spec.family in ("baseline", "instances")', 'x == "mps:2"']:
        assert not BY_NAME.search(line), line


def test_no_kind_is_tested_by_name_outside_modes():
    hits = kind_tests_by_name()
    assert not hits, "route by KindSpec traits or a behaviour table keyed by kind:\n" + "\n".join(hits)
