"""The replica-pattern grammar: examples, errors, and properties over generated patterns (hypothesis)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sharebench.errors import UserError
from sharebench.patterns import (
    BATCH,
    MAX_RATE_PER_S,
    MAX_THINK_S,
    MIN_RATE_PER_S,
    PATTERNS,
    Pattern,
    format_number,
    parse_pattern,
)


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("batch", BATCH),
        (" Batch ", BATCH),
        ("interactive", Pattern("interactive", units=10, think_s=0.5)),
        ("interactive:think=2", Pattern("interactive", units=10, think_s=2.0)),
        ("interactive:think=0.25,burst=3", Pattern("interactive", units=3, think_s=0.25)),
        ("INTERACTIVE:burst=1e3", Pattern("interactive", units=1000, think_s=0.5)),
        ("serve", Pattern("serve", units=1, rate_per_s=10.0)),
        ("serve:rate=2.5", Pattern("serve", units=1, rate_per_s=2.5)),
        ("serve: size=8 , rate=100", Pattern("serve", units=8, rate_per_s=100.0)),
    ],
)
def test_parse_pattern(text, pattern):
    assert parse_pattern(text) == pattern
    assert parse_pattern(pattern.label) == pattern


def test_labels_are_canonical():
    assert parse_pattern("interactive").label == "interactive:burst=10,think=0.5"
    assert parse_pattern("serve:rate=20").label == "serve:rate=20,size=1"
    assert str(parse_pattern("batch")) == "batch" and BATCH.saturated
    assert not parse_pattern("serve").saturated
    assert parse_pattern("serve:load=0.5").label == "serve:load=0.5,size=1"
    assert parse_pattern("serve:rate=3,load=0.5").label == "serve:rate=3,size=1,load=0.5"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("bursty", "unknown pattern 'bursty'; allowed: batch, interactive"),
        ("", "unknown pattern ''"),
        ("batch:rate=1", "'batch' takes no settings"),
        ("interactive:", "empty settings in pattern 'interactive:'"),
        ("interactive:think=0", "bad think '0' in pattern 'interactive:think=0'; allowed: seconds > 0"),
        ("interactive:think=-1", "bad think '-1'"),
        ("interactive:think=nan", "bad think 'nan'"),
        ("interactive:think=inf", "bad think 'inf'"),
        ("interactive:think=1e9", "bad think '1e9'"),
        ("interactive:burst=0", "bad burst '0'"),
        ("interactive:burst=2.5", "allowed: a whole number of units"),
        ("interactive:rate=3", "unknown key 'rate' in pattern 'interactive:rate=3'; allowed keys for interactive"),
        ("serve:rate=0", "bad rate '0' in pattern 'serve:rate=0'; allowed: requests/s > 0"),
        ("serve:rate=-2", "bad rate '-2'"),
        ("serve:rate", "bad setting 'rate'"),
        ("serve:rate=1,rate=2", "key 'rate' given twice"),
        ("serve:rate=1,", "bad setting ''"),
        ("serve:think=1", "unknown key 'think'"),
    ],
)
def test_bad_patterns_are_one_line(text, fragment):
    with pytest.raises(UserError) as err:
        parse_pattern(text)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


positive_think = st.floats(min_value=1e-6, max_value=MAX_THINK_S, allow_nan=False, allow_infinity=False)
positive_rate = st.floats(min_value=MIN_RATE_PER_S, max_value=MAX_RATE_PER_S, allow_nan=False, allow_infinity=False)
units = st.integers(min_value=1, max_value=10**9)
patterns = st.one_of(
    st.just(BATCH),
    st.builds(lambda n, t: Pattern("interactive", units=n, think_s=t), units, positive_think),
    st.builds(lambda n, r: Pattern("serve", units=n, rate_per_s=r), units, positive_rate),
)


@given(patterns)
def test_every_pattern_round_trips_through_its_label(pattern):
    assert parse_pattern(pattern.label) == pattern
    assert parse_pattern(pattern.label.upper()) == pattern
    assert parse_pattern(pattern.label).label == pattern.label


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_think_is_accepted_exactly_when_finite_and_in_range(think):
    text = f"interactive:think={think!r}"
    if math.isfinite(think) and 0 < think <= MAX_THINK_S:
        assert parse_pattern(text).think_s == think
    else:
        with pytest.raises(UserError, match="bad think"):
            parse_pattern(text)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_rate_is_accepted_exactly_when_finite_and_in_range(rate):
    text = f"serve:rate={rate!r}"
    if math.isfinite(rate) and MIN_RATE_PER_S <= rate <= MAX_RATE_PER_S:  # issue 46: a handful of requests a cell
        assert parse_pattern(text).rate_per_s == rate
    else:
        with pytest.raises(UserError, match="bad rate"):
            parse_pattern(text)


@given(st.text(max_size=30))
def test_any_text_parses_or_fails_in_one_line(text):
    try:
        pattern = parse_pattern(text)
    except UserError as err:
        assert "\n" not in str(err) and str(err)
    else:
        assert pattern.kind in PATTERNS
        assert parse_pattern(pattern.label) == pattern


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_number_reads_back(x):
    assert float(format_number(x)) == x
