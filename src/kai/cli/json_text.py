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
write a text it would have written the same.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_MAY_DIFFER = (b"0e0", b"0e-", b":0.0000", b"[0.0000", b",0.0000", b"-0.0000")


def dumps(doc: Any) -> str:
    """`json.dumps(doc, indent=2)` (plain JSON values: dicts with string keys, lists, strings,
    finite numbers, booleans, None)."""
    compact = msgspec.json.encode(doc)
    if not compact.isascii():
        return json.dumps(doc, indent=2)
    shapes = compact.translate(_DIGITS_AS_ZERO)
    if shapes.startswith(b"0.0000") or any(pattern in shapes for pattern in _MAY_DIFFER):
        return json.dumps(doc, indent=2)
    return msgspec.json.format(compact, indent=2).decode("ascii")
