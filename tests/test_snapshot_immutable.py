"""The snapshot is immutable: a whole scheduling cycle (every action) leaves it exactly as it was."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from kai.core.session import SchedulerConfig
from kai.scheduler.cycle import run_cycle
from kai.sim.engine import Simulation
from kai.sim.loader import load_paths

CASES = sorted((pathlib.Path(__file__).parent / "scenarios").glob("*/manifests.yaml"))


def fingerprint(snapshot: object) -> list[object]:
    """Every array and scalar reachable from the snapshot, copied."""
    out: list[object] = []

    def walk(value: object) -> None:
        if isinstance(value, np.ndarray):
            out.append(value.copy())
        elif isinstance(value, tuple | list):
            for item in value:
                walk(item)
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                out.append(key)
                walk(value[key])
        elif hasattr(value, "__dataclass_fields__") or hasattr(value, "__struct_fields__"):
            for name in getattr(value, "__dataclass_fields__", None) or value.__struct_fields__:  # type: ignore[attr-defined]
                walk(getattr(value, name))
        else:
            out.append(value)

    walk(snapshot)
    return out


def same(a: list[object], b: list[object]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, np.ndarray):
            if not isinstance(y, np.ndarray) or x.shape != y.shape or not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


@pytest.mark.parametrize("manifest", CASES, ids=[c.parent.name for c in CASES])
def test_cycle_does_not_modify_the_snapshot(manifest: pathlib.Path) -> None:
    loaded = load_paths([str(manifest)])
    sim = Simulation(loaded.objects, config=SchedulerConfig())
    sim.step()  # one cycle so that some pods run, then snapshot the next one
    snapshot = sim.snapshot().snapshot
    before = fingerprint(snapshot)
    run_cycle(snapshot, SchedulerConfig())
    assert same(before, fingerprint(snapshot))
