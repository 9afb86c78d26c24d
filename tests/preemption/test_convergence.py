"""No thrashing: with every action on, the cluster settles, and ten more cycles change nothing.

Each case runs until idle (nothing changed and no timed event is due), then ten more cycles must
leave every pod where it is and add no eviction, placement or event.
"""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from kai.core.session import SchedulerConfig
from kai.sim import output
from kai.sim.engine import Simulation
from kai.sim.loader import load_paths

ROOT = pathlib.Path(__file__).parent.parent.parent
PREFIXES = ("preempt-", "reclaim-", "consolidation-", "stale-")
CASES = sorted(
    [p / "manifests.yaml" for p in (ROOT / "tests" / "scenarios").iterdir() if p.name.startswith(PREFIXES)]
    + list((ROOT / "src" / "kai" / "cli" / "scenes").glob("0[45]-*.yaml"))
)


def state(doc: dict[str, Any]) -> tuple[object, ...]:
    pods = tuple((p["namespace"], p["name"], p["phase"], p["node"], p["nominatedNode"]) for p in doc["pods"])
    return pods, len(doc["evictions"]), len(doc["events"])


@pytest.mark.parametrize(
    "manifest", CASES, ids=[c.parent.name if c.name == "manifests.yaml" else c.stem for c in CASES]
)
def test_settles_and_stays(manifest: pathlib.Path) -> None:
    loaded = load_paths([str(manifest)])
    sim = Simulation(loaded.objects, config=SchedulerConfig())
    sim.run(cycles=None, until_idle=True, max_time=4 * 3600)
    settled = state(output.build(sim))
    for _ in range(10):
        assert not sim.step(), "a cycle after settling changed something"
        assert state(output.build(sim)) == settled
