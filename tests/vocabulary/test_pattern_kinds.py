"""Every pattern kind of ``PATTERNS`` has its place in each layer, and no layer tests a kind by its name.

:func:`missing_places` is the coverage check: it walks ``PATTERNS`` and names each place a kind lacks
(a grammar naming it, a default that reads back from its label, a pacing, a dry-run cost model, an
Answer line and noun, a usage class advise knows). A toy kind added in a test shows what adding a
pattern takes: a ``PATTERNS`` row and a cost model, two files (``patterns.py``, ``analysis/cost.py``);
the test then walks every layer with it (the per-burst driver, the alone sample, the dry run's cost,
the loss and latency tables, the Answer, capacity, advise and ``--help``).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import get_args

import numpy as np
import pytest

from sharebench.advise import advise, class_patterns, parse_class_overrides, read_costs, usage_from_rows
from sharebench.advise import usage as advise_usage
from sharebench.advise.synthetic import synthetic_trace
from sharebench.analysis import cost, reproduce, tables
from sharebench.analysis.answer import ISOLATION_LINE, NEIGHBOUR_LINE
from sharebench.analysis.samples import cell_samples
from sharebench.cli import main
from sharebench.errors import UserError
from sharebench.patterns import (
    PATTERNS,
    Form,
    Loop,
    Pattern,
    PatternSpec,
    Wait,
    Window,
    parse_pattern,
    requests,
    requests_label,
    saturated,
)
from sharebench.results import ResultsWriter, load_results
from sharebench.sweep.capacity import Capacity, Probe
from sharebench.workloads import Workload
from sharebench.workloads.bursts import run_pattern
from support.crafted import crafted_rows
from tests.advise.test_advise import results_folder
from tests.analysis.test_answer import folder_with_bursts

ROOT = Path(__file__).resolve().parents[2]


def reads_back(spec: PatternSpec) -> bool:
    """The kind's default pattern parses, reads back from its label and has a pacing."""
    try:
        p = parse_pattern(spec.name)
        return parse_pattern(p.label) == p and (p.needs_capacity or spec.pace(p) is None or callable(spec.pace(p)))
    except (UserError, KeyError, TypeError, ValueError):
        return False


def missing_places(patterns: dict[str, PatternSpec]) -> list[str]:
    """Each place a kind has nothing in, as ``pattern 'K': no WHAT (where)``."""
    out = []
    for name, spec in patterns.items():
        places = [
            (
                bool(spec.forms) and all(re.split(r"[:\[]", f.grammar)[0] == name for f in spec.forms),
                "grammar naming it",
                "PatternSpec.forms",
            ),
            (reads_back(spec), "default that reads back from its label", "PatternSpec.build, .label, .pace"),
            (spec.loop in get_args(Loop), f"loop ({spec.loop!r})", "PatternSpec.loop: closed or open"),
            (name in cost.COST_MODELS, "cost model", "sharebench.analysis.cost.COST_MODELS"),
            (
                bool(spec.answer) and spec.answer not in (NEIGHBOUR_LINE, ISOLATION_LINE),
                "Answer line",
                "PatternSpec.answer",
            ),
            (bool(spec.noun), "noun", "PatternSpec.noun"),
            (
                not spec.usage or spec.usage in advise_usage.USAGE_RULES,
                f"usage class {spec.usage!r}",
                "sharebench.advise.usage.USAGE_RULES",
            ),
            (
                spec.window in get_args(Window) and spec.min_window_s >= 0,
                f"sample window ({spec.window!r})",
                "PatternSpec.window: count or duration, .min_window_s",
            ),
        ]
        out += [f"pattern {name!r}: no {what} ({where})" for ok, what, where in places if not ok]
    return out


def test_every_pattern_kind_has_every_place():
    assert missing_places(PATTERNS) == []


def test_the_rows_fit_together():
    """One saturated kind (the throughput line, the default); each usage class advise infers maps to one kind;
    every Answer line its own; every cost model of a declared kind."""
    assert [s.name for s in PATTERNS.values() if s.saturated] == ["batch"] == [Pattern().kind]
    claims = Counter(s.usage for s in PATTERNS.values() if s.usage)
    assert dict(claims) == dict.fromkeys(advise_usage.USAGE_RULES, 1)
    answers = [s.answer for s in PATTERNS.values()]
    assert len(set(answers)) == len(answers)
    assert set(cost.COST_MODELS) <= set(PATTERNS)


