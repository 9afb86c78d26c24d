"""What `kai run` binds while a cycle is still running (`kai.kubernetes.early_binds`).

The scheduling loop looks at the session's placements at moments it does not choose, possibly
between two placements of one statement's commit. Here it looks after a seeded random choice of
appends: whatever it takes must be a whole commit of allocate's bindings (a gang never split
between a binding sent now and one sent later or never), never a pipelined or shared-GPU placement
or another action's, and the cycle's decisions are the ones the same cycle makes unobserved.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from benchmarks.clusters import Cluster, allocate_cluster, reclaim_cluster

from kai.core.decisions import Kind, Placement
from kai.core.session import SchedulerConfig, Session
from kai.kubernetes.early_binds import EarlyBinds
from kai.scheduler.cycle import close_session, run_actions, run_cycle


class _Watched(list[Placement]):
    """The session's placements, with the loop looking in after some appends."""

    def __init__(self, look: Any, rng: random.Random) -> None:
        super().__init__()
        self.look = look
        self.rng = rng

    def append(self, placement: Placement) -> None:
        super().append(placement)
        if self.rng.random() < 0.3:
            self.look()


CLUSTERS: dict[str, Any] = {
    "gangs": lambda: allocate_cluster(nodes=40, pods=600, queues=6, seed=3),
    # allocate binds some, reclaim and preempt pipeline others onto what their evictions free
    "reclaim": lambda: reclaim_cluster(nodes=30, queues=5, seed=3, running=120, pending=60),
}


def _snapshot(cluster: Cluster) -> Any:
    return cluster.built().snapshot


@pytest.mark.parametrize("name", sorted(CLUSTERS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_taken_while_running_are_whole_commits_of_allocate_bindings(name: str, seed: int) -> None:
    snapshot = _snapshot(CLUSTERS[name]())
    early = EarlyBinds(snapshot)
    batches: list[list[Placement]] = []

    def opened(session: Session) -> None:
        early.opened(session)
        session.placements = _Watched(lambda: batches.append(early.take()), random.Random(seed))

    session = run_actions(snapshot, SchedulerConfig(), opened=opened)
    result = close_session(session)
    assert result.placements == run_cycle(_snapshot(CLUSTERS[name]()), SchedulerConfig()).placements

    job_of = {task.key: task.job for task in snapshot.tasks}
    runs: list[list[Placement]] = []  # the commits: consecutive placements of one job
    for placement in result.placements:
        if runs and job_of[runs[-1][-1].pod] == job_of[placement.pod]:
            runs[-1].append(placement)
        else:
            runs.append([placement])
    batch_of = {p.pod: i for i, batch in enumerate(batches) for p in batch}
    assert batch_of, "nothing was bound early"
    assert set(batch_of) == early.bound
    for run in runs:
        taken = {batch_of.get(p.pod) for p in run}
        assert len(taken) == 1, f"a commit of {run[0].pod}'s job split: {taken}"
        if taken != {None}:
            assert all(p.kind is Kind.BIND and p.action == "allocate" and not p.gpu_groups for p in run)
