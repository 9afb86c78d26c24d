"""The victim order kept as arrays (`victim_steps`) is the victim order walked unit by unit (`VictimPool.units`).

Busy seeded clusters (the reclaim benchmark's: gangs and elastic jobs, GPU and CPU-only pods, over
several queues) are cut down to small sizes; the two walks must give the same units in the same
order, and a whole cycle must give the same decisions whichever walk the victim search reads.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from benchmarks.clusters import reclaim_cluster

from kai.actions.common import victim_steps, victims
from kai.actions.common.victim_steps import VictimSteps
from kai.actions.common.victims import VictimPool
from kai.core.decisions import CycleResult
from kai.core.model import Snapshot
from kai.core.session import SchedulerConfig, Session
from kai.scheduler.cycle import close_session, open_session, run_actions, run_cycle

CLUSTERS = [
    {"nodes": 12, "queues": 4, "seed": 1},
    {"nodes": 20, "queues": 6, "seed": 2},
    {"nodes": 30, "queues": 5, "seed": 3, "running": 400},
    {"nodes": 40, "queues": 8, "seed": 4},
]


def _snapshot(spec: dict[str, int]) -> Snapshot:
    cluster = reclaim_cluster(**spec)
    return cluster.built().snapshot


def _walked(session: Session, queues: list[int], below: int | None) -> list[tuple[int, tuple[int, ...], bool]]:
    pool = VictimPool(session)
    return [(u.job, u.tasks, u.whole) for u in pool.units(queues, below_priority=below)]


def _ordered(session: Session, queues: list[int], below: int | None) -> list[tuple[int, tuple[int, ...], bool]]:
    ordered = VictimSteps(VictimPool(session)).ordered(queues, below_priority=below)
    assert ordered is not None
    return [(u.job, u.tasks, u.whole) for block in ordered.blocks() for u in block.units]


@pytest.mark.parametrize("spec", CLUSTERS, ids=lambda s: f"{s['nodes']}n-{s['queues']}q")
def test_same_order_as_the_unit_walk(spec: dict[str, int]) -> None:
    session = open_session(_snapshot(spec), SchedulerConfig())
    pool = VictimPool(session)
    queues = pool.queues
    assert len(queues) > 1
    walked = _walked(session, queues, None)
    assert len(walked) > 50
    assert _ordered(session, queues, None) == walked
    # a subset of the queues, and one queue below a priority (as preempt asks)
    assert _ordered(session, queues[1:], None) == _walked(session, queues[1:], None)
    assert _ordered(session, queues[:1], 100) == _walked(session, queues[:1], 100)


@pytest.mark.parametrize("spec", CLUSTERS, ids=lambda s: f"{s['nodes']}n-{s['queues']}q")
def test_same_decisions_as_the_unit_walk(spec: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = _snapshot(spec)
    fast = run_cycle(snapshot, SchedulerConfig())
    monkeypatch.setattr(victim_steps.VictimSteps, "ordered", lambda self, queues, below_priority=None: None)
    walked = run_cycle(snapshot, SchedulerConfig())
    assert fast.evictions, "the cluster has reclaim and preempt work"
    assert _decisions(fast) == _decisions(walked)


@pytest.mark.parametrize(
    "spec", [*CLUSTERS[:2], {"nodes": 60, "queues": 6, "seed": 5}], ids=lambda s: f"{s['nodes']}n-{s['queues']}q"
)
def test_bounded_walk_in_small_blocks_same_decisions(spec: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The bounded walk (`OrderedVictims.relevant`) one candidate at a time: nodes join round after round
    and the steps already behind the walk on them are caught up; the 60-node cluster also has nodes
    short of CPU only (watched one by one). Same decisions as the unit walk."""
    snapshot = _snapshot(spec)
    monkeypatch.setattr(victim_steps, "FIRST_BLOCK", 1)
    monkeypatch.setattr(victim_steps, "LARGEST_BLOCK", 2)
    fast = run_cycle(snapshot, SchedulerConfig())
    monkeypatch.setattr(victim_steps.VictimSteps, "ordered", lambda self, queues, below_priority=None: None)
    walked = run_cycle(snapshot, SchedulerConfig())
    assert fast.evictions, "the cluster has reclaim and preempt work"
    assert _decisions(fast) == _decisions(walked)


