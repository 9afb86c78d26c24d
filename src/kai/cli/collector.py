"""The garbage collector around loading a command's input.

Reading a large input builds millions of small objects (the decoded documents and the typed objects
made from them) that live as long as the run and hold no reference cycles. Left alone, Python's
collector scans all of them again each time the heap has grown by a quarter, which on the 50,000-pod
benchmark cost a third of `kai sim`'s time. While the input is read the collector is paused; the
objects that survive are then frozen (moved out of the collector's generations, `gc.freeze`), so
the cycles that follow scan only what they create themselves.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the collector for the block; freeze what survives it (a nested pause is a no-op)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
