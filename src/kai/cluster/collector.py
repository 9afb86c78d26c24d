"""Pausing CPython's cyclic garbage collector around work that builds many objects at once.

Reading a large input builds millions of small objects (decoded documents and the typed objects made
from them) that live as long as the run, and a cycle at 50,000 pods builds some hundred thousand
more (the snapshot's tasks, the session's records, the effects) that live until it ends. Left alone,
the collector scans all of them again each time the heap has grown by a quarter: a third of
`kai sim`'s time on the 50,000-pod benchmark while reading, about a sixth of the cycle. None of
those collections finds anything. So the collector is paused for such a block, and afterwards either
what survived it is frozen (moved out of the collector's generations with `gc.freeze`: the input,
which holds no reference cycles and lives on), or the collector simply runs again and the first
collection after the block takes whatever it left in reference cycles (a cycle's garbage).

`kai run` sets the collector its own way, for a long-lived process (`kai.kubernetes.collector`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused(*, freeze: bool) -> Iterator[None]:
    """Pause the collector for the block; with `freeze`, freeze what survives it. A nested pause (the
    collector already off) is a no-op."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        gc.enable()
