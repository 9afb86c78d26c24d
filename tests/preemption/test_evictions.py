"""What a user sees of evictions: the action, the preemptor and a message, on the scenario tables."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from kai.api.fields import parse_timestamp
from kai.core.session import SchedulerConfig
from kai.sim import output
from kai.sim.engine import Simulation
from kai.sim.loader import load_paths

SCENARIOS = pathlib.Path(__file__).parent.parent / "scenarios"
ALL = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")


def run(case: str, *, cycles: int = 1, actions: tuple[str, ...] = ALL, **config: Any) -> dict[str, Any]:
    loaded = load_paths([str(SCENARIOS / case / "manifests.yaml")])
    sim = Simulation(loaded.objects, config=SchedulerConfig(actions=actions, **config))
    sim.run(cycles=cycles, until_idle=False, max_time=0)
    return output.build(sim)


def evicted(doc: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {e["pod"]: (e["action"], e["preemptor"]) for e in doc["evictions"]}


def messages(doc: dict[str, Any]) -> dict[str, str]:
    return {e["object"].removeprefix("Pod/"): e["message"] for e in doc["events"] if e["reason"] == "Evicted"}


def test_reclaim_names_queues_and_shares() -> None:
    doc = run("reclaim-toward-fair-share")
    assert evicted(doc) == {f"default/a{i}-0": ("reclaim", f"default/b{7 - i}") for i in range(4, 8)}
    assert messages(doc)["default/a7-0"] == (
        "evicted by reclaim: queue team-b is below its fair share of 4 GPUs (has 0); "
        "team-a is over its fair share (has 8 of 4)"
    )


def test_preempt_names_preemptor_and_priorities() -> None:
    doc = run("preempt-lowest-priority-newest-first")
    assert evicted(doc) == {"default/new-train-0": ("preempt", "default/serve")}
    assert messages(doc)["default/new-train-0"] == (
        "evicted by preempt: serve (priority 125) needs 1 GPU in queue team; new-train has lower priority 50"
    )


def test_consolidation_says_where_the_pod_moves() -> None:
    doc = run("consolidation-moves-pod")
    assert evicted(doc) == {"default/p2-0": ("consolidation", "default/big")}
    assert messages(doc)["default/p2-0"].startswith("evicted by consolidation: moved to node-a to make room for big")


def test_consolidation_respects_the_preemptee_cap() -> None:
    doc = run("consolidation-moves-pod", max_consolidation_preemptees=1)
    assert evicted(doc) == {"default/p2-0": ("consolidation", "default/big")}
    assert evicted(run("consolidation-refused-victim-cannot-move")) == {}


def test_stale_gang_eviction_message_and_no_preemptor() -> None:
    doc = run("stale-gang-evicted-after-grace", cycles=62, actions=("allocate", "stalegangeviction"))
    assert evicted(doc) == {"default/gang-0": ("stalegangeviction", None)}
    assert "1 of the 2 pods it needs (minMember) for 60s" in messages(doc)["default/gang-0"]


@pytest.mark.parametrize(
    ("case", "pods"),
    [
        ("preempt-gang-victim-whole", {"default/gang-0", "default/gang-1"}),
        ("preempt-elastic-surplus-one", {"default/elastic-2"}),
        ("preempt-min-runtime-protects", set()),
        ("preempt-equal-priority-never", set()),
        ("preempt-policy-never", set()),
        ("reclaim-none-at-fair-share", set()),
        ("reclaim-non-preemptible-victim-safe", set()),
    ],
)
def test_victim_rules(case: str, pods: set[str]) -> None:
    assert set(evicted(run(case))) == pods


def test_min_runtime_over_allows_preemption() -> None:
    """Once the job has run longer than preemptMinRuntime (10m) it may be preempted."""
    loaded = load_paths([str(SCENARIOS / "preempt-min-runtime-protects" / "manifests.yaml")])
    start = parse_timestamp("2026-01-01T00:11:00Z")
    sim = Simulation(loaded.objects, config=SchedulerConfig(actions=("allocate", "preempt")), start_time=start)
    sim.run(cycles=1, until_idle=False, max_time=0)
    assert set(evicted(output.build(sim))) == {"default/train-0"}


def test_victim_with_subgroup_tree_gets_back_only_what_its_tree_needs() -> None:
    """minSubGroup 1 of 2: one subgroup is moved to the free node, the other is evicted for good."""
    doc = run("minsubgroup-victim-moves-one-subgroup", actions=("allocate", "preempt"))
    moved = {pod for pod, text in messages(doc).items() if "moved to node-b" in text}
    assert moved == {"default/batch-a0", "default/batch-a1"}
    assert set(evicted(doc)) == {f"default/batch-{p}" for p in ("a0", "a1", "b0", "b1")}
