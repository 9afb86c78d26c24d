"""How `kai run` sets CPython's cyclic garbage collector: a process that holds millions of long-lived
objects (every pod, node and PodGroup as the API server sent it, and parsed) and builds them all
at once when it starts.

The collector runs a full collection whenever the objects that survived the younger generations
have grown by a quarter since the last one, and a full collection visits every tracked object.
While the first list fills the caches from nothing, that is a full collection for every quarter
of growth, each over everything listed so far: at 20,000 pods it was more than half of the first
list's CPU (msgspec decoding 20,000 pods took 0.95 s with the collector on, 0.25 s with it off),
and the first cycle after it paid again (a full cycle at 20,000 pending pods 8.2 s of CPU instead
of 4.1 s). None of those collections finds anything: what a list decodes (dicts, lists, strings)
holds no reference cycles.

So, as large Python services do (`gc.freeze` is for this):
* `starting()`: until the caches have synced, collections are rare (young generations of a million
  objects; a full collection only after a thousand of them, which the first list never reaches);
* `synced()`: once synced, every object alive is moved out of the collector's sight for good
  (`gc.freeze`): the caches' objects are freed by reference counting when their object goes, as
  they hold no cycles, and later collections visit only what came after; young generations are
  then `SYNCED[0]` objects, so the busy first cycle does not start a collection every 700 allocations.
Only `kai run`'s process calls these; the library and the tests keep the interpreter's defaults.
"""

from __future__ import annotations

import gc

STARTING = (1_000_000, 1_000, 1_000)  # thresholds while the first list fills the caches
SYNCED = (50_000, 10, 10)  # thresholds once synced (the interpreter's defaults are 700, 10, 10)


def starting() -> None:
    """Collections as rare as they can be while the caches fill (they would find nothing)."""
    gc.set_threshold(*STARTING)


def synced() -> None:
    """The caches are full: freeze what is alive and collect from here on among the newer objects."""
    gc.freeze()
    gc.set_threshold(*SYNCED)
