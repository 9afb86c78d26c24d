"""How a cycle's victim searches end: each action's scenario budget, and the hopeless searches of an
earlier cycle on the same cluster, which are skipped with exactly the decisions a full search makes."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import pytest
from benchmarks.clusters import NOW, reclaim_cluster, starving_cluster

from kai.actions.common import solver
from kai.actions.common.victims import VictimUnit
from kai.core.decisions import CycleResult, HopelessSearches, SearchReport
from kai.core.model import Snapshot
from kai.core.session import SchedulerConfig
from kai.scheduler.clock_rules import MARGIN, next_clock_event
from kai.scheduler.cycle import open_session, run_cycle

BUDGETS = [{}, {"reclaim": 12, "default": 3}]


def _snapshot(cluster_name: str, *, now: float = NOW) -> Snapshot:
    cluster = (
        starving_cluster(nodes=12, departments=2, teams=2)
        if cluster_name == "starving"
        else reclaim_cluster(nodes=30, queues=5, seed=3)
    )
    return cluster.built(now).snapshot


def _decisions(result: CycleResult) -> dict[str, object]:
    return {name: getattr(result, name) for name in result.__struct_fields__ if name not in ("searches", "hopeless")}


def _report(result: CycleResult, action: str) -> SearchReport:
    return next(r for r in result.searches if r.action == action)


def test_budget_stops_the_action_where_it_runs_out() -> None:
    snapshot = _snapshot("reclaim")
    free = run_cycle(snapshot, SchedulerConfig())
    capped = run_cycle(snapshot, SchedulerConfig(max_action_scenarios={"reclaim": 5}))
    unlimited, limited = _report(free, "reclaim"), _report(capped, "reclaim")
    assert not unlimited.budget_exhausted and unlimited.scenarios > 5
    assert limited.budget_exhausted and limited.scenarios == 5 and limited.not_attempted > 0
    assert 0 < limited.solved < unlimited.solved
    reclaimed = [e for e in capped.evictions if e.action == "reclaim"]
    assert 0 < len(reclaimed) < len([e for e in free.evictions if e.action == "reclaim"])
    # "default" is the budget of the actions without their own
    defaulted = run_cycle(snapshot, SchedulerConfig(max_action_scenarios={"default": 5, "reclaim": 0}))
    assert _report(defaulted, "preempt").scenarios <= 5 and not _report(defaulted, "reclaim").budget_exhausted


@pytest.mark.parametrize("cluster", ["reclaim", "starving"])
@pytest.mark.parametrize("budgets", BUDGETS, ids=["unlimited", "budget"])
def test_remembered_searches_are_skipped_with_the_same_decisions(cluster: str, budgets: dict[str, int]) -> None:
    config = SchedulerConfig(max_action_scenarios=budgets)
    first = run_cycle(_snapshot(cluster), config)
    assert first.hopeless.attempts, "some searches fail on this cluster"
    later = _snapshot(cluster, now=NOW + 1)
    remembered = run_cycle(later, config, hopeless=first.hopeless)
    searched = run_cycle(later, config)
    assert _decisions(remembered) == _decisions(searched)
    for again, full in zip(remembered.searches, searched.searches, strict=True):
        assert again.remembered == again.failed == full.failed and full.remembered == 0
        assert (again.solved, again.scenarios, again.not_attempted) == (full.solved, full.scenarios, full.not_attempted)
    assert remembered.hopeless.attempts == searched.hopeless.attempts


def test_memory_ends_with_its_clock_window() -> None:
    first = run_cycle(_snapshot("starving"), SchedulerConfig())
    window = msgspec.structs.replace(first.hopeless, until=NOW + 0.5)
    late = run_cycle(_snapshot("starving", now=NOW + 1), SchedulerConfig(), hopeless=window)
    assert all(r.remembered == 0 for r in late.searches)
    early = run_cycle(_snapshot("starving", now=NOW + 0.25), SchedulerConfig(), hopeless=window)
    assert any(r.remembered for r in early.searches)
    before = run_cycle(
        _snapshot("starving", now=NOW - 1),
        SchedulerConfig(),
        hopeless=HopelessSearches(attempts=first.hopeless.attempts, since=NOW, until=NOW + 10),
    )
    assert all(r.remembered == 0 for r in before.searches)


def test_next_clock_event_is_the_first_minimum_runtime_or_delay_to_end() -> None:
    snapshot = _snapshot("reclaim")
    assert next_clock_event(open_session(snapshot, SchedulerConfig())) == float("inf")
    queues = tuple(msgspec.structs.replace(q, reclaim_min_runtime=600.0) for q in snapshot.queues)
    jobs = list(snapshot.jobs)
    jobs[0] = msgspec.structs.replace(jobs[0], last_start=NOW - 100.0)
    jobs[1] = msgspec.structs.replace(jobs[1], last_start=NOW - 900.0)  # its protection ended already
    timed = msgspec.structs.replace(snapshot, queues=queues, jobs=tuple(jobs))
    assert next_clock_event(open_session(timed, SchedulerConfig())) == pytest.approx(NOW + 500.0 - MARGIN)
    jobs[2] = msgspec.structs.replace(jobs[2], preemption_delay=30.0, creation=NOW - 10.0, last_eviction=None)
    delayed = msgspec.structs.replace(timed, jobs=tuple(jobs))
    assert next_clock_event(open_session(delayed, SchedulerConfig())) == pytest.approx(NOW + 20.0 - MARGIN)


@pytest.mark.parametrize("budgets", [{}, {"reclaim": 24}, {"reclaim": 33}], ids=["unlimited", "budget-24", "budget-33"])
def test_a_try_that_failed_is_not_simulated_again_and_costs_the_same(
    budgets: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Within one search, a try (or a judged set of victims) that failed is charged again, not simulated
    again: the same decisions and search reports as simulating it, with fewer simulations."""
    snapshot = reclaim_cluster(nodes=40, seed=1).built().snapshot  # a cluster where tries repeat
    config = SchedulerConfig(max_action_scenarios=budgets)
    simulated: list[int] = []
    simulate = solver._Search.simulate

    def counted(self: solver._Search, units: Sequence[VictimUnit]) -> tuple[solver.Scenario, set[int]] | None:
        simulated.append(len(units))
        return simulate(self, units)

    monkeypatch.setattr(solver._Search, "simulate", counted)
    remembered = run_cycle(snapshot, config)
    with_memory = len(simulated)
    simulated.clear()
    monkeypatch.setattr(solver._Search, "recharged", lambda self, attempt: False)
    searched = run_cycle(snapshot, config)
    assert with_memory < len(simulated)
    assert _decisions(remembered) == _decisions(searched)
    assert remembered.searches == searched.searches and remembered.hopeless == searched.hopeless
