"""`kai sim`'s document lists pods by namespace, then name, whatever the namespaces and names
(`kai.sim.output`: the store's sorted `namespace/name` keys are reused, and namespaces such as `a`
and `a-b`, whose keys sort the other way, are put in order)."""

from __future__ import annotations

from typing import Any

import pytest

from kai.api.errors import Source
from kai.api.manifest import Document, SkippedObject, parse_document
from kai.core.session import SchedulerConfig
from kai.sim import output
from kai.sim.engine import Simulation


def pod(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "i"}]},
    }


def listed(names: list[tuple[str, str]]) -> list[tuple[str, str]]:
    objects = []
    for i, (namespace, name) in enumerate(names, start=1):
        raw = pod(namespace, name)
        parsed = parse_document(Document(raw=raw, source=Source(file="cluster", index=i)))
        assert not isinstance(parsed, SkippedObject)
        objects.append((parsed, raw))
    sim = Simulation(objects, config=SchedulerConfig(), start_time=None)
    sim.run(cycles=1, until_idle=False, max_time=60.0)
    return [(p["namespace"], p["name"]) for p in output.build(sim)["pods"]]


@pytest.mark.parametrize(
    "names",
    [
        [("a", "x"), ("a-b", "x"), ("a.b", "y"), ("a", "w"), ("b", "a"), ("ab", "z"), ("a-b", "a")],
        [("team", "p-10"), ("team", "p-9"), ("team", "p-1"), ("team-2", "p-0"), ("t", "p")],
        [("a", "b/c"), ("a/b", "d"), ("a", "d"), ("a-b", "x"), ("a", "c")],  # a `/` in a name or a namespace
    ],
)
def test_pods_are_listed_by_namespace_then_name(names: list[tuple[str, str]]) -> None:
    assert listed(names) == sorted(names)
