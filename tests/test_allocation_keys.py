"""Property: the allocation key a session keeps per queue (`Session.allocation_key`) is always the queue
order's key of the queue's allocation and the job's attempt as they are now, through placements,
evictions, rollbacks and the victim search's simulated attempts (a kept key would otherwise put the
jobs in a stale order). Deterministic (a seeded generator).
"""

from __future__ import annotations

import random

import numpy as np
from benchmarks.clusters import reclaim_cluster

from kai.core.model import TaskStatus
from kai.core.session import NOTHING, SchedulerConfig, Session
from kai.core.statement import Statement
from kai.scheduler.cycle import open_session


def _fresh(session: Session, queue: int, job: int) -> tuple[object, ...]:
    """The key computed from scratch."""
    allocated = tuple(session.queue_allocated[queue].tolist())
    attempt = tuple(session.attempt_request(session.snapshot.jobs[job]).tolist())
    return session.queue_order.key(session, queue, allocated, attempt, NOTHING)


def test_kept_allocation_keys_follow_every_change() -> None:
    session = open_session(reclaim_cluster(nodes=40, seed=3).built().snapshot, SchedulerConfig())
    snapshot = session.snapshot
    rng = random.Random(7)
    stmt = Statement(session, action="reclaim")
    jobs = [job for job in snapshot.jobs if job.queue >= 0]
    running = [t for t in snapshot.tasks if t.status == TaskStatus.RUNNING]
    pending = [t for t in snapshot.tasks if t.status == TaskStatus.PENDING]
    checked = 0
    simulated = []
    for _ in range(400):
        move = rng.random()
        if move < 0.3 and running:
            task = running.pop(rng.randrange(len(running)))
            stmt.evict(task, preemptor=None, message="")
        elif move < 0.6 and pending:
            task = pending.pop(rng.randrange(len(pending)))
            stmt.place(task, rng.randrange(snapshot.nodes.count), pipelined=True, choice=None)
        elif move < 0.7:
            stmt.rollback(rng.randrange(stmt.checkpoint() + 1))
            running = [t for t in snapshot.tasks if session.status[t.index] == TaskStatus.RUNNING]
            pending = [t for t in snapshot.tasks if session.status[t.index] == TaskStatus.PENDING]
        elif move < 0.8:
            job = rng.choice(jobs)
            session.allocation_key(job.queue, job)  # kept before the attempt changes
            session.simulated_attempts[job.index] = np.array([rng.randrange(4), 1000.0, 0.0])
            simulated.append(job)
        elif move < 0.85 and simulated:
            session.allocation_key(simulated[-1].queue, simulated[-1])
            session.simulated_attempts.clear()
        for job in rng.sample(jobs, 6) + simulated[-1:]:
            for queue in session.ancestors(job.queue):
                assert session.allocation_key(queue, job) == _fresh(session, queue, job.index)
                checked += 1
    assert checked > 1000
