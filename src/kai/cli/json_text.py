"""The JSON text commands print (`-o json`): what `json.dumps(doc, indent=2)` prints, made fast.

The stdlib encoder spent a second on the 50,000-pod benchmark's output; msgspec encodes and indents
the same document in a tenth of that. Its text is byte-identical to the stdlib's except in two cases,
where the stdlib encoder is used: non-ASCII text (the stdlib escapes it as `\\uXXXX`) and numbers the
two write differently (msgspec writes `1e16` and `0.00001` where Python writes `1e+16` and `1e-05`;
a finite float of neither form prints the same, its shortest round-trip digits).

Such a number is found without parsing the text: each one msgspec writes differently holds a digit,
`e` and a digit or minus sign (`1e16`, `1.5e-7`), or starts `0.0000` or `-0.0000`. In the compact
encoding a number starts the text or follows `:`, `[` or `,`; with every digit read as `0` such a
number is `0e0`, `0e-`, `:0.0000`, `[0.0000`, `,0.0000` or `-0.0000` somewhere in the text, or
`0.0000` at its start. The same letters inside a string (a name such as `x1e5`) only make the stdlib
write a text it would have written the same. The text is searched twice (for `0e` and for `0.0000`,
then the byte after or before each find is looked at), not once per pattern: on a 50,000-pod
document, whose names and timestamps are full of zeros once every digit is one, six searches took
0.1 s.

Commands write the bytes (`encode`): the text is ASCII either way, and a 38 MB text decoded to a
string only to be encoded again on its way out cost another 0.05 s.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_AFTER_E = (b"0", b"-")  # 0e0, 0e-
_BEFORE_SMALL = (b":", b"[", b",", b"-")  # :0.0000, [0.0000, ,0.0000, -0.0000


def _may_differ(compact: bytes) -> bool:
    """Whether the compact encoding may hold a number msgspec writes differently from the stdlib."""
    shapes = compact.translate(_DIGITS_AS_ZERO)
    at = shapes.find(b"0e")
    while at != -1:
        if shapes[at + 2 : at + 3] in _AFTER_E:
            return True
        at = shapes.find(b"0e", at + 1)
    at = shapes.find(b"0.0000")
    while at != -1:
        if at == 0 or shapes[at - 1 : at] in _BEFORE_SMALL:
            return True
        at = shapes.find(b"0.0000", at + 1)
    return False


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