def test_the_rows_keep_todays_numbers():
    """The sample windows (issue 42: a service's cell lasts seconds of arrivals, at least 5 s) and the nouns
    the Answer prints, as before the rows."""
    assert [(PATTERNS[k].window, PATTERNS[k].min_window_s) for k in ("batch", "interactive", "serve")] == [
        ("count", 0.0),
        ("count", 0.0),
        ("duration", 5.0),
    ]
    assert [
        (PATTERNS[k].answer, PATTERNS[k].noun, PATTERNS[k].capacity_unit) for k in ("batch", "interactive", "serve")
    ] == [
        ("batch throughput", "replicas", ""),
        ("interactive", "users", ""),
        ("serving", "services", "requests/s"),
    ]


# ------------------------------------------------------------------ a toy kind: requests at a constant rate


def constant_gaps(p: Pattern) -> Wait | None:
    """Requests exactly ``1 / rate`` apart (locust's ``constant_throughput``)."""
    gap = 1.0 / float(p.rate_per_s or 1.0)
    return lambda rng: gap


TOY = PatternSpec(
    "paced",
    (Form("paced[:rate=PER_SECOND,size=N]", "requests of N units exactly 1/PER_SECOND s apart"),),
    ("rate", "size"),
    requests,
    requests_label,
    "open",
    constant_gaps,
    answer="paced serving",
    noun="services",
    capacity_unit="requests/s",
    window="duration",
    min_window_s=1.0,
)
TOY_LABEL = "paced:rate=10,size=1"


@pytest.fixture
def toy(monkeypatch):
    """The toy kind: its PATTERNS row (patterns.py) and its cost model (analysis/cost.py)."""
    monkeypatch.setitem(PATTERNS, "paced", TOY)
    monkeypatch.setitem(cost.COST_MODELS, "paced", cost.QUEUEING)


def test_a_toy_kind_names_exactly_the_places_still_missing(monkeypatch):
    monkeypatch.setitem(PATTERNS, "paced", TOY)
    assert missing_places(PATTERNS) == ["pattern 'paced': no cost model (sharebench.analysis.cost.COST_MODELS)"]
    monkeypatch.setitem(cost.COST_MODELS, "paced", cost.QUEUEING)  # analysis/cost.py
    assert missing_places(PATTERNS) == []


@pytest.mark.usefixtures("toy")
def test_a_toy_kind_parses_paces_and_costs():
    p = parse_pattern("paced:rate=4,size=2")
    assert (p.label, p.spec, p.saturated) == ("paced:rate=4,size=2", TOY, False)
    assert parse_pattern("paced").label == TOY_LABEL
    with pytest.raises(UserError, match=r"allowed: .*paced\[:rate=PER_SECOND,size=N\]"):
        parse_pattern("bursty")
    with pytest.raises(UserError, match="unknown key 'load' in pattern 'paced:load=0.5'"):
        parse_pattern("paced:load=0.5")
    # the driver runs its schedule: an open loop of requests 0.25 s apart from the start, 2 units each
    clock = [100.0]

    def now() -> float:
        clock[0] += 1e-6
        return clock[0]

    def sleep(s: float) -> None:
        clock[0] += max(s, 0.0)

    def work(units: int) -> None:
        clock[0] += 0.01 * units

    out = run_pattern(p, work, count=4, clock=now, sleep=sleep)
    assert [b.units for b in out] == [2] * 4
    np.testing.assert_allclose([b.arrival - out[0].arrival for b in out], [0, 0.25, 0.5, 0.75], atol=1e-4)
    # its cells last a duration (the row's window): --bursts 30 at 10/s is 3 s of arrivals, at least the row's 1 s
    w = Workload(pattern=TOY_LABEL, bursts=30)
    alone, shared = cell_samples(w, 1), cell_samples(w, 2)
    assert (alone.window_s, alone.cap, shared.window_s, shared.min_s, w.patterned) == (3.0, 30, 3.0, 1.0, True)
    assert cell_samples(Workload(pattern=TOY_LABEL, bursts=5), 2).window_s == 1.0  # the floor
    # the dry run costs it by its model (a queue of requests at the rate), not as saturated work
    c = cost.cell_seconds((p, parse_pattern("batch")), 1, 10, unit_s=0.01)
    assert c.cell_s == pytest.approx(10 / 4 + 0.02 + (4 * 0.02) * 0.02 / (2 * (1 - 4 * 0.02)))
    assert c.cell_s != pytest.approx(10 * 0.02)
    assert np.isfinite(reproduce.pattern_seconds(["exclusive", "timeslice:2"], TOY_LABEL, "", 0.01))


