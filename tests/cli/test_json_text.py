"""`-o json` prints what `json.dumps(doc, indent=2)` prints, for every JSON document (the fast encoder
and its check for the numbers it writes differently, `kai.cli.json_text`)."""

from __future__ import annotations

import json
from typing import Any

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
