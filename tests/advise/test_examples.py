"""The documentation's advise examples are what the command gives today (issue 44 item 6).

``python -m tools.advise_examples`` regenerates docs/advise-example/ and the example blocks of
docs/readme/advise.md; here the same generation runs in a temporary folder and every byte must match what
is committed. The month's paragraph comes from the benchmark's record (docs/advise-example/month.json);
the slow test replays the month's advice (untimed) and compares it with what the record says it printed.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from sharebench.advise.synthetic import month100, synthetic_usage
from sharebench.cli import main
from tools import advise_examples

ROOT = Path(__file__).resolve().parents[2]
needs_h200 = pytest.mark.skipif(not (ROOT / "results" / "h200" / "cuda").is_dir(), reason="no committed H200 results")


@needs_h200
@pytest.mark.slow
def test_the_examples_regenerate_byte_identical(tmp_path):
    with advise_examples.at_root():
        got = advise_examples.generate(tmp_path)
        assert advise_examples.differences(got) == [], "rebuild with python -m tools.advise_examples"
    assert {p.name for p in got} >= {"advice.md", "advice.json", "advice.png", "assignment.csv", "check.json"}
    doc = got[advise_examples.DOC].decode()
    assert "$ sharebench advise --usage /tmp/pool16.csv --results results/h200 --check" in doc
    assert str(tmp_path) not in doc


def test_the_month_record_meets_the_documented_target():
    record = json.loads((ROOT / advise_examples.RECORD).read_text())
    assert record["rc"] == 0 and record["rows"] > 4_000_000 and record["cores"] >= 2
    assert record["cpu_s"] < 60 and record["peak_rss_bytes"] < 1.5e9
    assert advise_examples.month_block(record) in (ROOT / advise_examples.DOC).read_text()


@needs_h200
@pytest.mark.slow
def test_the_month_record_is_what_the_command_prints_today(tmp_path):
    record = json.loads((ROOT / advise_examples.RECORD).read_text())
    usage = tmp_path / "usage.csv"
    synthetic_usage(month100(), record["days"], seed=100).to_csv(usage, index=False)
    buf = io.StringIO()
    with advise_examples.at_root(), contextlib.redirect_stdout(buf):
        rc = main(
            ["advise", "--usage", str(usage), "--results", "results/h200", "--out", str(tmp_path / "o"), "--check"]
        )
    printed = [
        line.replace(str(tmp_path), "/tmp") for line in buf.getvalue().splitlines() if not line.startswith("wrote ")
    ]
    assert rc == record["rc"] and printed == record["printed"]
