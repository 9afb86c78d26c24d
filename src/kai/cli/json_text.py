"""The JSON text commands print (`-o json`): what `json.dumps(doc, indent=2)` prints, made fast.

The stdlib encoder spent a second on the 50,000-pod benchmark's output; msgspec encodes and indents
the same document in a tenth of that. Its text is byte-identical to the stdlib's except in two cases,
where the stdlib encoder is used: non-ASCII text (the stdlib escapes it as `\\uXXXX`) and numbers the
two write differently (msgspec writes `1e16` and `0.00001` where Python writes `1e+16` and `1e-05`;
a finite float of neither form prints the same, its shortest round-trip digits).

Such a number is found without parsing the text: each one msgspec writes differently holds a digit,
`e` and a digit or minus sign (`1e16`, `1.5e-7`), or starts `0.0000` or `-0.0000`. In the compact
encoding a number starts the text or follows `:`, `[` or `,`; so such a number is a digit, `e` and a
digit or `-` somewhere in the text, or `0.0000` at the text's start or after `:`, `[`, `,` or `-`.
The same letters inside a string (a name such as `x1e5`) only make the stdlib write a text it would
have written the same. The text is looked at with numpy, a quarter of a megabyte at a time (the
arrays for that much stay in the CPU's cache): a few passes find where a digit comes before an `e`
and where `.0` comes two bytes after a byte (`,0.0`), and only those few places are looked at
closer. Searching the bytes instead (every digit read as `0`, then `0e` and `0.0000` found, `0`
being everywhere) took 0.064 s on the 50,000-pod document; this takes 0.008 s.

Commands write the bytes (`encode`): the text is ASCII either way, and a 38 MB text decoded to a
string only to be encoded again on its way out cost another 0.05 s.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

_STEP = 1 << 18  # bytes looked at at once
_REACH = 6  # bytes a shape reaches past where it starts, at most (`,0.0000`)
_ZERO, _E, _MINUS, _DOT = b"0e-."  # byte values
_BEFORE_SMALL = np.frombuffer(b":[,-", np.uint8)  # :0.0000, [0.0000, ,0.0000, -0.0000


def _may_differ(compact: bytes) -> bool:
    """Whether the compact encoding may hold a number msgspec writes differently from the stdlib."""
    if compact.startswith(b"0.0000"):
        return True
    text = np.frombuffer(compact, np.uint8)
    step = max(1, min(_STEP, len(text)))
    minus_zero = np.empty(step, np.uint8)  # each byte less `0`: below 10 for a digit
    found = np.empty(step, np.bool_)
    also = np.empty(step, np.bool_)
    for start in range(0, len(text), step):
        # the shapes that start in [start, start + step), with the bytes they reach; zeros after the
        # text's end (no shape holds a zero byte)
        window = text[start : start + step + _REACH]
        if len(window) < step + _REACH:
            window = np.concatenate((window, np.zeros(step + _REACH - len(window), np.uint8)))
        np.less(np.subtract(window[:step], _ZERO, out=minus_zero), 10, out=found)  # a digit,
        found &= np.equal(window[1 : step + 1], _E, out=also)  # then `e`
        if found.any() and _exponent(window, np.flatnonzero(found)):
            return True
        np.equal(window[2 : step + 2], _DOT, out=found)  # any byte and another, then `.`,
        found &= np.equal(window[3 : step + 3], _ZERO, out=also)  # then `0`
        if found.any() and _small(window, np.flatnonzero(found)):
            return True
    return False


def _exponent(window: npt.NDArray[np.uint8], at: npt.NDArray[np.intp]) -> bool:
    """Whether a digit at one of `at` and the `e` after it are followed by a digit or `-` (`1e16`, `1e-7`)."""
    after = window[at + 2]
    return bool((((after - _ZERO) < 10) | (after == _MINUS)).any())


def _small(window: npt.NDArray[np.uint8], at: npt.NDArray[np.intp]) -> bool:
    """Whether one of `at` is `:`, `[`, `,` or `-` and `0.0000` follows (`.0` two bytes on is known)."""
    zeros = window[at + 1] == _ZERO
    for offset in (4, 5, 6):
        zeros &= window[at + offset] == _ZERO
    return bool((zeros & np.isin(window[at], _BEFORE_SMALL)).any())


def encode(doc: Any) -> bytes:
    """`json.dumps(doc, indent=2)` as ASCII bytes (plain JSON values: dicts with string keys, lists,
    strings, finite numbers, booleans, None)."""
    compact = msgspec.json.encode(doc)
    if not compact.isascii() or _may_differ(compact):
        return json.dumps(doc, indent=2).encode("ascii")
    return msgspec.json.format(compact, indent=2)


def dumps(doc: Any) -> str:
    """`json.dumps(doc, indent=2)`."""
    return encode(doc).decode("ascii")