@pytest.mark.parametrize("spec", CLUSTERS[:3], ids=lambda s: f"{s['nodes']}n-{s['queues']}q")
def test_steps_kept_in_step_are_the_steps_built_afresh(spec: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """After every update during a whole cycle (commits, rollbacks, preempt taking reclaim's steps over), and
    at every search for every queue it reads, a queue's steps are those built from scratch for the same
    pool (the same units, holdings, rows), and every job's kept plan (a plan's tail once its first steps
    are evicted) the plan made from scratch."""
    checked = []
    sync = victim_steps.QueueSteps.sync
    ordered = victim_steps.VictimSteps.ordered

    def checked_ordered(
        self: victim_steps.VictimSteps, queues: list[int], *, below_priority: int | None = None
    ) -> victim_steps.OrderedVictims | None:
        # every queue a search reads is in step, whether or not it was synced (no job of it changed)
        found = ordered(self, queues, below_priority=below_priority)
        assert found is not None
        for steps in found.queues:
            fresh = victim_steps.QueueSteps(self.pool, steps.queue)
            sync(fresh)
            assert _live(fresh) == _live(steps)
        return found

    def checked_sync(self: victim_steps.QueueSteps) -> None:
        sync(self)
        fresh = victim_steps.QueueSteps(self.pool, self.queue)
        sync(fresh)
        assert fresh.alive.all()
        assert _live(fresh) == _live(self)
        # each live step is found by its key, and a dead step (removed in place) holds nothing and has
        # no row on a node
        assert sorted(self.place.values()) == np.flatnonzero(self.alive).tolist()
        assert all(self.keys[at] == key for key, at in self.place.items())
        assert not self.holds[~self.alive].any()
        assert self.holds.flags.f_contiguous, "the holdings are kept column by column (victim_keys)"
        used = np.zeros(self.row_node.size, dtype=np.bool_)
        used[self.step_rows(np.flatnonzero(self.alive))[1]] = True
        assert set(self.row_node[~used].tolist()) <= {self.nowhere}
        assert (np.cumsum(self.holds, axis=0)[self.alive].tolist()) == np.cumsum(fresh.holds, axis=0).tolist()
        session = self.pool.session
        for job in self.jobs:  # each kept plan is the plan made now from scratch
            alone = victims._plan(session, job) if victims.is_candidate(session, job) else ()
            assert [_content(step) for step in self.pool.plan(job)] == [_content(step) for step in alone]
        checked.append(self.queue)

    monkeypatch.setattr(victim_steps.QueueSteps, "sync", checked_sync)
    monkeypatch.setattr(victim_steps.VictimSteps, "ordered", checked_ordered)
    assert run_cycle(_snapshot(spec), SchedulerConfig()).evictions
    assert len(checked) > len(set(checked)) > 1  # several queues, each kept in step more than once


def _live(steps: victim_steps.QueueSteps) -> tuple[object, ...]:
    """The live steps' units, holdings, and rows (nodes, freed amounts)."""
    alive = np.flatnonzero(steps.alive)
    rows = steps.step_rows(alive)[1]
    return (
        list(steps.units[alive]),
        steps.holds[alive].tolist(),
        steps.nrows[alive].tolist(),
        steps.row_node[rows].tolist(),
        steps.row_frees[rows].tolist(),
    )


@pytest.mark.parametrize("spec", CLUSTERS[:3], ids=lambda s: f"{s['nodes']}n-{s['queues']}q")
def test_combined_arrays_kept_in_step_are_the_arrays_built_afresh(
    spec: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After every refresh during a whole cycle (segments patched for removed steps, or written again), the
    walk's combined arrays hold what arrays built afresh from the same queues hold: per queue the same
    live steps with the same keys, units and rows, the same steps freeing each resource, and no row of a
    dead or spare step on any node."""
    checked = []
    building: list[bool] = []
    refresh = victim_steps.Combined.refresh

    def checked_refresh(self: victim_steps.Combined) -> None:
        refresh(self)
        if building:
            return  # the arrays built afresh
        building.append(True)
        fresh = victim_steps.Combined(self.queues, nodes=self.nodes)
        building.pop()
        everywhere = np.arange(self.nodes, dtype=np.int64)
        assert self.on(everywhere).tolist() == self.valid.tolist()
        for k in range(len(self.queues)):
            mine, theirs = _segment(self, k), _segment(fresh, k)
            assert mine == theirs
            for resources in list(self._freeing):
                a, b = int(self.offset[k]), int(fresh.offset[k])
                size = len(self.queues[k].keys)
                assert self.freeing(resources)[a : a + size].tolist() == fresh.freeing(resources)[b : b + size].tolist()
        checked.append(len(self.queues))

    monkeypatch.setattr(victim_steps.Combined, "refresh", checked_refresh)
    assert run_cycle(_snapshot(spec), SchedulerConfig()).evictions
    assert len(checked) > 1 and max(checked) > 1


def _segment(every: victim_steps.Combined, k: int) -> tuple[object, ...]:
    """Queue k's valid steps in the combined arrays: their places, keys, units and rows."""
    ids = np.flatnonzero(every.valid[every.offset[k] : every.offset[k + 1]]) + every.offset[k]
    _, rows = every.step_rows(ids)
    return (
        every.place[ids].tolist(),
        every.varying[ids].tolist(),
        every.units(ids),
        every.row_node[rows].tolist(),
        every.frees(rows).tolist(),
    )


def _content(step: victims.PlanStep) -> tuple[object, ...]:
    return (step.unit, step.holds, step.requeue, step.nodes, step.frees.tolist())


def _decisions(result: CycleResult) -> dict[str, object]:
    return {name: getattr(result, name) for name in result.__struct_fields__}


@pytest.mark.parametrize("spec", CLUSTERS, ids=lambda s: f"{s['nodes']}n-{s['queues']}q")
def test_plans_made_together_are_the_plans_made_one_by_one(
    spec: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`VictimPool.plan_all` (jobs at their gang minimum planned together) gives every job the plan
    `_plan` gives it alone: the same units, holdings, re-rank keys, nodes and freed amounts."""
    monkeypatch.setattr(victims, "BATCH", 1)
    session = open_session(_snapshot(spec), SchedulerConfig())
    pool = VictimPool(session)
    jobs = [job for entries in pool.by_queue.values() for _, job in entries]
    alone = [victims._plan(session, job) for job in jobs]
    pool.plan_all(jobs)
    together = [pool.plan(job) for job in jobs]
    assert sum(len(plan) == 1 and plan[0].unit.whole for plan in together) > len(jobs) // 2
    for one, many in zip(alone, together, strict=True):
        assert [(s.unit, s.holds, s.requeue, s.nodes, s.frees.tolist()) for s in one] == [
            (s.unit, s.holds, s.requeue, s.nodes, s.frees.tolist()) for s in many
        ]


def test_a_session_is_freed_with_what_its_searches_kept() -> None:
    """The victim steps, plans and search books kept per session do not keep it alive (`kai run` opens a
    session every cycle)."""
    session = run_actions(_snapshot(CLUSTERS[0]), SchedulerConfig())
    assert close_session(session).evictions, "the cycle searched for victims"
    alive = weakref.ref(session)
    del session
    gc.collect()
    assert alive() is None
