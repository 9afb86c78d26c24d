"""`-o json` prints what `json.dumps(doc, indent=2)` prints, for every JSON document (the fast encoder
and its check for the numbers it writes differently, `kai.cli.json_text`)."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kai.cli import json_text

NUMBERS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e-5, -1e-5, 1e16, 1.5e-7, 0.0001, 0.00012, 98509369.901056, 10.00005, 5e-324, -0.0]),
)
TEXT = st.one_of(
    st.text(max_size=12), st.sampled_from(["x1e5", "0.00001", "a 0.0000", "1e-", "3ea", "v1.00005", "é", "\u2028"])
)
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), NUMBERS, TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(doc=VALUES)
def test_the_text_is_the_stdlib_text(doc: Any) -> None:
    assert json_text.dumps(doc) == json.dumps(doc, indent=2)
    assert json_text.encode(doc) == json.dumps(doc, indent=2).encode("ascii")


def test_numbers_msgspec_writes_differently_are_written_as_python_writes_them() -> None:
    doc = {"small": 0.00001, "large": 1e16, "list": [1.5e-7, -0.00002], "plain": 98509369.901056}
    assert json_text.dumps(doc) == json.dumps(doc, indent=2)
    assert '"small": 1e-05' in json_text.dumps(doc)
    assert json_text.dumps(0.00001) == "1e-05"


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(doc=VALUES, step=st.integers(min_value=1, max_value=9))
def test_the_text_is_the_stdlib_text_looked_at_in_small_steps(doc: Any, step: int) -> None:
    # the text is looked at in steps: a number across two steps' seam is seen whole
    with mock.patch.object(json_text, "_STEP", step):
        assert json_text.encode(doc) == json.dumps(doc, indent=2).encode("ascii")


@pytest.mark.parametrize("number", [1e16, -1e16, 1.5e-7, 1e-6, 0.00001, -0.00001, 0.000015])
def test_a_number_written_differently_is_found_anywhere_in_the_text(number: float) -> None:
    # at every place around the first step's seam, and at the text's start and end
    step = json_text._STEP
    for padding in range(step - 12, step + 4):
        doc = ["x" * padding, number]
        assert json_text.encode(doc) == json.dumps(doc, indent=2).encode("ascii")
    assert json_text.encode(number) == json.dumps(number).encode("ascii")
    assert json_text.encode([number]) == json.dumps([number], indent=2).encode("ascii")
    assert json_text.encode({"a": number}) == json.dumps({"a": number}, indent=2).encode("ascii")


def test_numbers_written_the_same_are_not_taken_for_ones_written_differently() -> None:
    # false alarms only cost the slower encoder; these are common enough to be worth sparing it
    doc = {"a": 0.0001, "b": 10.00005, "c": [0.5, 100.0, 2.25, 0.001], "name": "x-0.0", "x1e": "1e"}
    assert not json_text._may_differ(msgspec.json.encode(doc))
    assert json_text._may_differ(msgspec.json.encode({"a": 1e16}))
    assert json_text._may_differ(msgspec.json.encode([-0.00001]))
    assert json_text._may_differ(b"0.00001")