@pytest.mark.usefixtures("toy")
def test_a_toy_kinds_cells_go_to_the_latency_table_and_its_answer_line(tmp_path):
    rows = crafted_rows()
    for r in rows:
        r["pattern"] = TOY_LABEL if r["mode"] == "timeslice:2" else "batch"
    ResultsWriter(tmp_path / "t").append(rows)
    t = tables.build_tables(load_results(tmp_path / "t"))
    assert "timeslice:2" not in set(t.timeslice["mode"]) and "timeslice:2" not in set(t.throughput["mode"])
    assert "mps:2" in set(t.throughput["mode"])  # batch cells still compared by throughput
    assert saturated("batch") and not saturated(TOY_LABEL) and saturated("")

    _, picks = folder_with_bursts(tmp_path / "b", {"timeslice:2": ([TOY_LABEL] * 2, 1.3)}, TOY_LABEL)
    line = picks.loc[f"paced serving ({TOY_LABEL})"]
    assert (line["mode"], line["basis"]) == ("timeslice:2", "measured")
    assert line["reason"].startswith("services per GPU at a p95 slowdown target of 2× against alone (every user")
    assert ": timeslice: ≥ 2 services (≥ 20 requests/s) (timeslice:2 within: worst user 1." in line["reason"]
    for other in ("interactive", "serving", "batch throughput"):
        assert picks.loc[other, "basis"] == "not measured"
    assert list(picks.index[:4]) == ["batch throughput", "interactive", "serving", f"paced serving ({TOY_LABEL})"]

    cap = Capacity(
        "mps", TOY_LABEL, 2.0, "3 users", 3, 4, "none", (Probe(2, "mps:2", "within", 1, 200, 1.2, 1.1, 1.3),)
    )
    assert cap.line().startswith("mps: 3 users per GPU, 30 requests/s per GPU (3 × 10/s) at p95 ≤ 2×")


@pytest.mark.usefixtures("toy")
def test_advise_and_the_help_take_a_toy_kind(tmp_path, capsys):
    usage = usage_from_rows(synthetic_trace({"nb": ("interactive", 2), "train": ("batch", 1)}, 120), "toy")
    overrides = parse_class_overrides(["nb=paced"])
    assert overrides == {"nb": TOY}
    found = class_patterns(usage, overrides)
    assert found == {"nb": TOY, "train": PATTERNS["batch"]}  # inferred kinds never the toy: it claims no usage
    a = advise(usage, read_costs([results_folder(tmp_path)], None), found, 2.0)
    assert "--pattern paced " in a.unmeasured["nb"] and a.read["classes"] == {"nb": "paced", "train": "batch"}
    assert a.recommended is not None and a.recommended.choice["nb"].option.mode == "exclusive"

    for argv, want in (
        (["run", "--help"], "paced[:rate=PER_SECOND,size=N] (requests of N units"),
        (
            ["advise", "--help"],
            "(batch, interactive, serve, paced)",
        ),
    ):
        with pytest.raises(SystemExit):
            main(argv)
        assert want in " ".join(capsys.readouterr().out.split())


# ------------------------------------------------------------------ no kind tested by name

