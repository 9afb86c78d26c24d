"""Where a waiting job stands in its leaf queue, and what the order is made of; for a job with no
usable queue or priority class, where it would stand once its fix is made.

The order is the session's own job key (the priority plugin's priority and elastic state, then
creation time and uid), the one the actions pop jobs by; queues are ordered against each other by
the proportion plugin (queue priority, then fair share), whose inputs are reported as factors.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from kai.core.model import Job
from kai.core.session import Session
from kai.explain import analysis, model


def waiting(session: Session, job: Job) -> bool:
    """Does the job wait in its queue (pending pods, a usable queue, not started in this cycle)?"""
    return (
        job.problem is None
        and job.queue >= 0
        and session.has_pending(job)
        and analysis.phase(session, job) == model.PENDING
    )


def position(session: Session, job: Job) -> model.Position | None:
    """The job's place among the waiting jobs of its leaf queue; None if it does not wait in one."""
    if not waiting(session, job):
        return None
    peers = [j for j in session.snapshot.jobs if j.queue == job.queue and waiting(session, j)]
    return _place(session, job, peers)


def positions(session: Session, jobs: Iterable[Job]) -> dict[str, model.Position]:
    """`position` of each of the jobs that waits in a leaf queue, by PodGroup namespace/name: each
    queue's waiting jobs are found and ordered once, however many of them are asked for."""
    chosen = [j for j in jobs if waiting(session, j)]
    queues = {j.queue for j in chosen}
    peers: dict[int, list[Job]] = {q: [] for q in queues}
    for j in session.snapshot.jobs:
        if j.queue in peers and waiting(session, j):
            peers[j.queue].append(j)
    for line in peers.values():
        line.sort(key=session.job_key)
    places = {q: {j.index: i for i, j in enumerate(line)} for q, line in peers.items()}
    return {j.key: _placed(session, j, peers[j.queue], places[j.queue][j.index]) for j in chosen}


def position_after(session: Session, job: Job, fix: model.Suggestion) -> model.Position | None:
    """Where a pending job that waits in no queue (its queue or its priority class is unusable) would
    stand once its fix is made: among the jobs waiting now in the leaf queue the fix leaves it in,
    in the session's order, the fix named; None if the fix leaves it with no usable queue."""
    moved = fix.fixed
    if moved is None or moved.problem is not None or moved.queue < 0:
        return None
    if analysis.phase(session, job) != model.PENDING:
        return None
    peers = [
        j for j in session.snapshot.jobs if j.queue == moved.queue and waiting(session, j) and j.index != job.index
    ]
    found = _place(session, moved, [*peers, moved])
    return msgspec.structs.replace(found, queue=moved.queue_name, after_fix=fix.change)


def _place(session: Session, job: Job, peers: list[Job]) -> model.Position:
    """The job's place among `peers` (itself included), in the session's job order."""
    peers.sort(key=session.job_key)
    index = next(i for i, j in enumerate(peers) if j.index == job.index)
    return _placed(session, job, peers, index)


def _placed(session: Session, job: Job, peers: list[Job], index: int) -> model.Position:
    """The job's place, `index` in `peers` (in the session's job order)."""
    ahead = tuple(
        model.Ahead(
            podgroup=j.key,
            workload=j.workload,
            gpu=float(session.attempt_request(j)[0]),
            priority=j.priority,
            created=j.creation,
        )
        for j in peers[:index]
    )
    queue = session.snapshot.queues[job.queue]
    factors: dict[str, object] = {
        "queue": queue.name,
        "queuePriority": queue.priority,
        "queueFairShareGpu": float(session.fair_share[job.queue, 0]),
        "queueAllocatedGpu": float(session.queue_allocated[job.queue, 0]),
        "jobPriority": job.priority,
        "created": job.creation,
    }
    return model.Position(in_queue=index + 1, ahead=ahead, factors=factors)