KIND = r"(?:batch|interactive|serve)"
BY_NAME = re.compile(
    "|".join(
        [
            rf'[!=]=\s*"{KIND}"',  # p.kind == "serve", kind != "batch"
            rf'"{KIND}"\s*[!=]=',  # "batch" == kind
            rf'\bin\s*[(\[{{][^)\]}}]*"{KIND}"',  # c.pattern in (pattern, "batch")
            rf'"{KIND}"\s*,\s*"{KIND}"',  # Cost(family, n, "batch", "batch", ...), a tuple of kinds
            rf'isin\(\s*\[[^\]]*"{KIND}"',  # frame["pattern"].isin(["", "batch"])
            rf'startswith\(\s*"{KIND}[":]',  # label.startswith("serve:")
            rf'\b(?:Pattern|ClassSpec)\(\s*"{KIND}"',  # Pattern("serve", ...): a pattern of a named kind
            rf'\breturn\s+"{KIND}"',  # return "batch": a kind chosen by name
            r"\.is_batch\b",  # parse_pattern(beside).is_batch
            r"[!=]=\s*BATCH\.(?:kind|label)\b|\bBATCH\.(?:kind|label)\s*[!=]=",  # victim.kind == BATCH.kind
        ]
    )
)


def kind_tests_by_name() -> list[str]:
    """``path:line: text`` of each test of a pattern kind by its name outside patterns.py."""
    hits = []
    for folder in ("src", "components", "pipelines"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "src" / "sharebench" / "patterns.py":
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if BY_NAME.search(line.split("#")[0]):
                    hits.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    return hits


def test_the_grep_catches_the_forms_that_existed():
    for line in [
        'if pattern.kind == "serve":',
        'if int(replicas) == 1 and parse_pattern(workload.pattern).kind == "interactive":',
        'if p is None or p.kind != "serve" or not p.rate_per_s or not self.users:',
        'name = "interactive" if kind == "interactive" else "serving"',
        'return {str(m) for m, p in zip(victims["mode"], victims["pattern"]) if pattern_kind(p) != "batch"}',
        'shaped = df[~df["pattern"].fillna("").astype(str).isin(["", "batch"])]',
        'return [c for c in self.points if c.pattern in (pattern, "batch")]',
        "return alone.get(beside, 1.0 if parse_pattern(beside).is_batch else math.nan)",
        'have = {(c.family, c.n) for c in costs.points if c.pattern == c.beside == "batch"}',
        'costs.points.append(Cost(MIG, count, "batch", "batch", ratio, src, BATCH_LABEL, profile=name))',
        'if mean < LIGHT and any(all(c.label == "batch" for c in surf.curves[n]) for n in covered):',
        '"train": ClassSpec("batch", 4, busy_beta=(97.0, 3.0)),',
        'return "serve"',
        'ev.command("interactive", "batch"),',
        "if victim.kind == BATCH.kind:",
        "return self.pattern != BATCH.label or self.neighbour_pattern != BATCH.label",
    ]:
        assert BY_NAME.search(line), line
    for line in [
        'COST_MODELS = {"batch": SATURATED, "interactive": THINKING, "serve": QUEUEING}',
        '"batch": batch,',
        'if spec.loop == "open":',
        'x == "serve:rate=2"',
    ]:
        assert not BY_NAME.search(line), line


def test_no_pattern_kind_is_tested_by_name_outside_patterns():
    hits = kind_tests_by_name()
    assert not hits, "route by PatternSpec traits or a behaviour table keyed by kind:\n" + "\n".join(hits)


QUOTED_KIND = re.compile(rf"[\"']{KIND}[\"']")


def test_advise_holds_no_pattern_string_vocabulary():
    """advise names no pattern kind at all: its classes map to kinds through the rows (PatternSpec.usage)."""
    hits = [
        f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
        for path in sorted((ROOT / "src" / "sharebench" / "advise").glob("*.py"))
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if QUOTED_KIND.search(line.split("#")[0])
    ]
    assert not hits, "\n".join(hits)
    assert QUOTED_KIND.search('MEMORY_GB = {"batch": 40.0}') and not QUOTED_KIND.search('"batches"')


def test_an_override_names_a_kind_by_the_grammar():
    with pytest.raises(UserError, match=r"unknown pattern 'bursty'"):
        parse_class_overrides(["nb=bursty"])
    assert parse_class_overrides(["nb=serve:rate=3"]) == {"nb": PATTERNS["serve"]}
